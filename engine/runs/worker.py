"""One report evaluated in another process: what the Ray and process-pool executors share.

A worker process cannot take the driver's judges and embedder (llama.cpp contexts, SQLite
connections, models in memory), so it gets their recipes (:class:`WorkerSetup`: plain,
picklable data) and rebuilds them, once per process. It opens the bundle by its absolute
path and answers through a ledger shard of the report's own,
``RUN_DIR/.ledger-shards/<report>.sqlite``, looked up before the run's ledger: a worker that
dies mid-report leaves its shard behind, and the retry answers from it what the dead
attempt already asked. Only a finished report's result reaches the driver, which merges
the shard's rows into the run's ledger in key order (:func:`take_result`) and deletes it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ambereval.engine.eval_context import SharedEmbedder
from ambereval.engine.runs.report_job import Outcome, ReportJob, RunSetup, evaluate_report
from ambereval.engine.runs.run_dir import SHARDS, remove_shard
from ambereval.errors import ConfigError
from ambereval.models import Embedder, Judge, open_judge
from ambereval.models.canonical import canonical_json
from ambereval.models.ledger import Ledger, ShardLedger


@dataclass(frozen=True)
class WorkerSetup:
    """What a worker needs to rebuild a :class:`RunSetup`: plain, picklable data."""

    protocols: list[str]
    judges: list[tuple[str, dict[str, Any]]]  # (name, open_judge recipe)
    embedder_dir: str | None
    max_chars: int
    rules: dict[str, str] | None
    ledger: str | None  # the run's ledger (absolute path)
    ledger_mode: str
    shard_dir: str | None
    allow_hosts: tuple[str, ...]
    judging: tuple[tuple[str, str], ...] = ()  # RunSetup.judging


def worker_setup(setup: RunSetup, allow_hosts: tuple[str, ...] = (),
                 threads: int | None = None) -> WorkerSetup:
    """The recipes of ``setup`` for a worker; ``threads``: llama.cpp threads of each
    in-process judge there (default: as the driver's judge was opened)."""
    if setup.context_factory is not None:  # e.g. replay's recorded contexts stay here
        raise ConfigError("this run builds its report contexts in this process; it cannot "
                          "be spread over worker processes")
    recipes = []
    for name, judge in setup.judges:
        if judge.recipe is None:
            raise ConfigError(f"judge {name!r} cannot be rebuilt in a worker process",
                              hint="open it with open_judge (a GGUF path or --judge-url)")
        recipe = dict(judge.recipe)
        if recipe.get("model_path"):
            recipe["model_path"] = str(Path(recipe["model_path"]).resolve())
        if threads is not None and not recipe.get("url"):
            recipe["threads"] = threads
        recipes.append((name, recipe))
    if len({id(j.ledger) for _, j in setup.judges if j.ledger is not None}) > 1:
        raise ConfigError("every judge of a run spread over workers must share one ledger")
    ledger = setup.ledger
    path = Path(ledger.path).resolve() if ledger is not None else None
    embedder = getattr(setup.embedder, "model_dir", None)
    return WorkerSetup(
        list(setup.protocols), recipes,
        str(Path(embedder).resolve()) if embedder is not None else None,
        setup.max_chars, setup.rules, str(path) if path else None,
        ledger.mode if ledger is not None else "record",
        str(path.parent / SHARDS) if path else None, allow_hosts,
        tuple(sorted(setup.judging.items())))


_JUDGES: dict[str, Judge] = {}  # per worker process: a GGUF is loaded once
_EMBEDDERS: dict[str, Embedder] = {}


def _judge(recipe: dict[str, Any], ledger: ShardLedger | None) -> Judge:
    key = canonical_json(recipe)
    if key not in _JUDGES:
        _JUDGES[key] = open_judge(**recipe)
    base = _JUDGES[key]
    return Judge(base.backend, ledger, seed=base.seed, n_ctx=base.n_ctx,
                 concurrency=base.limit.maximum, recipe=recipe)


def evaluate_on_worker(job: ReportJob, setup: WorkerSetup) -> dict[str, Any]:
    """One report in a worker process -> its document, its ledger shard's rows, judge
    stats and how long it took."""
    from ambereval.netguard import install_offline_guard

    install_offline_guard(setup.allow_hosts)
    start = time.monotonic()
    shard = None
    if setup.shard_dir is not None:
        Path(setup.shard_dir).mkdir(parents=True, exist_ok=True)
        shard = ShardLedger(Path(setup.shard_dir) / f"{job.fname}.sqlite", setup.ledger,
                            setup.ledger_mode)
    judges = [(name, _judge(recipe, shard)) for name, recipe in setup.judges]
    embedder: Embedder | SharedEmbedder | None = None
    if setup.embedder_dir is not None:
        if setup.embedder_dir not in _EMBEDDERS:
            _EMBEDDERS[setup.embedder_dir] = Embedder(setup.embedder_dir)
        embedder = _EMBEDDERS[setup.embedder_dir]
    run = RunSetup(setup.protocols, judges, embedder, setup.max_chars, setup.rules,
                   judging=dict(setup.judging))
    if run.width > 1 and isinstance(embedder, Embedder):
        run.embedder = SharedEmbedder(embedder)
    try:
        doc = evaluate_report(job, run)
        rows = shard.shard.rows() if shard is not None else []
    finally:
        for _, judge in judges:
            judge.close()
        if shard is not None:
            shard.close()
    return {"doc": doc, "rows": rows, "seconds": time.monotonic() - start,
            "stats": {name: judge.stats() for name, judge in judges}}


def take_result(result: dict[str, Any], job: ReportJob, setup: WorkerSetup,
                main: Ledger | None) -> Outcome:
    """On the driver, in run order: merge a finished report's ledger rows into the run's
    ledger (key order), delete its shard, and hand the report to the writer."""
    if main is not None and result["rows"]:
        main.merge(result["rows"])
    if setup.shard_dir is not None:
        remove_shard(Path(setup.shard_dir) / f"{job.fname}.sqlite")
    return Outcome(result["doc"], result["seconds"], result["stats"])


def add_stats(total: dict[str, dict[str, Any]], stats: dict[str, dict[str, Any]]) -> None:
    """Add one report's judge counters to the run's (peaks are maxima, not sums)."""
    for name, counters in stats.items():
        mine = total.setdefault(name, {})
        for key, value in counters.items():
            if key in ("concurrency", "peak_in_flight"):
                mine[key] = max(mine.get(key, 0), value)
            else:
                mine[key] = round(mine.get(key, 0) + value, 3)


__all__ = ["SHARDS", "WorkerSetup", "add_stats", "evaluate_on_worker", "take_result",
           "worker_setup"]
