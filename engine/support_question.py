"""The one support question DR3 FA and DeepEval E3 share (PROTOCOLS.md, end of §3).

Both protocols ask whether a cited page supports a statement of the report, under
different standards. With the rule ``support_question=shared`` (the default) Amber asks
it once per (statement, page), with a three-way answer:

- ``supports``: the passages state what the statement says;
- ``related``: they are about the same thing but do not establish it;
- ``contradicts_or_unrelated``: they contradict it, or hold nothing related to it;

and each protocol derives its verdict by its own rule: DR3 FA is lenient (supported
unless ``contradicts_or_unrelated``), DeepEval E3 is strict (supported only on
``supports``). The prompt depends on the statement and the page only, never on which
protocol asks, so it has one ledger key: a DR3 run and a DeepEval run of the same
report ask the same prompts, and whichever runs second is answered from the ledger.

The passages of a page are chosen for every statement citing it (URL or DR3 document
tag), whichever protocol asks (:func:`page_statements`), so both protocols send the
same passages. ``support_question=separate`` asks each protocol's own yes/no prompt
(the prompts of amber before this change).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ambereval.engine.eval_context import EvalContext
from ambereval.engine.evidence import Page
from ambereval.errors import InputError

RULE = "support_question"
CHOICES = ("shared", "separate")
DEFAULT = "shared"
SUPPORTS, RELATED, AGAINST = "supports", "related", "contradicts_or_unrelated"
LABELS = (SUPPORTS, RELATED, AGAINST)
SYSTEM = (
    "You compare a statement from a research report with passages of the source it cites. "
    "Use only the passages, never your own knowledge. Answer 'supports' if the passages "
    "state what the statement says; 'related' if they are about the same subject but do "
    "not establish the statement; 'contradicts_or_unrelated' if they contradict the "
    "statement or contain nothing related to it."
)
SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"answer": {"type": "string", "enum": list(LABELS)}},
    "required": ["answer"], "additionalProperties": False}
MAX_TOKENS = 24  # the longest label with its JSON is under 16 tokens


def messages(header: str, passages: str, statement: str) -> list[dict[str, str]]:
    """The shared question: the page first (a prefix every statement citing it shares),
    the statement last."""
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Source: {header}\nPassages:\n{passages}\n\n"
                                        f"Statement: {statement}"}]


def fa_supported(answer: str) -> bool:
    """DR3 FA's reading (lenient): supported unless contradicted or unrelated."""
    return answer != AGAINST


def e3_supported(answer: str) -> bool:
    """DeepEval E3's reading (strict): supported only when the page supports it."""
    return answer == SUPPORTS


#: the rules of how the judge is asked, with their choices (the first is the default);
#: ``prompt_layout`` names the prompts' layout and is not a choice: a run made with
#: another layout is replayed with the amber that made it
JUDGING_RULES = {RULE: CHOICES}
PROMPT_LAYOUT = "report-first-v1"


def split_rules(pairs: list[str] | None) -> tuple[list[str], dict[str, str]]:
    """``--rule`` values -> (the others, left to DailyReport's parser; the judging rules
    with defaults filled in). Example: ``split_rules(["support_question=separate"])``."""
    judging = {name: choices[0] for name, choices in JUDGING_RULES.items()}
    rest = []
    for pair in pairs or []:
        name, sep, value = (x.strip() for x in pair.partition("="))
        if name not in JUDGING_RULES:
            rest.append(pair)
            continue
        if value not in JUDGING_RULES[name]:
            raise InputError(f"rule {name} must be one of {', '.join(JUDGING_RULES[name])} "
                             f"(got {value!r})")
        judging[name] = value
    return rest, judging


@dataclass
class PageStatements:
    """One cited page and the statements citing it, in report order."""

    page: Page
    header: str
    statements: list[str] = field(default_factory=list)


def page_key(page: Page) -> str:
    return page.capture_id or page.url


def page_statements(ctx: EvalContext, doc_sources: list[tuple[str, Page]]) -> dict[
        str, PageStatements]:
    """Every valid cited page of the report with the statements citing it, whichever
    protocol asks: sentences citing the page by URL, then ``doc_sources`` (DR3 document
    tags resolved to pages: (sentence, page)). Each protocol passes the same list, so
    the passages chosen for a page, and the prompts, are the same for both."""
    out: dict[str, PageStatements] = {}

    def add(text: str, page: Page) -> None:
        if not page.valid:
            return
        slot = out.setdefault(page_key(page), PageStatements(page, page.title or page.url))
        if text not in slot.statements:
            slot.statements.append(text)

    for s in ctx.report.sentences:
        text = ctx.text[s.start : s.end]
        for c in ctx.report.citations_in(s.start, s.end):
            for url in c.urls:
                add(text, ctx.page(url))
    for text, page in doc_sources:
        add(text, page)
    return out


def page_passages(ctx: EvalContext, slot: PageStatements) -> str:
    """The passages of a page for all its statements (one prefix for every check)."""
    return "\n\n".join(ctx.page_passages(slot.page, slot.statements))
