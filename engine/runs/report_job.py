"""One report's evaluation: the job (plain data, cheap to send to another process), what
every report of a run shares (:class:`RunSetup`), the function that evaluates one report
with every protocol and judge, and the outcome an executor hands back. Below both the run
(:mod:`.evaluate`) and the executors that schedule it (:mod:`.executors`, worker
processes, Ray), so they import it and never each other in a circle."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ambereval.engine.aggregation import report_scores
from ambereval.engine.eval_context import SharedEmbedder, open_context
from ambereval.engine.judge_meter import Meter
from ambereval.engine.judging_rules import Asking
from ambereval.engine.tasks import Task
from ambereval.errors import InputError
from ambereval.models import Embedder, Judge
from ambereval.snapshots import Bundle


def protocol_runner(protocol: str) -> Callable[..., dict[str, Any]]:
    if protocol == "dailyreport":
        from ambereval.engine.protocols.dailyreport import evaluate_dailyreport
        return evaluate_dailyreport
    if protocol == "dr3":
        from ambereval.engine.protocols.dr3 import evaluate_dr3
        return evaluate_dr3
    if protocol == "deepeval":
        from ambereval.engine.protocols.deepeval import evaluate_deepeval
        return evaluate_deepeval
    raise InputError(f"unknown protocol {protocol!r} (dailyreport, dr3, deepeval or all)")


@dataclass(frozen=True)
class ReportJob:
    """One report to evaluate: plain data, cheap to send to another process."""

    index: int
    bundle: str  # as the user named it (recorded in the per-report file)
    path: str  # the bundle's absolute path (what a worker opens)
    report_id: str
    report_name: str
    system: str
    task: Task
    fname: str  # the per-report file name in RUN_DIR/reports/
    #: fields in which ``task`` differs from the task frozen with the report (a warning)
    task_changed: tuple[str, ...] = ()


@dataclass
class RunSetup:
    """What every report of a run is evaluated with."""

    protocols: list[str]
    judges: list[tuple[str, Judge]]
    embedder: Embedder | SharedEmbedder | None
    max_chars: int = 12_000
    rules: dict[str, str] | None = None
    #: builds each report's context (default :func:`open_context`); replay passes its own
    context_factory: Callable[..., Any] | None = None
    #: rules of how the judge is asked (engine/support_question.py: ``support_question``,
    #: ``support_batch``)
    judging: dict[str, str] = field(default_factory=dict)

    @property
    def ledger(self) -> Any:
        """The run's ledger (the judges share one), or None."""
        return run_ledger(self.judges)

    @property
    def width(self) -> int:
        """Requests the judges can take at once: 1 when any judge runs in-process."""
        return judges_width(self.judges)


def judges_width(judges: list[tuple[str, Judge]]) -> int:
    """Requests ``judges`` can all take at once: 1 when any judge runs in-process."""
    return min((j.limit.maximum for _, j in judges), default=1)


def run_ledger(judges: list[tuple[str, Judge]]) -> Any:
    """The ledger the run's judges write to (the first one found), or None."""
    return next((j.ledger for _, j in judges if j.ledger is not None), None)


def evaluate_report(job: ReportJob, setup: RunSetup,
                    tick: Callable[[], None] | None = None) -> dict[str, Any]:
    """Every protocol with every judge on one report -> the per-report document.

    With a served judge (``setup.width > 1``) the (judge, protocol) pairs run together on
    threads sharing the report's context; their results are assembled in a fixed order."""
    runners = {p: protocol_runner(p) for p in setup.protocols}
    with Bundle.open(job.path) as bundle:
        [row] = bundle.index.rows("SELECT * FROM reports WHERE id = ?", [job.report_id])
        ctx = (setup.context_factory or open_context)(bundle, row, job.task, setup.embedder)
        units = [(name, judge, p) for name, judge in setup.judges for p in setup.protocols]

        def one(unit: tuple[str, Judge, str]) -> tuple[dict[str, Any], Meter]:
            _, judge, protocol = unit
            meter = Meter(judge)  # books what this protocol asks of this judge
            if protocol == "dailyreport":
                result = runners[protocol](meter, ctx, setup.max_chars, setup.rules)
            else:
                result = runners[protocol](meter, ctx, setup.max_chars, setup.rules,
                                           Asking.of(setup.judging))
            if tick is not None:
                tick()
            return result, meter

        if setup.width > 1 and len(units) > 1:
            with ThreadPoolExecutor(len(units), thread_name_prefix="amber-unit") as pool:
                results = list(pool.map(one, units))
        else:
            results = [one(u) for u in units]
    per_judge: dict[str, dict[str, Any]] = {name: {} for name, _ in setup.judges}
    work: dict[str, dict[str, Any]] = {name: {} for name, _ in setup.judges}
    spent: dict[str, dict[str, Any]] = {name: {} for name, _ in setup.judges}
    for (name, _, protocol), (result, meter) in zip(units, results, strict=True):
        per_judge[name][protocol] = result
        work[name][protocol] = meter.work()
        spent[name][protocol] = meter.spent()
    means = {p: report_scores(p, [per_judge[n][p].get("scores") or {}
                                  for n, _ in setup.judges], setup.rules)
             for p in setup.protocols}
    # "retrieval" (what passage retrieval chose) is split off by the writer into its own
    # file, RUN_DIR/retrieval/<report>.jsonl, and "spent" (what this run paid, which a
    # replay does not) into stats.json; neither is part of the per-report document.
    return {"report": job.report_name, "report_id": job.report_id, "bundle": job.bundle,
            "system": job.system, "task": job.task.id, "scores": means, "judges": per_judge,
            "judge_work": work, "retrieval": ctx.retrievals(), "spent": spent}


Tick = Callable[..., None]


@dataclass
class Outcome:
    """One evaluated report: its document and how long it took (a timing)."""

    doc: dict[str, Any]
    seconds: float
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)


def timed_report(job: ReportJob, setup: RunSetup, tick: Tick) -> Outcome:
    start = time.monotonic()
    doc = evaluate_report(job, setup, tick)
    return Outcome(doc, time.monotonic() - start)
