"""The rules of how a run asks its judge (``--rule NAME=VALUE``), recorded in the run's
manifest (``judging``) so that a replay or rerun asks the same prompts.

- ``support_question``: ``shared`` (default) asks DR3 FA and DeepEval E3 one three-way
  question per (statement, cited page); ``separate``, each protocol its own yes/no
  prompt (engine/support_question.py).
- ``support_batch=N`` (default 1): up to N statements of a page in one shared prompt.
- ``passages``: ``merged`` (default) sends chosen chunks that overlap or touch as one
  passage; ``chunks`` as chosen.
- ``citation_marks``: ``dropped`` (default) shows the judge a statement without its
  citation marks (the source is named beside it: ``[3][7]`` carries nothing to check);
  ``kept`` as written.
- ``checklists``: ``together`` (default) asks a checklist's items in the prompts of the
  benchmark's reference code (DR3-Eval: five items a prompt; LiveResearchBench: the
  whole checklist in one, and presentation's items in one); ``each``, one item a prompt.
- ``relevance_opening``: how much of a page DeepEval E2 shows with its title:
  ``300-tokens`` (default; PROTOCOLS.md's "first ~300 tokens", estimated without a
  tokenizer: :func:`opening`) or ``1500-chars``.

A rule a run's manifest does not name was not there yet when the run was made: the run
asked as ``BEFORE_RULE`` says (amber 0.2.0 asked each statement alone, with the chosen
chunks as they are; 0.2.1 and before showed a statement with its citation marks, asked
one checklist item a prompt and showed E2 1,500 characters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ambereval.engine.report_scan import without_marks
from ambereval.errors import InputError

QUESTION_RULE = "support_question"
QUESTION_CHOICES = ("shared", "separate")
BATCH_RULE = "support_batch"
BATCH_DEFAULT = 1
BATCH_MAX = 16
PASSAGES_RULE = "passages"
PASSAGES_CHOICES = ("merged", "chunks")
MARKS_RULE = "citation_marks"
MARKS_CHOICES = ("dropped", "kept")
CHECKS_RULE = "checklists"
CHECKS_CHOICES = ("together", "each")
OPENING_RULE = "relevance_opening"
OPENING_CHOICES = ("300-tokens", "1500-chars")
#: the rules with their defaults (each choice list's first)
JUDGING_DEFAULTS = {QUESTION_RULE: QUESTION_CHOICES[0], BATCH_RULE: str(BATCH_DEFAULT),
                    PASSAGES_RULE: PASSAGES_CHOICES[0], MARKS_RULE: MARKS_CHOICES[0],
                    CHECKS_RULE: CHECKS_CHOICES[0], OPENING_RULE: OPENING_CHOICES[0]}
#: ``prompt_layout`` names the prompts' layout and is not a rule: a run made with another
#: layout is replayed with the amber that made it
PROMPT_LAYOUT = "report-first-v1"
#: what a run whose manifest predates a rule was asked with
BEFORE_RULE = {BATCH_RULE: "1", PASSAGES_RULE: "chunks", MARKS_RULE: "kept",
               CHECKS_RULE: "each", OPENING_RULE: "1500-chars"}
_CHOICES = {QUESTION_RULE: QUESTION_CHOICES, PASSAGES_RULE: PASSAGES_CHOICES,
            MARKS_RULE: MARKS_CHOICES, CHECKS_RULE: CHECKS_CHOICES,
            OPENING_RULE: OPENING_CHOICES}
OPENING_TOKENS = 300
# characters a tokenizer gives about a token each (CJK, kana, hangul); other text, ~4 a token
_WIDE = re.compile(r"[\u1100-\u11ff\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def check_rule(name: str, value: str) -> str:
    """``value`` for judging rule ``name`` in its recorded form, or a one-line error."""
    choices = _CHOICES.get(name)
    if choices is not None:
        if value not in choices:
            raise InputError(f"rule {name} must be one of {', '.join(choices)} "
                             f"(got {value!r})")
        return value
    if not value.isdigit() or not 1 <= int(value) <= BATCH_MAX:
        raise InputError(f"rule {BATCH_RULE} must be a whole number from 1 to {BATCH_MAX} "
                         f"(got {value!r})")
    return str(int(value))


def split_rules(pairs: list[str] | None) -> tuple[list[str], dict[str, str]]:
    """``--rule`` values -> (the others, left to the protocols' own switches; the judging
    rules with defaults filled in). Example: ``split_rules(["support_batch=4"])``."""
    judging = dict(JUDGING_DEFAULTS)
    rest = []
    for pair in pairs or []:
        name, _, value = (x.strip() for x in pair.partition("="))
        if name not in JUDGING_DEFAULTS:
            rest.append(pair)
            continue
        judging[name] = check_rule(name, value)
    return rest, judging


def opening(text: str, tokens: int = OPENING_TOKENS) -> str:
    """The start of ``text`` worth about ``tokens`` tokens for any judge: a wide (CJK)
    character counts one, any other character a quarter; cut back to a space when one
    is near. 1,200 characters of English, 300 of Chinese."""
    budget = 4 * tokens
    for i, ch in enumerate(text):
        budget -= 4 if _WIDE.match(ch) else 1
        if budget < 0:
            head = text[:i]
            space = head.rfind(" ", len(head) - 40)
            return head[:space] if space > 0 else head
    return text


@dataclass(frozen=True)
class Asking:
    """How a run asks its judge (the rules above, parsed). Whether a cited page supports
    a statement: ``question`` shared or separate, statements a shared prompt (``batch``),
    overlapping chunks sent as one passage (``merge``), a statement's citation marks kept
    (``keep_marks``); a checklist's items asked together (``checks_together``); E2's
    page opening (``opening``)."""

    question: str = QUESTION_CHOICES[0]
    batch: int = BATCH_DEFAULT
    merge: bool = True
    keep_marks: bool = False
    checks_together: bool = True
    opening: str = OPENING_CHOICES[0]

    @classmethod
    def of(cls, judging: dict[str, str] | None) -> Asking:
        judging = {**JUDGING_DEFAULTS, **(judging or {})}
        return cls(check_rule(QUESTION_RULE, judging[QUESTION_RULE]),
                   int(check_rule(BATCH_RULE, str(judging[BATCH_RULE]))),
                   check_rule(PASSAGES_RULE, judging[PASSAGES_RULE]) == "merged",
                   check_rule(MARKS_RULE, judging[MARKS_RULE]) == "kept",
                   check_rule(CHECKS_RULE, judging[CHECKS_RULE]) == "together",
                   check_rule(OPENING_RULE, judging[OPENING_RULE]))

    @property
    def shared(self) -> bool:
        return self.question == "shared"

    def statement(self, text: str) -> str:
        """``text`` as the judge is shown it: without its citation marks, unless kept."""
        return text if self.keep_marks else without_marks(text)

    def per_prompt(self, reference: int | None) -> int | None:
        """Checklist items a prompt: the reference code's ``reference`` (None: the whole
        checklist) when asked together, else one."""
        return reference if self.checks_together else 1

    def page_opening(self, text: str) -> str:
        """What E2 shows of a page after its title."""
        return opening(text) if self.opening == "300-tokens" else text[:1500]

    def rules(self) -> dict[str, Any]:
        """As recorded in a protocol's ``rules``: a rule only where it departs from what
        amber 0.2.0 did (so a run asked as 0.2.0 asked records what 0.2.0 recorded)."""
        grouped = self.shared and self.batch > 1
        return {QUESTION_RULE: self.question, **({BATCH_RULE: self.batch} if grouped else {}),
                **({PASSAGES_RULE: "merged"} if self.merge else {}),
                **({} if self.keep_marks else {MARKS_RULE: "dropped"}),
                **({CHECKS_RULE: "together"} if self.checks_together else {}),
                **({OPENING_RULE: self.opening} if self.opening != "1500-chars" else {})}


#: today's defaults
DEFAULT_ASKING = Asking()
