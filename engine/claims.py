"""Claim extraction (PROTOCOLS.md §1): objective, atomic, context-completed claims with
their verbatim span, the citations attached to them, verification questions and search
strings. The judge does the reading; everything around it is deterministic.

Per section, sentences that could carry a fact are numbered and sent in batches; the
judge returns, per claim, the sentence number, the verbatim ``fact`` and the rewritten
``claim``, a yes/no ``question`` (qualifiers and polarity kept) and a short ``search``
string. A ``fact`` not found verbatim falls back to the whole sentence span
(``span_exact: false``). Citations come from the parse: the sentence's own, else its
paragraph's; only when a paragraph cites several sources and the sentence none is the
judge asked which of them the claim relies on. Exact duplicates (case- and
punctuation-insensitive) across sections are merged, keeping the first.

Extraction is never silently empty: when the judge makes no usable claim of a batch of a
section's sentences (an empty list, or an answer that is not schema-valid) and that batch
has citing or numeric sentences, the batch falls back to the sentence extractor. Every
claim records the extractor that made it (``extractor``: ``judge`` or ``sentences``, and
``extractor_note`` saying why a fallback happened); :func:`extract_report_claims` also
counts what the sentence extractor alone would have made, so a caller can warn when the
judge made fewer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ambereval.engine.progress_count import ProgressCount
from ambereval.engine.report import Block, Report, Sentence
from ambereval.errors import ExtractionError, InputError, ModelError
from ambereval.models import Judge

BATCH_SENTENCES = 8
MIN_WORDS = 4
_WORDS = re.compile(r"\w+", re.U)

EXTRACT_PROMPT = (
    "You extract checkable facts from a research report. From the numbered sentences, list "
    "every objective, specific fact that a web search could confirm or refute: numbers, "
    "dates, names, places, events, prices, rankings. Split compound sentences into atomic "
    "facts (one table cell or list item is one fact). Rewrite each fact as a standalone "
    "claim: replace pronouns and add the subject, time and place the context gives. Leave "
    "out opinions, advice, predictions, hypotheticals, common knowledge, causal analysis, "
    "vague statements, and statements about the report or its sources. For each claim also "
    "write a yes/no question that keeps every qualifier and the claim's polarity, and a "
    "short web search query. Return an empty list when nothing qualifies."
)
EXTRACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "claims": {
            "type": "array",
            "maxItems": 12,
            "items": {
                "type": "object",
                "properties": {
                    "sentence": {"type": "integer"},
                    "fact": {"type": "string", "maxLength": 300},
                    "claim": {"type": "string", "maxLength": 300},
                    "question": {"type": "string", "maxLength": 300},
                    "search": {"type": "string", "maxLength": 120},
                },
                "required": ["sentence", "fact", "claim", "question", "search"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["claims"],
    "additionalProperties": False,
}
MATCH_PROMPT = (
    "A paragraph of a report cites several sources. Which of the listed sources does the "
    "given claim rely on? Answer with their numbers; an empty list if you cannot tell."
)


@dataclass
class ExtractedClaim:
    """One claim, frozen into the bundle and evaluated later."""

    id: str
    text: str
    fact: str
    start: int
    end: int
    span_exact: bool
    section: str
    section_path: list[str]
    sentence: list[int]
    citations: list[int]
    urls: list[str]
    citation_source: str  # sentence | paragraph | judge | none
    questions: list[str]
    searches: list[str]
    question_id: str | None = None
    ledger_keys: list[str] = field(default_factory=list)
    extractor: str = "judge"  # judge | sentences: which extractor made this claim
    extractor_note: str | None = None  # why the sentence extractor stood in for the judge

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


Progress = Callable[[str, int, int], None]


def _normal(text: str) -> str:
    return " ".join(_WORDS.findall(text.casefold()))


def _substantial(text: str, words: int = 3) -> bool:
    """At least ``words`` words (or, for unspaced scripts, 6 characters)."""
    if not text.isascii():
        return len(text.strip()) >= 6
    return len(_WORDS.findall(text)) >= words


def _candidate(report: Report, sentence: Sentence) -> bool:
    text = report.text[sentence.start : sentence.end]
    words = _WORDS.findall(text)
    if len(words) < MIN_WORDS and not any(ch.isdigit() for ch in text):
        return len(text) >= 8 and not text.isascii()  # CJK sentences have few \w runs
    return not text.rstrip().endswith("?")


def _attach(report: Report, sentence: Sentence, block: Block,
            own: list[Any] | None = None) -> tuple[list[int], list[str], str]:
    if own is None:
        own = report.citations_in(sentence.start, sentence.end)
    if own:
        source, cites = "sentence", own
    else:
        cites = report.citations_in(block.start, block.end)
        source = "paragraph" if cites else "none"
    numbers = sorted({n for c in cites for n in c.numbers})
    urls = list(dict.fromkeys(u for c in cites for u in c.urls))
    return numbers, urls, source


def extract_claims(report: Report, judge: Judge, progress: Progress | None = None,
                   max_tokens: int = 700, fallback: bool = True,
                   outcomes: list[dict[str, Any]] | None = None) -> list[ExtractedClaim]:
    """Extract claims section by section; ids are ``c1``, ``c2``, … in report order.

    With ``fallback`` (the default), a batch the judge makes no usable claim of falls
    back to :func:`sentence_claims` for its sentences. ``outcomes``, when given, receives
    one entry per batch: ``{"section", "sentences", "judge_claims", "fallback", "error"}``.
    """
    progress = progress or (lambda phase, done, total: None)
    by_section: dict[str, list[int]] = {}
    for index, sentence in enumerate(report.sentences):
        if _candidate(report, sentence):
            block = report.blocks[sentence.block]
            by_section.setdefault(block.section, []).append(index)
    batches = [(section, ids[i : i + BATCH_SENTENCES]) for section, ids in by_section.items()
               for i in range(0, len(ids), BATCH_SENTENCES)]
    sections = {s.id: s for s in report.sections}
    claims: list[ExtractedClaim] = []
    seen: set[str] = set()
    calls = []
    for section_id, ids in batches:
        section = sections.get(section_id)
        title = " > ".join(section.path) if section else "(untitled)"
        listing = "\n".join(f"{n}. {report.text[report.sentences[i].start:report.sentences[i].end]}"
                            for n, i in enumerate(ids, start=1))
        messages = [{"role": "system", "content": EXTRACT_PROMPT},
                    {"role": "user", "content": f"Section: {title}\n\nSentences:\n{listing}"}]
        calls.append((messages, EXTRACT_SCHEMA, max_tokens))
    tick = ProgressCount(progress, "extract", len(batches))  # sections finish together

    # asked together (up to the judge's concurrency), read back in report order
    answers = judge.map(calls, on_done=tick)
    for (section_id, ids), answer in zip(batches, answers, strict=True):
        error = None
        if isinstance(answer, ModelError):  # unusable answer: not schema-valid, too long
            made, error = [], str(answer)
        elif isinstance(answer, Exception):
            raise answer
        else:
            made = _judge_claims(report, ids, answer.obj["claims"], answer.key, sections)
        note = None
        if not made and fallback:
            note = f"judge answer unusable: {error}" if error else "judge returned no claim"
            made = [c for c in (_sentence_claim(report, report.sentences[i], sections)
                                for i in ids) if c is not None]
            for claim in made:
                claim.extractor, claim.extractor_note = "sentences", note
        if outcomes is not None:
            outcomes.append({"section": section_id, "sentences": len(ids),
                             "judge_claims": 0 if note else len(made),
                             "fallback": len(made) if note else 0, "error": error})
        for claim in made:
            key = _normal(claim.text)
            if not key or key in seen:
                continue
            seen.add(key)
            claim.id = f"c{len(claims) + 1}"
            claims.append(claim)
    _disambiguate(report, claims, judge)
    return claims


def _judge_claims(report: Report, ids: list[int], items: list[dict[str, Any]], key: str,
                  sections: dict[str, Any]) -> list[ExtractedClaim]:
    """The usable claims of one judge answer (before de-duplication across the report)."""
    out: list[ExtractedClaim] = []
    for item in items:
        n = item["sentence"]
        text = item["claim"].strip()
        if not (1 <= n <= len(ids)) or not _substantial(text):
            continue  # degenerate output of a small judge: not a claim
        sentence = report.sentences[ids[n - 1]]
        block = report.blocks[sentence.block]
        section = sections.get(block.section)
        fact = item["fact"].strip()
        found = report.text.find(fact, sentence.start, sentence.end) if fact else -1
        start, end = (found, found + len(fact)) if found >= 0 else \
            (sentence.start, sentence.end)
        numbers, urls, source = _attach(report, sentence, block)
        question = item["question"].strip()
        if not _substantial(question):
            question = f"Is it true that {text.rstrip('.')}?"
        search = item["search"].strip()
        if not _substantial(search, 2):
            search = text[:120]
        out.append(ExtractedClaim(
            id="", text=text, fact=report.text[start:end], start=start,
            end=end, span_exact=found >= 0, section=block.section,
            section_path=section.path if section else [],
            sentence=[sentence.start, sentence.end], citations=numbers, urls=urls,
            citation_source=source, questions=[question], searches=[search],
            ledger_keys=[key]))
    return out


def _strip_marks(report: Report, sentence: Sentence, own: list[Any]) -> str:
    """The sentence without its citation marks (links keep their text), whitespace
    normalised. Linear in the sentence, however many marks it has."""
    pieces, pos = [], sentence.start
    for c in own:  # sorted by start, never overlapping
        if c.kind != "link":
            pieces.append(report.text[pos : c.start])
            pos = c.end
    pieces.append(report.text[pos : sentence.end])
    text = " ".join("".join(pieces).split())  # = re.sub(r"\s+", " ", ...).strip()
    for mark in ".,;:。":  # no space before punctuation (spaces are single by now)
        text = text.replace(" " + mark, mark)
    return text


def _sentence_claim(report: Report, sentence: Sentence,
                    sections: dict[str, Any]) -> ExtractedClaim | None:
    """The sentence extractor's claim for one sentence (no id yet), or None when the
    sentence neither cites a source nor states a number, or is too short."""
    if not _candidate(report, sentence):
        return None
    block = report.blocks[sentence.block]
    own = report.citations_in(sentence.start, sentence.end)
    raw = report.text[sentence.start : sentence.end]
    if not own and not any(ch.isdigit() for ch in raw):
        return None
    text = _strip_marks(report, sentence, own)
    if not _substantial(text):
        return None
    numbers, urls, source = _attach(report, sentence, block, own)
    section = sections.get(block.section)
    return ExtractedClaim(
        id="", text=text, fact=raw, start=sentence.start,
        end=sentence.end, span_exact=True, section=block.section,
        section_path=section.path if section else [],
        sentence=[sentence.start, sentence.end], citations=numbers, urls=urls,
        citation_source=source, questions=[f"Is it true that {text.rstrip('.。')}?"],
        searches=[text[:120]], extractor="sentences")


def sentence_claims(report: Report) -> list[ExtractedClaim]:
    """The judge-free extractor: every candidate sentence that cites a source or states a
    number becomes one claim (citation marks removed). Coarser than the protocol's atomic
    claims, but deterministic and usable with judges too small to extract well."""
    claims: list[ExtractedClaim] = []
    seen: set[str] = set()
    sections = {s.id: s for s in report.sections}
    for sentence in report.sentences:
        claim = _sentence_claim(report, sentence, sections)
        if claim is None:
            continue
        key = _normal(claim.text)
        if key in seen:
            continue
        seen.add(key)
        claim.id = f"c{len(claims) + 1}"
        claims.append(claim)
    return claims


def extract_report_claims(report: Report, judge: Judge, extractor: str = "judge",
                          progress: Progress | None = None,
                          ) -> tuple[list[ExtractedClaim], dict[str, Any]]:
    """Claims by the chosen extractor, and an account of how they were made::

        {"extractor", "by_extractor": {"judge": n, "sentences": m}, "sentence_baseline",
         "batches", "fallback_batches", "judge_errors": [...], "warning": str | None}

    ``sentence_baseline`` is what the sentence extractor alone makes of the report; the
    warning says when the judge made fewer claims than that. Raises
    :class:`ExtractionError` when sentences cite sources yet no claim came out: a report
    with cited sentences never silently yields nothing.
    """
    baseline = sentence_claims(report)
    outcomes: list[dict[str, Any]] = []
    if extractor == "judge":
        claims = extract_claims(report, judge, progress, outcomes=outcomes)
    elif extractor == "sentences":
        claims = baseline
    else:
        raise InputError(f"unknown extractor {extractor!r} (judge or sentences)")
    by = {name: sum(1 for c in claims if c.extractor == name) for name in ("judge", "sentences")}
    warning = None
    if extractor == "judge" and by["judge"] < len(baseline):
        fell = sum(1 for o in outcomes if o["fallback"] or o["error"])
        warning = (f"the judge made {by['judge']} claims where the sentence extractor makes "
                   f"{len(baseline)}; {fell} of {len(outcomes)} batches fell back to the "
                   "sentence extractor (a larger judge extracts better; or use "
                   "--extractor sentences)")
    cited = sum(1 for s in report.sentences if report.citations_in(s.start, s.end))
    if not claims and cited:
        raise ExtractionError(
            f"no claims extracted, although {cited} sentences cite sources",
            hint="the cited sentences are too short to check; see amber report inspect")
    account = {"extractor": extractor, "by_extractor": by,
               "sentence_baseline": len(baseline), "batches": len(outcomes),
               "fallback_batches": sum(1 for o in outcomes if o["fallback"]),
               "judge_errors": [o["error"] for o in outcomes if o["error"]],
               "warning": warning}
    return claims, account


def _disambiguate(report: Report, claims: list[ExtractedClaim], judge: Judge) -> None:
    """Ask the judge only for paragraph-level citations naming several sources."""
    refs = {r.number: r for r in report.references}
    for claim in claims:
        if claim.citation_source != "paragraph" or len(claim.citations) < 2:
            continue
        options = [n for n in claim.citations if n in refs]
        if len(options) < 2:
            continue
        listing = "\n".join(f"[{n}] {refs[n].title} {refs[n].url or ''}" for n in options)
        schema = {"type": "object",
                  "properties": {"sources": {"type": "array", "maxItems": len(options),
                                             "items": {"type": "integer", "enum": options}}},
                  "required": ["sources"], "additionalProperties": False}
        try:
            answer = judge.ask([{"role": "system", "content": MATCH_PROMPT},
                                {"role": "user", "content": f"Claim: {claim.text}\n\n"
                                                            f"Sources:\n{listing}"}],
                               schema, max_tokens=60)
        except ModelError:
            continue  # an unusable answer leaves the paragraph's citations as they are
        chosen = sorted(set(answer.obj["sources"]))
        claim.ledger_keys.append(answer.key)
        if chosen:
            claim.citations = chosen
            claim.urls = [refs[n].url for n in chosen if refs[n].url]  # type: ignore[misc]
            claim.citation_source = "judge"
