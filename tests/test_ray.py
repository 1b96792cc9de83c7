"""``amber evaluate --executor ray``: a local Ray instance started by the test, a served
judge on loopback; the Ray run directory equals the local one, and a worker that dies
mid-report is retried without asking again what it had already answered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakejudge import FakeJudgeServer
from rundirs import ledger_rows, run_contents
from test_concurrency import dr3_bundles

from ambereval.engine.runs.evaluate import evaluate_bundles
from ambereval.engine.runs.executors import make_executor
from ambereval.models import Embedder, open_judge

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray")

TESTS = Path(__file__).parent


@pytest.fixture(scope="module")
def ray_local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Ray with two CPUs; every worker gets the fault hook, disarmed until a test arms it
    by writing a number into the control file."""
    faults = tmp_path_factory.mktemp("faults")
    control = faults / "control"
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"worker_process_setup_hook": "worker_faults.install",
                          "env_vars": {"PYTHONPATH": path,
                                       "AMBER_FAULT_CONTROL": str(control),
                                       "AMBER_FAULT_MARKER": str(faults / "died")}})
    yield faults
    ray.shutdown()


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def run(executor: str, n: int, bundles: list[Path], tasks: Path, out: Path, url: str,
        embedder: Embedder) -> dict:
    judge = open_judge(None, url, "fake", out / "ledger.sqlite", "reuse", concurrency=n)
    return evaluate_bundles(bundles, tasks, ["dr3", "deepeval"], [("served", judge)], out,
                            embedder, executor=make_executor(executor, n))


def test_ray_run_equals_local_run(tmp_path: Path, ray_local: Path, embedder: Embedder) -> None:
    bundles, tasks = dr3_bundles(tmp_path)
    with FakeJudgeServer(latency=0.01) as server:
        local = run("sequential", 1, bundles, tasks, tmp_path / "local", server.url, embedder)
        remote = run("ray", 4, bundles, tasks, tmp_path / "ray", server.url, embedder)
    assert remote["stats"]["executor"]["name"] == "ray"
    assert run_contents(tmp_path / "local") == run_contents(tmp_path / "ray")
    assert remote["stats"]["totals"]["calls"] >= local["stats"]["totals"]["calls"] > 10
    assert not list((tmp_path / "ray" / ".ledger-shards").iterdir())  # merged, then removed


def test_dead_worker_is_retried_and_keeps_its_answers(tmp_path: Path, ray_local: Path,
                                                      embedder: Embedder) -> None:
    bundles, tasks = dr3_bundles(tmp_path, systems=1)
    with FakeJudgeServer(latency=0.01) as server:
        run("sequential", 1, bundles, tasks, tmp_path / "local", server.url, embedder)
        before = Counter(server.seen)
        (ray_local / "control").write_text("3")  # die when starting the 4th request
        try:
            remote = run("ray", 1, bundles, tasks, tmp_path / "ray", server.url, embedder)
        finally:
            (ray_local / "control").write_text("")
        asked = Counter(server.seen) - before
    assert (ray_local / "died").exists()  # a worker really died mid-report
    assert run_contents(tmp_path / "local") == run_contents(tmp_path / "ray")
    # the retry answered the dead attempt's three questions from its shard: every request
    # reached the server exactly once, and each is one ledger row
    assert max(asked.values()) == 1
    assert sum(asked.values()) == len(ledger_rows(tmp_path / "ray" / "ledger.sqlite"))
    assert remote["stats"]["totals"]["ledger_hits"] >= 3


def test_ray_cli_and_missing_extra(tmp_path: Path, ray_local: Path) -> None:
    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    with FakeJudgeServer(latency=0.01) as server:
        args = [sys.executable, "-m", "ambereval.cli", "evaluate", *map(str, bundles),
                "--task", str(tasks), "--protocol", "dr3", "--judge-url", server.url,
                "--judge-name", "fake", "--out", str(tmp_path / "run"), "--executor", "ray"]
        done = subprocess.run(args, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        assert "ray (" in done.stdout and "2 reports in" in done.stdout
        stats = json.loads((tmp_path / "run" / "stats.json").read_text())
        assert stats["executor"]["name"] == "ray" and stats["executor"]["nodes"] >= 1
        # Ray hidden from the interpreter: one line naming the extra, no traceback
        shadow = tmp_path / "shadow"
        (shadow / "ray").mkdir(parents=True)
        (shadow / "ray" / "__init__.py").write_text("raise ImportError('no ray here')\n")
        env = {**os.environ, "PYTHONPATH": str(shadow)}
        done = subprocess.run([*args[:-4], "--out", str(tmp_path / "x"), "--executor", "ray"],
                              capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "amber: error: --executor ray needs Ray, which is not installed "
        "(hint: pip install 'amber-eval[ray]')"]
