"""DR3-Eval (PROTOCOLS.md §2): IR_UF, IR_SC, CC, FA, IF, DQ and their average, 0-100.

CC needs no judge. A required document counts as cited when a citation of the report
names it: normalised exact match (NFKC, case, spacing, punctuation), then containment,
then fuzzy [our rule ``cc_fuzzy``: token overlap = share of the required name's tokens
found in the cited name ≥ 0.6, or difflib similarity ≥ 0.75]; fallback: the normalised
title (≥ 4 characters) appears in the report text. FA checks (claim, sources) pairs
taken from the parse [our rule ``fa_claims="cited-sentences"``: every sentence that cites
a source is a claim with those sources, and so is an uncited sentence stating a figure
(a digit), which is unsupported: §2 "a claim with no citation is unsupported"; the judge
is lenient], sources cut to their best passages. A
cited source that is not in the bundle (user files are matched by name for CC but their
contents are not imported) cannot support its claim.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from typing import Any

from ambereval.engine import support_question as sq
from ambereval.engine.aggregation import summarise
from ambereval.engine.eval_context import EvalContext
from ambereval.engine.judging import (
    DECISION_TOKENS,
    checklist_score,
    clip,
    judge_checklist,
    judge_choice,
)
from ambereval.engine.judging_rules import DEFAULT_ASKING, Asking
from ambereval.engine.protocols.switches import FIXED, switch
from ambereval.engine.tasks import RequiredDocument
from ambereval.errors import ModelError
from ambereval.models import Judge

RULES = {k: FIXED["dr3"][k] for k in ("cc_fuzzy", "ir_strict")}  # and fa_claims (switches)
_TAG_TITLE = re.compile(r'^\s*(?:long_context|doc|document|file|source)\s*:\s*"?([^",]+?)"?'
                        r'\s*(?:,.*)?$', re.I)
INSIGHT_SYSTEM = (
    "You check whether a research report covers a given fact. Score 1 if the report states "
    "it fully, 0.5 if it states part of it, 0 if it is missing or contradicted."
)
DEPTH_SYSTEM = (
    "You are a harsh reviewer of analytical depth. Score the report from 1 to 10: 1-3 "
    "restates sources, 4-6 organises and compares, 7-8 explains causes and trade-offs with "
    "evidence, 9-10 offers original, well-supported insight a specialist would value."
)
IF_PER_PROMPT = 5  # the reference's batch: checklist items a prompt
IF_SYSTEM = (
    "You check one requirement of the user's request against a research report. Answer "
    "pass if the report satisfies it, fail otherwise."
)
FA_SCHEMA = {"type": "object", "properties": {"supported": {"type": "boolean"}},
             "required": ["supported"], "additionalProperties": False}
FA_SYSTEM = (
    "You check a statement from a report against passages of the source it cites. Be "
    "lenient: answer supported unless the passages directly contradict the statement or "
    "contain nothing related to it."
)


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return re.sub(r"[\W_]+", " ", text).strip()


def _tokens(text: str) -> set[str]:
    return set(normalise(text).split())


def cited_names(ctx: EvalContext) -> list[str]:
    names: list[str] = []
    for c in ctx.report.citations:
        if c.kind == "doc_tag" and c.label:
            m = _TAG_TITLE.match(c.label)
            names.append(m.group(1).strip() if m else c.label)
        elif c.kind == "link" and c.label:
            names.append(c.label)
    names += [r.title for r in ctx.report.references if r.title]
    return list(dict.fromkeys(n for n in names if n.strip()))


MATCH_LEVELS = ("exact", "contains", "fuzzy", "in-text")
FILE_SUFFIX = re.compile(r"\.(pdf|docx?|md|txt|pptx?|xlsx?|csv|html?|json|rtf|odt)$", re.I)


def match_document(doc: RequiredDocument, cited: list[str], report_text: str) -> str | None:
    """How ``doc`` is cited (exact/contains/fuzzy/in-text), or None. Containment is the
    required name inside a cited name, on word boundaries; names under 4 characters only
    match exactly."""
    wanted = [n for n in (doc.title, doc.file_name) if n]
    if doc.file_name and FILE_SUFFIX.search(doc.file_name):
        wanted.append(FILE_SUFFIX.sub("", doc.file_name))
    wanted_n = [normalise(n) for n in wanted if normalise(n)]
    cited_n = [normalise(c) for c in cited if normalise(c)]
    if any(w == c for w in wanted_n for c in cited_n):
        return "exact"
    if any(len(w) >= 4 and f" {w} " in f" {c} " for w in wanted_n for c in cited_n):
        return "contains"
    for w in wanted_n:
        wt = set(w.split())
        for c in cited_n:
            if min(len(w), len(c)) < 4:
                continue
            overlap = len(wt & set(c.split())) / len(wt) if wt else 0
            if overlap >= 0.6 or difflib.SequenceMatcher(None, w, c).ratio() >= 0.75:
                return "fuzzy"
    text_n = f" {normalise(report_text)} "
    if any(len(w) >= 4 and f" {w} " in text_n for w in wanted_n):
        return "in-text"
    return None


def best_title(name: str, titles: list[str]) -> str | None:
    """The corpus title a cited name refers to: the best match level wins, then order."""
    doc = RequiredDocument(name)
    ranked = [(MATCH_LEVELS.index(level), i, t) for i, t in enumerate(titles)
              if (level := match_document(doc, [t], "")) is not None]
    return min(ranked)[2] if ranked else None


def citation_coverage(ctx: EvalContext) -> dict[str, Any]:
    docs = ctx.task.required_documents
    if not docs:
        return {"score": None, "reason": "task lists no required documents"}
    cited = cited_names(ctx)
    rows = [{"title": d.title, "kind": d.kind, "matched": match_document(d, cited, ctx.text)}
            for d in docs]
    hit = sum(1 for r in rows if r["matched"])
    return {"score": round(100.0 * hit / len(docs), 4), "required": len(docs), "cited": hit,
            "documents": rows}


def _insights(judge: Judge, ctx: EvalContext, insights: list[str] | None,
              report: Any) -> dict[str, Any]:
    if not insights:
        return {"score": None, "reason": "no gold insights"}
    rows = []
    for insight in insights:
        value, reason, key = judge_choice(judge, INSIGHT_SYSTEM, report,
                                          f"Fact: {insight}", [0, 0.5, 1])
        rows.append({"insight": insight, "score": value, "reason": reason, "ledger_key": key})
    full = sum(1 for r in rows if r["score"] == 1)
    return {"score": round(100.0 * full / len(rows), 4), "items": rows}


def fa_messages(source: str, passages: str, statement: str) -> list[dict[str, str]]:
    """One FA check: a statement against the passages of the source it cites."""
    return [{"role": "system", "content": FA_SYSTEM},
            {"role": "user", "content": f"Source: {source}\nPassages:\n{passages}\n\n"
                                        f"Statement: {statement}"}]


def doc_tag_pages(ctx: EvalContext) -> list[tuple[str, str, Any]]:
    """The report's document-tag citations resolved to corpus pages: (sentence, cited
    name, page or None) in report order. DeepEval passes them to the shared support
    question too, so a page's passages are chosen for the same statements."""
    tagged = [(s, c) for s in ctx.report.sentences
              for c in ctx.report.citations_in(s.start, s.end)
              if c.kind == "doc_tag" and c.label]
    if not tagged:
        return []
    by_title = ctx.urls_by_title()
    titles = list(by_title)
    out = []
    for s, c in tagged:
        m = _TAG_TITLE.match(c.label)
        name = m.group(1).strip() if m else c.label
        best = best_title(name, titles)
        out.append((ctx.text[s.start : s.end], name, ctx.page(by_title[best]) if best else None))
    return out


