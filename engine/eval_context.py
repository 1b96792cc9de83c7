"""What a protocol gets for one report: its text and parse, its task, its bundle.

A context may be shared by the protocols and judges of one report running on several
threads: page loading and passage retrieval hold the context's lock, and
:class:`SharedEmbedder` lets threads share one embedding model, one batch at a time.

Every retrieval made for the report is recorded (:meth:`EvalContext.retrievals`, written
to ``RUN_DIR/retrieval/<report>.jsonl``, format in ``runs/run_dir.py``): passages picked
from one page (:meth:`EvalContext.passages`), and the searches of claim verification,
which runs over an index of all the claims' pages built once per report
(:meth:`EvalContext.claim_index`), so ``amber replay`` can answer both from the record.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ambereval.engine.evidence import ClaimEvidence, Page, load_claims, load_page
from ambereval.engine.report import Report, parse_report
from ambereval.engine.tasks import Task
from ambereval.models import Chunk, ChunkParams, Embedder, Hit, Retriever, RetrieverSpec
from ambereval.models.chunk_source import ChunkSource, as_source
from ambereval.snapshots import Bundle

#: the ``step`` of the retrieval record's verification lines (passage lines have none)
VERIFY_INDEX_STEP = "verification-index"
VERIFY_SEARCH_STEP = "verification"


def chunks_digest(chunks: list[Chunk] | ChunkSource) -> str:
    """sha256 naming a set of chunks (ids, spans, texts), whatever their order: which
    index a recorded verification search ran on."""
    return as_source(chunks).digest


def search_key(index: str, captures: set[str] | list[str] | None, query: str,
               k: int) -> tuple[str, str, str, int]:
    """The sort/lookup key of a recorded verification search."""
    return (index, "\n".join(sorted(captures)) if captures is not None else "", query, k)


#: chunks per page when several statements are checked against it (``page_passages``)
PAGE_PASSAGES = 6


def merged_spans(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``(start, end)`` spans in order, those that overlap or touch made one:
    ``merged_spans([(0, 5), (5, 9), (12, 20)]) == [(0, 9), (12, 20)]``."""
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def hit_rows(hits: list[Hit]) -> list[dict[str, Any]]:
    return [{"chunk_id": h.chunk.chunk_id, "start": h.chunk.start, "end": h.chunk.end,
             "score": float(h.score), "rank": h.rank} for h in hits]


