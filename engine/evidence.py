"""The evidence a bundle holds for its claims: valid pages, their text, their chunks.

A page is valid when its capture succeeded, text was extracted, and the text does not
look like an error or bot-wall page; otherwise it is listed with the reason, and no
judge ever sees it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ambereval.errors import BundleError
from ambereval.models import Chunk, ChunkParams, chunk_text
from ambereval.models.chunk_source import Digest, text_key
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
    stored = bundle.read_capture(capture_id, body=False)
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


class BundleChunks:
    """The chunks of some pages of an open bundle as a chunk source
    (models/chunk_source.py) that never holds their text: :meth:`add` keeps a loaded
    page's chunks without their text (and a sha256 of each text), each :meth:`texts`
    pass reads the pages' text again from the bundle, one page at a time, and
    :meth:`page` reloads one whole page when its passages are wanted. A reload reads the
    conversion record alone and cuts the chunks at their recorded spans (nothing is
    chunked twice); a text that no longer matches its digests is a BundleError.

    Chunk ids are ``{capture_id}:{n:05d}``, so pages taken in order of
    ``capture_id + ":"`` give their chunks in chunk-id order."""

    def __init__(self, bundle: Bundle, params: ChunkParams) -> None:
        self.bundle, self.params = bundle, params
        self._pages: dict[str, Page] = {}
        self._keys: dict[str, list[str]] = {}
        self._chunks: list[Chunk] | None = None
        self._digest: str | None = None

    def add(self, page: Page) -> Page:
        """Take a valid loaded page; -> the same page without its text."""
        light = replace(page, text="", chunks=[replace(c, text="") for c in page.chunks])
        self._pages[page.capture_id] = light
        self._keys[page.capture_id] = [text_key(c.text) for c in page.chunks]
        self._chunks = self._digest = None
        return light

    def _order(self) -> list[str]:
        return sorted(self._pages, key=lambda cid: cid + ":")

    @property
    def chunks(self) -> list[Chunk]:
        if self._chunks is None:
            self._chunks = [c for cid in self._order() for c in self._pages[cid].chunks]
            ids = [c.chunk_id for c in self._chunks]
            if ids != sorted(ids):
                raise ValueError("chunk ids are not in capture order")
        return self._chunks

    @property
    def digest(self) -> str:
        if self._digest is None:
            digest = Digest()
            for cid in self._order():
                for chunk, key in zip(self._pages[cid].chunks, self._keys[cid], strict=True):
                    digest.add(chunk, key)
            self._digest = digest.hexdigest()
        return self._digest

    def page(self, capture_id: str) -> Page:
        """The whole page :meth:`add` took, its text read again from the bundle."""
        light = self._pages[capture_id]
        text = self._text(capture_id)
        chunks = [replace(c, text=text[c.start:c.end]) for c in light.chunks]
        if [text_key(c.text) for c in chunks] != self._keys[capture_id]:
            raise BundleError(f"capture {capture_id} changed while it was being read")
        return replace(light, text=text, chunks=chunks)

    def _text(self, capture_id: str) -> str:
        record = self._pages[capture_id].text_record  # the conversion record alone
        if record is None:
            return self.bundle.read_capture(capture_id, body=False).text or ""
        return self.bundle.read_record(record).body.decode("utf-8")

    def texts(self) -> Iterator[str]:
        for cid in self._order():
            yield from (c.text for c in self.page(cid).chunks)
