"""Fan a run out over a Ray cluster: one Ray task per report. The only module importing Ray.

Each task runs :func:`~ambereval.engine.runs.worker.evaluate_on_worker` on a worker: the
same report evaluation a local run does, with judges and embedder rebuilt from their
recipes (a ``--judge-url`` server, or a GGUF file every node can read, loaded once per
worker process). Bundles, the run directory and model files are opened by absolute path,
so they must sit on a path every node sees (NFS, a shared volume) under the same name.

Judge answers go to the report's ledger shard (``worker.py``); a worker that dies
mid-report leaves it behind, Ray retries the task (``max_retries``) and the retry answers
from the shard what the dead attempt already asked. Only a finished task's result
reaches the driver, which writes the report and merges the shard in key order: nothing
from a dead attempt reaches the run directory except judge answers, which are the same
whoever asked.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ambereval.engine.runs.report_job import Outcome, ReportJob, RunSetup, Tick
from ambereval.engine.runs.worker import (
    add_stats,
    evaluate_on_worker,
    take_result,
    worker_setup,
)
from ambereval.errors import AmberError, ConfigError, ModelError

try:
    import ray
except ImportError:  # the optional extra
    ray = None


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

    def _connect(self) -> None:
        if ray.is_initialized():
            return
        if self.address:
            ray.init(address=self.address, log_to_driver=False)
        else:
            ray.init(log_to_driver=False, include_dashboard=False)

    def run(self, jobs: list[ReportJob], setup: RunSetup, tick: Tick) -> Iterator[Outcome]:
        worker = worker_setup(setup, self.allow_hosts)
        main = setup.ledger
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
                outcome = take_result(done.pop(i), job, worker, main)
                add_stats(self._stats, outcome.stats)
                yield outcome
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


__all__ = ["RayExecutor"]
