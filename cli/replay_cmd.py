"""``amber replay``: re-evaluate a finished run from its ledger and retrieval record."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ambereval.cli.output import handled, print_json
from ambereval.cli.run_inputs import from_where_it_was_made


def replay_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A finished `amber evaluate` run directory.")],
    recompute_retrieval: Annotated[bool, typer.Option(
        "--recompute-retrieval", help="Instead of replaying: re-embed with the run's "
        "embedder, re-run every recorded retrieval and list those whose chosen chunks, "
        "order or scores (beyond 1e-4) differ from the record.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
    = False,
) -> None:
    """Re-evaluate a run from its ledger and check its outputs are byte-identical.

    Judges answer only from RUN_DIR's ledger and the recorded retrieval (no model, no
    embedder); the per-report JSON, retrieval records, run.json and run.csv must come out
    byte-identical. Exit 0 when identical, 3 naming the first difference. With
    --recompute-retrieval, check instead that this machine's embedder ranks passages as
    the record says (exit 3 listing each search that differs).

    Example: amber replay runs/smol/ --json

    Example: amber replay runs/smol/ --recompute-retrieval
    """
    from ambereval.netguard import install_offline_guard

    install_offline_guard()  # replay reads files only
    run_dir = from_where_it_was_made(run_dir)
    if recompute_retrieval:
        _recompute(run_dir, as_json)
        return
    from ambereval.engine.runs.replay import replay_run

    with handled():
        result = replay_run(run_dir)
    if as_json:
        print_json(result)
    elif result["identical"]:
        n = result["reports"]
        typer.echo(f"OK: replay identical ({n} report{'' if n == 1 else 's'}, {result['files']} "
                   f"files, {result['ledger_hits']} ledger answers, {result['seconds']} s)")
    else:
        d = result["difference"]
        typer.echo(f"amber: replay differs: first difference in {d['file']} at {d['path']}",
                   err=True)
    if not result["identical"]:
        raise typer.Exit(3)


def _where(d: dict[str, Any]) -> str:
    if d["step"] == "passages":
        on = f"capture {d['capture_id']}"
    elif d.get("captures"):
        on = f"capture {', '.join(d['captures'])}"
    else:
        on = "the whole verification index"
    query = f" query {d['query'][:60]!r} (k={d['k']})" if d.get("query") is not None else ""
    return f"{d['report']}: {d['step']} on {on}{query}"


def _recompute(run_dir: Path, as_json: bool) -> None:
    from ambereval.engine.runs.recompute_retrieval import recompute_retrieval

    with handled():
        result = recompute_retrieval(run_dir)
    if as_json:
        print_json(result)
    elif result["agree"]:
        typer.echo(f"OK: retrieval recomputed, all {result['checked']} recorded searches "
                   f"agree (scores within {result['tolerance']}, {result['seconds']} s)")
    else:
        for d in result["differences"]:
            typer.echo(f"amber: retrieval differs ({d['kind']}): {_where(d)}: recorded "
                       f"{d['recorded']}, recomputed {d['recomputed']}", err=True)
        typer.echo(f"amber: {len(result['differences'])} of {result['checked']} recorded "
                   "searches differ", err=True)
    if not result["agree"]:
        raise typer.Exit(3)
