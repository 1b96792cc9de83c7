"""Fan a run out over a Ray cluster: one Ray task per report. The only module importing Ray.

Each task runs :func:`~ambereval.engine.runs.evaluate.evaluate_report` on a worker, the
same function a local run calls. The worker rebuilds the judges from their recipes (the
``open_judge`` arguments: a ``--judge-url`` server, or a GGUF file every node can read,
loaded once per worker process) and the embedder from its directory, and opens the
bundle by its absolute path: bundles, the run directory and model files must sit on a
path every node sees (NFS, a shared volume) under the same name.

Judge answers go to a ledger shard of the task's own, ``RUN_DIR/.ledger-shards/<report>``
(SQLite), looked up before the run's ledger. A worker that dies mid-report leaves its
shard behind; Ray retries the task (``max_retries``) and the retry answers from the shard
what the dead attempt already asked. Only a finished task's result reaches the driver,
which writes the report, merges the shard's rows into ``RUN_DIR/ledger.sqlite`` in key
order and deletes the shard: nothing from a dead attempt reaches the run directory except
judge answers, which are the same whoever asked.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ambereval.engine.eval_context import SharedEmbedder
from ambereval.engine.runs.evaluate import ReportJob, RunSetup, evaluate_report
from ambereval.engine.runs.executors import Outcome, Tick
from ambereval.errors import AmberError, ConfigError, ModelError
from ambereval.models import Embedder, Judge, open_judge
from ambereval.models.canonical import canonical_json
from ambereval.models.ledger import ShardLedger

try:
    import ray
except ImportError:  # the optional extra
    ray = None

SHARDS = ".ledger-shards"


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
    """One report on a Ray worker -> its document, its ledger shard's rows, judge stats."""
    from ambereval.netguard import install_offline_guard

    install_offline_guard(setup.allow_hosts)
    start = time.monotonic()
    shard = None
    if setup.shard_dir is not None:
        shard = ShardLedger(Path(setup.shard_dir) / f"{job.fname}.sqlite", setup.ledger,
                            setup.ledger_mode)
    judges = [(name, _judge(recipe, shard)) for name, recipe in setup.judges]
    embedder: Embedder | SharedEmbedder | None = None
    if setup.embedder_dir is not None:
        if setup.embedder_dir not in _EMBEDDERS:
            _EMBEDDERS[setup.embedder_dir] = Embedder(setup.embedder_dir)
        embedder = _EMBEDDERS[setup.embedder_dir]
    run = RunSetup(setup.protocols, judges, embedder, setup.max_chars, setup.rules)
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


class RayExecutor:
    """One Ray task per report; outcomes come back to the driver in job order."""

    def __init__(self, address: str | None = None, max_retries: int = 3,
                 num_cpus: float = 1.0, allow_hosts: tuple[str, ...] = ()) -> None:
        if ray is None:
            raise ConfigError("--executor ray needs Ray, which is not installed",
                              hint="pip install 'amber-eval[ray]'")
        self.address = address
        self.max_retries = max_retries
        self.num_cpus = num_cpus
        self.allow_hosts = allow_hosts
        self._stats: dict[str, dict[str, Any]] = {}

    def describe(self) -> dict[str, Any]:
        nodes = len([n for n in ray.nodes() if n.get("Alive")]) if ray.is_initialized() else 0
        return {"name": "ray", "address": self.address or "local", "nodes": nodes,
                "max_retries": self.max_retries}

    def judge_stats(self, setup: RunSetup) -> dict[str, dict[str, Any]]:
        return self._stats

    def _worker_setup(self, setup: RunSetup) -> WorkerSetup:
        recipes = []
        for name, judge in setup.judges:
            if judge.recipe is None:
                raise ConfigError(f"judge {name!r} cannot be rebuilt on a Ray worker",
                                  hint="open it with open_judge (a GGUF path or --judge-url)")
            recipe = dict(judge.recipe)
            if recipe.get("model_path"):
                recipe["model_path"] = str(Path(recipe["model_path"]).resolve())
            recipes.append((name, recipe))
        ledgers = {id(j.ledger): j.ledger for _, j in setup.judges if j.ledger is not None}
        if len(ledgers) > 1:
            raise ConfigError("every judge of a Ray run must share one ledger")
        ledger = next(iter(ledgers.values()), None)
        path = Path(ledger.path).resolve() if ledger is not None else None
        embedder = getattr(setup.embedder, "model_dir", None)
        return WorkerSetup(
            list(setup.protocols), recipes,
            str(Path(embedder).resolve()) if embedder is not None else None,
            setup.max_chars, setup.rules, str(path) if path else None,
            ledger.mode if ledger is not None else "record",
            str(path.parent / SHARDS) if path else None, self.allow_hosts)

    def _connect(self) -> None:
        if ray.is_initialized():
            return
        if self.address:
            ray.init(address=self.address, log_to_driver=False)
        else:
            ray.init(log_to_driver=False, include_dashboard=False)

    def run(self, jobs: list[ReportJob], setup: RunSetup, tick: Tick) -> Iterator[Outcome]:
        worker = self._worker_setup(setup)
        main = next((j.ledger for _, j in setup.judges if j.ledger is not None), None)
        self._connect()
        remote = ray.remote(num_cpus=self.num_cpus, max_retries=self.max_retries,
                            retry_exceptions=False)(evaluate_on_worker)
        setup_ref = ray.put(worker)
        refs = [remote.remote(job, setup_ref) for job in jobs]
        position = {ref: i for i, ref in enumerate(refs)}
        done: dict[int, dict[str, Any]] = {}
        pending = list(refs)
        units = len(setup.judges) * len(setup.protocols)
        try:
            for i, job in enumerate(jobs):
                while i not in done:
                    ready, pending = ray.wait(pending, num_returns=1)
                    for ref in ready:
                        done[position[ref]] = self._get(ref, jobs[position[ref]])
                        tick(units)
                result = done.pop(i)
                if main is not None and result["rows"]:
                    main.merge(result["rows"])
                if worker.shard_dir is not None:
                    _remove_shard(Path(worker.shard_dir) / f"{job.fname}.sqlite")
                self._add_stats(result["stats"])
                yield Outcome(result["doc"], result["seconds"], result["stats"])
        finally:
            for ref in pending:
                ray.cancel(ref)

    def _get(self, ref: Any, job: ReportJob) -> dict[str, Any]:
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as err:
            cause = getattr(err, "cause", None)
            if isinstance(cause, AmberError):
                raise cause from None
            raise ModelError(f"{job.fname}: the Ray task failed ({cause or err})") from None
        except ray.exceptions.RayError as err:
            raise ModelError(f"{job.fname}: the Ray task failed after "
                             f"{self.max_retries} retries ({type(err).__name__})",
                             hint="see the Ray logs of the worker") from None

    def _add_stats(self, stats: dict[str, dict[str, Any]]) -> None:
        for name, counters in stats.items():
            mine = self._stats.setdefault(name, {})
            for key, value in counters.items():
                if key in ("concurrency", "peak_in_flight"):
                    mine[key] = max(mine.get(key, 0), value)
                else:
                    mine[key] = round(mine.get(key, 0) + value, 3)


def _remove_shard(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


__all__ = ["RayExecutor", "WorkerSetup", "evaluate_on_worker"]
