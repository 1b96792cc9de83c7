"""``amber rerun RUN_DIR --times N``: ask the judges everything again, N times, and say
what moved.

Each rerun opens the run's inputs from ``RUN_DIR/invocation.json`` and evaluates them
into ``RUN_DIR/reruns/<i>/`` (the reruns of an earlier call are removed first) with a
fresh ledger in mode ``record`` (every question goes to the judge; nothing is answered
from a ledger). The result (format ``amber-rerun/1``):

- ``dimensions``: per ``protocol.dimension`` column, over the original run and its
  reruns, the largest and the mean spread (max - min) of a report's score, and how many
  reports moved at all; largest spread first.
- ``verdicts``: every judged item (claim, checklist item, game, rubric...) whose verdict
  differs between the original run and any rerun, with its label in each run.
- ``systems``: per system and column, the spread (max - min) of the system's figure
  over the original run and its reruns (as ``run.json`` aggregates it: DeepEval depth
  pooled over the system's games), largest first.
- ``identical_reruns``: how many reruns scored every report exactly as the original.

A deterministic judge on one machine (in-process llama.cpp, greedy, fixed seed) must
move nothing; a served judge with batching nondeterminism may.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ambereval.engine.runs.diff import diff_runs
from ambereval.engine.runs.invocation import read_invocation
from ambereval.errors import InputError

RERUN_FORMAT = "amber-rerun/1"


def _rows(run: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    table = json.loads((run / "run.json").read_text(encoding="utf-8"))
    return {(r["system"], r["report"], r["task"]): r for r in table["rows"]}


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def spread(runs: list[Path]) -> list[dict[str, Any]]:
    """Per column, the spread of each report's score over ``runs`` (see module doc)."""
    tables = [_rows(r) for r in runs]
    columns = sorted({c for t in tables for row in t.values() for c in row}
                     - {"system", "report", "task"})
    out = []
    for column in columns:
        spreads: list[float | None] = []  # None: a score null in some runs only
        for key in tables[0]:
            values = [t[key].get(column) for t in tables if key in t]
            numbers = [v for v in values if _number(v)]
            if not numbers:
                spreads.append(0.0)
            elif len(numbers) == len(values):
                spreads.append(max(numbers) - min(numbers))
            else:
                spreads.append(None)
        known = [x for x in spreads if x is not None]
        out.append({"column": column,
                    "max_spread": round(max(known), 6) if known else 0.0,
                    "mean_spread": round(sum(known) / len(known), 6) if known else 0.0,
                    "reports_moved": sum(1 for x in spreads if x is None or x > 0),
                    "null_in_some_runs": spreads.count(None), "reports": len(spreads)})
    out.sort(key=lambda d: (-d["max_spread"], -d["reports_moved"], d["column"]))
    return out


def system_spread(runs: list[Path]) -> list[dict[str, Any]]:
    """Per (system, column), the spread of the system's figure over ``runs``."""
    tables = [json.loads((r / "run.json").read_text(encoding="utf-8")) for r in runs]
    by_run = [{s["system"]: s for s in t.get("systems") or []} for t in tables]
    columns = sorted({c for t in tables for c in t.get("columns") or []})
    out = []
    for system in sorted(by_run[0]):
        for column in columns:
            values = [b[system].get(column) for b in by_run if system in b]
            numbers = [v for v in values if _number(v)]
            if not numbers:
                continue
            out.append({"system": system, "column": column,
                        "spread": round(max(numbers) - min(numbers), 6),
                        "null_in_some_runs": len(values) - len(numbers),
                        "values": values})
    out.sort(key=lambda d: (-d["spread"], -d["null_in_some_runs"], d["system"],
                            d["column"]))
    return out


def rerun_run(run_dir: str | Path, times: int, concurrency: int | None = None,
              threads: int | None = None, executor: str = "auto",
              progress: Callable[[str, int, int], None] | None = None,
              embedder: Any = None, workers: int | None = None) -> dict[str, Any]:
    """Evaluate the run's inputs ``times`` more times with no ledger reuse; compare.
    ``executor`` (and ``workers``): as ``amber evaluate --executor``, a fresh one per
    rerun (auto, sequential, threads or processes).

    Example: ``rerun_run("runs/smol", 3)["verdicts"]`` (empty for a deterministic judge)
    """
    from ambereval.engine.judging_rules import split_rules
    from ambereval.engine.protocols.switches import parse_run_rules
    from ambereval.engine.runs.evaluate import evaluate_bundles
    from ambereval.engine.runs.executors import make_executor
    from ambereval.engine.runs.replay import judging_of
    from ambereval.engine.runs.report_job import judges_width
    from ambereval.models import Embedder

    run = Path(run_dir)
    if times < 1:
        raise InputError("--times must be at least 1")
    invocation = read_invocation(run)
    if not (run / "run.json").is_file():
        raise InputError(f"{run}: the run did not finish (no run.json)",
                         hint=f"finish it first: amber evaluate --resume {run}")
    # asked as the run asked (a rule the run predates keeps its earlier value)
    judging = judging_of(json.loads((run / "manifest.json").read_text()), run)
    embedder = embedder or Embedder()
    reruns = []
    shutil.rmtree(run / "reruns", ignore_errors=True)  # reruns of an earlier call go
    for i in range(1, times + 1):
        out = run / "reruns" / str(i)
        judges = invocation.open_judges(out / "ledger.sqlite", "record",
                                        concurrency=concurrency, threads=threads)
        try:
            runner = make_executor(executor, judges_width(judges), workers=workers,
                                   threads=threads)
            evaluate_bundles(invocation.bundles, invocation.tasks, invocation.protocols,
                             judges, out, embedder, progress, invocation.clip_chars,
                             parse_run_rules(split_rules(invocation.rules)[0] or None),
                             runner, invocation=invocation,
                             judging=judging)
        finally:
            for _, judge in judges:
                judge.close()
        reruns.append(out)
    verdicts: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    identical = 0
    for i, out in enumerate(reruns, start=1):
        d = diff_runs(run, out)
        identical += not (d["scores"] or d["verdicts"])
        for v in d["verdicts"]:
            key = (v["report"], v["judge"], v["dimension"], v["item"])
            entry = verdicts.setdefault(key, {
                "report": v["report"], "judge": v["judge"], "dimension": v["dimension"],
                "item": v["item"], "text": v["text"], "original": v["a"], "reruns": {}})
            entry["reruns"][str(i)] = v["b"]
    return {"format": RERUN_FORMAT, "run": str(run), "times": times,
            "reruns": [str(p) for p in reruns], "identical_reruns": identical,
            "dimensions": spread([run, *reruns]),
            "systems": system_spread([run, *reruns]),
            "verdicts": [verdicts[k] for k in sorted(verdicts)]}
