"""``amber evaluate``: the benchmark protocols, offline, into a run directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ambereval.cli.judge_options import (
    JudgeConcurrency,
    JudgeCtx,
    JudgeName,
    JudgeUrl,
    Seed,
    Threads,
    check_ledger_mode,
    check_workers,
)
from ambereval.cli.output import (
    handled,
    print_json,
    print_scores,
    progress_bar,
    run_summary,
    stderr,
    stdout,
    truncation_warning,
    warn_if_damaged,
)
from ambereval.cli.run_inputs import from_where_it_was_made, given_options

if TYPE_CHECKING:
    from ambereval.engine.runs.report_job import ReportJob

# what a resumed run may set anew; every other input comes from its invocation.json
RESUME_MAY_CHANGE = frozenset({"resume", "judge_concurrency", "threads", "executor", "workers",
                               "ray_address", "as_json", "plan"})


def evaluate_cmd(
    ctx: typer.Context,
    bundles: Annotated[list[Path] | None, typer.Argument(
        help="Bundles holding a snapshotted report.")] = None,
    task: Annotated[Path | None, typer.Option("--task", help="Tasks file (amber-task/1).")]
    = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Run directory to write.")]
    = None,
    protocol: Annotated[str, typer.Option(
        "--protocol", help="dailyreport, dr3, deepeval or all.")] = "all",
    judge_model: Annotated[list[Path] | None, typer.Option(
        "--judge-model", help="GGUF judge; repeat for an ensemble (default SmolLM2).")] = None,
    judge_ref: Annotated[list[str] | None, typer.Option(
        "--judge", help="A judge by name (amber models list); repeatable, and combines with "
        "--judge-model and --judge-url into one ensemble.")] = None,
    judge_url: JudgeUrl = None,
    judge_name: JudgeName = None,
    judge_ctx: JudgeCtx = 4096,
    judge_concurrency: JudgeConcurrency = None,
    threads: Threads = None,
    seed: Seed = 0,
    clip_chars: Annotated[int, typer.Option(
        "--clip-chars", min=500, help="Reports longer than this are cut at a paragraph "
        "break before judging (recorded).")] = 12_000,
    ledger_mode: Annotated[str, typer.Option(
        "--ledger-mode", help="record | reuse | replay for RUN_DIR/ledger.sqlite.")] = "reuse",
    rule: Annotated[list[str] | None, typer.Option(
        "--rule", help="Switch one of the protocols' own rules, e.g. c1_empty=zero "
        "(DailyReport), depth_no_decisive=zero (DeepEval), support_question=separate (DR3 FA "
        "and DeepEval E3 ask their own questions), support_batch=4 (four statements of "
        "a page in one support prompt; default 1) or checklists=each (one checklist item a "
        "prompt); the documentation's page \"The three "
        "protocols\" (docs/protocols.md) lists them all (repeatable; recorded in "
        "manifest.json).")] = None,
    executor: Annotated[str, typer.Option(
        "--executor", help="auto (reports in parallel with a served judge), sequential, "
        "threads, processes (worker processes on this machine, each with its own judge and "
        "a share of the cores), or ray (one Ray task per report; needs the extra "
        "amber-eval\\[ray]).")
    ] = "auto",
    workers: Annotated[int | None, typer.Option(
        "--workers", min=1, help="With --executor processes: worker processes (default one "
        "per 4 cores); --threads sets each one's llama.cpp threads.")] = None,
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", help="A running Ray cluster (e.g. ray://head:10001 or head:6379); "
        "default: start Ray on this machine.")] = None,
    resume: Annotated[Path | None, typer.Option(
        "--resume", help="Finish an interrupted run in this directory: its inputs come from "
        "its invocation.json, finished reports are kept and finished judge calls are "
        "answered from its ledger.")] = None,
    plan: Annotated[bool, typer.Option(
        "--plan", help="Print the judge calls and prompt tokens the run would ask, per "
        "protocol and report, and what the ledger already answers; call no judge, write "
        "nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run table (with "
                                          "--plan: the plan) as JSON.")] = False,
) -> None:
    """Score reports with DailyReport, DR3-Eval and/or DeepEval, offline, reproducibly.

    Example: amber evaluate b1/ b2/ --task tasks.json --protocol deepeval --out run/

    Example: amber evaluate runs/*/bundle --task tasks.json --judge-url http://gpu:8000
    --judge-name qwen --judge-concurrency 32 --executor ray --ray-address ray://head:10001
    --out run/

    Example: amber evaluate b*/ --task tasks.json --executor processes --workers 8
    --threads 4 --out run/

    Example: amber evaluate --resume run/
    """
    from urllib.parse import urlsplit

    from ambereval.cli.output import fail
    from ambereval.engine.runs.evaluate import (
        PROTOCOLS,
        evaluate_bundles,
        plan_reports,
    )
    from ambereval.engine.runs.executors import make_executor
    from ambereval.engine.runs.invocation import Invocation, judge_specs, read_invocation
    from ambereval.engine.runs.report_job import judges_width
    from ambereval.errors import InputError
    from ambereval.models import Embedder
    from ambereval.netguard import install_offline_guard

    check_workers(executor, workers)
    check_ledger_mode(ledger_mode)
    if resume is not None:
        given = ["BUNDLES"] * bool(bundles) + given_options(ctx, RESUME_MAY_CHANGE)
        if given:
            fail(f"with --resume the inputs come from {resume}/invocation.json; do not give "
                 f"{', '.join(given)}", hint="only --judge-concurrency, --threads, "
                 "--executor, --workers, --ray-address and --json may change", exit_code=2)
    elif not bundles or task is None or out is None:
        fail("give BUNDLES..., --task and --out (or --resume RUN_DIR)", exit_code=2)
    if resume is not None:
        resume = from_where_it_was_made(resume)
    run_dir = resume if resume is not None else out
    with handled():  # the inputs, checked before anything is written
        if resume is not None:
            invocation = read_invocation(resume)
            out, ledger_mode = resume, "reuse"
        else:
            invocation = Invocation(
                [str(b) for b in bundles or []], str(task),
                list(PROTOCOLS) if protocol == "all" else [protocol],
                judge_specs([(judge_url, judge_name)] if judge_url else [], judge_ref or [],
                            [str(p) for p in judge_model or []]
                            or ([] if judge_url or judge_ref else [None])),
                judge_ctx, seed, clip_chars, list(rule or []), os.getcwd())
        assert out is not None
        url = next((j.url for j in invocation.judges if j.kind == "url"), None)
        # the judge server and the Ray head are the only hosts the user asked us to reach
        allow = tuple(h for h in (urlsplit(url).hostname if url else None,
                                  urlsplit(ray_address if ray_address and "://" in ray_address
                                           else f"ray://{ray_address}").hostname
                                  if ray_address else None) if h)
        install_offline_guard(allow)
        from ambereval.engine.judging_rules import split_rules
        from ambereval.engine.protocols.switches import parse_run_rules

        others, judging = split_rules(invocation.rules)
        rules = parse_run_rules(others or None)
        protocols = invocation.protocols
        if any(p not in PROTOCOLS for p in protocols):
            raise InputError(f"unknown --protocol {protocol!r} (dailyreport, dr3, deepeval, all)")
        invocation.check_judges()
        _warn_if_tasks_changed(plan_reports(invocation.bundles, invocation.tasks),
                               "--task" if resume is None else invocation.tasks)
        warn_if_damaged(invocation.bundles)
    if plan:
        with handled():
            _print_plan(invocation, out, ledger_mode, protocols, rules, judging, threads,
                        as_json)
        return
    with handled(f"the judge's answers so far are in {run_dir}/ledger.sqlite; "
                 f"`amber evaluate --resume {run_dir}` goes on from there"):
        judges = invocation.open_judges(out / "ledger.sqlite", ledger_mode,
                                        concurrency=judge_concurrency, threads=threads)
        runner = make_executor(executor, judges_width(judges), ray_address, workers, threads,
                               allow_hosts=allow)
        with progress_bar(not as_json) as progress:
            result = evaluate_bundles(invocation.bundles, invocation.tasks, protocols, judges,
                                      out, Embedder(), progress, invocation.clip_chars, rules,
                                      runner, resume=resume is not None,
                                      invocation=invocation, judging=judging)
    table = result["table"]
    truncation_warning(result["stats"]["totals"].get("truncated", 0))  # stderr: --json too
    notes = _what_was_not_scored(result["reports"])
    if as_json:
        print_json(table)
        for line in notes:  # stdout holds exactly run.json
            stderr.print(f"amber: {line}", markup=False)
        return
    if result["stats"].get("resumed_reports"):
        stdout.print(f"resumed: {result['stats']['resumed_reports']} of "
                     f"{result['stats']['reports']} reports were already finished")
    run_summary(result["stats"])
    print_scores(f"Run {out}", table["columns"], table["systems"])
    for line in notes:
        stdout.print(line, markup=False)
    stdout.print(f"per-report scores in {out / 'reports'}; table in {out / 'run.csv'}")


def _warn_if_tasks_changed(jobs: list[ReportJob], tasks: str) -> None:
    """One warning line when the tasks file (``tasks``: how to name it) gives a report a
    task that differs from the task frozen with it: the run scores with the file's
    (recorded by its sha256 in the manifest)."""
    changed = [job for job in jobs if job.task_changed]
    if not changed:
        return
    first = changed[0]
    more = f" (and {len(changed) - 1} more report{'s' if len(changed) > 2 else ''})" \
        if len(changed) > 1 else ""
    stderr.print(f"amber: warning: task {first.task.id} in {tasks} differs from the task "
                 f"frozen with {first.bundle}:{first.report_name} in "
                 f"{', '.join(first.task_changed)}{more}; the run scores with {tasks}'s",
                 markup=False)


def _what_was_not_scored(reports: list[dict[str, Any]]) -> list[str]:
    """One line per dimension left unscored (with why and on how many reports), and one
    for the cited URLs that had no usable page."""
    from ambereval.engine.runs.evaluate import unscored, unusable_citations

    lines = [f"not scored: {what} on {count} of {len(reports)} "
             f"report{'s' if len(reports) != 1 else ''}: {why}"
             for what, why, count in unscored(reports)]
    gaps = unusable_citations(reports)
    if gaps:
        n = sum(gaps.values())
        lines.append(f"note: {n} cited URL{'s' if n != 1 else ''} "
                     f"{'have' if n != 1 else 'has'} no usable page in the bundles "
                     f"({', '.join(f'{why} {k}' for why, k in gaps.items())}); DeepEval "
                     "counts them invalid (E1), as a dead link is counted live: `amber "
                     "bundle drift` tells a dead page from a failed capture")
    return lines


def _print_plan(invocation: Any, out: Path, ledger_mode: str, protocols: list[str],
                rules: dict[str, str], judging: dict[str, str], threads: int | None,
                as_json: bool) -> None:
    """``--plan``: the judge work of the run, read against the run directory's ledger
    when there is one (nothing is written: without one, an empty ledger in a temporary
    directory stands in)."""
    import tempfile

    from ambereval.engine.runs.plan import plan_bundles
    from ambereval.models import Embedder

    with tempfile.TemporaryDirectory(prefix="amber-plan-") as tmp:
        ledger = out / "ledger.sqlite"
        if not ledger.is_file():
            ledger, ledger_mode = Path(tmp) / "ledger.sqlite", "reuse"
        judges = invocation.open_judges(ledger, ledger_mode, threads=threads)
        result = plan_bundles(invocation.bundles, invocation.tasks, protocols, judges,
                              Embedder(), invocation.clip_chars, rules, judging)
        for _, judge in judges:
            if judge.ledger is not None:
                judge.ledger.close()
    if as_json:
        print_json(result)
        return
    mark = "" if result["tokens"] == "exact" else " (estimated: 4 characters a token)"
    stdout.print(f"plan: {len(result['reports'])} report(s), judges "
                 f"{', '.join(result['judges'].values())}; prompt tokens{mark}", markup=False)
    stdout.print(f"{'report / protocol':36} {'requests':>9} {'calls':>7} {'ledger':>7} "
                 f"{'prompt tokens':>14} {'cached':>10}", markup=False)

    def line(label: str, row: dict[str, int]) -> None:
        stdout.print(f"{label:36} {row['requests']:>9} {row['calls']:>7} {row['ledger']:>7} "
                     f"{row['prompt_tokens']:>14,} {row['cached_tokens']:>10,}", markup=False)

    for report in result["reports"]:
        stdout.print(f"{report['report'][:44]}" + (f"  [{report['upper_bound']}]"
                                                     if "upper_bound" in report else ""),
                     markup=False)
        for protocol, row in report["protocols"].items():
            line(f"  {protocol}", row)
    line("total", result["total"])
    stdout.print("cached: prompt tokens a call shares with the start of the call before, "
                 "which a prefix cache does not read again", markup=False)
    if not result["exact"]:
        stdout.print("calls are an upper bound: DeepEval asks a page's E3 checks only when "
                     "the judge finds the page relevant (E2)", markup=False)
