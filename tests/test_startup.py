"""Start-up: commands that never touch a model do not import the model stack, nor the
command modules, pydantic, fsspec or rich they do not need.

Each command runs in a fresh interpreter (the real CLI entry point, in-process there) and
reports which heavy modules ended up in ``sys.modules``. A deterministic check, not a
timing: scripts/bench_startup.py measures the time. The lazy registration and the plain
parameter coercion that make this so are checked against typer's own (help text of every
command, coerced values and errors of every parameter).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer._coercion import build_runtime_param
from typer.testing import CliRunner

from ambereval.cli import main, plain_params
from ambereval.cli.lazy_commands import summary_of
from ambereval.cli.main import COMMANDS

from conftest import one_page_bundle

MODEL_STACK = ("torch", "transformers", "sentence_transformers", "llama_cpp", "faiss",
               "bm25s")
# Not needed to print help or read a bundle either (capture clients, schema checks; typer's
# pydantic coercion, warcio's remote-file support).
ALSO_LAZY = ("numpy", "httpx", "trafilatura", "jsonschema", "cdxj_indexer", "pydantic",
             "fsspec")
# Every command module: only the one of the command being run is imported.
COMMAND_MODULES = tuple(sorted({f"ambereval.cli.{c.target.split(':')[0]}" for c in COMMANDS}))

PROBE = """
import json, runpy, sys
watch = json.loads(sys.argv[2])
sys.argv = ["amber", *json.loads(sys.argv[1])]
code = 0
try:
    runpy.run_module("ambereval.cli", run_name="__main__")
except SystemExit as stop:
    code = stop.code or 0
print(json.dumps({"exit": code, "loaded": sorted(m for m in watch if m in sys.modules)}),
      file=sys.stderr)