def factual_accuracy(judge: Judge, ctx: EvalContext, asking: Asking = DEFAULT_ASKING,
                     claims_rule: str = "cited-sentences") -> dict[str, Any]:
    """FA over (claim, sources) pairs; with ``support_question=shared`` each (statement,
    page) is the shared three-way question read leniently (its statements grouped per
    page, engine/support_question.py), else FA's own yes/no prompt."""
    tags = doc_tag_pages(ctx)
    tag_pages = {(text, name): page for text, name, page in tags}
    claims: list[dict[str, Any]] = []
    # (source header, capture) -> the page and its (claim, check) slots, asked together
    # so that the page is read once: one set of passages, one shared prompt prefix
    by_page: dict[tuple[str, str], tuple[Any, list[tuple[int, int]]]] = {}
    for s in ctx.report.sentences:
        text = ctx.text[s.start : s.end]
        cites = ctx.report.citations_in(s.start, s.end)
        sources: list[Any] = []
        for c in cites:
            if c.kind == "doc_tag" and c.label:
                m = _TAG_TITLE.match(c.label)
                name = m.group(1).strip() if m else c.label
                sources.append(("title", name, tag_pages[(text, name)]))
            for url in c.urls:
                sources.append(("url", url, ctx.page(url)))
        if not sources and (claims_rule == "cited-only" or
                            not any(ch.isdigit() for ch in text)):
            continue  # not a claim for FA: no source (and no figure, by the contract)
        checks: list[dict[str, Any]] = []
        for _kind, name, page in sources:
            if page is None or not page.valid:
                checks.append({"source": name, "supported": False, "reason": "source missing"})
                continue
            header = (page.title or page.url) if asking.shared else (page.title or name)
            slot = by_page.setdefault((header, page.capture_id or page.url), (page, []))
            slot[1].append((len(claims), len(checks)))
            checks.append({"source": name})
        claims.append({"claim": text[:300], "start": s.start, "end": s.end,
                       "text": text, "sources": checks})
    asker = sq.SupportAsker(judge, ctx, sq.page_statements(
        ctx, [(t, p) for t, _, p in tags if p is not None]), asking) \
        if asking.shared else None
    for (header, _), (page, slots) in sorted(by_page.items()):
        if asker is not None:
            for i, j in slots:
                got = asker.ask(page, claims[i]["text"])
                check = claims[i]["sources"][j]
                check.update(got.record(), supported=got.answer is not None and
                             sq.fa_supported(got.answer))
                if got.answer is None:
                    check["reason"] = f"judge error: {got.error}"
                else:
                    check["warc_record_id"] = page.text_record
            continue
        passages = "\n\n".join(ctx.page_passages(page, [claims[i]["text"] for i, _ in slots],
                                                  merge=asking.merge))
        for i, j in slots:
            check = claims[i]["sources"][j]
            messages = fa_messages(header, passages, asking.statement(claims[i]["text"]))
            try:
                ans = judge.ask(messages, FA_SCHEMA, max_tokens=DECISION_TOKENS)
            except ModelError as err:
                check.update(supported=False, reason=f"judge error: {err}",
                             ledger_key=judge.key(messages, FA_SCHEMA, DECISION_TOKENS))
                continue
            check.update(supported=bool(ans.obj["supported"]), ledger_key=ans.key,
                         warc_record_id=page.text_record)
    for claim in claims:
        del claim["text"]
        claim["supported"] = bool(claim["sources"]) and all(
            c["supported"] for c in claim["sources"])
    if not claims:
        return {"score": None, "reason": "no claims"}
    return {"score": round(100.0 * sum(c["supported"] for c in claims) / len(claims), 4),
            "claims": claims}


