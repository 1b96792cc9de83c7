"""The real default llama.cpp judge: schema-valid JSON, determinism, replay, context rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from ambereval.errors import ModelError
from ambereval.models import Judge, Ledger, default_judge_path
from ambereval.models.llamacpp_backend import LlamaCppBackend

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["supported", "contradicted",
                                                         "unknown"]},
                   "confidence": {"type": "string", "enum": ["low", "high"]}},
    "required": ["verdict", "confidence"],
    "additionalProperties": False,
}
FACTS = ["The Eiffel Tower was completed in 1889.", "Python was released in 1991.",
         "The Louvre opened in 1793.", "Python 3.0 came out in 2008.",
         "The Berlin Wall fell in 1989."]


def requests() -> list[list[dict[str, str]]]:
    out = []
    for i in range(20):
        fact = FACTS[i % len(FACTS)]
        claim = fact if i % 2 == 0 else fact.replace("1", "2", 1)
        out.append([
            {"role": "system", "content": "Judge the claim against the evidence. Reply in JSON."},
            {"role": "user", "content": f"Evidence: {fact}\n\nClaim ({i}): {claim}"},
        ])
    return out


def run_all(judge: Judge) -> list[tuple[str, dict]]:
    return [(r.raw, r.obj) for r in (judge.ask(m, SCHEMA, max_tokens=48) for m in requests())]


def test_twenty_requests_identical_twice_and_from_replay(tmp_path: Path) -> None:
    ledger_path = tmp_path / "ledger.sqlite"
    first_backend = LlamaCppBackend(default_judge_path(), n_ctx=1024, n_threads=2)
    first = run_all(Judge(first_backend, Ledger(ledger_path, "record")))
    for _, obj in first:
        assert obj["verdict"] in ("supported", "contradicted", "unknown")
        assert obj["confidence"] in ("low", "high")
    del first_backend
    fresh = LlamaCppBackend(default_judge_path(), n_ctx=1024, n_threads=2)
    second = run_all(Judge(fresh))
    assert second == first
    cold = LlamaCppBackend(default_judge_path(), n_ctx=1024, n_threads=2)
    replayed = run_all(Judge(cold, Ledger(ledger_path, "replay")))
    assert replayed == first
    assert cold._llm is None  # the replay never loaded the model


def test_context_rule_cuts_whole_paragraphs_and_records_it() -> None:
    backend = LlamaCppBackend(default_judge_path(), n_ctx=384, n_threads=2)
    judge = Judge(backend)
    evidence = "\n\n".join(f"Paragraph {i}: " + "the tower is tall " * 12 for i in range(30))
    answer = judge.ask([{"role": "system", "content": "Reply in JSON."},
                        {"role": "user", "content": f"Claim: X.\n\n{evidence}"}],
                       SCHEMA, max_tokens=48)
    cut = answer.truncation
    assert cut is not None and cut["rule"] == "drop-trailing-paragraphs-v1"
    assert cut["dropped_paragraphs"] > 0 and cut["cut_chars"] > 0 and cut["message"] == 1
    assert answer.usage["prompt_tokens"] <= 384 - 48


def test_prompt_that_cannot_fit() -> None:
    backend = LlamaCppBackend(default_judge_path(), n_ctx=256, n_threads=2)
    long_system = "Rules: " + "be careful " * 400
    with pytest.raises(ModelError, match="does not fit the context"):
        Judge(backend).ask([{"role": "system", "content": long_system},
                            {"role": "user", "content": "short"}], SCHEMA, max_tokens=24)
