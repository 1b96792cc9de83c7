"""``amber rerun``: the judges asked everything again, the spread per dimension and the
verdicts that changed. A served judge on loopback whose answers change between the run
and the reruns must show movement; the in-process llama.cpp judge must show none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakejudge import FakeJudgeServer
from rundirs import dr3_bundles

from conftest import run_amber


def test_rerun_reports_what_moved_when_the_judge_changes(tmp_path: Path) -> None:
    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    run = tmp_path / "run"
    with FakeJudgeServer() as server:
        done = run_amber("evaluate", *map(str, bundles), "--task", str(tasks), "--protocol",
                         "dr3", "--judge-url", server.url, "--judge-name", "fake", "--out",
                         str(run))
        assert done.returncode == 0, done.stderr
        first = server.served

        same = run_amber("rerun", str(run), "--times", "2", "--json", "--exit-code")
        assert same.returncode == 0, same.stderr
        asked = [json.loads((run / "reruns" / i / "stats.json").read_text())["totals"]
                 for i in ("1", "2")]
        # every request asked afresh (record), each once: a repeat is read back
        assert all(t["calls"] == first for t in asked)
        assert server.served == first + sum(t["calls"] for t in asked)  # all asked again
        result = json.loads(same.stdout)
        assert result["identical_reruns"] == 2 and result["verdicts"] == []
        assert all(d["max_spread"] == 0 and d["reports_moved"] == 0
                   for d in result["dimensions"])
        assert sorted(p.name for p in (run / "reruns").iterdir()) == ["1", "2"]

        server.salt = b"another model"  # the served model changed behind the same URL
        moved = run_amber("rerun", str(run), "--times", "1", "--json", "--exit-code")
        assert moved.returncode == 3, moved.stderr
        result = json.loads(moved.stdout)
        shown = run_amber("rerun", str(run), "--times", "1")
    assert result["identical_reruns"] == 0
    assert result["verdicts"], "a changed judge changed no verdict"
    v = result["verdicts"][0]
    assert v["dimension"].startswith("dr3.") and v["reruns"]["1"] != v["original"]
    top = result["dimensions"][0]
    assert top["max_spread"] > 0 and top["reports_moved"] >= 1
    assert [d["max_spread"] for d in result["dimensions"]] == sorted(
        (d["max_spread"] for d in result["dimensions"]), reverse=True)
    assert shown.returncode == 0 and "Verdicts that changed" in shown.stdout
    assert len(list((run / "reruns").iterdir())) == 1  # reruns start from nothing


def test_rerun_errors_are_one_line(tmp_path: Path) -> None:
    missing = run_amber("rerun", str(tmp_path))
    assert missing.returncode != 0 and "invocation.json" in missing.stderr
    assert "Traceback" not in missing.stderr
    zero = run_amber("rerun", str(tmp_path), "--times", "0")
    assert zero.returncode == 2
    for bad, message in ((["--workers", "2"], "--workers goes with --executor processes"),
                         (["--executor", "ray"], "rerun takes auto, sequential, threads or "
                                                 "processes")):
        done = run_amber("rerun", str(tmp_path), *bad)
        assert done.returncode == 2 and message in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_in_process_judge_reruns_change_nothing(tmp_path: Path) -> None:
    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    run = tmp_path / "run"
    done = run_amber("evaluate", *map(str, bundles), "--task", str(tasks), "--protocol",
                     "dr3", "--judge-ctx", "2048", "--out", str(run))
    assert done.returncode == 0, done.stderr
    again = run_amber("rerun", str(run), "--times", "1", "--json", "--exit-code")
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert result["identical_reruns"] == 1 and result["verdicts"] == []
    # the reruns really asked the model, as the first run did: every request afresh, and
    # only a request asked again within the run (one shared question) read back
    first = json.loads((run / "stats.json").read_text())["totals"]
    stats = json.loads((run / "reruns" / "1" / "stats.json").read_text())
    assert stats["totals"]["calls"] == first["calls"] > 0
    assert stats["totals"]["ledger_hits"] == first["ledger_hits"]
    # the same on worker processes of one thread each (one report per worker)
    spread = run_amber("rerun", str(run), "--times", "1", "--json", "--exit-code",
                       "--executor", "processes", "--workers", "2", "--threads", "1")
    assert spread.returncode == 0, spread.stderr
    assert json.loads(spread.stdout)["identical_reruns"] == 1
    stats = json.loads((run / "reruns" / "1" / "stats.json").read_text())
    assert stats["executor"]["name"] == "processes" and stats["totals"]["calls"] > 0
