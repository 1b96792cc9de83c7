"""``amber replay``: re-evaluate a finished run from its ledger and retrieval record."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ambereval.cli.output import handled, print_json


def replay_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A finished `amber evaluate` run directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
    = False,
) -> None:
    """Re-evaluate RUN_DIR with judges answering only from its ledger and the recorded
    retrieval (no model, no embedder), and check the per-report JSON, run.json and run.csv
    are byte-identical. Exit 0 when identical, 3 naming the first difference.

    Example: amber replay runs/smol/ --json
    """
    from ambereval.engine.runs.replay import replay_run
    from ambereval.netguard import install_offline_guard

    install_offline_guard()  # replay reads files only
    with handled():
        result = replay_run(run_dir)
    if as_json:
        print_json(result)
    elif result["identical"]:
        typer.echo(f"OK: replay identical ({result['reports']} reports, {result['files']} "
                   f"files, {result['ledger_hits']} ledger answers, {result['seconds']} s)")
    else:
        d = result["difference"]
        typer.echo(f"amber: replay differs: first difference in {d['file']} at {d['path']}",
                   err=True)
    if not result["identical"]:
        raise typer.Exit(3)
