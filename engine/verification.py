"""Offline verification of a bundle's claims, with provenance for every verdict.

For each claim and each of its questions, candidate pages are the pages it cites, then
the pages its searches found (optionally every page in the bundle). Passages come from
a FAISS index over the pages' chunks, built from a source that streams their text back
from the bundle (engine/evidence.py ``BundleChunks``): no more than one page's text is
held at a time, whichever pages are searched. Pages are processed one at a time: the
instructions and the page's passages form a shared prompt prefix, and each (claim,
question) on that page is a short suffix, so llama.cpp reuses the prefix's KV cache.

Rules (PROTOCOLS.md §1 and the named options below):
- per (question, page) the judge answers true / false / none, then the number of the
  passage it rests on (nothing else is generated: ``quote`` stays empty);
- per question [our rule ``page_rule="cited-first"``]: if any cited page answers true or
  false without disagreement among cited pages, that answer stands ("prior reference
  verification"); otherwise true when some page says true and none false, false when
  some page says false and none true, none otherwise (conflicts included);
- per claim: every question true -> Correct; any false -> Incorrect; else Unknown
  (reason ``no_evidence`` when no valid page was available at all);
- cited-reference consistency per (claim, cited page): invalid page -> unknown without
  asking the judge; else support if the page's answers are all true, conflict if any is
  false, unknown otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ambereval.engine.evidence import (
    BundleChunks,
    ClaimEvidence,
    Page,
    load_claims,
    load_page,
)
from ambereval.engine.judge_card import card_entry
from ambereval.engine.progress_count import ProgressCount
from ambereval.engine.verify_question import (
    VERIFY_PROMPT,
    decision_for,
    page_prefix,
    question_messages,
    read_answer,
    recorded_decision,
)
from ambereval.errors import ModelError
from ambereval.models import ChunkParams, Embedder, Hit, Judge, Retriever, RetrieverSpec
from ambereval.models.canonical import content_key
from ambereval.models.chunk_source import ChunkSource
from ambereval.models.retriever import DEFAULT_RETRIEVER
from ambereval.snapshots import Bundle

Progress = Callable[[str, int, int], None]


class ClaimIndex(Protocol):
    """What verification searches: a :class:`~ambereval.models.Retriever`, or an index an
    evaluation records (``EvalContext.claim_index``) or a replay answers from its record."""

    def identity(self) -> dict[str, Any]: ...
    def search(self, query: str, k: int = 5, captures: set[str] | None = None
               ) -> list[Hit]: ...
    def search_many(self, queries: list[str], k: int = 5, captures: set[str] | None = None
                    ) -> list[list[Hit]]: ...


#: builds the claim index from (chunk source, chunking, retriever spec) instead of
#: verify_claims; the source's chunks carry no text (models/chunk_source.py)
IndexFactory = Callable[[ChunkSource, ChunkParams, RetrieverSpec], ClaimIndex]

@dataclass(frozen=True)
class VerifyOptions:
    """Every choice that changes a verdict; recorded in the summary."""

    passages_per_question: int = 3
    max_passages_per_page: int = 6
    whole_bundle: bool = False
    whole_bundle_pages: int = 3
    page_rule: str = "cited-first"
    chunk_tokens: int = 160
    chunk_overlap: int = 32
    #: dense, bm25 or hybrid (dense + BM25 by reciprocal rank fusion), models/retriever.py
    retriever: str = DEFAULT_RETRIEVER
    max_tokens: int = 32  # {"answer": "none", "passage": 3}: ~16 tokens for SmolLM2
    #: how the judge's answer is decided: generated (answer first, then the passage
    #: number), or from the label log-probabilities plus the judge's calibration offsets
    #: (engine/calibration.py); ``auto`` uses log-probabilities only for a calibrated
    #: in-process judge (see ``decision_for``)
    decision: str = "auto"

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Judgment:
    claim_id: str
    question: str
    page: Page
    cited: bool
    answer: str
    evidence_quote: str
    passages: list[Hit]
    ledger_key: str
    prompt_tokens: int


@dataclass
class ClaimVerdict:
    id: str
    text: str
    verdict: str
    reason: str
    questions: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    consistency: list[dict[str, Any]] = field(default_factory=list)
    span: list[int] | None = None
    judge_calls: int = 0
    prompt_tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _question_verdict(judgments: list[Judgment], rule: str) -> str:
    def settle(items: list[Judgment]) -> str | None:
        answers = {j.answer for j in items} - {"none"}
        return answers.pop() if len(answers) == 1 else None

    if rule == "cited-first":
        cited = settle([j for j in judgments if j.cited])
        if cited is not None:
            return cited
    elif rule != "any-page":
        raise ValueError(f"unknown page_rule {rule!r} (cited-first or any-page)")
    return settle(judgments) or "none"


def _provenance(j: Judgment) -> dict[str, Any]:
    return {
        "url": j.page.url, "capture_id": j.page.capture_id, "question": j.question,
        "answer": j.answer, "quote": j.evidence_quote, "cited": j.cited,
        "warc_file": j.page.warc_file, "warc_record_id": j.page.text_record,
        "response_record_id": j.page.response_record, "ledger_key": j.ledger_key,
        "passages": [{"chunk_id": h.chunk.chunk_id, "start": h.chunk.start,
                      "end": h.chunk.end, "score": round(h.score, 6)} for h in j.passages],
    }


Ask = tuple[ClaimEvidence, str, Page, bool, list[Hit], list[Hit]]
Call = tuple[list[dict[str, str]], dict[str, Any], int]


def _claim_index(source: BundleChunks, params: ChunkParams, options: VerifyOptions,
                 embedder: Embedder, cache_dir: str | Path | None,
                 index_for: IndexFactory | None, progress: Progress) -> ClaimIndex:
    spec = RetrieverSpec.named(options.retriever)
    if index_for is not None:
        return index_for(source, params, spec)

    def embedded(done: int, total: int) -> None:
        progress("index", done, total)

    if cache_dir is not None:
        return Retriever.load_or_build(Path(cache_dir), source, embedder, params.as_dict(),
                                       spec, embedded)[0]
    return Retriever.build(source, embedder, params.as_dict(), spec, embedded)


def _plan(claims: list[ClaimEvidence], pages: dict[str, Page], valid: dict[str, Page],
          index: ClaimIndex, options: VerifyOptions
          ) -> dict[str, list[tuple[ClaimEvidence, Page, bool]]]:
    """capture id -> the (claim, page, cited) entries to ask about that page."""
    plan: dict[str, list[tuple[ClaimEvidence, Page, bool]]] = {}
    for claim in claims:
        cited_ids = {cid for _, cid in claim.cited if cid}
        seen: set[str] = set()
        for url, cid in claim.cited + [(u, c) for u, c, _, _ in claim.found]:
            page = pages.get(cid or f"url:{url}")
            if page is None or not page.valid or page.capture_id in seen:
                continue
            seen.add(page.capture_id)
            plan.setdefault(page.capture_id, []).append((claim, page, cid in cited_ids))
        if options.whole_bundle:
            for hit in index.search(claim.text, k=options.whole_bundle_pages * 4):
                cid = hit.chunk.capture_id
                if cid in seen or len(seen) >= len(claim.cited) + len(claim.found) + \
                        options.whole_bundle_pages:
                    continue
                seen.add(cid)
                plan.setdefault(cid, []).append((claim, valid[cid], False))
    return plan


def _prompts(plan: dict[str, list[tuple[ClaimEvidence, Page, bool]]], source: BundleChunks,
             index: ClaimIndex, options: VerifyOptions, schema: dict[str, Any]
             ) -> tuple[list[Ask], list[Call]]:
    """Every (page, claim, question) prompt, built in a fixed order to be asked together:
    a served judge takes up to its concurrency at once, the in-process judge answers them
    one by one in this same order (consecutive questions on one page share the page's
    prompt prefix). One page's text is in memory at a time."""
    asks: list[Ask] = []
    calls: list[Call] = []
    for capture_id in sorted(plan):
        entries = plan[capture_id]
        page = entries[0][1]
        by_id = {c.chunk_id: c for c in source.page(capture_id).chunks}
        questions = [(c, q, cited) for c, _, cited in entries for q in c.questions]
        hits_per_q = [[Hit(by_id[h.chunk.chunk_id], h.score, h.rank) for h in hits]
                      for hits in index.search_many([q for _, q, _ in questions],
                                                    options.passages_per_question,
                                                    captures={capture_id})]
        best: dict[str, Hit] = {}
        for hits in hits_per_q:
            for h in hits:
                if h.chunk.chunk_id not in best or best[h.chunk.chunk_id].score < h.score:
                    best[h.chunk.chunk_id] = h
        chosen = sorted(best.values(), key=lambda h: (-h.score, h.chunk.chunk_id))
        chosen = sorted(chosen[: options.max_passages_per_page], key=lambda h: h.chunk.start)
        prefix = page_prefix([h.chunk.text for h in chosen], page.title, page.url)
        for (claim, question, cited), hits in zip(questions, hits_per_q, strict=True):
            asks.append((claim, question, page, cited, hits, chosen))
            calls.append((question_messages(prefix, question, claim.text,
                                            claim.extra.get("fact")), schema,
                          options.max_tokens))
    return asks, calls


