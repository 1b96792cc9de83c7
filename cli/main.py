"""The ``amber`` command: a thin typer layer over the library.

Commands are listed in the order of the work (capture, check, score, inspect, serve, then
the tools) and registered lazily (``LazyCommand``): a command's module is imported only when
that command runs or prints its own help, so ``amber --help`` and the bundle commands start
fast. To add a command, add one ``LazyCommand(name, "module:attribute", summary)`` line to
``COMMANDS``: the attribute is the command function (as ``app.command(name)(fn)``) or a
``typer.Typer`` group (as ``app.add_typer(sub, name=name)``), and the summary is the first
paragraph of its help as ``amber --help`` shows it (tests/test_startup.py checks both and
prints the expected summary when it differs).
"""

from __future__ import annotations

from typing import Annotated

import typer

from ambereval import __version__
from ambereval.cli import help_types, plain_params
from ambereval.cli.lazy_commands import LazyCommand, LazyGroup

plain_params.install()  # typer coerces plain values without importing pydantic
help_types.install()  # help names what an option takes, not its Python type

COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand("snapshot", "snapshot:app", "Capture web evidence into a bundle (online)."),
    LazyCommand("bundle", "bundle_cmd:app", "Check, pack and inspect evidence bundles."),
    LazyCommand("verify", "verify_cmd:verify_cmd",
                "Verify every claim in a bundle, offline: Correct, Incorrect or Unknown."),
    LazyCommand("evaluate", "evaluate_cmd:evaluate_cmd",
                "Score reports with DailyReport, DR3-Eval and/or DeepEval, offline, "
                "reproducibly."),
    LazyCommand("audit", "audit_cmd:audit_cmd",
                "Show which captured bytes justified each verdict."),
    LazyCommand("diff", "diff_cmd:diff_cmd",
                "What differs between two runs: inputs, then scores and verdicts that moved."),
    LazyCommand("replay", "replay_cmd:replay_cmd",
                "Re-evaluate a run from its ledger and check its outputs are byte-identical."),
    LazyCommand("rerun", "rerun_cmd:rerun_cmd",
                "Evaluate a run's inputs again N times and report how much the scores move."),
    LazyCommand("serve", "serve_cmd:serve_cmd",
                "Serve Serper searches, Jina Reader reads and captured pages from bundles."),
    LazyCommand("models", "models_cmd:app", "Local judge and embedding models."),
    LazyCommand("judge-bench", "judge_bench_cmd:judge_bench_cmd",
                "Run a judge on labeled pairs: accuracy, balanced accuracy, Cohen's kappa, "
                "confusion."),
    LazyCommand("report", "report_cmd:app", "Parse and inspect research reports."),
    LazyCommand("import", "import_cmd:app", "Import benchmark tasks and corpora."),
    LazyCommand("aggregate", "aggregate_cmd:app", "Recompute a protocol's aggregates from scores."),
    LazyCommand("doctor", "models_cmd:doctor_cmd",
                "Check the install: llama.cpp build flags and CPU features, models, offline "
                "readiness."),
)


class AmberGroup(LazyGroup):
    lazy_commands = COMMANDS


app = typer.Typer(
    name="amber",
    cls=AmberGroup,
    no_args_is_help=True,
    add_completion=False,
    help="Amber: freeze the web evidence behind research reports, then score them offline.",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"amber {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Show the version and exit.")] = False,
) -> None:
    """Amber: freeze the web evidence behind research reports, then score them offline."""


def run() -> None:
    app(prog_name="amber")
