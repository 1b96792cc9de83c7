"""HTML to text with trafilatura; plain text passes through."""

from __future__ import annotations

import re
from dataclasses import dataclass

import trafilatura

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.I | re.S)
_CHARSET = re.compile(r"charset=([\w-]+)", re.I)


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
    text = trafilatura.extract(
        html,
        url=url,
        include_comments=False,
        include_tables=True,
        favor_precision=False,
        deduplicate=False,
    ) or ""
    title = None
    meta = trafilatura.extract_metadata(html)
    if meta is not None and meta.title:
        title = meta.title
    else:
        found = _TITLE.search(body)
        if found:
            title = _decode(found.group(1), content_type).strip() or None
    text = text.strip()
    return Extracted(text, title, "trafilatura", "ok" if text else "empty")
