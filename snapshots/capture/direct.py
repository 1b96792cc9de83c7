"""Direct fetcher: plain HTTP GET of the page (redirects archived hop by hop)."""

from __future__ import annotations

from urllib.parse import urljoin

from ambereval.snapshots.capture.address_policy import scheme_problem
from ambereval.snapshots.capture.extract import extract_text
from ambereval.snapshots.capture.page import PageFetch
from ambereval.snapshots.capture.transport import Transport

MAX_REDIRECTS = 10
REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})


class DirectReader:
    name = "direct"

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def options(self) -> dict[str, str]:
        return {}

    def fetch_url(self, url: str) -> str:
        return url

    def read(self, url: str) -> PageFetch:
        result = PageFetch(url=url)
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            exchange = self.transport.send(
                "GET", current, headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
            )
            if not exchange.blocked:  # a refused request was never sent: nothing to archive
                result.exchanges.append(exchange)
            result.status = exchange.status
            result.final_url = current
            if exchange.status is None or exchange.error is not None:
                result.error = exchange.error or "no response"
                result.permanent = exchange.permanent
                return result
            location = exchange.header("location")
            if exchange.status in REDIRECT_STATUS and location:
                try:
                    current = urljoin(current, location)
                except ValueError:
                    current = location
                problem = scheme_problem(current)
                if problem is not None:  # refused before any request to it is built
                    result.error = f"redirect to {location[:200]!r} refused: {problem}"
                    result.permanent = True
                    return result
                continue
            if not exchange.ok:
                result.error = f"HTTP {exchange.status}"
                result.permanent = exchange.permanent
                return result
            content_type = exchange.header("content-type") or ""
            body = result.body_of(exchange)
            if body is None:
                return result
            extracted = extract_text(body, content_type, current)
            result.text = extracted.text
            result.title = extracted.title
            result.extractor = extracted.extractor
            result.text_status = extracted.status
            return result
        result.error = f"more than {MAX_REDIRECTS} redirects"
        result.permanent = True
        return result
