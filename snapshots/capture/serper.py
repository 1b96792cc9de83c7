"""Serper (Google search API) client: POST ``<base>/search`` with ``X-API-KEY``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from ambereval.errors import ServiceError
from ambereval.snapshots.capture.transport import Exchange, Transport

DEFAULT_SERPER_URL = "https://google.serper.dev"


@dataclass(frozen=True)
class SearchParams:
    """One Serper query. ``tbs`` (time filter) and ``page`` are sent only when set."""

    q: str
    gl: str = "us"
    hl: str = "en"
    num: int = 10
    tbs: str | None = None
    page: int | None = None

    def payload(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class SearchResult:
    rank: int
    title: str | None
    link: str
    snippet: str | None
    date: str | None
    position: int | None


def _check_json(exchange: Exchange) -> str | None:
    try:
        data = json.loads(exchange.decoded_body())
    except (ValueError, UnicodeDecodeError):
        return "malformed JSON from search service"
    if not isinstance(data, dict):
        return "search response is not a JSON object"
    if not isinstance(data.get("organic", []), list):
        return "search response has no list of organic results"
    return None


class SerperClient:
    def __init__(self, base_url: str, api_key: str, transport: Transport) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.transport = transport

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/search"

    def search(self, params: SearchParams) -> Exchange:
        body = json.dumps(params.payload(), sort_keys=True, separators=(",", ":")).encode()
        exchange = self.transport.send(
            "POST",
            self.endpoint,
            headers={"X-API-KEY": self.api_key, "Content-Type": "application/json"},
            body=body,
            check=_check_json,
        )
        if exchange.status is None and not exchange.ok:
            raise ServiceError(
                f"search service at {self.base_url} is unreachable ({exchange.error})",
                hint="check SERPER_BASE_URL and your network",
            )
        if exchange.status in (401, 403):
            raise ServiceError(
                f"search service rejected the API key (HTTP {exchange.status})",
                hint="check SERPER_API_KEY",
            )
        return exchange


def parse_results(body: bytes) -> list[SearchResult]:
    """Organic results in rank order (rank is 1-based by list order)."""
    data = json.loads(body)
    results: list[SearchResult] = []
    for item in data.get("organic") or []:
        link = item.get("link") if isinstance(item, dict) else None
        if not isinstance(link, str) or not link:
            continue
        position = item.get("position")
        results.append(
            SearchResult(
                rank=len(results) + 1,
                title=item.get("title"),
                link=link,
                snippet=item.get("snippet"),
                date=item.get("date"),
                position=position if isinstance(position, int) else None,
            )
        )
    return results
