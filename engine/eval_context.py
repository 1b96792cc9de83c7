"""What a protocol gets for one report: its text and parse, its task, its bundle.

A context may be shared by the protocols and judges of one report running on several
threads: page loading and passage retrieval hold the context's lock, and
:class:`SharedEmbedder` lets threads share one embedding model, one batch at a time.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ambereval.engine.evidence import ClaimEvidence, Page, load_claims, load_page
from ambereval.engine.report import Report, parse_report
from ambereval.engine.tasks import Task
from ambereval.models import ChunkParams, Embedder, Retriever, RetrieverSpec
from ambereval.snapshots import Bundle


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

    def passages(self, page: Page, query: str, k: int = 3) -> list[str]:
        """The k chunks of ``page`` closest to ``query`` (page order), or its start."""
        if not page.chunks:
            return []
        if self.embedder is None or len(page.chunks) <= k:
            return [c.text for c in page.chunks[:k]]
        with self._lock:
            index = self._indexes.get(page.capture_id)
            if index is None:  # each page's chunks are embedded once per evaluation
                index = Retriever.build(page.chunks, self.embedder, self.params.as_dict(),
                                        self.retriever)
                self._indexes[page.capture_id] = index
            hits = index.search(query, k)
            self._retrievals[(page.capture_id, query, k)] = {
                "capture_id": page.capture_id, "query": query, "k": k,
                "retriever": index.identity(),
                "hits": [{"chunk_id": h.chunk.chunk_id, "start": h.chunk.start,
                          "end": h.chunk.end, "score": float(h.score), "rank": h.rank}
                         for h in hits]}
        return [h.chunk.text for h in sorted(hits, key=lambda h: h.chunk.start)]

    def retrievals(self) -> list[dict[str, Any]]:
        """What retrieval chose for each (capture, query, k), in a deterministic order."""
        with self._lock:
            return [self._retrievals[key] for key in sorted(self._retrievals)]

    def pages_by_title(self) -> dict[str, Page]:
        """Every valid page of the bundle by its title (DR3 sandbox corpora)."""
        out: dict[str, Page] = {}
        with self._lock:
            rows = self.bundle.index.rows(
                "SELECT c.id, c.url, t.title FROM captures c JOIN texts t "
                "ON t.capture_id = c.id WHERE c.kind = 'page' AND c.state = 'ok' ORDER BY c.id")
            for row in rows:
                if row["title"] and row["title"] not in out:
                    out[row["title"]] = self._page(row["url"])
        return out


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

