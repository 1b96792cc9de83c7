"""Offline verification: the verdict rules (scripted judge at the model edge), and the
whole path through the CLI with the real default judge, provenance and replay."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ambereval.engine.verification import VerifyOptions, verify_claims, write_results
from ambereval.models import Embedder, Judge
from ambereval.models.judge import Completion
from ambereval.snapshots import Bundle, ClaimInput, capture_claims

from conftest import fast_options, run_amber
from fakeweb import FakeWeb

REPORT = (Path(__file__).parent / "fixtures" / "report.md").read_text()


class PageReader:
    """A literal-minded judge: 'true' when the claim's year is on the page, 'false' when a
    different year is, 'none' otherwise."""

    name = "page-reader"

    def identity(self) -> dict[str, Any]:
        return {"model": {"name": "page-reader-v1"}}

    def complete(self, messages, schema, max_tokens, seed):  # type: ignore[no-untyped-def]
        prompt = messages[-1]["content"]
        passages, _, rest = prompt.partition("Report sentence:")
        claim_years = set(re.findall(r"\b1[0-9]{3}\b", rest.split("Claim:")[1]))
        page_years = set(re.findall(r"\b1[0-9]{3}\b", passages))
        if claim_years and claim_years <= page_years:
            answer = "true"
        elif claim_years and page_years:
            answer = "false"
        else:
            answer = "none"
        return Completion(json.dumps({"answer": answer, "passage": 1}),
                          {"prompt_tokens": len(prompt) // 4, "completion_tokens": 9})


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def build(tmp_path: Path, web: FakeWeb, claims: list[ClaimInput]) -> Path:
    out = tmp_path / "bundle"
    capture_claims(out, claims, fast_options(web, reader="direct", top_k=3))
    return out


def test_verdict_rules_and_provenance(tmp_path: Path, web: FakeWeb, embedder: Embedder) -> None:
    claims = [
        ClaimInput("right", "The Eiffel Tower was completed in 1889.",
                   (web.url("/pages/eiffel.html"),)),
        ClaimInput("wrong", "The Eiffel Tower was completed in 1925.",
                   (web.url("/pages/eiffel.html"),)),
        ClaimInput("silent", "Tea is a drink.", (web.url("/pages/tea.html"),)),
        ClaimInput("dead", "The page says 1889.", (web.url("/missing"),)),
        ClaimInput("nothing", "No sources at all."),
        # cited page agrees (1793); the search also finds pages with other years
        ClaimInput("cited-first", "The Louvre opened in 1793.", (web.url("/pages/louvre.html"),),
                   ("Louvre Eiffel Python museum tower",)),
    ]
    bundle = build(tmp_path, web, claims)
    result = verify_claims(bundle, Judge(PageReader()), embedder)
    by_id = {c["id"]: c for c in result["claims"]}
    assert (by_id["right"]["verdict"], by_id["right"]["reason"]) == ("Correct", "supported")
    assert (by_id["wrong"]["verdict"], by_id["wrong"]["reason"]) == ("Incorrect", "contradicted")
    assert (by_id["silent"]["verdict"], by_id["silent"]["reason"]) == ("Unknown", "not_settled")
    assert (by_id["dead"]["verdict"], by_id["dead"]["reason"]) == ("Unknown", "no_evidence")
    assert by_id["dead"]["consistency"][0]["label"] == "unknown"
    assert by_id["dead"]["consistency"][0]["reason"].startswith("failed_capture HTTP 404")
    assert (by_id["nothing"]["verdict"], by_id["nothing"]["reason"]) == ("Unknown",
                                                                        "no_evidence")
    assert by_id["cited-first"]["verdict"] == "Correct"
    any_page = verify_claims(bundle, Judge(PageReader()), embedder,
                             VerifyOptions(page_rule="any-page"))
    assert {c["id"]: c["verdict"] for c in any_page["claims"]}["cited-first"] == "Unknown"
    assert by_id["right"]["consistency"][0]["label"] == "support"
    assert by_id["wrong"]["consistency"][0]["label"] == "conflict"
    summary = result["summary"]
    assert (summary["correct"], summary["incorrect"], summary["unknown"]) == (2, 1, 3)
    assert summary["no_evidence"] == 2
    assert summary["judge_calls"] == sum(c["judge_calls"] for c in result["claims"]) > 0
    # every verdict's evidence points at bytes in the bundle
    with Bundle.open(bundle) as b:
        for claim in result["claims"]:
            for ev in claim["evidence"]:
                stored = b.read_capture(ev["capture_id"])
                assert b.read_record(ev["warc_record_id"]).type == "conversion"
                assert stored.url == ev["url"]
                for p in ev["passages"]:
                    assert stored.text[p["start"] : p["end"]]
                assert len(ev["ledger_key"]) == 64
    # the audit says why a claim had no page to judge
    write_results(result, tmp_path / "verify")
    audit = run_amber("audit", str(tmp_path / "verify"), "--claim", "dead")
    assert audit.returncode == 0, audit.stderr
    assert f"cited page {web.url('/missing')}: failed_capture HTTP 404" in audit.stdout


def test_whole_bundle_finds_an_uncited_page(tmp_path: Path, web: FakeWeb,
                                            embedder: Embedder) -> None:
    """--whole-bundle: a claim citing only an unrelated page is settled by another page
    of the bundle, found by searching every page; the evidence says it was not cited."""
    claims = [
        ClaimInput("elsewhere", "The Eiffel Tower was completed in 1889.",
                   (web.url("/pages/tea.html"),)),
        ClaimInput("louvre", "The Louvre opened in 1793.", (web.url("/pages/louvre.html"),)),
        ClaimInput("holder", "Tea is a drink.", (web.url("/pages/eiffel.html"),)),
    ]
    bundle = build(tmp_path, web, claims)
    narrow = verify_claims(bundle, Judge(PageReader()), embedder)
    wide = verify_claims(bundle, Judge(PageReader()), embedder,
                         VerifyOptions(whole_bundle=True, whole_bundle_pages=1))
    assert {c["id"]: c["verdict"] for c in narrow["claims"]}["elsewhere"] == "Unknown"
    found = {c["id"]: c for c in wide["claims"]}["elsewhere"]
    assert found["verdict"] == "Correct"
    assert [(e["url"], e["cited"]) for e in found["evidence"]] == [
        (web.url("/pages/eiffel.html"), False)]
    assert wide["summary"]["chunks"] == narrow["summary"]["chunks"]  # same three pages
    with Bundle.open(bundle) as b:
        stored = b.read_capture(found["evidence"][0]["capture_id"])
        assert any("1889" in stored.text[p["start"]:p["end"]]
                   for p in found["evidence"][0]["passages"])
    again = verify_claims(bundle, Judge(PageReader()), embedder,
                          VerifyOptions(whole_bundle=True, whole_bundle_pages=1))
    assert again == wide


@pytest.mark.slow
def test_snapshot_report_and_verify_with_the_real_judge(tmp_path: Path, web: FakeWeb) -> None:
    report = tmp_path / "report.md"
    report.write_text(REPORT.replace("{ORIGIN}", web.origin_url))
    bundle = tmp_path / "bundle"
    done = run_amber("snapshot", "report", str(report), "--out", str(bundle), "--extractor",
                     "sentences", "--top-k", "0", "--reader", "direct", "--json",
                     "--retries", "1", "--rate", "0")
    assert done.returncode == 0, done.stderr
    snap = json.loads(done.stdout)
    assert snap["claims"] == 4 and snap["failed"] == 1
    with Bundle.open(bundle) as b:
        _, text = b.report_text()
        assert text == report.read_text()
    assert run_amber("bundle", "verify", str(bundle)).returncode == 0

    out = tmp_path / "verify"
    args = ["verify", str(bundle), "--out", str(out), "--json", "--judge-ctx", "2048",
            "--threads", "2"]
    first = run_amber(*args)
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert len(result["claims"]) == 4
    for claim in result["claims"]:
        assert {"id", "text", "verdict", "reason", "evidence"} <= set(claim)
        assert claim["verdict"] in ("Correct", "Incorrect", "Unknown")
        for ev in claim["evidence"]:
            assert {"url", "capture_id", "warc_record_id", "passages"} <= set(ev)
    assert (out / "verdicts.jsonl").read_text().count("\n") == 4
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge_calls"] > 0 and summary["prompt_tokens"] > 0
    replay = run_amber(*args, "--ledger-mode", "replay")
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["claims"] == result["claims"]
    assert result["stats"]["truncated"] == 0
    small = run_amber("verify", str(bundle), "--out", str(tmp_path / "small"),
                      "--judge-ctx", "256", "--threads", "2")  # the evidence cannot fit
    assert small.returncode == 0, small.stderr
    assert "judge prompts were cut to fit the judge's context" in small.stderr


def test_verify_bad_inputs(tmp_path: Path) -> None:
    done = run_amber("verify", str(tmp_path / "nope"))
    assert done.returncode == 1 and "no such bundle" in done.stderr
    done = run_amber("verify", str(tmp_path), "--page-rule", "vote")
    assert done.returncode == 2 and "unknown --page-rule" in done.stderr


def test_snapshot_report_bad_inputs(tmp_path: Path) -> None:
    empty = tmp_path / "empty.md"
    empty.write_text("  \n")
    done = run_amber("snapshot", "report", str(empty), "--out", str(tmp_path / "b"),
                     "--extractor", "sentences", "--top-k", "0")
    assert done.returncode == 2 and "the report is empty" in done.stderr
    report = tmp_path / "r.md"
    report.write_text("A fact from 1999.\n")
    task = tmp_path / "task.json"
    task.write_text(json.dumps({"id": "t1", "report": "other.md", "query": "q"}))
    done = run_amber("snapshot", "report", str(report), "--out", str(tmp_path / "b"),
                     "--task", str(task), "--extractor", "sentences", "--top-k", "0")
    assert done.returncode == 2 and "task is for report 'other.md'" in done.stderr
    task.write_text("{not json")
    done = run_amber("snapshot", "report", str(report), "--out", str(tmp_path / "b"),
                     "--task", str(task), "--extractor", "sentences", "--top-k", "0")
    assert done.returncode == 2 and "not a JSON task file" in done.stderr
    done = run_amber("snapshot", "report", str(report), "--out", str(tmp_path / "b"),
                     "--extractor", "magic", "--top-k", "0")
    assert done.returncode == 2 and "unknown extractor" in done.stderr
