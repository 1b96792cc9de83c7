"""Reports spread over worker processes on one machine: ``--executor processes``.

What the in-process llama.cpp judge needs on a many-core machine: its calls run one at a
time in one process (the KV cache is shared state), so one process cannot use 32 cores
well, but 8 processes of 4 threads can. Each worker process rebuilds the judges and the
embedder once from their recipes and evaluates whole reports, one at a time, with the
same function every executor calls (``worker.py``: ledger shards, results merged by the
driver in run order). A report runs in one process from start to end, so its prompts keep
sharing their prefixes.

A worker that dies (killed, out of memory) breaks the pool: every report not finished is
started again in a fresh pool, answering from its ledger shard what the dead attempt had
already asked, up to ``max_retries`` times; then the run stops with one line, and
``amber evaluate --resume`` continues it.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ambereval.engine.runs.report_job import Outcome, ReportJob, RunSetup, Tick
from ambereval.engine.runs.run_dir import merge_leftover_shards
from ambereval.engine.runs.worker import (
    add_stats,
    evaluate_on_worker,
    take_result,
    worker_setup,
)
from ambereval.errors import ConfigError, ModelError

THREADS_PER_WORKER = 4  # the default share of cores when --workers is not given


def default_workers(cpus: int | None = None) -> int:
    """One worker per ``THREADS_PER_WORKER`` cores, at least one."""
    return max(1, (cpus or os.cpu_count() or 1) // THREADS_PER_WORKER)


def _start_worker(threads: int, hook: str | None) -> None:
    """In each new worker process, before any model loads: its share of the threads for
    the math libraries (torch reads these at import), then the optional setup hook."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(threads)
    if hook:
        module, _, function = hook.rpartition(".")
        getattr(importlib.import_module(module), function)()


class ProcessExecutor:
    """``workers`` processes of ``threads`` threads each (default: the machine's cores
    shared out among the workers a run can use: never more than its reports); outcomes
    are yielded in job order."""

    def __init__(self, workers: int | None = None, threads: int | None = None,
                 max_retries: int = 3, allow_hosts: tuple[str, ...] = (),
                 setup_hook: str | None = None) -> None:
        if workers is not None and workers < 1:
            raise ConfigError(f"--workers must be at least 1 (got {workers})")
        self.workers = workers or default_workers()
        self._threads_given = threads
        self.threads = threads or self._share(self.workers)
        self.max_retries = max_retries
        self.allow_hosts = allow_hosts
        self.setup_hook = setup_hook  # "module.function", run in every worker (tests)
        self.restarts = 0
        self._stats: dict[str, dict[str, Any]] = {}

    def describe(self) -> dict[str, Any]:
        return {"name": "processes", "workers": self.workers,
                "threads_per_worker": self.threads, "restarts": self.restarts}

    def judge_stats(self, setup: RunSetup) -> dict[str, dict[str, Any]]:
        return self._stats

    @staticmethod
    def _share(workers: int) -> int:
        return max(1, (os.cpu_count() or 1) // workers)

    def _pool(self, size: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(size, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_start_worker,
                                   initargs=(self.threads, self.setup_hook))

    def run(self, jobs: list[ReportJob], setup: RunSetup, tick: Tick) -> Iterator[Outcome]:
        if self._threads_given is None:  # fewer reports than workers: more threads each
            self.threads = self._share(max(1, min(self.workers, len(jobs))))
        worker = worker_setup(setup, self.allow_hosts, threads=self.threads)
        main = setup.ledger
        units = len(setup.judges) * len(setup.protocols)
        results: dict[int, dict[str, Any]] = {}
        pending: dict[Future[dict[str, Any]], int] = {}
        pool: ProcessPoolExecutor | None = None
        emitted = 0
        finished_all = False
        try:
            while emitted < len(jobs):
                if pool is None:
                    todo = [i for i in range(emitted, len(jobs)) if i not in results]
                    pool = self._pool(min(self.workers, len(todo)))
                    pending = {pool.submit(evaluate_on_worker, jobs[i], worker): i
                               for i in todo}
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                broken = False
                for future in finished:
                    index = pending.pop(future)
                    try:
                        results[index] = future.result()
                    except BrokenProcessPool:
                        broken = True
                        continue
                    tick(units)
                if broken:
                    self._restart(pool, pending, results, tick, units)
                    pool, pending = None, {}
                while emitted in results:
                    outcome = take_result(results.pop(emitted), jobs[emitted], worker, main)
                    add_stats(self._stats, outcome.stats)
                    emitted += 1
                    yield outcome
            finished_all = True
        finally:
            if pool is not None:
                if not finished_all:  # an error or an interrupt: stop the other workers
                    _terminate(pool)
                pool.shutdown(wait=finished_all, cancel_futures=True)
            if not finished_all:  # keep what the stopped workers had answered
                merge_leftover_shards(main)

    def _restart(self, pool: ProcessPoolExecutor,
                 pending: dict[Future[dict[str, Any]], int],
                 results: dict[int, dict[str, Any]], tick: Tick, units: int) -> None:
        """A worker died: keep what finished, drop the pool (the next loop starts a fresh
        one for the rest), or give up after ``max_retries`` restarts."""
        for future, index in pending.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                results[index] = future.result()
                tick(units)
        pool.shutdown(wait=True, cancel_futures=True)
        self.restarts += 1
        if self.restarts > self.max_retries:
            raise ModelError(f"a worker process died {self.restarts} times; stopped",
                             hint="see what killed it (memory?); `amber evaluate --resume "
                                  "RUN_DIR` continues with what was answered")


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Stop a pool's workers now, mid-report (their ledger shards stay for a resume)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=30)


__all__ = ["ProcessExecutor", "default_workers"]