"""


def loaded_by(*args: str, watch: tuple[str, ...] = MODEL_STACK + ALSO_LAZY) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args), json.dumps(watch)],
                          capture_output=True, text=True, timeout=120)
    return json.loads(proc.stderr.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_page_bundle(tmp_path_factory.mktemp("startup") / "bundle", "/pages/eiffel.html")


@pytest.mark.parametrize("args", [["--help"], ["bundle", "--help"], ["evaluate", "--help"],
                                  ["verify", "--help"], ["snapshot", "--help"]])
def test_help_imports_no_model_and_no_numpy(args: list[str]) -> None:
    result = loaded_by(*args)
    assert result == {"exit": 0, "loaded": []}


def test_help_imports_no_command_module() -> None:
    """`amber --help` lists every command from its summary: no command module imported."""
    assert loaded_by("--help", watch=COMMAND_MODULES) == {"exit": 0, "loaded": []}
    assert loaded_by(watch=COMMAND_MODULES) == {"exit": 2, "loaded": []}  # no args: help too


def test_bundle_commands_import_no_model(bundle: Path) -> None:
    # bundle_cmd registers `bundle drift`, whose options come from snapshot.py
    others = tuple(m for m in COMMAND_MODULES if m.rsplit(".", 1)[1]
                   not in ("bundle_cmd", "drift_cmd", "snapshot"))
    for args in (["bundle", "stats", str(bundle), "--json"],
                 ["bundle", "verify", str(bundle)],
                 ["bundle", "show", str(bundle), "cap-does-not-exist"]):
        result = loaded_by(*args, watch=MODEL_STACK + ALSO_LAZY + others + (
            "sqlite_utils", "rich"))
        assert result["loaded"] == [], args
    assert loaded_by("bundle", "stats", str(bundle))["exit"] == 0


def test_report_inspect_imports_no_model() -> None:
    report = Path(__file__).parent / "fixtures" / "report.md"
    others = tuple(m for m in COMMAND_MODULES if not m.endswith(".report_cmd"))
    watch = MODEL_STACK + ALSO_LAZY + others + ("rich", "warcio")
    assert loaded_by("report", "inspect", str(report), "--json", watch=watch) == {
        "exit": 0, "loaded": []}


def test_the_probe_sees_a_lazy_import(bundle: Path) -> None:
    """The check can fail: the table view of `bundle stats` does import rich."""
    assert loaded_by("bundle", "stats", str(bundle), watch=("rich", "pydantic")) == {
        "exit": 0, "loaded": ["rich"]}


def test_warcio_is_imported_without_fsspec() -> None:
    if importlib.util.find_spec("fsspec") is None:
        pytest.skip("fsspec is not installed: nothing to keep out")
    code = ("import sys, ambereval.snapshots.bundle.warc, warcio.utils; "
            "print('fsspec' in sys.modules, warcio.utils.HAS_FSSPEC); "
            "import fsspec; print(fsspec.open is not None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120).stdout.split()
    assert out == ["False", "False", "True"]  # and fsspec stays importable afterwards


def test_the_probe_sees_a_model_import() -> None:
    """The check can fail: importing the retriever's index loads FAISS."""
    code = "import sys, ambereval.models as m; m.VectorIndex; print('faiss' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120).stdout.strip()
    assert out == "False"  # FAISS itself is imported on the first search or build
    code = ("import sys, numpy as np, ambereval.models as m; "
            "m.VectorIndex([], np.zeros((0, 4), 'float32'), {'dim': 4}); "
            "print('faiss' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120).stdout.strip()
    assert out == "True"


def eager_app() -> typer.Typer:
    """The CLI registered the eager way (``app.command`` / ``app.add_typer``), importing
    every command module: what `amber` was before commands became lazy."""
    class InWorkOrder(typer.core.TyperGroup):
        def list_commands(self, ctx: Any) -> list[str]:  # as COMMANDS lists them
            return [c.name for c in COMMANDS]

    app = typer.Typer(name="amber", no_args_is_help=True, add_completion=False,
                      help=main.app.info.help, cls=InWorkOrder)
    for command in COMMANDS:
        command.register(app)
    app.callback()(main.main)
    return app


def all_command_paths(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name in group.list_commands(None):
        command = group.get_command(None, name)
        if hasattr(command, "list_commands"):
            paths += all_command_paths(command, (*prefix, name))
        else:
            paths.append((*prefix, name))
    return paths


def test_lazy_registration_shows_what_the_eager_one_shows() -> None:
    eager = eager_app()
    paths = all_command_paths(typer.main.get_command(eager))
    assert len(paths) > len(COMMANDS)
    runner = CliRunner()
    for args in [[*p, "--help"] for p in paths] + [[], ["bundel"], ["bundle", "stat"]]:
        ours, theirs = runner.invoke(main.app, args), runner.invoke(eager, args)
        assert (ours.exit_code, ours.output) == (theirs.exit_code, theirs.output), args
    assert "Did you mean 'bundle'?" in runner.invoke(main.app, ["bundel"]).output


def test_every_summary_is_the_commands_own() -> None:
    names = [c.name for c in COMMANDS]
    assert len(set(names)) == len(names)
    for command in COMMANDS:
        expected = summary_of(command.load())
        assert command.summary == expected, (
            f"COMMANDS in cli/main.py: the summary of {command.name!r} should be {expected!r}")


def every_command() -> list[tuple[tuple[str, ...], Any]]:
    """Each command and group of the eager app with its path (the app itself first)."""
    root = typer.main.get_command(eager_app())
    found = []
    for path in all_command_paths(root):
        command = root
        for name in path:
            command = command.get_command(None, name)  # type: ignore[attr-defined]
        found.append((path, command))
    return found


def test_every_summary_is_one_line() -> None:
    """A command list prints each summary as written: a line break in a docstring's first
    paragraph would break the row mid-sentence (typer's rich help keeps it)."""
    for path, command in every_command()[1:]:
        assert "\n" not in summary_of(command), (
            f"amber {' '.join(path)}: make its help's first paragraph one line")


def test_every_command_takes_json() -> None:
    for path, command in every_command():
        if hasattr(command, "list_commands"):
            continue  # a group: its commands print
        options = {o for p in command.params for o in getattr(p, "opts", ())}
        assert "--json" in options, f"amber {' '.join(path)} has no --json"


def test_bracketed_words_in_help_are_printed() -> None:
    """typer's rich help reads "[word]" as markup and drops it ("needs amber-eval[ray]"
    printed "needs amber-eval"): every bracket in a help text must reach the screen."""
    import re

    runner = CliRunner()
    checked = 0
    for path, command in every_command()[1:]:
        texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
        wanted = [m.replace("\\[", "[") for t in texts
                  for m in re.findall(r"\\?\[[A-Za-z][^\]\n]*\]", t)]
        if not wanted:
            continue
        shown = runner.invoke(main.app, [*path, "--help"], terminal_width=400).output
        flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", shown).split())
        for text in wanted:
            checked += 1
            assert " ".join(text.split()) in flat, f"amber {' '.join(path)}: {text!r} not shown"
    assert checked > 0


def plain_samples(param: Any, tmp: Path) -> list[Any]:
    """Values a user (or a default) could hand to the parameter, valid and not."""
    words = ["abc", "", "5", "-3", "007", "+5", " 5", "5.0", "-0", "1_000", "0.5", "1e3",
             "nan", "-", "x/y", "[bold]x[/bold]", "\udcff", "true", "9" * 30,
             str(tmp / "file.txt"), str(tmp), str(tmp / "missing")]
    descriptor = param.type_descriptor
    choices = descriptor.choices or ()
    for choice in choices:
        text = str(getattr(choice, "value", choice))
        words += [text, text.upper()]
    samples: list[Any] = [*words, *choices, 5, 0.5, True, Path("x"), tmp]
    if param.default is not None and not callable(param.default):
        samples.append(param.default)
    if param.multiple or param.nargs == -1:
        samples = [tuple(words[:3]), (), *((w,) for w in words), ["a", "b"]]
    return samples


def outcome(runtime: Any, value: Any, param: Any, ctx: Any) -> tuple[Any, ...]:
    try:
        result = runtime.coerce(value, param=param, ctx=ctx)
    except Exception as err:  # noqa: BLE001  (compared, not swallowed)
        return ("error", type(err).__name__, getattr(err, "message", str(err)))
    return ("ok", type(result).__name__, repr(result))


def test_plain_coercion_gives_what_typer_gives(tmp_path: Path) -> None:
    """Every parameter of every command: the pydantic-free coercer returns typer's value,
    or typer's own error, for valid and invalid input alike."""
    (tmp_path / "file.txt").write_text("x", encoding="utf-8")
    group = typer.main.get_command(eager_app())
    served = compared = 0
    for path in all_command_paths(group):
        command = group
        for name in path:
            command = command.get_command(None, name)
        ctx = typer.Context(command, info_name=path[-1] if path else "amber")
        for param in command.get_params(ctx):
            descriptor = getattr(param, "type_descriptor", None)
            plain = plain_params.plain_coercer(descriptor) if descriptor else None
            if plain is None:
                continue
            ours = plain_params.PlainRuntimeParam(
                parameter_info=descriptor.parameter_info, annotation=descriptor.annotation,
                descriptor=descriptor, plain=plain)
            typers = build_runtime_param(descriptor)
            for value in plain_samples(param, tmp_path):
                expected = outcome(typers, value, param, ctx)
                assert outcome(ours, value, param, ctx) == expected, (path, param.name, value)
                compared += 1
                if expected[0] == "ok" and value is not None:
                    served += plain(value, param, ctx) is not plain_params.UNHANDLED
    assert compared > 2000 and served > 500  # the plain path does carry the common values


def test_help_lists_commands_in_the_order_of_the_work() -> None:
    shown = CliRunner().invoke(main.app, ["--help"], terminal_width=200).output
    import re

    commands = shown.split("Commands", 1)[1]
    names = re.findall(r"(?m)^│ ([a-z][a-z-]*) {2,}", commands)
    assert names == ["snapshot", "bundle", "verify", "evaluate", "audit", "diff", "replay",
                     "rerun", "serve", "models", "judge-bench", "report", "import",
                     "aggregate", "doctor"]


def test_help_names_what_an_option_takes_not_its_python_type() -> None:
    """typer prints ``<bool>``, ``<int range>`` or ``<list[Path]>`` before each option's
    help; Amber's help shows nothing for a flag and an upper-case word for a value."""
    import re

    runner = CliRunner()
    seen: set[str] = set()
    for path, _ in every_command():
        shown = runner.invoke(main.app, [*path, "--help"], terminal_width=200).output
        assert not re.search(r"<(bool|int|float|str|path|list|choice)\b", shown, re.I), \
            f"amber {' '.join(path)} --help shows a type placeholder"
        seen.update(re.findall(r"\b(INTEGER|PATH|TEXT|FLOAT)\b", shown))
        flags = re.findall(r"│ (--json) +(\S+)", shown)
        assert all(word == "Print" or not word.isupper() for _, word in flags), flags
    assert {"INTEGER", "PATH", "TEXT", "FLOAT"} <= seen
