"""Deciding a label from log-probabilities: the rule by hand, the schema, and the real
default judge scoring labels (recorded, replayed without the model, never generating)."""

from __future__ import annotations

import math
from pathlib import Path

import jsonschema
import pytest
from scripted_judge import scripted_judge

from ambereval.engine.calibration import calibration_for
from ambereval.engine.verify_question import (
    VERIFY_LOGPROB_SCHEMA,
    VERIFY_SCHEMA,
    decision_for,
    page_prefix,
    question_messages,
    read_answer,
)
from ambereval.errors import ConfigError
from ambereval.models import Judge, Ledger, open_judge
from ambereval.models.decision import (
    DECIDE,
    boolean_logprob_schema,
    decide,
    decision_spec,
    normalized,
)


def test_decide_with_and_without_offsets() -> None:
    lp = {"true": -1.0, "false": -2.0, "none": -1.5}
    assert decide(lp) == "true"
    assert decide(lp, {"true": -1.0}) == "none"  # -2.0 < -1.5
    assert decide(lp, {"true": -1.0, "false": 0.6}) == "false"
    assert decide({"a": -1.0, "b": -1.0}) == "a"  # ties: the label that sorts first
    probs = normalized(lp)
    assert math.isclose(sum(probs.values()), 1.0) and probs["true"] > probs["none"]


def test_logprob_schema_is_a_valid_schema_that_names_its_method() -> None:
    jsonschema.Draft202012Validator.check_schema(VERIFY_LOGPROB_SCHEMA)
    assert decision_spec(VERIFY_LOGPROB_SCHEMA) == ("answer", ["true", "false", "none"], False)
    assert decision_spec(VERIFY_SCHEMA) is None and DECIDE in VERIFY_LOGPROB_SCHEMA
    ok = {"answer": "none", "logprobs": {"true": -3.0, "false": -2.0, "none": -1.0}}
    jsonschema.validate(ok, VERIFY_LOGPROB_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"answer": "none", "logprobs": {"true": -1.0}},
                            VERIFY_LOGPROB_SCHEMA)
    assert read_answer(ok, None) == ("none", None)
    assert read_answer(ok, {"false": 1.5}) == ("false", None)
    assert read_answer({"answer": "true", "passage": 2}, None) == ("true", 2)


def test_yes_no_schema_scores_literals_for_a_judge_that_can() -> None:
    schema = boolean_logprob_schema("supported")
    jsonschema.Draft202012Validator.check_schema(schema)
    assert decision_spec(schema) == ("supported", ["true", "false"], True)
    assert decision_spec(VERIFY_LOGPROB_SCHEMA).literal is False
    jsonschema.validate({"supported": False, "logprobs": {"true": -2.0, "false": -0.5}},
                        schema)
    with pytest.raises(jsonschema.ValidationError):  # the value is a boolean, not a label
        jsonschema.validate({"supported": "false", "logprobs": {"true": -2.0,
                                                                 "false": -0.5}}, schema)


def test_a_judge_that_cannot_score_labels_generates() -> None:
    judge = scripted_judge()
    assert decision_for(judge)[:2] == ("generate", VERIFY_SCHEMA)
    assert decision_for(judge, "generate") == ("generate", VERIFY_SCHEMA, None)
    with pytest.raises(ConfigError, match="cannot score labels"):
        decision_for(judge, "logprobs")
    with pytest.raises(ConfigError, match="unknown decision"):
        decision_for(judge, "vote")


def test_prompt_pieces() -> None:
    prefix = page_prefix(["First.", "Second."], "T", "https://x.org/a")
    assert prefix == "Page: T\nURL: https://x.org/a\n\nPassages:\n\n[1] First.\n\n[2] Second."
    assert page_prefix(["Only."]) == "Passages:\n\n[1] Only."
    user = question_messages(prefix, "Is it 1889?", "It is 1889.")[1]["content"]
    assert user.endswith("\n\nReport sentence: It is 1889.\nClaim: It is 1889.\n"
                         "Question: Is it 1889?")
    user = question_messages(prefix, "Q?", "C.", "The sentence [1].")[1]["content"]
    assert "Report sentence: The sentence [1].\nClaim: C.\nQuestion: Q?" in user


@pytest.mark.slow
def test_real_judge_scores_labels_and_replays_without_the_model(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    judge = open_judge(ledger=ledger, ledger_mode="record", n_ctx=2048, threads=2)
    # the default judge has fitted offsets (engine/calibration.py): auto scores labels
    fitted = calibration_for(judge.backend.identity()["model"]["sha256"])
    assert fitted is not None and set(fitted) == {"true", "false"}
    assert decision_for(judge) == ("logprobs", VERIFY_LOGPROB_SCHEMA, fitted)
    method, schema, bias = decision_for(judge, "logprobs")
    assert (method, bias) == ("logprobs", fitted)
    prefix = page_prefix(["The Eiffel Tower in Paris was completed in 1889."])
    asks = [question_messages(prefix, f"Is it true that the tower was completed in {y}?",
                              f"The tower was completed in {y}.") for y in (1889, 1925)]
    answers = [judge.ask(m, schema, 16) for m in asks]
    for a in answers:
        lp = a.obj["logprobs"]
        assert set(lp) == {"true", "false", "none"} and all(v < 0 for v in lp.values())
        assert a.obj["answer"] == decide(lp)  # the plain argmax
        assert a.usage["completion_tokens"] == 0  # nothing generated
    again = judge.ask(asks[0], schema, 16)
    assert again.raw == answers[0].raw  # deterministic
    # the ledger key holds the method (it is in the schema) and the answer its numbers
    assert judge.key(asks[0], schema, 16) != judge.key(asks[0], VERIFY_SCHEMA, 16)
    replay = Judge(judge.backend.__class__(judge.backend.model_path, n_ctx=2048),
                   Ledger(ledger, "replay"), n_ctx=2048)
    replayed = [replay.ask(m, schema, 16) for m in asks]
    assert [r.obj for r in replayed] == [a.obj for a in answers]
    assert all(r.source == "ledger" for r in replayed) and replay.backend._llm is None


@pytest.mark.slow
def test_real_judge_scores_a_yes_no_field_without_generating(tmp_path: Path) -> None:
    judge = open_judge(ledger=tmp_path / "ledger.sqlite", ledger_mode="record", n_ctx=2048,
                       threads=2)
    schema = boolean_logprob_schema("supported")
    asks = [{"role": "system", "content": "Decide whether the passages support the "
             "statement. Use only the passages."},
            {"role": "user", "content": "Passages:\nThe Eiffel Tower in Paris was completed "
             "in 1889.\n\nStatement: The tower was completed in 1889."}]
    answer = judge.ask(asks, schema, 24)
    lp = answer.obj["logprobs"]
    assert set(lp) == {"true", "false"} and all(v < 0 for v in lp.values())
    assert answer.obj["supported"] is (decide(lp) == "true")  # a JSON boolean, the argmax
    assert answer.usage["completion_tokens"] == 0
    assert judge.ask(asks, schema, 24).raw == answer.raw  # deterministic
