"""The ``amber`` command: a thin typer layer over the library."""

from __future__ import annotations

from typing import Annotated

import typer

from ambereval import __version__
from ambereval.cli import (
    aggregate_cmd,
    audit_cmd,
    bundle_cmd,
    diff_cmd,
    evaluate_cmd,
    import_cmd,
    judge_bench_cmd,
    models_cmd,
    replay_cmd,
    report_cmd,
    serve_cmd,
    snapshot,
    verify_cmd,
)

app = typer.Typer(
    name="amber",
    no_args_is_help=True,
    add_completion=False,
    help="Amber: freeze the web evidence behind research reports, then score them offline.",
)
app.add_typer(snapshot.app, name="snapshot")
app.add_typer(bundle_cmd.app, name="bundle")
app.add_typer(models_cmd.app, name="models")
app.add_typer(report_cmd.app, name="report")
app.add_typer(aggregate_cmd.app, name="aggregate")
app.add_typer(import_cmd.app, name="import")
app.command("doctor")(models_cmd.doctor_cmd)
app.command("judge-bench")(judge_bench_cmd.judge_bench_cmd)
app.command("verify")(verify_cmd.verify_cmd)
app.command("evaluate")(evaluate_cmd.evaluate_cmd)
app.command("serve")(serve_cmd.serve_cmd)
app.command("audit")(audit_cmd.audit_cmd)
app.command("diff")(diff_cmd.diff_cmd)
app.command("replay")(replay_cmd.replay_cmd)


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