def verify_claims(bundle_path: str | Path, judge: Judge, embedder: Embedder,
                  options: VerifyOptions | None = None, cache_dir: str | Path | None = None,
                  progress: Progress | None = None,
                  index_for: IndexFactory | None = None,
                  decided: dict[str, Any] | None = None) -> dict[str, Any]:
    """Verify every claim in the bundle; returns ``{"claims": [...], "summary": {...}}``.

    ``index_for``: how the passage index over the claims' pages is made (default: built
    here, cached in ``cache_dir``); an evaluation passes one that records every search,
    a replay one that answers from that record without the embedder. ``decided``: a
    summary's recorded ``decision`` (``{"method", "bias"}``) to use instead of choosing
    one now (a replay decides as the run did, whatever the calibration table says today)."""
    options = options or VerifyOptions()
    method, schema, bias = recorded_decision(decided) if decided else \
        decision_for(judge, options.decision)
    progress = progress or (lambda phase, done, total: None)
    params = ChunkParams(options.chunk_tokens, options.chunk_overlap)
    with Bundle.open(bundle_path) as bundle:
        claims = load_claims(bundle)
        # Every candidate page is read once here and kept without its text (its chunks
        # go into `source`); the index streams the texts back from the bundle, and a
        # page's text is read again only when its questions are asked.
        source = BundleChunks(bundle, params)
        pages: dict[str, Page] = {}
        invalid: dict[str, Page] = {}

        def page_for(url: str, capture_id: str | None) -> Page:
            key = capture_id or f"url:{url}"
            if key not in pages:
                page = load_page(bundle, capture_id, url, params)
                pages[key] = source.add(page) if page.valid else page
                if not page.valid:
                    invalid[key] = page
            return pages[key]

        for claim in claims:
            for url, cid in claim.cited:
                page_for(url, cid)
            for url, cid, _, _ in claim.found:
                page_for(url, cid)
        if options.whole_bundle:
            for row in bundle.index.rows("SELECT id, url FROM captures WHERE kind = 'page' "
                                         "AND state = 'ok' ORDER BY id"):
                page_for(row["url"], row["id"])
        bundle_digest = bundle.index.meta("created")
        valid = {k: p for k, p in pages.items() if p.valid}
        index = _claim_index(source, params, options, embedder, cache_dir, index_for,
                             progress)
        plan = _plan(claims, pages, valid, index, options)
        asks, calls = _prompts(plan, source, index, options, schema)

    tick = ProgressCount(progress, "verify", len(calls))

    answers = judge.map(calls, on_done=tick)
    judgments: dict[str, list[Judgment]] = {}
    errors: list[dict[str, str]] = []
    for (claim, question, page, cited, hits, chosen), call, answer in zip(
            asks, calls, answers, strict=True):
        if isinstance(answer, ModelError):  # one unusable answer must not sink the run
            errors.append({"claim": claim.id, "capture_id": page.capture_id,
                           "error": str(answer)})
            judgments.setdefault(claim.id, []).append(Judgment(
                claim.id, question, page, cited, "none", "", hits,
                judge.key(*call), 0))
            continue
        label, n = read_answer(answer.obj, bias)
        used = [chosen[n - 1]] if n is not None and 1 <= n <= len(chosen) else hits
        judgments.setdefault(claim.id, []).append(Judgment(
            claim.id, question, page, cited, label, "", used, answer.key,
            answer.usage.get("prompt_tokens", 0)))

    verdicts = [_claim_verdict(c, judgments.get(c.id, []), pages, options) for c in claims]
    counts = {v: sum(1 for x in verdicts if x.verdict == v)
              for v in ("Correct", "Incorrect", "Unknown")}
    pairs = [p for v in verdicts for p in v.consistency]
    summary = {
        "bundle": str(bundle_path),
        "bundle_created": bundle_digest,
        "claims": len(verdicts),
        **{k.lower(): n for k, n in counts.items()},
        "no_evidence": sum(1 for v in verdicts if v.reason == "no_evidence"),
        "pages_valid": len(valid), "pages_invalid": len(invalid),
        "chunks": len(source.chunks),
        "judge_calls": sum(v.judge_calls for v in verdicts),
        "judge_errors": errors,
        "prompt_tokens": sum(v.prompt_tokens for v in verdicts),
        "consistency": {k: sum(1 for p in pairs if p["label"] == k)
                        for k in ("support", "conflict", "unknown")},
        "judge": judge.backend.identity()["model"],
        "judge_card": card_entry(judge),  # its measured quality; warns when poor or unknown
        "embedder": embedder.identity(),
        "retriever": index.identity(),
        "options": options.as_dict(),
        "decision": {"method": method, "bias": bias},
        "prompt_sha256": content_key([VERIFY_PROMPT, schema]),
    }
    return {"claims": [v.as_dict() for v in verdicts], "summary": summary}


