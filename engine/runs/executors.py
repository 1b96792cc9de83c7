"""Where and when reports are evaluated; never what the result is.

An executor takes the planned :class:`~ambereval.engine.runs.evaluate.ReportJob` list
and yields one :class:`Outcome` per job, **in job order** whatever order they finish in
(a finished report waits until every report before it is done), so the one writer
writes the same run directory for every executor:

- :class:`SequentialExecutor`: one report after another (the in-process llama.cpp judge,
  whose shared-prefix KV reuse wants calls in a fixed order);
- :class:`ThreadExecutor`: up to ``width`` reports at once, for served judges; together
  with the judge's own bound (``--judge-concurrency``) this keeps the server's queue full;
- ``ProcessExecutor`` (``process_executor.py``): worker processes on this machine, each
  with its own judges and a share of the cores (the in-process judge on many cores);
- ``RayExecutor`` (``ray_executor.py``, the only module that imports Ray): one Ray task
  per report across a cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from ambereval.engine.runs.report_job import Outcome, ReportJob, RunSetup, Tick, timed_report
from ambereval.errors import ConfigError


class Executor(Protocol):
    def run(self, jobs: list[ReportJob], setup: RunSetup, tick: Tick) -> Iterator[Outcome]:
        """One outcome per job, in job order."""
        ...

    def describe(self) -> dict[str, Any]: ...

    def judge_stats(self, setup: RunSetup) -> dict[str, dict[str, Any]]: ...


class SequentialExecutor:
    """Every report in turn, on the calling thread."""

    def __init__(self, picked_for_you: bool = False) -> None:
        self.picked_for_you = picked_for_you  # ``auto`` chose it: evaluate may suggest workers

    def run(self, jobs: list[ReportJob], setup: RunSetup, tick: Tick) -> Iterator[Outcome]:
        for job in jobs:
            yield timed_report(job, setup, tick)

    def describe(self) -> dict[str, Any]:
        return {"name": "sequential"}

    def judge_stats(self, setup: RunSetup) -> dict[str, dict[str, Any]]:
        return {name: judge.stats() for name, judge in setup.judges}


class ThreadExecutor(SequentialExecutor):
    """Up to ``width`` reports at once on threads sharing the judges (thread-safe, each
    bounded by its own concurrency limit). Outcomes are yielded in job order."""

    def __init__(self, width: int) -> None:
        self.width = max(1, width)

    def run(self, jobs: list[ReportJob], setup: RunSetup, tick: Tick) -> Iterator[Outcome]:
        pool = ThreadPoolExecutor(self.width, thread_name_prefix="amber-report")
        futures: list[Future[Outcome]] = []
        try:
            futures = [pool.submit(timed_report, job, setup, tick) for job in jobs]
            for future in futures:
                yield future.result()
        finally:
            for future in futures:
                future.cancel()
            pool.shutdown(wait=True)
            for _, judge in setup.judges:
                judge.close()

    def describe(self) -> dict[str, Any]:
        return {"name": "threads", "reports_at_once": self.width}


def make_executor(name: str, width: int = 1, ray_address: str | None = None,
                  workers: int | None = None, threads: int | None = None,
                  **options: Any) -> Executor:
    """``auto`` (threads when every judge is served, else sequential), ``sequential``,
    ``threads``, ``processes`` (``workers`` processes of ``threads`` threads) or ``ray``.
    ``options`` go to the process or Ray executor (``allow_hosts``, ``max_retries``)."""
    if name == "auto":
        if width > 1:
            return ThreadExecutor(width)
        return SequentialExecutor(picked_for_you=True)
    if name == "sequential":
        return SequentialExecutor()
    if name == "threads":
        return ThreadExecutor(width)
    if name == "processes":
        from ambereval.engine.runs.process_executor import ProcessExecutor

        return ProcessExecutor(workers, threads, **options)
    if name == "ray":
        from ambereval.engine.runs.ray_executor import RayExecutor

        return RayExecutor(ray_address, **options)
    raise ConfigError(f"unknown executor {name!r} (auto, sequential, threads, processes or "
                      "ray)")
