"""A checklist's items asked together, as the benchmarks' reference code asks them
(engine/judging.py, rule ``checklists``): the prompts, each item's verdict, errors."""

from __future__ import annotations

import jsonschema
import pytest
from scripted_judge import ScriptedBackend

from ambereval.engine.judging import (
    Clipped,
    answer_numbers,
    check_groups,
    checklist_score,
    judge_checklist,
)
from ambereval.engine.tasks import ChecklistItem
from ambereval.errors import ModelError
from ambereval.models import Judge

REPORT = Clipped("The bridge cost $4m and opened in 2021.", 0)
ITEMS = [ChecklistItem(f"c{n}", f"Gives fact {n}") for n in range(1, 8)]


@pytest.mark.parametrize(("n", "per_prompt", "sizes"), [
    (7, 5, [5, 2]), (6, 5, [5, 1]), (5, 5, [5]), (7, None, [7]), (3, 1, [1, 1, 1]),
    (0, None, [])])
def test_items_are_cut_as_the_reference_batches_them(n: int, per_prompt: int | None,
                                                    sizes: list[int]) -> None:
    got = check_groups(list(range(n)), per_prompt)
    assert [len(g) for g in got] == sizes
    assert [x for g in got for x in g] == list(range(n))


def test_each_item_gets_the_answer_given_for_its_number() -> None:
    backend = ScriptedBackend({"Requirements:\n1. Gives fact 1": {"2": False, "4": False}})
    rows = judge_checklist(Judge(backend), REPORT, ITEMS[:5], per_prompt=None)
    assert len(backend.calls) == 1
    prompt = backend.calls[0]
    assert prompt.startswith(f"Report:\n{REPORT.text}")  # the report stays the prefix
    assert "\n5. Gives fact 5\n" in prompt and "answer for every number" in prompt
    assert [r["pass"] for r in rows] == [True, False, True, False, True]
    assert [r["asked"] for r in rows] == [{"item": n, "of": 5} for n in range(1, 6)]
    assert len({r["ledger_key"] for r in rows}) == 1
    assert checklist_score(rows) == 60.0


def test_a_prompt_of_one_item_is_the_one_item_prompt() -> None:
    """Five a prompt cuts seven items 5 + 2 and six 5 + 1; the lone sixth is asked as
    ``checklists=each`` asks it, so the two rules share its ledger entry."""
    together, each = ScriptedBackend(), ScriptedBackend()
    rows = judge_checklist(Judge(together), REPORT, ITEMS[:6], per_prompt=5)
    alone = judge_checklist(Judge(each), REPORT, ITEMS[:6], per_prompt=1)
    assert len(together.calls) == 2 and len(each.calls) == 6
    assert together.calls[1] == each.calls[5]
    assert rows[5]["ledger_key"] == alone[5]["ledger_key"] and "asked" not in rows[5]
    assert [r["pass"] for r in rows] == [r["pass"] for r in alone]


class Failing(ScriptedBackend):
    def complete(self, messages, schema, max_tokens, seed):  # type: ignore[no-untyped-def]
        if "Requirements:" in messages[-1]["content"]:
            raise ModelError("no schema-valid answer")
        return super().complete(messages, schema, max_tokens, seed)


def test_a_failed_prompt_errs_every_item_it_asked() -> None:
    rows = judge_checklist(Judge(Failing()), REPORT, ITEMS[:6], per_prompt=5)
    assert [bool(r.get("error")) for r in rows] == [True] * 5 + [False]
    assert checklist_score(rows, "exclude") == 100.0  # the reference: errors leave
    assert checklist_score(rows, "null-dimension") is None


def test_the_grouped_schema_wants_every_number() -> None:
    backend = ScriptedBackend()
    schemas: list[dict] = []
    original = backend.complete

    def keep(messages, schema, max_tokens, seed):  # type: ignore[no-untyped-def]
        schemas.append(schema)
        return original(messages, schema, max_tokens, seed)

    backend.complete = keep  # type: ignore[method-assign]
    judge_checklist(Judge(backend), REPORT, ITEMS[:3], per_prompt=None)
    [schema] = schemas
    jsonschema.validate({"1": True, "2": False, "3": True}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"1": True, "3": True}, schema)


def test_a_long_checklist_is_numbered_so_sorted_keys_keep_its_order() -> None:
    """A constrained judge writes the schema's keys in sorted order (the request is
    canonical JSON): twelve items are numbered 01..12, so the answer goes in list order."""
    assert answer_numbers(3) == ["1", "2", "3"]
    assert answer_numbers(12) == sorted(answer_numbers(12))
    assert answer_numbers(12)[:2] == ["01", "02"] and answer_numbers(12)[-1] == "12"
    items = [ChecklistItem(f"c{n}", f"Gives fact {n}") for n in range(1, 13)]
    backend = ScriptedBackend({"Requirements:\n01. Gives fact 1": {"02": False, "11": False}})
    rows = judge_checklist(Judge(backend), REPORT, items, per_prompt=None)
    assert "\n12. Gives fact 12\n" in backend.calls[0]
    assert [n for n, r in enumerate(rows, start=1) if not r["pass"]] == [2, 11]
    assert rows[10]["asked"] == {"item": 11, "of": 12}
