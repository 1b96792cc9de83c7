"""The evidence a bundle holds for its claims: valid pages, their text, their chunks.

A page is valid when its capture succeeded, text was extracted, and the text does not
look like an error or bot-wall page; otherwise it is listed with the reason, and no
judge ever sees it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ambereval.models import Chunk, ChunkParams, chunk_text
from ambereval.snapshots import Bundle

_ERROR_PAGE = re.compile(
    r"\b(404|403|page not found|not found|access denied|forbidden|captcha|are you a robot|"
    r"enable javascript|verify you are human|request blocked|service unavailable)\b", re.I)


@dataclass
class Page:
    capture_id: str
    url: str
    valid: bool
    reason: str | None
    title: str | None = None
    text: str = ""
    text_record: str | None = None
    response_record: str | None = None
    warc_file: str | None = None
    chunks: list[Chunk] = field(default_factory=list)


@dataclass
class ClaimEvidence:
    """A claim as frozen in the bundle, with the pages linked to it."""

    id: str
    text: str
    questions: list[str]
    cited: list[tuple[str, str | None]]  # (url, capture id)
    found: list[tuple[str, str | None, str, int]]  # (url, capture id, query id, rank)
    extra: dict[str, Any]


def looks_like_error_page(text: str) -> bool:
    stripped = text.strip()
    return len(stripped) < 400 and _ERROR_PAGE.search(stripped) is not None


def load_claims(bundle: Bundle) -> list[ClaimEvidence]:
    out = []
    for row in bundle.index.rows("SELECT * FROM claims ORDER BY ordinal, id"):
        extra = json.loads(row["extra"] or "{}")
        questions = [q for q in extra.get("questions", []) if isinstance(q, str) and q.strip()]
        if not questions:
            questions = [row["text"]]
        cited, found = [], []
        for link in bundle.links_for_claim(row["id"]):
            if link["source"] == "cited":
                cited.append((link["url"], link["capture_id"]))
            else:
                found.append((link["url"], link["capture_id"], link["query_id"], link["rank"]))
        out.append(ClaimEvidence(row["id"], row["text"], questions, cited, found, extra))
    return out


def load_page(bundle: Bundle, capture_id: str | None, url: str,
              params: ChunkParams) -> Page:
    if capture_id is None:
        return Page("", url, False, "not_captured")
    row = bundle.index.capture(capture_id)
    if row is None:
        return Page(capture_id, url, False, "not_captured")
    if row["state"] != "ok":
        status = f" HTTP {row['status']}" if row["status"] else ""
        return Page(capture_id, url, False, f"failed_capture{status}: {row['error']}")
    stored = bundle.read_capture(capture_id)
    if stored.text is None or stored.text_status != "ok":
        return Page(capture_id, url, False, f"no_text ({stored.text_status or 'missing'})")
    if looks_like_error_page(stored.text):
        return Page(capture_id, url, False, "error_page")
    record = bundle.index.record(stored.text_record) if stored.text_record else None
    page = Page(capture_id, row["url"], True, None, stored.title, stored.text,
                stored.text_record, stored.response_record,
                record["warc_file"] if record else None)
    page.chunks = chunk_text(stored.text, capture_id, params)
    return page
