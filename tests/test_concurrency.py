"""Concurrent judging against a served judge: the bound, the pushback, the order, and
run directories that do not depend on --judge-concurrency. Real HTTP on loopback
(tests/fakejudge.py), the real client, ledger, protocols, embedder and writer."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
from fakejudge import FakeJudgeServer
from rundirs import dr3_bundles, ledger_rows, run_contents
from scripted_judge import scripted_judge

from ambereval.engine.runs.evaluate import evaluate_bundles
from ambereval.engine.snapshot_report import snapshot_report
from ambereval.models import Embedder, Judge, Ledger, open_judge
from ambereval.models.concurrency import AdaptiveLimit
from ambereval.models.openai_backend import OpenAIBackend, retry_after

from conftest import fast_options, run_amber
from fakeweb import FakeWeb

FIXTURES = Path(__file__).parent / "fixtures"
SCHEMA = {"type": "object", "properties": {
    "answer": {"type": "string", "enum": ["true", "false", "none"]},
    "evidence": {"type": "string", "maxLength": 40}},
    "required": ["answer", "evidence"], "additionalProperties": False}


def calls(n: int) -> list[tuple[list[dict[str, str]], dict, int]]:
    return [([{"role": "user", "content": f"Is claim {i} true?"}], SCHEMA, 32)
            for i in range(n)]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def test_adaptive_limit_halves_on_pushback_and_grows_back() -> None:
    limit = AdaptiveLimit(8)
    limit.throttle(0.0)
    assert limit.limit == 4 and limit.throttles == 1
    limit.throttle(0.0)
    limit.throttle(0.0)
    limit.throttle(0.0)
    assert limit.limit == 1  # never below one request in flight
    for _ in range(1 + 2 + 3 + 4):  # `limit` successes in a row earn one more slot
        limit.success()
    assert limit.limit == 5
    with pytest.raises(ValueError):
        AdaptiveLimit(0)


def test_adaptive_limit_blocks_beyond_the_limit() -> None:
    limit = AdaptiveLimit(2)
    entered = threading.Semaphore(0)
    release = threading.Event()

    def hold() -> None:
        with limit.slot():
            entered.release()
            release.wait()

    workers = [threading.Thread(target=hold) for _ in range(3)]
    for w in workers:
        w.start()
    assert entered.acquire(timeout=10) and entered.acquire(timeout=10)
    assert not entered.acquire(timeout=0.3)  # the third waits for a free slot
    assert limit.in_flight == 2
    release.set()
    assert entered.acquire(timeout=10)
    for w in workers:
        w.join()
    assert limit.in_flight == 0 and limit.peak == 2


def test_retry_after_header_forms() -> None:
    assert retry_after("3") == 3.0 and retry_after("0.5") == 0.5
    assert retry_after(None) is None and retry_after("soon") is None
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past


def test_map_keeps_input_order_and_the_bound(tmp_path: Path) -> None:
    with FakeJudgeServer(gate=4) as server:
        judge = Judge(OpenAIBackend(server.url, "fake"), Ledger(tmp_path / "l.sqlite"),
                      concurrency=4)
        answers = judge.map(calls(20))
        judge.close()
        assert server.peak == 4  # the gate opens only when four requests are in flight
    with FakeJudgeServer() as server:
        sequential = Judge(OpenAIBackend(server.url, "fake"))
        expected = [sequential.ask(*c) for c in calls(20)]
    assert [a.obj for a in answers] == [e.obj for e in expected]
    assert [a.key for a in answers] == [e.key for e in expected]
    stats = judge.stats()
    assert stats["calls"] == 20 and stats["peak_in_flight"] == 4 and stats["errors"] == 0


def test_pushback_slows_the_pool_instead_of_failing(tmp_path: Path) -> None:
    with FakeJudgeServer(capacity=2, refuse_first=3, retry_after=0.01, latency=0.01) as server:
        judge = Judge(OpenAIBackend(server.url, "fake"), Ledger(tmp_path / "l.sqlite"),
                      concurrency=8)
        answers = judge.map(calls(24))
        judge.close()
        assert server.peak <= 2
    assert not [a for a in answers if isinstance(a, Exception)]
    stats = judge.stats()
    assert stats["throttled"] == server.refused >= 3
    assert stats["calls"] == 24 and stats["errors"] == 0
    assert judge.limit.limit < 8  # still below the configured width after the pushback


def evaluate_at(n: int, bundles: list[Path], tasks: Path, out: Path, url: str,
                protocols: list[str], embedder: Embedder) -> dict:
    judge = open_judge(None, url, "fake", out / "ledger.sqlite", "reuse", concurrency=n)
    return evaluate_bundles(bundles, tasks, protocols, [("served", judge)], out, embedder)


def test_dr3_and_deepeval_runs_do_not_depend_on_concurrency(tmp_path: Path,
                                                            embedder: Embedder) -> None:
    bundles, tasks = dr3_bundles(tmp_path)
    with FakeJudgeServer(latency=0.01) as server:
        one = evaluate_at(1, bundles, tasks, tmp_path / "n1", server.url,
                          ["dr3", "deepeval"], embedder)
        many = evaluate_at(32, bundles, tasks, tmp_path / "n32", server.url,
                           ["dr3", "deepeval"], embedder)
        assert server.peak > 1  # the wide run really had several requests in flight
    assert one["stats"]["executor"] == {"name": "sequential"}
    assert many["stats"]["executor"] == {"name": "threads", "reports_at_once": 32}
    assert run_contents(tmp_path / "n1") == run_contents(tmp_path / "n32")
    calls_made = one["stats"]["totals"]["calls"]
    assert calls_made > 10 and many["stats"]["totals"]["calls"] == calls_made
    manifest = json.loads((tmp_path / "n32" / "manifest.json").read_text())
    assert manifest["format"] == "amber-run/3"
    assert sorted(manifest["reports"]) == sorted(
        p.name for p in (tmp_path / "n32" / "reports").iterdir())
    assert [r["report_id"][:12] for r in many["reports"]] == [
        name.rsplit("--", 1)[1][:12] for name in manifest["reports"]]  # run order
    stats = json.loads((tmp_path / "n32" / "stats.json").read_text())
    assert stats["format"] == "amber-run-stats/1" and stats["reports"] == 3
    assert not list((tmp_path / "n32").rglob("*.tmp"))


def test_dailyreport_verification_does_not_depend_on_concurrency(
        tmp_path: Path, web: FakeWeb, embedder: Embedder) -> None:
    report = tmp_path / "landmarks.md"
    report.write_text((FIXTURES / "report.md").read_text().replace("{ORIGIN}", web.origin_url))
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps({"id": "landmarks", "query": "Landmarks brief",
                                 "report": "landmarks.md", "subtasks": [
        {"id": "s1", "instruction": "Gives the Eiffel Tower's completion year.",
         "factuality": ["When was the Eiffel Tower completed?"], "importance": "P0"},
        {"id": "s2", "instruction": "Describes the Rhine.", "importance": "P1",
         "rationality": "Explains why the Rhine matters."}]}))
    bundle = tmp_path / "bundle"
    snapshot_report(report, bundle, scripted_judge(), fast_options(web, reader="direct",
                                                                    top_k=0),
                    tasks, extractor="sentences")
    with FakeJudgeServer(latency=0.01) as server:
        one = evaluate_at(1, [bundle], tasks, tmp_path / "n1", server.url, ["dailyreport"],
                          embedder)
        evaluate_at(32, [bundle], tasks, tmp_path / "n32", server.url, ["dailyreport"],
                    embedder)
    assert run_contents(tmp_path / "n1") == run_contents(tmp_path / "n32")
    result = one["reports"][0]["judges"]["served"]["dailyreport"]
    assert result["verification"]["judge_calls"] > 0  # the verification path really ran


def test_evaluate_cli_concurrency_summary_and_json(tmp_path: Path) -> None:
    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    with FakeJudgeServer(latency=0.01) as server:
        args = ["evaluate", *map(str, bundles), "--task", str(tasks), "--protocol", "dr3",
                "--judge-url", server.url, "--judge-name", "fake"]
        done = run_amber(*args, "--judge-concurrency", "16", "--out", str(tmp_path / "a"))
        assert done.returncode == 0, done.stderr
        assert "2 reports in" in done.stdout and "threads x16" in done.stdout
        assert "0 unusable answers" in done.stdout
        done = run_amber(*args, "--judge-concurrency", "1", "--out", str(tmp_path / "b"),
                         "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == json.loads((tmp_path / "b" / "run.json").read_text())
        bad = run_amber(*args, "--judge-concurrency", "0", "--out", str(tmp_path / "c"))
        assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert run_contents(tmp_path / "a") == run_contents(tmp_path / "b")
    shutil.rmtree(tmp_path / "c", ignore_errors=True)


def test_verify_cli_is_the_same_at_any_concurrency(tmp_path: Path, web: FakeWeb) -> None:
    report = tmp_path / "landmarks.md"
    report.write_text((FIXTURES / "report.md").read_text().replace("{ORIGIN}", web.origin_url))
    bundle = tmp_path / "bundle"
    snapshot_report(report, bundle, scripted_judge(),
                    fast_options(web, reader="direct", top_k=0), extractor="sentences")
    with FakeJudgeServer(latency=0.01) as server:
        out = {}
        for n in (1, 32):
            done = run_amber("verify", str(bundle), "--out", str(tmp_path / f"v{n}"),
                             "--judge-url", server.url, "--judge-name", "fake",
                             "--judge-concurrency", str(n), "--json")
            assert done.returncode == 0, done.stderr
            out[n] = json.loads(done.stdout)
    assert out[1]["claims"] == out[32]["claims"]
    assert out[1]["stats"]["calls"] == out[32]["stats"]["calls"] > 0
    assert out[32]["stats"]["concurrency"] == 32
    for name in ("verdicts.jsonl", "summary.json"):
        assert (tmp_path / "v1" / name).read_bytes() == (tmp_path / "v32" / name).read_bytes()


def test_a_judge_server_that_goes_down_stops_the_run_and_resume_finishes_it(
        tmp_path: Path) -> None:
    """A failed request is not an answer: the run stops with one line (it used to score
    every failed call as the protocol's lowest value and exit 0), what was answered stays
    in the ledger, and --resume against the server back up ends where an uninterrupted
    run ends, asking only what was not answered."""
    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    with FakeJudgeServer() as server:
        args = ["evaluate", *map(str, bundles), "--task", str(tasks), "--protocol", "dr3",
                "--judge-url", server.url, "--judge-name", "fake", "--judge-concurrency", "2"]
        assert run_amber(*args, "--out", str(tmp_path / "clean")).returncode == 0
        whole = server.served
        server.fail_after = server.served + 3  # three more answers, then HTTP 500
        done = run_amber(*args, "--out", str(tmp_path / "cut"))
        assert done.returncode == 1, done.stdout
        assert "Traceback" not in done.stderr and "judge server" in done.stderr
        assert "failed after 3 attempts: HTTP 500" in done.stderr
        assert not (tmp_path / "cut" / "run.json").exists()  # no scores from a dead judge
        kept = len(ledger_rows(tmp_path / "cut" / "ledger.sqlite"))
        assert 3 <= kept < whole
        server.fail_after = None  # the server is back
        before = server.served
        done = run_amber("evaluate", "--resume", str(tmp_path / "cut"))
        assert done.returncode == 0, done.stderr
        assert server.served - before == whole - kept  # answered calls were not asked again
    assert run_contents(tmp_path / "cut") == run_contents(tmp_path / "clean")


def test_a_dead_judge_url_is_one_line_and_no_scores(tmp_path: Path) -> None:
    bundles, tasks = dr3_bundles(tmp_path, systems=1)
    done = run_amber("evaluate", *map(str, bundles), "--task", str(tasks), "--protocol", "dr3",
                     "--judge-url", "http://127.0.0.1:9", "--judge-name", "fake",
                     "--out", str(tmp_path / "run"))
    assert done.returncode == 1 and "unreachable" in done.stderr
    assert "Traceback" not in done.stderr and "Run " not in done.stdout
    assert not (tmp_path / "run" / "run.json").exists()
