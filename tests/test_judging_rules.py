"""The rules of how a run asks its judge (engine/judging_rules.py): parsing, what a run
records, what a run made before a rule was asked with, and what each rule changes in
the prompt."""

from __future__ import annotations

import pytest

from ambereval.engine import support_question as sq
from ambereval.engine.judging_rules import BEFORE_RULE, Asking, opening, split_rules
from ambereval.errors import InputError


def test_the_rules_and_what_a_run_records() -> None:
    assert split_rules(None)[1] == {
        "support_question": "shared", "support_batch": "1", "passages": "merged",
        "citation_marks": "dropped", "checklists": "together",
        "relevance_opening": "300-tokens"}
    rest, judging = split_rules(["support_batch=08", "c1_empty=zero"])
    assert rest == ["c1_empty=zero"] and judging["support_batch"] == "8"
    for bad in ("support_batch=0", "support_batch=17", "support_batch=x",
                "support_question=maybe", "passages=all", "citation_marks=some",
                "checklists=5", "relevance_opening=300"):
        with pytest.raises(InputError):
            split_rules([bad])
    assert Asking.of(judging).rules() == {
        "support_question": "shared", "support_batch": 8, "passages": "merged",
        "citation_marks": "dropped", "checklists": "together",
        "relevance_opening": "300-tokens"}
    # asked as amber 0.2.0 asked, a run records what 0.2.0 recorded; separate: no batch
    assert Asking.of({**BEFORE_RULE, "support_question": "shared"}).rules() == {
        "support_question": "shared"}
    assert Asking.of({**BEFORE_RULE, "support_question": "separate",
                      "support_batch": "4", "passages": "merged"}).rules() == {
        "support_question": "separate", "passages": "merged"}
    assert set(BEFORE_RULE) == set(split_rules(None)[1]) - {"support_question"}


@pytest.mark.parametrize(("written", "shown"), [
    ("Sales rose 4% in 2023 [2][5].", "Sales rose 4% in 2023."),
    ("Key rules include SEC [1, 2], OFAC【3】 and FinCEN[^4] guidance.",
     "Key rules include SEC, OFAC and FinCEN guidance."),
    ("The [SEC rule](https://sec.gov/r) took effect [7](https://a.org/x) in 2023.",
     "The SEC rule took effect in 2023."),
    ("Revenue doubled [Doc: annual.pdf] [3]Then it fell.", "Revenue doubled Then it fell."),
    ("See https://www.cisa.gov/ for the portal [9].", "See https://www.cisa.gov/ for the portal."),
    ("No marks here.", "No marks here."),
])
def test_a_statement_is_shown_without_its_citation_marks(written: str, shown: str) -> None:
    assert Asking().statement(written) == shown
    assert Asking(keep_marks=True).statement(written) == written  # citation_marks=kept
    assert sq.messages("Src", "P", Asking().statement(written))[1]["content"].endswith(
        f"Statement: {shown}")


def test_the_relevance_opening_is_about_300_tokens_in_any_script() -> None:
    english = "The tower was completed in 1889 for the fair. " * 60
    head = opening(english)
    assert 1_160 <= len(head) <= 1_200 and english.startswith(head)
    assert not head.endswith(" ") and english[len(head)] == " "  # cut at a space
    chinese = "埃菲尔铁塔是巴黎的地标，" * 60  # every character a token
    assert len(opening(chinese)) == 300
    assert opening("short page") == "short page"
    assert Asking().page_opening(english) == head
    assert Asking(opening="1500-chars").page_opening(english) == english[:1500]
