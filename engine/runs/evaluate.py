"""``amber evaluate``: run the benchmark protocols offline over bundles, write a run dir.

The run is planned first (:func:`plan_reports`: one :class:`ReportJob` per report, in
bundle order then storage order), then :func:`evaluate_report` evaluates one report and
returns plain data. Where and when it runs is the executor's business (``executors.py``:
one at a time, a thread pool for a served judge; ``ray_executor.py``: a Ray cluster);
every executor hands results back in run order to the one :class:`RunWriter`. The run
directory's format (``RUN_FORMAT``) is documented field by field in ``run_dir.py``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ambereval import __version__
from ambereval.engine.aggregation import run_table
from ambereval.engine.eval_context import (
    SharedEmbedder,
    reports_in,
    stored_task_id,
)
from ambereval.engine.judge_card import card_entries
from ambereval.engine.judge_meter import SPENT_KEYS, WORK_KEYS, add_up
from ambereval.engine.judging_rules import PROMPT_LAYOUT, Asking, split_rules
from ambereval.engine.progress_count import ProgressCount
from ambereval.engine.runs.executors import make_executor
from ambereval.engine.runs.report_job import (
    ReportJob,
    RunSetup,
    protocol_runner,
    run_ledger,
)
from ambereval.engine.runs.run_dir import RUN_FORMAT, RunWriter, merge_leftover_shards
from ambereval.engine.tasks import changed_fields, load_tasks, task_for_report
from ambereval.errors import InputError
from ambereval.models import Embedder, Judge, RetrieverSpec
from ambereval.snapshots import Bundle

PROTOCOLS = ("dailyreport", "dr3", "deepeval")
MANY_CORES = 8  # from here an in-process judge is worth splitting into worker processes
_log = logging.getLogger("ambereval.evaluate")
Progress = Callable[[str, int, int], None]


def _digest(path: Path) -> str | None:
    manifest = path / "datapackage.json"
    return hashlib.sha256(manifest.read_bytes()).hexdigest() if manifest.is_file() else None


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "report"


def plan_reports(bundles: list[str | Path], tasks_path: str | Path) -> list[ReportJob]:
    """One job per report of every bundle, in run order; fails before any judging."""
    tasks = load_tasks(tasks_path)
    jobs: list[ReportJob] = []
    seen: dict[Path, str] = {}
    for path in map(Path, bundles):
        if path.resolve() in seen:
            raise InputError(f"bundle {path} given twice (also as {seen[path.resolve()]}): "
                             "its reports would be scored twice")
        seen[path.resolve()] = str(path)
    for path in bundles:
        path = Path(path)
        with Bundle.open(path) as bundle:
            rows = reports_in(bundle)
        if not rows:
            raise InputError(f"{path}: bundle holds no report",
                             hint="freeze one with `amber snapshot report`")
        for row in rows:
            task = task_for_report(tasks, Path(row["name"]).name, stored_task_id(row))
            system = (json.loads(row["meta"]).get("system") if row.get("meta") else None) \
                or path.parent.name or "default"
            fname = (f"{_safe(path.parent.name)}--{_safe(path.name)}--"
                     f"{_safe(Path(row['name']).stem)}--{row['id'][:12]}.json")
            frozen = json.loads(row["task"]) if row.get("task") else None
            jobs.append(ReportJob(len(jobs), str(path), str(path.resolve()), row["id"],
                                  row["name"], system, task, fname,
                                  tuple(changed_fields(frozen, task))))
    return jobs


def evaluate_bundles(bundles: list[str | Path], tasks_path: str | Path, protocols: list[str],
                     judges: list[tuple[str, Judge]], out: str | Path,
                     embedder: Embedder | None = None,
                     progress: Progress | None = None,
                     max_chars: int = 12_000,
                     rules: dict[str, str] | None = None,
                     executor: Any = None, resume: bool = False,
                     invocation: Any = None,
                     judging: dict[str, str] | None = None) -> dict[str, Any]:
    """Evaluate every report of ``bundles`` and write the run directory ``out``.

    ``resume``: ``out`` holds an interrupted run of the same inputs (its manifest must
    match, judge cards aside); reports already written are read back, not evaluated
    again, and the judges (ledger mode reuse) answer every call the dead run finished
    from the ledger. ``invocation`` (``engine/runs/invocation.py``): how to open these
    inputs again, written to ``out/invocation.json`` for ``--resume`` and ``amber rerun``.

    ``executor``: None picks one (a thread pool as wide as the judges' concurrency when
    every judge is served, else one report at a time); or an executor from
    :func:`~ambereval.engine.runs.executors.make_executor`. Results do not depend on it.
    Example: ``evaluate_bundles(["b/"], "tasks.json", ["deepeval"], [("j", judge)], "run")``
    """

    progress = progress or (lambda phase, done, total: None)
    out = Path(out)
    for p in protocols:
        protocol_runner(p)
    jobs = plan_reports(bundles, tasks_path)
    judging = {**split_rules(None)[1], **(judging or {})}
    setup = RunSetup(list(protocols), judges, embedder, max_chars, rules, judging=judging)
    executor = executor or make_executor("auto", setup.width)
    _suggest_workers(executor, setup, len(jobs))
    if setup.width > 1 and isinstance(embedder, Embedder):
        setup.embedder = SharedEmbedder(embedder)
    manifest = {
        "software": f"amber-eval {__version__}", "protocols": list(protocols),
        "bundles": {b: _digest(Path(b)) for b in dict.fromkeys(j.bundle for j in jobs)},
        "tasks_file": str(tasks_path),
        "tasks_sha256": hashlib.sha256(Path(tasks_path).read_bytes()).hexdigest(),
        "judges": {n: j.backend.identity()["model"] for n, j in judges},
        "judge_cards": card_entries(judges),  # measured quality; warns when poor or unknown
        "seed": judges[0][1].seed if judges else None,
        "embedder": embedder.identity() if embedder else None,
        "retriever": RetrieverSpec().as_dict() if embedder else None,
        "rules": _rules(list(protocols), rules, judging),
        "judging": {**judging, "prompt_layout": PROMPT_LAYOUT},
        "report_clip_chars": max_chars,
        "reports": [j.fname for j in jobs],
    }
    if not resume:
        check_run_target(out, manifest)
        (out / "audit.html").unlink(missing_ok=True)  # made from the run this replaces
    writer = RunWriter(out)
    done = finished_reports(out, manifest) if resume else {}
    if resume:  # answers of workers a crash stopped mid-report (Ray, processes)
        merge_leftover_shards(run_ledger(judges))
    if not resume:
        writer.manifest(manifest)
        if invocation is not None:
            invocation.write(out)
    pending = [j for j in jobs if j.fname not in done]

    total = len(pending) * len(judges) * len(protocols)
    tick = ProgressCount(progress, "evaluate", total)

    started = time.monotonic()
    results = []
    report_seconds: dict[str, float] = {}
    spent: dict[str, dict[str, Any]] = {}
    outcomes = iter(executor.run(pending, setup, tick))
    for job in jobs:
        if job.fname in done:
            results.append(done[job.fname])
            continue
        outcome = next(outcomes)
        writer.retrieval(job.fname, outcome.doc.pop("retrieval", []))
        spent[job.fname] = outcome.doc.pop("spent", {})
        writer.report(job.fname, outcome.doc)
        report_seconds[job.fname] = round(outcome.seconds, 3)
        results.append(outcome.doc)
    for _ in outcomes:  # let the executor finish (and release what it holds)
        pass
    table = run_table(results, list(protocols), rules)
    table["judge_work"] = work_totals(results)
    writer.table(table)
    stats = {"executor": executor.describe(), "wall_seconds":
             round(time.monotonic() - started, 3), "reports": len(jobs),
             "resumed_reports": len(done),
             "report_seconds": report_seconds,
             "judges": executor.judge_stats(setup)}
    stats["totals"] = _totals(stats["judges"])
    stats["spent"] = spent_totals(spent)
    writer.stats(stats)
    return {"manifest": {"format": RUN_FORMAT, **manifest}, "table": table,
            "reports": results, "stats": stats}


def unscored(results: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    """What the run could not score and why, from the per-report documents: (what,
    reason, reports), e.g. ``("dailyreport", "task has no subtasks ...", 3)``, sorted."""
    seen: dict[tuple[str, str], set[str]] = {}

    def walk(node: Any, path: str, report: str) -> None:
        if isinstance(node, dict):
            empty = ("score" in node and node["score"] is None) or \
                ("scores" in node and node["scores"] is None)
            reason = node.get("reason")
            if empty and not reason and path.endswith("citation_accuracy") and \
                    node.get("pairs") == 0:
                reason = "no sentence cites a URL"  # DeepEval: no (statement, URL) pair
            if empty and isinstance(reason, str) and reason:
                seen.setdefault((path, reason), set()).add(report)
                return
            for key, value in node.items():
                walk(value, f"{path}.{key}" if path else key, report)

    for doc in results:
        for by_protocol in (doc.get("judges") or {}).values():
            walk(by_protocol, "", f"{doc.get('bundle')}/{doc.get('report_id')}")
    return sorted((what, why, len(reports)) for (what, why), reports in seen.items())


def unusable_citations(results: list[dict[str, Any]]) -> dict[str, int]:
    """Cited URLs the bundles hold no usable page for, by why (``failed_capture``,
    ``not_captured``, ``no_text``, ``error_page``), each (bundle, URL) once, from
    DeepEval's citation accuracy: the protocols count them against the report (E1), as a
    dead link is counted live, so the reader should know how many there were."""
    seen: dict[tuple[str, str], str] = {}
    for doc in results:
        for by_protocol in (doc.get("judges") or {}).values():
            accuracy = (by_protocol.get("deepeval") or {}).get("citation_accuracy") or {}
            for entry in accuracy.get("urls") or []:
                if entry.get("error") == "E1":
                    why = str(entry.get("reason") or "invalid").split(" ")[0].split(":")[0]
                    seen[(str(doc.get("bundle")), entry["url"])] = why
    counts: dict[str, int] = {}
    for why in seen.values():
        counts[why] = counts.get(why, 0) + 1
    return dict(sorted(counts.items()))


def _suggest_workers(executor: Any, setup: RunSetup, reports: int) -> None:
    """One line when ``auto`` left an in-process judge to take many reports one at a time
    on a machine with many cores: worker processes would use them (same result)."""
    cores = os.cpu_count() or 1
    if getattr(executor, "picked_for_you", False) and setup.width == 1 and reports > 1 \
            and cores >= MANY_CORES:
        _log.warning("amber: note: %d reports, one at a time, on %d cores: "
                     "--executor processes evaluates them side by side (same results)",
                     reports, cores)


#: manifest fields a resumed run may differ in (quality measured since is not an input)
NOT_COMPARED_ON_RESUME = ("judge_cards",)


def _differences(before: dict[str, Any], manifest: dict[str, Any]) -> list[str]:
    """The manifest fields in which a run directory's recorded run and this one differ."""
    now = {"format": RUN_FORMAT, **manifest}
    return [k for k in sorted(set(before) | set(now))
            if k not in NOT_COMPARED_ON_RESUME and before.get(k) != now.get(k)]


