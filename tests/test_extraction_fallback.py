"""Extraction is never silently empty (issue 8): a batch the judge makes nothing usable of
falls back to the sentence extractor, every claim says which extractor made it, and a
report whose sentences cite sources never yields 0 claims with exit 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ambereval.engine.claims import extract_claims, extract_report_claims
from ambereval.engine.report import parse_report
from ambereval.errors import ExtractionError
from ambereval.models import Judge
from ambereval.models.judge import Completion
from ambereval.snapshots import Bundle

from conftest import run_amber
from fakeweb import FakeWeb

FIXTURE = (Path(__file__).parent / "fixtures" / "report.md").read_text()
REPORT = FIXTURE.replace("{ORIGIN}", "https://site.example")
SHORT = """# Three facts

The Eiffel Tower in Paris was completed in 1889 [1]. The Louvre opened as a public museum
in 1793 [2]. The Rhine flows about 1,230 kilometres to the North Sea [3].

## Sources
[1] Eiffel Tower facts: {ORIGIN}/pages/eiffel.html
[2] The Louvre museum: {ORIGIN}/pages/louvre.html
[3] The river Rhine: {ORIGIN}/pages/rhine.html
"""


class RawBackend:
    """Returns the given raw texts in order (a model at the edge, right or wrong)."""

    name = "raw"

    def __init__(self, raws: list[str]) -> None:
        self.raws = raws

    def identity(self) -> dict[str, Any]:
        return {"model": {"name": "raw-v1"}}

    def complete(self, messages, schema, max_tokens, seed):  # type: ignore[no-untyped-def]
        return Completion(self.raws.pop(0), {"prompt_tokens": 10, "completion_tokens": 5})


def claim_json(sentence: int, claim: str) -> dict[str, Any]:
    return {"sentence": sentence, "fact": "", "claim": claim,
            "question": f"Is it true that {claim}?", "search": claim}


def test_an_empty_judge_answer_falls_back_to_the_sentence_extractor() -> None:
    report = parse_report(REPORT)
    judge = Judge(RawBackend([json.dumps({"claims": []}), json.dumps({"claims": [
        claim_json(1, "The Rhine is about 1,230 kilometres long.")]})]))
    outcomes: list[dict[str, Any]] = []
    claims = extract_claims(report, judge, outcomes=outcomes)
    # Paris section: nothing from the judge -> its two cited sentences, by the sentence
    # extractor; Rivers section: the judge's own claim, no fallback
    assert [(c.id, c.extractor) for c in claims] == [
        ("c1", "sentences"), ("c2", "sentences"), ("c3", "judge")]
    assert claims[0].text == "The Eiffel Tower in Paris was completed in 1889."
    assert claims[0].extractor_note == "judge returned no claim"
    assert claims[0].citations == [1] and claims[2].extractor_note is None
    assert [o["fallback"] for o in outcomes] == [2, 0]
    assert [o["judge_claims"] for o in outcomes] == [0, 1]


def test_a_schema_failure_falls_back_and_is_named() -> None:
    report = parse_report(REPORT)
    judge = Judge(RawBackend(['{"claims": [{"sentence": "one"}]}', "not json at all"]))
    claims, account = extract_report_claims(report, judge, "judge")
    assert [c.extractor for c in claims] == ["sentences"] * 4
    assert all(c.extractor_note.startswith("judge answer unusable: judge output does not")
               or c.extractor_note.startswith("judge answer unusable: judge returned invalid")
               for c in claims)
    assert account["by_extractor"] == {"judge": 0, "sentences": 4}
    assert account["sentence_baseline"] == 4 and account["fallback_batches"] == 2
    assert len(account["judge_errors"]) == 2
    assert "the judge made 0 claims where the sentence extractor makes 4" in account["warning"]


def test_without_fallback_the_judge_alone_decides() -> None:
    report = parse_report(REPORT)
    judge = Judge(RawBackend([json.dumps({"claims": []})] * 2))
    assert extract_claims(report, judge, fallback=False) == []


def test_a_good_judge_gets_no_warning() -> None:
    report = parse_report(REPORT)
    judge = Judge(RawBackend([json.dumps({"claims": [
        claim_json(1, "The Eiffel Tower was completed in 1889."),
        claim_json(2, "The Louvre opened as a public museum in 1793.")]}),
        json.dumps({"claims": [claim_json(1, "The Rhine is about 1,230 km long."),
                               claim_json(2, "The Rhine passes Basel."),
                               claim_json(2, "The Rhine passes Cologne.")]})]))
    claims, account = extract_report_claims(report, judge)
    assert len(claims) == 5 and account["warning"] is None
    assert account["by_extractor"] == {"judge": 5, "sentences": 0}


def test_cited_sentences_that_yield_nothing_are_an_error() -> None:
    report = parse_report("Yes [1]. No [2].\n\n## Sources\n[1] a https://a.org\n"
                          "[2] b https://b.org\n")
    judge = Judge(RawBackend([json.dumps({"claims": []})]))
    with pytest.raises(ExtractionError, match="although 2 sentences cite sources"):
        extract_report_claims(report, judge)
    with pytest.raises(ExtractionError):
        extract_report_claims(report, judge, "sentences")
    # nothing cited and nothing numeric: no claims is a fair answer, not an error
    quiet = parse_report("An opinion without sources.\n")
    claims, account = extract_report_claims(quiet, Judge(RawBackend([])), "sentences")
    assert claims == [] and account["warning"] is None


def test_snapshot_report_cli_refuses_zero_claims(tmp_path: Path) -> None:
    report = tmp_path / "r.md"
    report.write_text("Yes [1].\n\n## Sources\n[1] a https://a.org/x\n")
    done = run_amber("snapshot", "report", str(report), "--out", str(tmp_path / "b"),
                     "--extractor", "sentences", "--top-k", "0")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "no claims extracted, although 1 sentences cite sources" in done.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.slow
def test_real_default_judge_never_yields_zero_claims(tmp_path: Path, web: FakeWeb) -> None:
    report = tmp_path / "short.md"
    report.write_text(SHORT.replace("{ORIGIN}", web.origin_url))
    bundle = tmp_path / "bundle"
    done = run_amber("snapshot", "report", str(report), "--out", str(bundle), "--top-k", "0",
                     "--reader", "direct", "--json", "--retries", "1", "--rate", "0",
                     "--judge-ctx", "2048", "--threads", "2")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    account = out["extraction"]
    assert out["claims"] >= 3  # three cited sentences: never 0
    assert account["sentence_baseline"] == 3
    assert sum(account["by_extractor"].values()) == out["claims"]
    if account["by_extractor"]["judge"] < 3:
        assert "amber: warning: the judge made" in done.stderr
    with Bundle.open(bundle) as b:
        rows = b.index.rows("SELECT id, extra FROM claims ORDER BY ordinal")
        meta = json.loads(b.index.one("SELECT meta FROM reports")["meta"])
    extractors = [json.loads(r["extra"])["extractor"] for r in rows]
    assert len(rows) == out["claims"] and set(extractors) <= {"judge", "sentences"}
    assert meta["extraction"]["by_extractor"] == account["by_extractor"]
    human = run_amber("snapshot", "report", str(report), "--out", str(tmp_path / "b2"),
                      "--top-k", "0", "--reader", "direct", "--retries", "1", "--rate", "0",
                      "--judge-ctx", "2048", "--threads", "2")
    assert human.returncode == 0, human.stderr
    assert "by the judge" in human.stdout and "by the sentence extractor" in human.stdout