def _claim_verdict(claim: ClaimEvidence, judged: list[Judgment], pages: dict[str, Page],
                   options: VerifyOptions) -> ClaimVerdict:
    span = None
    if "start" in claim.extra and "end" in claim.extra:
        span = [claim.extra["start"], claim.extra["end"]]
    result = ClaimVerdict(claim.id, claim.text, "Unknown", "no_evidence", span=span,
                          judge_calls=len(judged),
                          prompt_tokens=sum(j.prompt_tokens for j in judged))
    consistency = []
    for url, cid in claim.cited:
        page = pages.get(cid or f"url:{url}")
        if page is None or not page.valid:
            consistency.append({"url": url, "capture_id": cid, "label": "unknown",
                                "reason": page.reason if page else "not_captured"})
            continue
        answers = {j.answer for j in judged if j.page.capture_id == page.capture_id}
        label = "conflict" if "false" in answers else \
            "support" if answers == {"true"} else "unknown"
        consistency.append({"url": url, "capture_id": cid, "label": label,
                            "reason": "judged", "warc_record_id": page.text_record})
    result.consistency = consistency
    if not judged:
        return result
    per_question = []
    for question in claim.questions:
        mine = [j for j in judged if j.question == question]
        per_question.append((question, _question_verdict(mine, options.page_rule), mine))
    result.questions = [{"question": q, "answer": a} for q, a, _ in per_question]
    answers = [a for _, a, _ in per_question]
    if answers and all(a == "true" for a in answers):
        result.verdict, result.reason = "Correct", "supported"
    elif "false" in answers:
        result.verdict, result.reason = "Incorrect", "contradicted"
    else:
        result.verdict, result.reason = "Unknown", "not_settled"
    decisive = [j for _, a, mine in per_question for j in mine if j.answer == a != "none"]
    result.evidence = [_provenance(j) for j in (decisive or judged)]
    return result


def deciding_evidence(claim: dict[str, Any]) -> dict[str, Any] | None:
    """The evidence entry a reader should see first for a claim verdict: one that answered
    as the verdict did (``true`` for Correct, ``false`` for Incorrect), a cited page
    before a found one; for Unknown the first cited page. ``None`` without evidence."""
    evidence = claim.get("evidence") or []
    wanted = {"Correct": "true", "Incorrect": "false"}.get(claim.get("verdict", ""))
    ranked = sorted(evidence, key=lambda e: (e.get("answer") != wanted, not e.get("cited")))
    return ranked[0] if ranked else None


def write_results(result: dict[str, Any], out: str | Path) -> Path:
    from ambereval.engine.runs.run_dir import write_atomic  # complete files or none

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "verdicts.jsonl", "".join(
        json.dumps(c, sort_keys=True, ensure_ascii=False) + "\n" for c in result["claims"]))
    write_atomic(out / "summary.json", json.dumps(result["summary"], indent=2, sort_keys=True)
                 + "\n")
    return out
