"""``amber evaluate --executor processes``: reports spread over worker processes on this
machine. The run directory equals a sequential run's, a worker that dies mid-report is
replaced without asking again what it had answered, and the CLI takes --workers."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from fakejudge import FakeJudgeServer
from rundirs import dr3_bundles, ledger_rows, run_contents

from ambereval.engine.runs.evaluate import evaluate_bundles
from ambereval.engine.runs.executors import make_executor
from ambereval.engine.runs.process_executor import ProcessExecutor
from ambereval.errors import ConfigError, ModelError
from ambereval.models import Embedder, open_judge


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def run(executor: object, bundles: list[Path], tasks: Path, out: Path, url: str,
        embedder: Embedder) -> dict:
    judge = open_judge(None, url, "fake", out / "ledger.sqlite", "reuse", concurrency=1)
    return evaluate_bundles(bundles, tasks, ["dr3", "deepeval"], [("served", judge)], out,
                            embedder, executor=executor)


def test_process_run_equals_sequential_run(tmp_path: Path, embedder: Embedder) -> None:
    bundles, tasks = dr3_bundles(tmp_path)
    with FakeJudgeServer(latency=0.01) as server:
        local = run(make_executor("sequential"), bundles, tasks, tmp_path / "local",
                    server.url, embedder)
        spread = run(make_executor("processes", workers=2, threads=1), bundles, tasks,
                     tmp_path / "procs", server.url, embedder)
    assert spread["stats"]["executor"] == {"name": "processes", "workers": 2,
                                           "threads_per_worker": 1, "restarts": 0}
    assert run_contents(tmp_path / "local") == run_contents(tmp_path / "procs")
    # an identical request from reports in two processes may reach the judge twice
    assert spread["stats"]["totals"]["calls"] >= local["stats"]["totals"]["calls"] > 10
    assert not list((tmp_path / "procs" / ".ledger-shards").iterdir())  # merged, removed


def test_dead_worker_is_replaced_and_keeps_its_answers(tmp_path: Path, embedder: Embedder,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    control, marker = tmp_path / "control", tmp_path / "died"
    monkeypatch.setenv("AMBER_FAULT_CONTROL", str(control))
    monkeypatch.setenv("AMBER_FAULT_MARKER", str(marker))
    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    with FakeJudgeServer(latency=0.01) as server:
        run(make_executor("sequential"), bundles, tasks, tmp_path / "local", server.url,
            embedder)
        before = Counter(server.seen)
        control.write_text("3")  # the first worker to start its 4th request dies
        executor = ProcessExecutor(1, 1, setup_hook="worker_faults.install")
        spread = run(executor, bundles, tasks, tmp_path / "procs", server.url, embedder)
        asked = Counter(server.seen) - before
    assert marker.exists()  # a worker really died mid-report
    assert executor.restarts == 1
    assert run_contents(tmp_path / "local") == run_contents(tmp_path / "procs")
    # the new worker answered the dead one's three questions from its shard: every
    # request reached the server exactly once, and each is one ledger row
    assert max(asked.values()) == 1
    assert sum(asked.values()) == len(ledger_rows(tmp_path / "procs" / "ledger.sqlite"))
    assert spread["stats"]["totals"]["ledger_hits"] >= 3


def test_workers_that_keep_dying_stop_the_run(tmp_path: Path, embedder: Embedder,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    control = tmp_path / "control"
    monkeypatch.setenv("AMBER_FAULT_CONTROL", str(control))
    monkeypatch.setenv("AMBER_FAULT_MARKER", str(tmp_path / "died"))
    monkeypatch.setenv("AMBER_FAULT_EVERY_TIME", "1")
    bundles, tasks = dr3_bundles(tmp_path, systems=1)
    control.write_text("0")
    with FakeJudgeServer(latency=0.01) as server:
        executor = ProcessExecutor(1, 1, max_retries=1, setup_hook="worker_faults.install")
        with pytest.raises(ModelError, match="a worker process died 2 times"):
            run(executor, bundles, tasks, tmp_path / "procs", server.url, embedder)
        assert not server.seen
    assert not (tmp_path / "procs" / "reports").exists() or \
        not list((tmp_path / "procs" / "reports").iterdir())


def test_fewer_reports_than_workers_get_more_threads_each(tmp_path: Path, embedder: Embedder,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    # a 16-core machine as the driver sees it: 8 workers would get 16 // 8 = 2 threads
    # each, but only 2 reports start 2 workers, which share the 16 cores: 8 threads each
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert ProcessExecutor(workers=8).threads == 2
    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    with FakeJudgeServer() as server:
        result = run(ProcessExecutor(workers=8), bundles, tasks, tmp_path / "run", server.url,
                     embedder)
    assert result["stats"]["executor"]["threads_per_worker"] == 8
    assert ProcessExecutor(workers=8, threads=3).threads == 3  # as given, whatever the run


def test_errors_keep_their_hint_across_processes() -> None:
    """A worker's error reaches the driver pickled: its one-line hint must survive."""
    from ambereval.errors import JudgeUnavailable
    from ambereval.models.judge import Throttled

    again = pickle.loads(pickle.dumps(JudgeUnavailable("server down", hint="start it")))
    assert type(again) is JudgeUnavailable
    assert (str(again), again.hint) == ("server down", "start it")
    assert pickle.loads(pickle.dumps(Throttled("busy", retry_after=2.5))).retry_after == 2.5


