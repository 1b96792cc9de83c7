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

**Passages** (rule ``passages``, default ``merged``): chosen chunks that overlap or
touch go as one passage, the page's text over their span (``chunks``: as chosen, what
amber 0.2.0 sent).

**Statements asked together** (rule ``support_batch=N``, default 1, opt-in): the
statements citing a page are split, in report order, into the fewest groups of at most
N of near-equal size, and each group is one prompt: the page's passages once, then the
numbered statements, and an answer per number. It sends a page's passages once instead
of once a statement, but the judges measured here answer grouped statements worse
(docs/judge-work.md), so it is not the default. Both protocols group the same statements
the same way, so the ledger still shares every answer between them.

**The statement** is shown without its citation marks (rule ``citation_marks``): the
page is named beside it. The rules are parsed in engine/judging_rules.py; a run whose
manifest predates a rule is replayed as it was asked (``BEFORE_RULE`` there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from ambereval.engine.eval_context import EvalContext
from ambereval.engine.evidence import Page
from ambereval.engine.judging_rules import DEFAULT_ASKING, Asking
from ambereval.errors import ModelError
from ambereval.models.judge import Judge

T = TypeVar("T")
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


BATCH_SYSTEM = (
    "You compare numbered statements from a research report with passages of the source "
    "they cite. Use only the passages, never your own knowledge. Judge each statement on "
    "its own and answer for every number: 'supports' if the passages state what the "
    "statement says; 'related' if they are about the same subject but do not establish "
    "the statement; 'contradicts_or_unrelated' if they contradict the statement or "
    "contain nothing related to it."
)


def batch_messages(header: str, passages: str, statements: list[str]) -> list[dict[str, str]]:
    """The shared question for several statements of one page: the page in one user
    message (the longest, so the context rule cuts passages, never a statement), the
    numbered statements in a second."""
    listing = "\n".join(f"{n}. {' '.join(text.split())}"
                        for n, text in enumerate(statements, start=1))
    return [{"role": "system", "content": BATCH_SYSTEM},
            {"role": "user", "content": f"Source: {header}\nPassages:\n{passages}"},
            {"role": "user", "content": f"Statements:\n{listing}\n\n"
                                        "Answer for each statement by its number."}]


def batch_schema(statements: list[str]) -> dict[str, Any]:
    """One label per statement number, "1" to ``n``, all required."""
    numbers = [str(i) for i in range(1, len(statements) + 1)]
    return {"type": "object",
            "properties": {k: {"type": "string", "enum": list(LABELS)} for k in numbers},
            "required": numbers, "additionalProperties": False}


def batch_answers(obj: dict[str, Any], n: int) -> list[str]:
    """The labels of a several-statement answer, in statement order."""
    return [str(obj[str(i)]) for i in range(1, n + 1)]


def batch_max_tokens(statements: list[str]) -> int:
    """Room for every answer: a number and its label with their JSON are under 14 tokens."""
    return 8 + 14 * len(statements)


def is_support_schema(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` asks the shared question (one statement or several)."""
    props = schema.get("properties") or {}
    return schema == SCHEMA or (bool(props) and all(k.isdigit() for k in props) and all(
        v.get("enum") == list(LABELS)
        for v in props.values()))


def fa_supported(answer: str) -> bool:
    """DR3 FA's reading (lenient): supported unless contradicted or unrelated."""
    return answer != AGAINST


def e3_supported(answer: str) -> bool:
    """DeepEval E3's reading (strict): supported only when the page supports it."""
    return answer == SUPPORTS


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


def page_passages(ctx: EvalContext, slot: PageStatements, merge: bool = True) -> str:
    """The passages of a page for all its statements (one prefix for every check)."""
    return "\n\n".join(ctx.page_passages(slot.page, slot.statements, merge=merge))


def groups(statements: list[T], size: int) -> list[list[T]]:
    """``statements`` in report order, split into the fewest groups of at most ``size``,
    of near-equal size (the earlier groups one larger): 9 by 4 -> 3, 3, 3."""
    if not statements:
        return []
    count = -(-len(statements) // size)
    base, extra = divmod(len(statements), count)
    out: list[list[T]] = []
    at = 0
    for g in range(count):
        n = base + (g < extra)
        out.append(statements[at : at + n])
        at += n
    return out


@dataclass
class SupportAnswer:
    """The shared question's answer for one (statement, page): ``answer`` is None on a
    judge error (``error``); ``item`` is the statement's number in its prompt of ``of``
    statements."""

    answer: str | None
    key: str
    error: str | None = None
    item: int = 1
    of: int = 1

    def record(self) -> dict[str, Any]:
        """What a verdict records of its question besides the verdict itself."""
        out: dict[str, Any] = {"ledger_key": self.key}
        if self.answer is not None:
            out["answer"] = self.answer
        if self.of > 1:
            out.update(item=self.item, of=self.of)
        return out


class SupportAsker:
    """Asks the shared question for one protocol's pass over a report, each prompt once:
    the page's passages and groups are derived from ``slots`` (:func:`page_statements`)
    alone, so every protocol sends the same prompts."""

    def __init__(self, judge: Judge, ctx: EvalContext, slots: dict[str, PageStatements],
                 asking: Asking = DEFAULT_ASKING) -> None:
        self.judge, self.ctx, self.slots = judge, ctx, slots
        self.batch, self.merge, self.say = asking.batch, asking.merge, asking.statement
        self._passages: dict[str, str] = {}
        self._answers: dict[tuple[str, str], SupportAnswer] = {}

    def slot(self, page: Page, statement: str) -> PageStatements:
        slot = self.slots.get(page_key(page))
        if slot is None or statement not in slot.statements:  # not cited as parsed: alone
            return PageStatements(page, page.title or page.url, [statement])
        return slot

    def passages(self, slot: PageStatements) -> str:
        key = "\n".join([page_key(slot.page), *slot.statements])
        if key not in self._passages:
            self._passages[key] = page_passages(self.ctx, slot, self.merge)
        return self._passages[key]

    def ask(self, page: Page, statement: str) -> SupportAnswer:
        slot = self.slot(page, statement)
        done = self._answers.get((page_key(page), statement))
        if done is not None:
            return done
        passages = self.passages(slot)
        group = next(g for g in groups(slot.statements, self.batch) if statement in g)
        if self.batch == 1:
            msgs, schema, cap = (messages(slot.header, passages, self.say(statement)),
                                 SCHEMA, MAX_TOKENS)
        else:
            msgs, schema, cap = (batch_messages(slot.header, passages,
                                                [self.say(t) for t in group]),
                                 batch_schema(group), batch_max_tokens(group))
        try:
            reply = self.judge.ask(msgs, schema, max_tokens=cap)
        except ModelError as err:
            key = self.judge.key(msgs, schema, cap)
            answers = [SupportAnswer(None, key, str(err)) for _ in group]
        else:
            if self.batch == 1:
                answers = [SupportAnswer(str(reply.obj["answer"]), reply.key)]
            else:
                answers = [SupportAnswer(label, reply.key)
                           for label in batch_answers(reply.obj, len(group))]
        for n, (text, answer) in enumerate(zip(group, answers, strict=True), start=1):
            if self.batch > 1:
                answer.item, answer.of = n, len(group)
            self._answers[(page_key(page), text)] = answer
        return self._answers[(page_key(page), statement)]
