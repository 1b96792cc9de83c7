"""Reading capture inputs: a claims JSONL file, or a plain list of URLs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ambereval.errors import InputError
from ambereval.jsonl import iter_objects, read_text_lines


@dataclass(frozen=True)
class ClaimInput:
    """``{"id": "c1", "text": "...", "urls": [...], "queries": [...]}``."""

    id: str
    text: str
    urls: tuple[str, ...] = ()
    queries: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


def check_url(url: str) -> str | None:
    """Why ``url`` cannot be fetched, or None when it can."""
    try:
        parts = urlsplit(url)
    except ValueError as err:  # e.g. an unclosed IPv6 bracket
        return f"is not a valid URL ({err})"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parts.netloc:
        return "has no host"
    if any(c.isspace() for c in url):
        return "contains whitespace"
    return None


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _strings(value: Any, where: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where}: '{name}' must be a list of strings")
    return tuple(v.strip() for v in value if v.strip())


def load_claims(path: str | Path) -> list[ClaimInput]:
    """Parse a claims JSONL file; every error names the file and line."""
    path = Path(path)
    claims: list[ClaimInput] = []
    seen: set[str] = set()
    for where, obj in iter_objects(path):
        claim_id = obj.get("id")
        if isinstance(claim_id, int) and not isinstance(claim_id, bool):
            claim_id = str(claim_id)
        if not isinstance(claim_id, str) or not claim_id.strip():
            raise InputError(f"{where}: missing or empty 'id'")
        text = obj.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{where}: missing or empty 'text'")
        if claim_id in seen:
            raise InputError(f"{where}: duplicate claim id {claim_id!r}")
        seen.add(claim_id)
        urls = _strings(obj.get("urls"), where, "urls")
        for url in urls:
            problem = check_url(url)
            if problem:
                raise InputError(f"{where}: URL {_short(url)!r} {problem}")
        queries = _strings(obj.get("queries"), where, "queries")
        extra = {k: v for k, v in obj.items() if k not in ("id", "text", "urls", "queries")}
        claims.append(ClaimInput(claim_id, text.strip(), urls, queries, extra))
    if not claims:
        raise InputError(f"{path}: no claims found")
    return claims


def load_urls(path: str | Path) -> list[str]:
    """One URL per line; blank lines and lines starting with '#' are skipped."""
    path = Path(path)
    urls: list[str] = []
    for number, line in enumerate(read_text_lines(path), start=1):
        url = line.strip()
        if not url or url.startswith("#"):
            continue
        problem = check_url(url)
        if problem:
            raise InputError(f"{path}:{number}: URL {_short(url)!r} {problem}")
        if url not in urls:
            urls.append(url)
    if not urls:
        raise InputError(f"{path}: no URLs found")
    return urls