def check_run_target(out: Path, manifest: dict[str, Any]) -> None:
    """A fresh run may go into a new or empty directory, or into a run directory of the
    same inputs (evaluated again, e.g. with ``--ledger-mode replay`` from its ledger). A
    run of other inputs there would mix two runs' reports and ledgers: refused."""
    if not out.is_dir() or not any(out.iterdir()):
        return
    path = out / "manifest.json"
    if not path.is_file():
        if all(p.name.startswith("ledger.sqlite") for p in out.iterdir()):
            return  # the run's ledger, opened already (or put there to answer from)
        raise InputError(f"{out}: not empty and not a run directory",
                         hint="give a new --out directory")
    try:
        before = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise InputError(f"{out}/manifest.json: not JSON") from None
    differ = _differences(before, manifest)
    if differ:
        raise InputError(f"{out}: holds a run of other inputs (they differ in "
                         f"{', '.join(differ)}); a new run there would mix the two",
                         hint="give a new --out directory, or --resume to finish that run")


def finished_reports(out: Path, manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The per-report documents an interrupted run in ``out`` already wrote (by file
    name), after checking that its manifest plans exactly this run."""
    path = out / "manifest.json"
    if not path.is_file():
        raise InputError(f"{out}: no manifest.json: nothing to resume",
                         hint="start the run without --resume")
    before = json.loads(path.read_text(encoding="utf-8"))
    if before.get("format") != RUN_FORMAT:
        raise InputError(f"{out}: run directory format {before.get('format')!r}, this "
                         f"amber resumes {RUN_FORMAT}")
    differ = _differences(before, manifest)
    if differ:
        raise InputError(f"{out}: cannot resume: the inputs differ from the interrupted "
                         f"run's in {', '.join(differ)}",
                         hint="resume with the same bundles, tasks, judges and rules, or "
                              "start a new run directory")
    done = {}
    for fname in manifest["reports"]:
        report = out / "reports" / fname
        if report.is_file():  # written atomically, after its retrieval record
            done[fname] = json.loads(report.read_text(encoding="utf-8"))
    return done


def work_totals(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The judge work of the run's reports (content: a replay finds the same) per
    protocol, summed over judges and reports, and in all: requests asked, distinct
    requests and their prompt tokens (distinct within a protocol and report: a question
    DR3 and DeepEval share counts for both). A report written before the work was
    booked counts nothing."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for doc in results:
        for by_protocol in (doc.get("judge_work") or {}).values():
            for protocol, work in by_protocol.items():
                rows.setdefault(protocol, []).append(work)
    out: dict[str, Any] = {p: add_up(r, WORK_KEYS) for p, r in sorted(rows.items())}
    out["total"] = add_up([w for r in rows.values() for w in r], WORK_KEYS)
    return out


def spent_totals(spent: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What this run paid per report and protocol (summed over judges), per protocol and
    in all: model calls, ledger answers, prompt and generated tokens of the calls."""
    per_report: dict[str, dict[str, dict[str, int]]] = {}
    for fname, by_judge in spent.items():
        per_protocol: dict[str, list[dict[str, Any]]] = {}
        for by_protocol in by_judge.values():
            for protocol, row in by_protocol.items():
                per_protocol.setdefault(protocol, []).append(row)
        per_report[fname] = {p: add_up(r, SPENT_KEYS) for p, r in sorted(per_protocol.items())}
    protocols = sorted({p for r in per_report.values() for p in r})
    by_protocol = {p: add_up([r[p] for r in per_report.values() if p in r], SPENT_KEYS)
                   for p in protocols}
    return {"reports": per_report, "protocols": by_protocol,
            "total": add_up(list(by_protocol.values()), SPENT_KEYS)}


def _totals(per_judge: dict[str, dict[str, Any]]) -> dict[str, Any]:
    keys = ("calls", "ledger_hits", "prompt_tokens", "completion_tokens", "errors",
            "truncated", "retries", "throttled")
    return {k: sum(s.get(k, 0) for s in per_judge.values()) for k in keys}


def _rules(protocols: list[str], chosen: dict[str, str] | None,
           judging: dict[str, str]) -> dict[str, Any]:
    from ambereval.engine.protocols.dailyreport_math import RULES as DR_RULES
    from ambereval.engine.protocols.switches import protocol_rules
    from ambereval.engine.verification import VerifyOptions

    rules: dict[str, Any] = {}
    if "dailyreport" in protocols:
        mine = {k: v for k, v in (chosen or {}).items() if k in DR_RULES}
        rules["dailyreport"] = {**DR_RULES, **mine, "verify": VerifyOptions().as_dict()}
    for p in ("dr3", "deepeval"):
        if p in protocols:
            rules[p] = {**protocol_rules(p, chosen), **Asking.of(judging).rules()}
    return rules