def evaluate_dr3(judge: Judge, ctx: EvalContext, max_chars: int = 12_000,
                 rules: dict[str, str] | None = None,
                 asking: Asking = DEFAULT_ASKING) -> dict[str, Any]:
    report = clip(ctx.text, max_chars)
    claims_rule = switch(rules, "fa_claims")
    out: dict[str, Any] = {"clipped_chars": report.cut_chars,
                           "rules": {**RULES, "fa_claims": claims_rule, **asking.rules()}}
    out["ir_uf"] = _insights(judge, ctx, ctx.task.insights_user_files, report)
    out["ir_sc"] = _insights(judge, ctx, ctx.task.insights_sandbox, report)
    out["cc"] = citation_coverage(ctx)
    out["fa"] = {}  # asked last: the report-level calls before it share the report prefix
    if ctx.task.checklist:
        checks = judge_checklist(judge, report, ctx.task.checklist, system=IF_SYSTEM,
                                 per_prompt=asking.per_prompt(IF_PER_PROMPT))
        # errored items leave the denominator, as in the reference (all errored: null)
        out["if"] = {"score": checklist_score(checks, "exclude"), "items": checks}
    else:
        out["if"] = {"score": None, "reason": "task has no checklist"}
    value, reason, key = judge_choice(judge, DEPTH_SYSTEM, report,
                                      f"Request: {ctx.task.query}\nScore the depth.",
                                      list(range(1, 11)))
    if reason:  # the judge gave no usable score: undefined, not the lowest [dq_judge_error]
        out["dq"] = {"score": None, "raw": None, "reason": reason, "ledger_key": key}
    else:
        out["dq"] = {"score": 10 * value, "raw": value, "reason": reason, "ledger_key": key}
    out["fa"] = factual_accuracy(judge, ctx, asking, claims_rule)
    dims = ("ir_uf", "ir_sc", "cc", "fa", "if", "dq")
    out["scores"] = {d: out[d]["score"] for d in dims}
    out["scores"]["avg"] = summarise("dr3", out["scores"], rules)
    out["null_columns"] = [d for d in dims if out["scores"][d] is None]
    return out
