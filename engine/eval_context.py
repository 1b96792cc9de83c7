"""What a protocol gets for one report: its text and parse, its task, its bundle."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ambereval.engine.evidence import ClaimEvidence, Page, load_claims, load_page
from ambereval.engine.report import Report, parse_report
from ambereval.engine.tasks import Task
from ambereval.models import ChunkParams, Embedder, VectorIndex
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
    embedder: Embedder | None = None
    params: ChunkParams = field(default_factory=ChunkParams)
    _pages: dict[str, Page] = field(default_factory=dict)
    _indexes: dict[str, VectorIndex] = field(default_factory=dict)

    def page(self, url: str) -> Page:
        """The captured page for a URL (or a corpus page by id), loaded once."""
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
        index = self._indexes.get(page.capture_id)
        if index is None:  # each page's chunks are embedded once per evaluation
            index = VectorIndex.build(page.chunks, self.embedder, self.params.as_dict())
            self._indexes[page.capture_id] = index
        hits = index.search(self.embedder.embed([query])[0], k)
        return [h.chunk.text for h in sorted(hits, key=lambda h: h.chunk.start)]

    def pages_by_title(self) -> dict[str, Page]:
        """Every valid page of the bundle by its title (DR3 sandbox corpora)."""
        out: dict[str, Page] = {}
        rows = self.bundle.index.rows(
            "SELECT c.id, c.url, t.title FROM captures c JOIN texts t ON t.capture_id = c.id "
            "WHERE c.kind = 'page' AND c.state = 'ok' ORDER BY c.id")
        for row in rows:
            if row["title"] and row["title"] not in out:
                out[row["title"]] = self.page(row["url"])
        return out


def reports_in(bundle: Bundle) -> list[dict[str, Any]]:
    return bundle.index.rows("SELECT * FROM reports ORDER BY stored_at, id")


def open_context(bundle: Bundle, row: dict[str, Any], task: Task,
                 embedder: Embedder | None) -> EvalContext:
    _, text = bundle.report_text(row["id"])
    claims = [c for c in load_claims(bundle) if c.extra.get("report_id") in (None, row["id"])]
    return EvalContext(row["name"], row["id"], text, parse_report(text), task, bundle, claims,
                       embedder)


def stored_task_id(row: dict[str, Any]) -> str | None:
    task = json.loads(row["task"]) if row.get("task") else None
    return task.get("id") if isinstance(task, dict) else None

