"""Claim extraction: the judge-free sentence extractor, and the judge path with a scripted
judge at the model edge (plus one run of the real default judge)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ambereval.engine.claims import extract_claims, sentence_claims
from ambereval.engine.report import parse_report
from ambereval.models import Judge, open_judge
from ambereval.models.judge import Completion

FIXTURE = (Path(__file__).parent / "fixtures" / "report.md").read_text()
REPORT = FIXTURE.replace("{ORIGIN}", "https://site.example")


class ScriptedBackend:
    """Answers by looking at the prompt, like a (very literal) model would."""

    name = "scripted"

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers
        self.prompts: list[str] = []

    def identity(self) -> dict[str, Any]:
        return {"model": {"name": "scripted-v1"}}

    def complete(self, messages, schema, max_tokens, seed):  # type: ignore[no-untyped-def]
        self.prompts.append(messages[-1]["content"])
        return Completion(json.dumps(self.answers.pop(0)), {"prompt_tokens": 10,
                                                            "completion_tokens": 5})


def test_sentence_claims_spans_and_citations() -> None:
    report = parse_report(REPORT)
    claims = sentence_claims(report)
    assert [c.text for c in claims] == [
        "The Eiffel Tower in Paris was completed in 1889.",
        "The Louvre opened as a public museum in 1793.",
        "The Rhine flows about 1,230 kilometres to the North Sea.",
        "It passes Basel and Cologne.",
    ]
    for c in claims:
        assert REPORT[c.start : c.end] == c.fact and c.span_exact
    assert claims[0].citations == [1] and claims[0].urls == ["https://site.example/pages/eiffel.html"]
    assert claims[3].citations == [3, 4] and len(claims[3].urls) == 2
    assert claims[0].questions == ["Is it true that The Eiffel Tower in Paris was completed in "
                                   "1889?"]
    assert claims[0].section_path == ["Landmarks of Western Europe", "Paris"]


def test_judge_extraction_spans_dedup_and_filters() -> None:
    report = parse_report(REPORT)
    answers = [
        {"claims": [
            {"sentence": 1, "fact": "completed in 1889", "claim": "The Eiffel Tower was "
             "completed in 1889.", "question": "Was the Eiffel Tower completed in 1889?",
             "search": "Eiffel Tower completion year"},
            {"sentence": 2, "fact": "not in the text", "claim": "The Louvre opened in 1793.",
             "question": "x", "search": ""},
            {"sentence": 9, "fact": "", "claim": "Out of range sentence number.",
             "question": "?", "search": "?"},
            {"sentence": 1, "fact": "1889", "claim": "1889", "question": "", "search": ""},
        ]},
        {"claims": [
            {"sentence": 1, "fact": "flows about 1,230 kilometres", "claim": "THE EIFFEL "
             "TOWER WAS COMPLETED IN 1889", "question": "dup", "search": "dup"},
            {"sentence": 2, "fact": "passes Basel", "claim": "The Rhine passes Basel.",
             "question": "Does the Rhine pass Basel?", "search": "Rhine Basel"},
        ]},
    ]
    backend = ScriptedBackend(answers)
    claims = extract_claims(report, Judge(backend))
    assert [c.text for c in claims] == ["The Eiffel Tower was completed in 1889.",
                                        "The Louvre opened in 1793.", "The Rhine passes Basel."]
    first, second, third = claims
    assert REPORT[first.start : first.end] == "completed in 1889" and first.span_exact
    assert not second.span_exact and REPORT[second.start : second.end].startswith("The Louvre")
    assert second.questions == ["Is it true that The Louvre opened in 1793?"]
    assert second.searches == ["The Louvre opened in 1793."]
    assert third.citations == [3, 4]  # sentence-level citations: no judge needed
    assert len(backend.prompts) == 2 and "Section: Landmarks of Western Europe > Paris" in \
        backend.prompts[0]
    assert all(len(c.ledger_keys) == 1 for c in claims)


def test_paragraph_citations_are_disambiguated_by_the_judge() -> None:
    text = ("Tea is grown in Kenya. China produces the most tea. Both facts matter [1][2].\n\n"
            "## Sources\n[1] Kenya tea: https://a.example/k\n[2] China tea: https://b.example/c\n")
    report = parse_report(text)
    answers = [{"claims": [{"sentence": 1, "fact": "Tea is grown in Kenya", "claim": "Tea is "
                            "grown in Kenya.", "question": "Is tea grown in Kenya?",
                            "search": "tea Kenya"}]},
               {"sources": [1]}]
    backend = ScriptedBackend(answers)
    [claim] = extract_claims(report, Judge(backend))
    assert claim.citation_source == "judge" and claim.citations == [1]
    assert claim.urls == ["https://a.example/k"] and len(claim.ledger_keys) == 2
    assert "[2] China tea" in backend.prompts[1]


@pytest.mark.slow
def test_real_default_judge_extracts_without_error() -> None:
    report = parse_report(REPORT)
    claims = extract_claims(report, open_judge(n_ctx=2048, threads=2))
    for c in claims:  # the tiny model may find nothing; whatever it finds is well-formed
        assert 0 <= c.start < c.end <= len(REPORT) and c.questions and c.searches


def test_a_one_megabyte_report_parses_with_bounded_output() -> None:
    big = REPORT.split("## Sources")[0] * 4000
    report = parse_report(big + "\n## Sources\n" + REPORT.split("## Sources\n")[1])
    assert len(report.text) > 1_000_000 and len(report.sentences) >= 16_000
    claims = sentence_claims(report)
    assert len(claims) == 4  # repeated sentences are merged, not multiplied