@dataclass
class EvalContext:
    name: str
    report_id: str
    text: str
    report: Report
    task: Task
    bundle: Bundle
    claims: list[ClaimEvidence]
    embedder: Embedder | SharedEmbedder | None = None
    params: ChunkParams = field(default_factory=ChunkParams)
    retriever: RetrieverSpec = field(default_factory=RetrieverSpec)
    _pages: dict[str, Page] = field(default_factory=dict)
    _indexes: dict[str, Retriever] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _retrievals: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict,
                                                                  repr=False)
    _claim_indexes: dict[str, Any] = field(default_factory=dict, repr=False)
    _index_records: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _searches: dict[tuple[str, str, str, int], dict[str, Any]] = field(default_factory=dict,
                                                                       repr=False)

    def page(self, url: str) -> Page:
        """The captured page for a URL (or a corpus page by id), loaded once."""
        with self._lock:
            return self._page(url)

    def _page(self, url: str) -> Page:
        if url not in self._pages:
            try:
                row = self.bundle.find_capture(url)
                cid = row["id"]
            except Exception:  # BundleError: not captured
                cid = None
            self._pages[url] = load_page(self.bundle, cid, url, self.params)
        return self._pages[url]

    def ranked(self, page: Page, query: str, k: int = 3) -> list[Chunk]:
        """The k chunks of ``page`` closest to ``query``, best first (the page's first k
        when there is no embedder or no more chunks); every search is recorded."""
        if not page.chunks:
            return []
        if self.embedder is None or len(page.chunks) <= k:
            return page.chunks[:k]
        with self._lock:
            index = self._indexes.get(page.capture_id)
            if index is None:  # each page's chunks are embedded once per evaluation
                index = Retriever.build(page.chunks, self.embedder, self.params.as_dict(),
                                        self.retriever)
                self._indexes[page.capture_id] = index
            hits = index.search(query, k)
            self._retrievals[(page.capture_id, query, k)] = {
                "capture_id": page.capture_id, "query": query, "k": k,
                "retriever": index.identity(), "hits": hit_rows(hits)}
        return [h.chunk for h in hits]

    def passages(self, page: Page, query: str, k: int = 3) -> list[str]:
        """The k chunks of ``page`` closest to ``query`` (page order), or its start."""
        return [c.text for c in sorted(self.ranked(page, query, k), key=lambda c: c.start)]

    def page_passages(self, page: Page, queries: list[str], k: int = 3,
                      cap: int = PAGE_PASSAGES, merge: bool = False) -> list[str]:
        """The passages of ``page`` for several statements at once, so that every check
        against the page shares one prompt prefix (the page is read once): each
        statement's k best chunks taken in turns by rank (every statement's best, then
        every second best, ...) up to ``cap`` chunks, in page order. With ``merge``,
        chosen chunks that overlap or touch are one passage, the page's text over their
        span, so the words two neighbours share are sent once."""
        lists = [self.ranked(page, q, k) for q in dict.fromkeys(queries)]
        chosen: dict[str, Chunk] = {}
        for rank in range(k):
            for chunks in lists:
                if rank < len(chunks) and len(chosen) < cap:
                    chosen.setdefault(chunks[rank].chunk_id, chunks[rank])
        ordered = sorted(chosen.values(), key=lambda c: (c.start, c.end))
        if not merge or not all(page.text[c.start : c.end] == c.text for c in ordered):
            return [c.text for c in ordered]
        return [page.text[a:b] for a, b in merged_spans((c.start, c.end) for c in ordered)]

    def claim_index(self, source: ChunkSource, params: ChunkParams,
                    spec: RetrieverSpec) -> RecordingIndex:
        """The index claim verification searches (``verify_claims(index_for=...)``): built
        once per report over the source's chunks (every judge's verification shares it)
        and recording every search it answers."""
        digest = source.digest
        with self._lock:
            inner = self._claim_indexes.get(digest)
            if inner is None:
                inner = Retriever.build(source, self.embedder, params.as_dict(), spec)
                self._claim_indexes[digest] = inner
                self._index_records[digest] = {
                    "step": VERIFY_INDEX_STEP, "index": digest,
                    "captures": sorted({c.capture_id for c in source.chunks}),
                    "chunks": len(source.chunks), "chunking": params.as_dict(),
                    "retriever": inner.identity()}
        return RecordingIndex(inner, digest, self)

    def verify_decision(self, judge_model: dict[str, Any]) -> dict[str, Any] | None:
        """How claim verification decides for the judge of this model identity: ``None``
        chooses now (engine/verification.py ``decision_for``); a replay returns what the
        run recorded."""
        return None

    def record_search(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._searches[search_key(record["index"], record["captures"], record["query"],
                                      record["k"])] = record

    def retrievals(self) -> list[dict[str, Any]]:
        """What retrieval chose, in a deterministic order: passage choices by (capture,
        query, k), then each verification index, then its searches by (index, captures,
        query, k)."""
        with self._lock:
            return [*(self._retrievals[key] for key in sorted(self._retrievals)),
                    *(self._index_records[key] for key in sorted(self._index_records)),
                    *(self._searches[key] for key in sorted(self._searches))]

    def urls_by_title(self) -> dict[str, str]:
        """The URL of every captured page of the bundle by its title, the first capture
        of a title winning (DR3 sandbox corpora cite documents by title). Only the index
        is read: a page is loaded when it is cited (:meth:`page`)."""
        out: dict[str, str] = {}
        with self._lock:
            rows = self.bundle.index.rows(
                "SELECT c.id, c.url, t.title FROM captures c JOIN texts t "
                "ON t.capture_id = c.id WHERE c.kind = 'page' AND c.state = 'ok' ORDER BY c.id")
            for row in rows:
                if row["title"] and row["title"] not in out:
                    out[row["title"]] = row["url"]
        return out


class RecordingIndex:
    """A verification index that records each search in its context (one line per query,
    whatever batch it came in)."""

    def __init__(self, inner: Retriever, digest: str, ctx: EvalContext) -> None:
        self.inner, self.digest, self.ctx = inner, digest, ctx

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def search(self, query: str, k: int = 5, captures: set[str] | None = None) -> list[Hit]:
        return self.search_many([query], k, captures)[0]

    def search_many(self, queries: list[str], k: int = 5,
                    captures: set[str] | None = None) -> list[list[Hit]]:
        with self.ctx._lock:  # one search at a time over the shared index and embedder
            found = self.inner.search_many(queries, k, captures)
        identity = self.inner.identity()
        for query, hits in zip(queries, found, strict=True):
            self.ctx.record_search({
                "step": VERIFY_SEARCH_STEP, "index": self.digest,
                "captures": sorted(captures) if captures is not None else None,
                "query": query, "k": k, "retriever": identity, "hits": hit_rows(hits)})
        return found


class SharedEmbedder:
    """One embedder shared by threads: each ``embed`` call (and the model's lazy load) runs
    alone, so a batch is encoded exactly as it would be on one thread."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:  # identity(), sha256, model_dir, ...
        return getattr(self.inner, name)

    @property
    def dim(self) -> int:
        with self._lock:
            return self.inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return self.inner.embed(texts)


def reports_in(bundle: Bundle) -> list[dict[str, Any]]:
    return bundle.index.rows("SELECT * FROM reports ORDER BY stored_at, id")


def open_context(bundle: Bundle, row: dict[str, Any], task: Task,
                 embedder: Embedder | SharedEmbedder | None) -> EvalContext:
    _, text = bundle.report_text(row["id"])
    claims = [c for c in load_claims(bundle) if c.extra.get("report_id") in (None, row["id"])]
    return EvalContext(row["name"], row["id"], text, parse_report(text), task, bundle, claims,
                       embedder)


def stored_task_id(row: dict[str, Any]) -> str | None:
    task = json.loads(row["task"]) if row.get("task") else None
    return task.get("id") if isinstance(task, dict) else None