def test_workers_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="--workers must be at least 1"):
        ProcessExecutor(0)


def test_processes_from_the_cli(tmp_path: Path) -> None:
    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    with FakeJudgeServer(latency=0.01) as server:
        args = [sys.executable, "-m", "ambereval.cli", "evaluate", *map(str, bundles),
                "--task", str(tasks), "--protocol", "dr3", "--judge-url", server.url,
                "--judge-name", "fake", "--out", str(tmp_path / "run")]
        done = subprocess.run([*args, "--executor", "processes", "--workers", "2"],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        assert "processes (2 workers" in done.stdout and "2 reports in" in done.stdout
        stats = json.loads((tmp_path / "run" / "stats.json").read_text())
        assert stats["executor"]["name"] == "processes"
        done = subprocess.run([*args[:-1], str(tmp_path / "x"), "--workers", "2"],
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "amber: error: --workers goes with --executor processes"]
    assert not (tmp_path / "x").exists()  # refused before anything was written


@pytest.mark.slow
def test_in_process_judge_in_workers_equals_sequential(tmp_path: Path,
                                                       embedder: Embedder) -> None:
    """The case the executor is for: the default llama.cpp judge, two reports. Two workers
    of one thread each write what one process of two threads writes (llama.cpp's CPU
    results do not depend on its thread count)."""
    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    for name, executor in (("local", make_executor("sequential")),
                           ("procs", make_executor("processes", workers=2, threads=1))):
        judge = open_judge(ledger=tmp_path / name / "ledger.sqlite", threads=2)
        evaluate_bundles(bundles, tasks, ["dr3"], [("default", judge)], tmp_path / name,
                         embedder, executor=executor)
    assert run_contents(tmp_path / "local") == run_contents(tmp_path / "procs")


def test_a_judge_that_goes_down_stops_the_workers_and_resume_finishes(tmp_path: Path) -> None:
    """The judge fails mid-run: one line, exit 1, no scores; what the workers had answered
    is merged into the run's ledger (no shard left behind), and --resume on workers asks
    only the rest and ends with the run an uninterrupted run writes."""
    from conftest import run_amber

    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    workers = ["--executor", "processes", "--workers", "2", "--threads", "1"]

    def args(url: str) -> list[str]:
        return ["evaluate", *map(str, bundles), "--task", str(tasks), "--protocol", "dr3",
                "--judge-url", url, "--judge-name", "fake"]

    with FakeJudgeServer() as server:
        assert run_amber(*args(server.url), "--out", str(tmp_path / "clean")).returncode == 0
        clean = Counter(server.seen)
        server.fail_after = server.served + 3  # three more answers, then HTTP 500
        done = run_amber(*args(server.url), "--out", str(tmp_path / "cut"), *workers)
        assert done.returncode == 1, done.stdout
        errors = [line for line in done.stderr.splitlines() if "warning" not in line]
        assert len(errors) == 1 and errors[0].startswith("amber: error: ")
        assert "failed after 3 attempts: HTTP 500" in errors[0]
        assert "(hint: " in errors[0]  # the worker's hint survived the trip to the driver
        assert not (tmp_path / "cut" / "run.json").exists()
        assert not list((tmp_path / "cut" / ".ledger-shards").glob("*"))
        assert len(ledger_rows(tmp_path / "cut" / "ledger.sqlite")) == 3
        answered = Counter(server.seen) - clean
        server.fail_after = None
        done = run_amber("evaluate", "--resume", str(tmp_path / "cut"), *workers)
        assert done.returncode == 0, done.stderr
        asked_again = Counter(server.seen) - clean - answered
    assert len(answered) == 3 and not set(answered) & set(asked_again)
    assert set(answered) | set(asked_again) == set(clean)
    assert run_contents(tmp_path / "cut") == run_contents(tmp_path / "clean")


def test_many_reports_on_many_cores_one_at_a_time_get_a_note(
        tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    from ambereval.engine.runs import evaluate

    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    with FakeJudgeServer() as server:
        monkeypatch.setattr(evaluate.os, "cpu_count", lambda: 32)
        run(make_executor("auto"), bundles, tasks, tmp_path / "a", server.url, embedder)
        notes = [r.message for r in caplog.records if "amber: note:" in r.message]
        assert notes == ["amber: note: 2 reports, one at a time, on 32 cores: --executor "
                         "processes evaluates them side by side (same results)"]
        caplog.clear()
        # asked for by name, or a small machine: nothing to say
        run(make_executor("sequential"), bundles, tasks, tmp_path / "b", server.url, embedder)
        monkeypatch.setattr(evaluate.os, "cpu_count", lambda: 2)
        run(make_executor("auto"), bundles, tasks, tmp_path / "c", server.url, embedder)
    assert not [r for r in caplog.records if "amber: note:" in r.message]


def test_ctrl_c_stops_the_workers_and_keeps_their_answers(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) while workers wait on
    a held judge: exit 130 with one line saying how to go on, no worker left running, no
    shard left behind, every answer in the run's ledger; --resume finishes the run."""
    import signal
    import time

    from conftest import run_amber

    bundles, tasks = dr3_bundles(tmp_path, systems=3)
    with FakeJudgeServer() as server:
        args = ["evaluate", *map(str, bundles), "--task", str(tasks), "--protocol", "dr3",
                "--judge-url", server.url, "--judge-name", "fake"]
        assert run_amber(*args, "--out", str(tmp_path / "clean")).returncode == 0
        clean = Counter(server.seen)
        server.pushback_after = server.served + 4  # four answers, then 503 until released
        run_dir = tmp_path / "run"
        env = {**os.environ, "AMBER_ALLOW_PRIVATE_ADDRESSES": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "ambereval.cli", *args, "--out", str(run_dir),
             "--executor", "processes", "--workers", "2", "--threads", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            start_new_session=True)
        deadline = time.monotonic() + 120
        while server.refused == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.refused > 0, "the run never reached the held point"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130
        assert err.splitlines()[-1] == (
            f"amber: interrupted; the judge's answers so far are in {run_dir}/ledger.sqlite; "
            f"`amber evaluate --resume {run_dir}` goes on from there")
        assert "Traceback" not in err
        assert not list((run_dir / ".ledger-shards").glob("*"))
        assert len(ledger_rows(run_dir / "ledger.sqlite")) == 4
        answered = Counter(server.seen) - clean
        server.pushback_after = None
        done = run_amber("evaluate", "--resume", str(run_dir), "--executor", "processes",
                         "--workers", "2", "--threads", "1")
        assert done.returncode == 0, done.stderr
        asked_again = Counter(server.seen) - clean - answered
    assert not set(answered) & set(asked_again)
    assert run_contents(run_dir) == run_contents(tmp_path / "clean")
