"""HTML to text with trafilatura; plain text passes through."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import trafilatura

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.I | re.S)
_CHARSET = re.compile(r"charset=([\w-]+)", re.I)
# trafilatura's lxml work is not thread-safe: concurrent extract() calls from capture's
# worker threads can corrupt lxml's proxy registry and crash the process (trafilatura
# issues #840 and #925; reproduced here: 8 threads extracting the 80 shared HTML pages
# crashed 2 of 5 runs, none of 7 with this lock). lxml releases the GIL while parsing, so
# the lock costs parallel extraction; a capture's time goes to the network, not here.
_TRAFILATURA = threading.Lock()


@dataclass(frozen=True)
class Extracted:
    text: str
    title: str | None
    extractor: str
    status: str  # ok | empty | unsupported


def _decode(body: bytes, content_type: str) -> str:
    match = _CHARSET.search(content_type or "")
    for encoding in ([match.group(1)] if match else []) + ["utf-8"]:
        try:
            return body.decode(encoding)
        except (LookupError, UnicodeDecodeError):
            continue
    return body.decode("utf-8", errors="replace")


def extract_text(body: bytes, content_type: str, url: str) -> Extracted:
    """Extract the main text of a page. Deterministic for the same bytes."""
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind in ("text/plain", "text/markdown"):
        text = _decode(body, content_type).strip()
        return Extracted(text, None, "plain", "ok" if text else "empty")
    if kind and kind not in ("text/html", "application/xhtml+xml", "application/xml", "text/xml"):
        return Extracted("", None, "none", "unsupported")
    html = _decode(body, content_type)
    with _TRAFILATURA:
        text = trafilatura.extract(
            html,
            url=url,
            include_comments=False,
            include_tables=True,
            favor_precision=False,
            deduplicate=False,
        ) or ""
        meta = trafilatura.extract_metadata(html)
    title = None
    if meta is not None and meta.title:
        title = meta.title
    else:
        found = _TITLE.search(body)
        if found:
            title = _decode(found.group(1), content_type).strip() or None
    text = text.strip()
    return Extracted(text, title, "trafilatura", "ok" if text else "empty")
