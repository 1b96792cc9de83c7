"""``amber diff``: two runs side by side — inputs, then the scores and verdicts that moved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Column, Table

from ambereval.cli.output import handled, print_json, stdout
from ambereval.cli.terminal_text import escape


def diff_cmd(
    run_a: Annotated[Path, typer.Argument(help="A run directory (or `amber verify` output).")],
    run_b: Annotated[Path, typer.Argument(help="Another one of the same kind.")],
    limit: Annotated[int, typer.Option(
        "--limit", min=1, help="Rows shown per table in the terminal.")] = 30,
    exit_code: Annotated[bool, typer.Option(
        "--exit-code", help="Exit 3 when the runs differ (for scripts and CI).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole diff as JSON.")]
    = False,
) -> None:
    """What differs between two runs: inputs, then scores and verdicts that moved.

    Inputs are judges, bundles, options, rules, prompts' sha256 and retriever; scores and
    verdicts are listed largest move first.

    Example: amber diff run-smol/ run-qwen/ --limit 20
    """
    from ambereval.engine.runs.diff import diff_runs
    from ambereval.netguard import install_offline_guard

    install_offline_guard()  # reads files only: offline means offline

    with handled():
        diff = diff_runs(run_a, run_b)
    for warning in diff["warnings"]:
        typer.echo(f"amber: warning: {warning}", err=True)
    if as_json:
        print_json(diff)
    else:
        _render(diff, limit)
    if exit_code and not diff["identical"]:
        raise typer.Exit(3)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return "-" if value is None else str(value)


def _render(diff: dict[str, Any], limit: int) -> None:
    if diff["identical"]:
        stdout.print(f"identical: same inputs, scores and verdicts ({diff['kind']} runs "
                     f"{escape(diff['a'])} and {escape(diff['b'])})")
        return
    if diff["inputs"]:
        t = Table(Column("input", overflow="fold"), "A", "B", title="Inputs that differ")
        for row in diff["inputs"][:limit]:
            t.add_row(escape(row["field"]), escape(_show(row["a"])), escape(_show(row["b"])))
        stdout.print(t)
    else:
        stdout.print("inputs: the same")
    if diff["prompts"].get("not_compared"):
        stdout.print(f"prompts: not compared, {escape(diff['prompts']['not_compared'])}")
    for side in ("only_a", "only_b"):
        for p in diff["prompts"][side]:
            stdout.print(f"prompt only in {side[-1].upper()}: {p['sha256'][:16]}  "
                         f"{escape(p['starts'])} ...")
        for name in diff["reports"][side]:
            stdout.print(f"report only in {side[-1].upper()}: {escape(name)}")
    if diff.get("aggregation"):
        stdout.print(f"aggregation: {escape(diff['aggregation']['note'])}")
    for a, b in diff["judges_paired"].items():
        stdout.print(f"judges paired: {escape(a)} (A) with {escape(b)} (B)")
    if diff["systems"]:
        t = Table("system", "column", "A", "B", "delta", title="System means that moved")
        for row in diff["systems"][:limit]:
            t.add_row(escape(row["system"]), row["column"], _show(row["a"]), _show(row["b"]),
                      _show(row["delta"]))
        stdout.print(t)
    # with several systems a report's name is not enough to tell the rows apart
    several = len(diff.get("systems_compared") or []) > 1

    def report(row: dict[str, Any]) -> str:
        return escape(f"{row['system']}: {row['report']}" if several else row["report"])

    if diff["scores"]:
        t = Table("report", "column", "A", "B", "delta",
                  title=f"Scores that moved ({len(diff['scores'])}), largest first")
        for row in diff["scores"][:limit]:
            t.add_row(report(row), row["column"], _show(row["a"]), _show(row["b"]),
                      _show(row["delta"]))
        stdout.print(t)
    if diff["verdicts"]:
        stdout.print(f"Verdicts that moved ({len(diff['verdicts'])}), largest first "
                     "(report / judge / item: A -> B):")
        for row in diff["verdicts"][:limit]:
            stdout.print(f"  {report(row)} / {escape(row['judge'])} / "
                         f"[bold]{escape(row['item'])}[/bold]: {escape(row['a'])} -> "
                         f"{escape(row['b'])}  [dim]{escape(row['text'][:70])}[/dim]")
    else:
        stdout.print("verdicts: none moved")
