"""LiveResearchBench DeepEval (PROTOCOLS.md §3): six dimensions, 0-100.

Presentation's citation items (3, 4, 5, 6, 10), the table syntax part of item 9 and the
"no tables or figures" case of item 8 are decided by the parser; the judge decides the
rest, and each item records which. Consistency and citation association map a count
through the shared table; coverage is a strict checklist; depth is two pairwise games
against the baseline; citation accuracy walks the E1/E2/E3 tree per cited URL.
The [our rule] switches (``switches.py``): ``checklist_item_error`` for presentation and
coverage items whose judge call failed; ``deepeval_average`` for the report's average
(Table 1's four columns by default). A report identical to its baseline plays no depth
game (null, as the reference skips the baseline system).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ambereval.engine import support_question as sq
from ambereval.engine.aggregation import summarise
from ambereval.engine.eval_context import EvalContext
from ambereval.engine.judging import (
    DECISION_TOKENS,
    Clipped,
    checklist_score,
    clip,
    count_to_score,
    judge_checklist,
    judge_list,
    pairwise_depth,
)
from ambereval.engine.judging_rules import DEFAULT_ASKING, Asking
from ambereval.engine.protocols.dr3 import doc_tag_pages
from ambereval.engine.protocols.switches import switch
from ambereval.engine.report import REF_HEADINGS, Report, clean_heading
from ambereval.errors import ModelError
from ambereval.models import Judge

PRESENTATION_ITEMS = {
    1: "The report has a clear, logical structure (an introduction, sections that build on "
       "each other, a conclusion).",
    2: "The report has no grammar or spelling errors.",
    3: "Every entry of the reference list is cited in the text.",
    4: "Every in-text citation has an entry in the reference list.",
    5: "There is exactly one References section, consistently ordered.",
    6: "One citation style is used throughout.",
    7: "Citations are placed at the end of the clause or sentence they support.",
    8: "Tables and figures are complete (no empty cells, placeholders or missing captions).",
    9: "Formatting is correct and consistent (Markdown headings, tables that render).",
    10: "Numbered citations have no gaps or duplicates.",
}
STYLE_FAMILY = {"numeric": "numbered", "citation_tag": "numbered", "dagger": "numbered",
                "footnote": "numbered", "link_number": "numbered", "link": "inline-link",
                "url": "bare-url", "doc_tag": "tag"}
CONSISTENCY_SYSTEM = (
    "You read a research report and list its internal contradictions: places where it "
    "states two incompatible facts, numbers, dates or names. Do not check facts against "
    "the world; only the report against itself. Each item names both statements briefly. "
    "Return an empty list if there are none."
)
ASSOCIATION_SYSTEM = (
    "You read a research report and list factual claims that have no citation, or whose "
    "citation clearly does not fit the claim. A citation at the end of a paragraph may "
    "cover the whole paragraph. Ignore opinions and common knowledge. Each item quotes the "
    "claim briefly. Return an empty list if every factual claim is properly cited."
)
RELEVANCE_SYSTEM = ("Decide whether a web page is on topic for a research request, from its "
                    "title and opening.")
SUPPORT_SYSTEM = ("Decide whether the page passages support the statement from a report. "
                  "Use only the passages.")
RELEVANCE_SCHEMA = {"type": "object", "properties": {"relevant": {"type": "boolean"}},
                    "required": ["relevant"], "additionalProperties": False}
SUPPORT_SCHEMA = {"type": "object", "properties": {"supported": {"type": "boolean"}},
                  "required": ["supported"], "additionalProperties": False}


def presentation_parser_checks(report: Report) -> dict[int, bool | None]:
    """The items the parser decides (None: left to the judge)."""
    kinds = {p.kind for p in report.problems}
    has_refs = bool(report.references)
    numbered = [c for c in report.citations if c.numbers]
    ref_heads = sum(1 for s in report.sections if REF_HEADINGS.match(clean_heading(s.heading)))
    if report.references_span and report.references:
        ref_heads += 1  # the reference section itself is not among the body sections
    numbers = [r.number for r in report.references]
    styles = {STYLE_FAMILY[c.kind] for c in report.citations if c.kind in STYLE_FAMILY}
    has_tables = any(b.kind == "table_cell" for b in report.blocks)
    has_figures = "![" in report.text
    return {
        3: "reference_never_cited" not in kinds,
        4: "citation_without_reference" not in kinds and "no_references" not in kinds,
        5: has_refs and ref_heads == 1 and numbers == sorted(numbers),
        6: len(styles) <= 1,
        8: True if not (has_tables or has_figures) else None,
        9: False if "broken_table" in kinds else None,
        10: ("numbering_gap" not in kinds and "duplicate_reference_number" not in kinds)
        if numbered else True,
    }


def presentation(judge: Judge, ctx: EvalContext, report: Clipped,
                 on_error: str = "null-dimension",
                 per_prompt: int | None = 1) -> dict[str, Any]:
    """The ten items, the parser's first; the judge's ``per_prompt`` a prompt (None: all
    in one, as the reference asks its ten questions)."""
    decided = presentation_parser_checks(ctx.report)
    items = []
    to_judge = []
    for number, text in PRESENTATION_ITEMS.items():
        verdict = decided.get(number)
        if verdict is None:
            to_judge.append((number, text))
        else:
            items.append({"item": number, "text": text, "pass": verdict, "method": "parser"})
    from ambereval.engine.tasks import ChecklistItem

    judged = judge_checklist(judge, report, [ChecklistItem(str(n), t) for n, t in to_judge],
                             system=PRESENTATION_SYSTEM, per_prompt=per_prompt)
    for (number, text), result in zip(to_judge, judged, strict=True):
        items.append({"item": number, "text": text, "pass": result["pass"], "method": "judge",
                      "ledger_key": result["ledger_key"],
                      **{k: result[k] for k in ("asked", "error") if k in result}})
    items.sort(key=lambda i: i["item"])
    return {"score": checklist_score(items, on_error, total=len(PRESENTATION_ITEMS)),
            "items": items}


PRESENTATION_SYSTEM = (
    "You check the presentation of a research report against one criterion at a time. "
    "Answer pass only if the whole report meets the criterion."
)


def support_messages(url: str, passages: str, statement: str) -> list[dict[str, str]]:
    """One E3 check: a statement against passages of the page it cites."""
    return [{"role": "system", "content": SUPPORT_SYSTEM},
            {"role": "user", "content": f"Passages from {url}:\n{passages}\n\n"
                                        f"Statement: {statement}"}]


def citation_accuracy(judge: Judge, ctx: EvalContext,
                      asking: Asking = DEFAULT_ASKING) -> dict[str, Any]:
    """E1 invalid URL, E2 irrelevant page, E3 unsupported (claim, citation) pair; with
    ``support_question=shared`` E3 is the shared three-way question read strictly (its
    statements grouped per page, engine/support_question.py)."""
    asker = sq.SupportAsker(judge, ctx, sq.page_statements(
        ctx, [(t, p) for t, _, p in doc_tag_pages(ctx) if p is not None]), asking) \
        if asking.shared else None
    by_url: dict[str, list[str]] = {}
    sentences = ctx.report.sentences
    for s in sentences:
        claim = ctx.text[s.start : s.end]
        for c in ctx.report.citations_in(s.start, s.end):
            for url in c.urls:
                by_url.setdefault(url, [])
                if claim not in by_url[url]:
                    by_url[url].append(claim)
    urls = []
    e1 = e2 = e3 = supported = pairs = 0
    for url in sorted(by_url):
        claims = by_url[url]
        page = ctx.page(url)
        entry: dict[str, Any] = {"url": url, "claims": len(claims),
                                 "capture_id": page.capture_id or None}
        pairs += len(claims)
        if not page.valid:
            e1 += 1
            entry.update(error="E1", reason=page.reason)
            urls.append(entry)
            continue
        head = asking.page_opening(page.text)
        messages = [{"role": "system", "content": RELEVANCE_SYSTEM},
                    {"role": "user", "content": f"Request: {ctx.task.query}\n\nPage title: "
                     f"{page.title or '-'}\nOpening:\n{head}"}]
        rel, entry["relevance_key"] = _ask(judge, messages, RELEVANCE_SCHEMA, DECISION_TOKENS)
        if rel is None or not rel["relevant"]:
            e2 += 1
            entry.update(error="E2", reason="irrelevant")
            urls.append(entry)
            continue
        verdicts = []
        # the page is read once: one set of passages for all its claims, so their prompts
        # share the page as a prefix (the in-process judge evaluates it once)
        passages = "" if asker else "\n\n".join(ctx.page_passages(page, claims,
                                                                    merge=asking.merge))
        for claim in claims:
            if asker is not None:
                got = asker.ask(page, claim)
                ok = got.answer is not None and sq.e3_supported(got.answer)
                asked = got.record()
            else:
                ans, key = _ask(judge, support_messages(page.url, passages,
                                                        asking.statement(claim)),
                                SUPPORT_SCHEMA, DECISION_TOKENS)
                ok = bool(ans and ans["supported"])
                asked = {"ledger_key": key}
            supported += ok
            e3 += not ok
            verdicts.append({"claim": claim[:300], "supported": ok, **asked,
                             "warc_record_id": page.text_record})
        entry["pairs"] = verdicts
        urls.append(entry)
    return {"score": round(100.0 * supported / pairs, 4) if pairs else None,
            # the paper's Table 2 reports these counts (mean per report), not the share
            "e1_invalid_urls": e1, "e2_irrelevant_urls": e2, "e3_unsupported_pairs": e3,
            "pairs": pairs, "supported_pairs": supported, "urls": urls}


def _counted(found: list[str] | None, key: str) -> dict[str, Any]:
    if found is None:
        return {"score": None, "reason": "judge error", "ledger_key": key}
    return {"score": count_to_score(len(found)), "count": len(found), "items": found,
            "ledger_key": key}


def _ask(judge: Judge, messages: list[dict[str, str]], schema: dict[str, Any],
         max_tokens: int) -> tuple[dict[str, Any] | None, str]:
    try:
        answer = judge.ask(messages, schema, max_tokens=max_tokens)
    except ModelError:
        return None, judge.key(messages, schema, max_tokens)
    return answer.obj, answer.key


def evaluate_deepeval(judge: Judge, ctx: EvalContext, max_chars: int = 12_000,
                      rules: dict[str, str] | None = None,
                      asking: Asking = DEFAULT_ASKING) -> dict[str, Any]:
    report = clip(ctx.text, max_chars)
    on_error = switch(rules, "checklist_item_error")
    out: dict[str, Any] = {"clipped_chars": report.cut_chars}
    out["presentation"] = presentation(judge, ctx, report, on_error,
                                       asking.per_prompt(None))
    found, key = judge_list(judge, CONSISTENCY_SYSTEM, report,
                            "List the report's internal contradictions.")
    out["consistency"] = _counted(found, key)
    if ctx.task.checklist:
        # the reference grades a whole checklist in one prompt
        checks = judge_checklist(judge, report, ctx.task.checklist,
                                 per_prompt=asking.per_prompt(None))
        out["coverage"] = {"score": checklist_score(checks, on_error), "items": checks}
    else:
        out["coverage"] = {"score": None, "reason": "task has no checklist"}
    out["depth"] = {}  # asked after citation association: the report stays the prefix
    found, key = judge_list(judge, ASSOCIATION_SYSTEM, report,
                            "List the factual claims with a missing or mismatched citation.")
    association = _counted(found, key)
    baseline = Path(ctx.task.baseline_report) if ctx.task.baseline_report else None
    base_text = baseline.read_text(encoding="utf-8") \
        if baseline is not None and baseline.is_file() else None
    if base_text is not None and base_text.strip() == ctx.text.strip():
        out["depth"] = {"score": None, "reason": "the report is the baseline report"}
    elif base_text is not None:
        depth = pairwise_depth(judge, ctx.task.query, ctx.text, base_text)
        out["depth"] = {"score": depth["win_rate"], **depth}
    else:
        why = "task has no baseline report" if baseline is None else \
            f"baseline report not found: {baseline}"
        out["depth"] = {"score": None, "reason": why}
    out["citation_association"] = association
    out["citation_accuracy"] = citation_accuracy(judge, ctx, asking)
    dims = ("presentation", "consistency", "coverage", "depth", "citation_association",
            "citation_accuracy")
    out["scores"] = {d: out[d]["score"] for d in dims}
    out["scores"]["average"] = summarise("deepeval", out["scores"], rules)
    accuracy = out["citation_accuracy"]
    for count in ("e1_invalid_urls", "e2_irrelevant_urls", "e3_unsupported_pairs"):
        out["scores"][count] = accuracy[count]
    return out
