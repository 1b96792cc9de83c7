"""The documentation cannot drift: the README stays short, the CLI reference and the module
map are what the code generates, every documented example prints what the text shows,
every ``amber`` command line in the docs parses, and the site builds with
``mkdocs build --strict`` (a broken link, anchor or an unlisted page fails).

When one of these fails after a change, regenerate: ``.venv/bin/python scripts/gen_docs.py``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import docs_examples  # noqa: E402
from docs_cli import cli_reference  # noqa: E402
from docs_layout import render as render_layout  # noqa: E402

REGENERATE = "stale: regenerate with .venv/bin/python scripts/gen_docs.py"


def test_readme_is_a_short_front_door() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme) <= 12_000, f"README.md has {len(readme)} characters (at most 12,000)"
    assert "./scripts/test.sh" in readme and ".ci/run" in readme
    assert "./scripts/run.sh" in readme
    for page in ("docs/judges.md", "docs/reference/cli.md", "docs/getting-started.md"):
        assert f"]({page})" in readme


def test_cli_reference_is_generated_from_the_cli() -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert page == cli_reference(), REGENERATE


def test_cli_reference_lists_every_command_and_option() -> None:
    """The generator misses nothing: every command path and option of the click tree."""
    import typer
    from typer._click.core import Context

    from ambereval.cli.main import app

    page = cli_reference()
    root = typer.main.get_command(app)
    stack = [(root, Context(root, info_name="amber"))]
    seen = 0
    while stack:
        command, ctx = stack.pop()
        assert f"`{ctx.command_path}`" in page
        for param in command.get_params(ctx):
            if param.name != "help" and not getattr(param, "hidden", False):
                assert f"`{param.opts[0]}`" in page or f"`{param.name.upper()}`" in page
                seen += 1
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                stack.append((sub, Context(sub, info_name=name, parent=ctx)))
    assert seen > 100


def test_module_map_follows_the_tree() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert page == render_layout(page), REGENERATE
    assert "`serve/server.py`" in page and "`capture/pipeline.py`" in page


def _documented_commands() -> list[tuple[str, list[str]]]:
    found = []
    for path in docs_examples.documents():
        if path.name == "cli.md":
            continue
        in_console = False
        text = path.read_text(encoding="utf-8").replace("\\\n", " ")  # continued lines
        for line in (raw.strip() for raw in text.splitlines()):
            if line.startswith("```"):
                in_console = line == "```console" and not in_console
                continue
            if in_console and line.startswith("$ amber "):
                command = line[2:].split(" #")[0].split(" | ")[0].split(" || ")[0]
                command = command.removesuffix(" &").strip()
                found.append((f"{path.relative_to(ROOT)}: {command}", shlex.split(command)))
    return found


def test_every_documented_command_line_parses() -> None:
    """Options renamed or removed in the CLI show up here, also in examples not run."""
    import typer
    from typer._click.core import Context

    from ambereval.cli.main import app

    root = typer.main.get_command(app)
    failures = []
    commands = _documented_commands()
    assert len(commands) > 40
    for where, argv in commands:
        ctx = Context(root, info_name="amber", resilient_parsing=False)
        args, command = argv[1:], root
        while hasattr(command, "list_commands") and args and not args[0].startswith("-"):
            sub = command.get_command(ctx, args[0])
            if sub is None:
                failures.append(f"{where}: no command {args[0]!r}")
                break
            ctx = Context(sub, info_name=args[0], parent=ctx)
            command, args = sub, args[1:]
        else:
            known = {o for p in command.get_params(ctx) for o in [*p.opts, *p.secondary_opts]}
            for arg in args:
                option = arg.split("=")[0]
                if option.startswith("--") and option not in known:
                    failures.append(f"{where}: unknown option {option}")
    assert failures == []


@pytest.mark.parametrize("session", [s for s in docs_examples.all_sessions() if not s.slow],
                         ids=lambda s: s.id)
def test_examples_print_what_the_docs_show(session: docs_examples.Session) -> None:
    _check_session(session)


@pytest.mark.slow
@pytest.mark.parametrize("session", [s for s in docs_examples.all_sessions() if s.slow],
                         ids=lambda s: s.id)
def test_judged_examples_print_what_the_docs_show(session: docs_examples.Session) -> None:
    _check_session(session)


def _check_session(session: docs_examples.Session) -> None:
    [(path, old, new)] = docs_examples.regenerate([session])
    assert path == session.path
    if old != new:
        import difflib

        diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                            "documented", "produced", n=1))
        pytest.fail(f"{session.id}: {REGENERATE}\n{diff}")


def test_same_output_ignores_only_what_varies_between_identical_runs() -> None:
    same = docs_examples.same_output
    assert same("ok: 5 files, 16 records, 166283 bytes verified",
                "ok: 5 files, 16 records, 166290 bytes verified")
    assert not same("ok: 5 files, 16 records, 166283 bytes verified",
                    "ok: 5 files, 17 records, 166283 bytes verified")
    assert not same("ok: 5 files, 16 records, 166283 bytes verified",
                    "ok: 5 files, 16 records, 196283 bytes verified")
    assert same("captured 2026-11-24T21:42:45.274437Z, 1 report in 57.0 s",
                "captured 2027-01-02T03:04:05.000001Z, 1 report in 61.3 s")
    assert not same("Correct 4, Incorrect 0", "Correct 3, Incorrect 1")
    assert not same("score 0.033", "score 0.034")
    assert not same("a\nb", "a")
    assert same("WARC amber-20261124215714-00001.warc.gz @ 4668, conversion record",
                "WARC amber-20261124220135-00001.warc.gz @ 6261, conversion record")
    assert same("offset: 4668\nbody_bytes: 516", "offset: 6261\nbody_bytes: 516")
    assert not same("offset: 4668\nbody_bytes: 516", "offset: 4668\nbody_bytes: 517")


def test_site_builds_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()
    assert (tmp_path / "site" / "img" / "architecture.svg").exists()
