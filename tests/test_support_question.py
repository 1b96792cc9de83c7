"""The shared support question's several-statement prompt (engine/support_question.py):
groups, schema, reading, rules, and the context rule cutting passages, never a
statement."""

from __future__ import annotations

import jsonschema
import pytest

from ambereval.engine import support_question as sq
from ambereval.engine.runs.plan import placeholder

STATEMENTS = ["The Eiffel Tower in Paris was completed in 1889 for a fair.",
              "It is\n made of   wrought iron.", "Short one."]


@pytest.mark.parametrize(("n", "size", "sizes"), [
    (9, 4, [3, 3, 3]), (5, 4, [3, 2]), (4, 4, [4]), (1, 4, [1]), (0, 4, []),
    (17, 16, [9, 8]), (3, 1, [1, 1, 1])])
def test_groups_are_the_fewest_of_near_equal_size_in_order(n: int, size: int,
                                                          sizes: list[int]) -> None:
    items = list(range(n))
    got = sq.groups(items, size)
    assert [len(g) for g in got] == sizes
    assert [x for g in got for x in g] == items  # report order kept


def test_the_schema_asks_one_label_per_number() -> None:
    schema = sq.batch_schema(STATEMENTS)
    assert list(schema["properties"]) == ["1", "2", "3"] == schema["required"]
    assert sq.is_support_schema(schema) and sq.is_support_schema(sq.SCHEMA)
    assert not sq.is_support_schema({"type": "object", "properties": {
        "1": {"type": "string", "enum": ["yes", "no"]}}})
    answer = {"1": "supports", "2": "related", "3": "contradicts_or_unrelated"}
    jsonschema.validate(answer, schema)
    assert sq.batch_answers(answer, 3) == ["supports", "related", "contradicts_or_unrelated"]
    jsonschema.validate(placeholder(schema), schema)  # what --plan answers fits too
    with pytest.raises(jsonschema.ValidationError):  # a number left out
        jsonschema.validate({k: answer[k] for k in ("1", "3")}, schema)


def test_the_page_and_the_statements_are_two_messages() -> None:
    msgs = sq.batch_messages("Eiffel", "PASSAGE ONE\n\nPASSAGE TWO", STATEMENTS)
    assert [m["role"] for m in msgs] == ["system", "user", "user"]
    assert msgs[1]["content"] == "Source: Eiffel\nPassages:\nPASSAGE ONE\n\nPASSAGE TWO"
    assert "1. The Eiffel Tower" in msgs[2]["content"]
    assert "2. It is made of wrought iron." in msgs[2]["content"]
    assert "PASSAGE" not in msgs[2]["content"]


@pytest.mark.slow
def test_the_context_rule_cuts_passages_and_keeps_every_statement() -> None:
    """With a context too small for the page, the judge's context rule shortens the
    longest user message, the page's: every statement is still asked."""
    from ambereval.models.llamacpp_backend import LlamaCppBackend
    from ambereval.models.registry import default_judge_path

    backend = LlamaCppBackend(default_judge_path(), n_ctx=512)  # vocabulary only below
    passages = "\n\n".join(f"Paragraph {i}: " + "the tower is tall and made of iron. " * 12
                           for i in range(12))
    msgs = sq.batch_messages("Eiffel", passages, STATEMENTS)
    sent, cut = backend.fit(msgs, sq.batch_max_tokens(STATEMENTS))
    assert cut is not None and cut["message"] == 1 and cut["dropped_paragraphs"] > 0
    assert sent[2] == msgs[2] and sent[0] == msgs[0]
    assert backend.prompt_tokens(msgs, sq.batch_schema(STATEMENTS),
                                 sq.batch_max_tokens(STATEMENTS)) <= 512
