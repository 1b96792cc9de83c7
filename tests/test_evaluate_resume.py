"""``amber evaluate --resume``: a run killed with SIGKILL mid-way completes, repeats no
finished judge call, and ends byte-identical to a run never interrupted. Real CLI in a
subprocess, real HTTP judge on loopback (tests/fakejudge.py) that holds the run with
503s after a number of answers, so the kill lands mid-run without any timing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fakejudge import FakeJudgeServer
from rundirs import dr3_bundles, run_contents

from conftest import run_amber


def _args(bundles: list[Path], tasks: Path, url: str) -> list[str]:
    return ["evaluate", *map(str, bundles), "--task", str(tasks), "--protocol", "dr3",
            "--judge-url", url, "--judge-name", "fake", "--judge-concurrency", "1"]


def test_kill_9_then_resume_completes_without_repeating_a_call(tmp_path: Path) -> None:
    bundles, tasks = dr3_bundles(tmp_path, systems=3)
    with FakeJudgeServer(retry_after=1) as server:
        clean = run_amber(*_args(bundles, tasks, server.url), "--out",
                          str(tmp_path / "clean"))
        assert clean.returncode == 0, clean.stderr
        total = server.served
        assert total > 6
        clean_questions = dict(server.seen)

        server.pushback_after = total + total // 2  # hold the second run half-way
        env = {**os.environ, "AMBER_ALLOW_PRIVATE_ADDRESSES": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "ambereval.cli",
             *_args(bundles, tasks, server.url), "--out", str(tmp_path / "run")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 120
        while server.refused == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.refused > 0, "the run never reached the held point"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert server.served == total + total // 2
        run = tmp_path / "run"
        assert not (run / "run.json").exists()  # an interrupted run never looks complete
        assert not list(run.rglob("*.tmp"))
        finished_before = len(list((run / "reports").iterdir()))

        server.pushback_after = None
        resumed = run_amber("evaluate", "--resume", str(run), "--judge-concurrency", "4")
        assert resumed.returncode == 0, resumed.stderr
        if finished_before:
            assert f"resumed: {finished_before} of 3 reports" in resumed.stdout
    # over the killed and the resumed process every question was asked exactly once
    second = {k: n - clean_questions.get(k, 0) for k, n in server.seen.items()}
    assert second == dict.fromkeys(clean_questions, 1)
    assert server.served == 2 * total
    assert run_contents(run) == run_contents(tmp_path / "clean")
    stats = json.loads((run / "stats.json").read_text())
    assert stats["resumed_reports"] == finished_before


def test_resume_refuses_other_inputs_and_non_runs(tmp_path: Path) -> None:
    bundles, tasks = dr3_bundles(tmp_path, systems=1)
    mixed = run_amber("evaluate", "--resume", str(tmp_path), "--task", str(tasks))
    assert mixed.returncode == 2 and "do not give --task" in mixed.stderr
    # options with defaults are refused too when given: a resume would ignore them
    ignored = run_amber("evaluate", "--resume", str(tmp_path), "--protocol", "dr3",
                        "--seed", "0", "--judge-concurrency", "2")
    assert ignored.returncode == 2, ignored.stderr
    assert "do not give --protocol, --seed (hint" in ignored.stderr
    missing = run_amber("evaluate", "--resume", str(tmp_path / "nowhere"))
    assert missing.returncode != 0 and "not a run directory" in missing.stderr
    assert "Traceback" not in missing.stderr
    nothing = run_amber("evaluate")
    assert nothing.returncode == 2 and "--resume RUN_DIR" in nothing.stderr

    with FakeJudgeServer() as server:
        done = run_amber(*_args(bundles, tasks, server.url), "--out", str(tmp_path / "r"))
        assert done.returncode == 0, done.stderr
        invocation = json.loads((tmp_path / "r" / "invocation.json").read_text())
        assert invocation["judges"] == [{"kind": "url", "label": "fake", "model": "fake",
                                         "url": server.url}]
        assert "concurrency" not in json.dumps(invocation)
        # the bundle changed since: resuming would mix two inputs
        tasks.write_text(tasks.read_text().replace("}", " }", 1))
        changed = run_amber("evaluate", "--resume", str(tmp_path / "r"))
    assert changed.returncode != 0 and "tasks_sha256" in changed.stderr
    assert "Traceback" not in changed.stderr


def test_a_run_made_with_relative_paths_replays_and_resumes_from_anywhere(
        tmp_path: Path) -> None:
    home = tmp_path / "lab"
    bundles, tasks = dr3_bundles(home, systems=1)
    relative = [b.relative_to(home) for b in bundles]
    with FakeJudgeServer() as server:
        done = run_amber(*_args(relative, tasks.relative_to(home), server.url),
                         "--out", "run", cwd=home)
        assert done.returncode == 0, done.stderr
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        replay = run_amber("replay", str(home / "run"), cwd=elsewhere)
        assert replay.returncode == 0, replay.stderr
        assert replay.stdout.startswith("OK: replay identical")
        assert f"reading the run's inputs from {home}" in replay.stderr
        again = run_amber("evaluate", "--resume", str(home / "run"), cwd=elsewhere)
        assert again.returncode == 0, again.stderr
    assert json.loads((home / "run" / "invocation.json").read_text())["cwd"] == str(home)


def test_a_new_run_never_mixes_into_a_run_of_other_inputs(tmp_path: Path) -> None:
    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    out = tmp_path / "r"
    with FakeJudgeServer() as server:
        first = run_amber(*_args(bundles, tasks, server.url), "--out", str(out))
        assert first.returncode == 0, first.stderr
        before = run_contents(out)
        other = run_amber(*_args(bundles[:1], tasks, server.url), "--out", str(out))
        assert other.returncode == 2 and "holds a run of other inputs" in other.stderr
        assert "differ in bundles" in other.stderr and "Traceback" not in other.stderr
        assert run_contents(out) == before  # untouched
        same = run_amber(*_args(bundles, tasks, server.url), "--out", str(out))
        assert same.returncode == 0, same.stderr  # the same inputs evaluated again
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("mine")
    with FakeJudgeServer() as server:
        stray = run_amber(*_args(bundles, tasks, server.url), "--out", str(tmp_path / "x"))
    assert stray.returncode == 2 and "not empty and not a run directory" in stray.stderr
