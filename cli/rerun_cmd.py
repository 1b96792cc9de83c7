"""``amber rerun``: ask the judges again, N times, and show what moved."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ambereval.cli.judge_options import JudgeConcurrency, Threads, check_workers
from ambereval.cli.output import handled, print_json, progress_bar, stdout
from ambereval.cli.run_inputs import from_where_it_was_made
from ambereval.cli.terminal_text import escape


def rerun_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A finished `amber evaluate` run directory.")],
    times: Annotated[int, typer.Option("--times", "-n", min=1,
                                       help="How many times to evaluate again.")] = 1,
    judge_concurrency: JudgeConcurrency = None,
    threads: Threads = None,
    executor: Annotated[str, typer.Option(
        "--executor", help="auto, sequential, threads or processes, as for amber evaluate "
        "(a fresh one per rerun).")] = "auto",
    workers: Annotated[int | None, typer.Option(
        "--workers", min=1, help="With --executor processes: worker processes.")] = None,
    limit: Annotated[int, typer.Option(
        "--limit", min=1, help="Rows shown per table in the terminal.")] = 30,
    exit_code: Annotated[bool, typer.Option(
        "--exit-code", help="Exit 3 when any score or verdict moved (for scripts and CI).")]
    = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
    = False,
) -> None:
    """Evaluate a run's inputs again N times and report how much the scores move.

    Every question goes to the judge again (no ledger reuse), into RUN_DIR/reruns/<i>/;
    then, per dimension, the spread of the scores and every verdict that changed.

    Example: amber rerun runs/smol/ --times 3

    Example: amber rerun runs/smol/ --times 3 --executor processes --workers 4
    """
    from urllib.parse import urlsplit

    from ambereval.cli.output import fail
    from ambereval.engine.runs.invocation import read_invocation
    from ambereval.engine.runs.rerun import rerun_run
    from ambereval.netguard import install_offline_guard

    if executor not in ("auto", "sequential", "threads", "processes"):
        fail(f"--executor {executor!r}: rerun takes auto, sequential, threads or processes",
             exit_code=2)
    check_workers(executor, workers)
    run_dir = from_where_it_was_made(run_dir)
    with handled():
        urls = [j.url for j in read_invocation(run_dir).judges if j.url]
        install_offline_guard(tuple(h for h in (urlsplit(u).hostname for u in urls) if h))
        with progress_bar(not as_json) as progress:
            result = rerun_run(run_dir, times, judge_concurrency, threads, executor,
                               progress=progress, workers=workers)
    moved = any(d["reports_moved"] for d in result["dimensions"]) or result["verdicts"]
    if as_json:
        print_json(result)
    else:
        from rich.table import Table

        stdout.print(f"{result['identical_reruns']} of {times} reruns scored every report "
                     f"exactly as the run did (reruns in {escape(str(run_dir))}/reruns/)")
        t = Table("dimension", "max spread", "mean spread", "reports moved",
                  title="Score spread over the run and its reruns")
        for d in result["dimensions"][:limit]:
            t.add_row(d["column"], f"{d['max_spread']:.4g}", f"{d['mean_spread']:.4g}",
                      f"{d['reports_moved']} of {d['reports']}")
        stdout.print(t)
        moved_systems = [d for d in result["systems"] if d["spread"] or d["null_in_some_runs"]]
        if moved_systems:
            t = Table("system", "column", "spread", "values",
                      title="System figures that moved (DeepEval depth: games pooled)")
            for d in moved_systems[:limit]:
                t.add_row(escape(d["system"]), d["column"], f"{d['spread']:.4g}",
                          ", ".join("-" if v is None else f"{v:.4g}" for v in d["values"]))
            stdout.print(t)
        if result["verdicts"]:
            t = Table("report", "judge", "dimension", "item", "run", "reruns",
                      title="Verdicts that changed")
            for v in result["verdicts"][:limit]:
                t.add_row(escape(v["report"]), escape(v["judge"]), v["dimension"],
                          escape(v["item"]), escape(str(v["original"])),
                          escape(", ".join(f"#{k} {x}" for k, x in v["reruns"].items())))
            stdout.print(t)
        else:
            stdout.print("no verdict changed")
    if exit_code and moved:
        raise typer.Exit(3)
