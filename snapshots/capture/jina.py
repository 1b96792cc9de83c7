"""Jina Reader client: GET ``<base>/<url>``; the reader returns the page as text."""

from __future__ import annotations

import json
import re

from ambereval.errors import ServiceError
from ambereval.snapshots.capture.page import PageFetch
from ambereval.snapshots.capture.transport import Exchange, Transport

DEFAULT_JINA_URL = "https://r.jina.ai"
#: the reader options of evaluation pipelines whose code is public, by name, so a capture
#: can ask exactly what the pipeline will ask (``--reader-header NAME``); only the headers
#: that shape the output are listed (X-Timeout and the key are transport)
READER_PROFILES: dict[str, dict[str, str]] = {
    # DeepResearch Bench, FACT citation scraper (utils/scrape.py): JSON envelope, images
    # with generated alt text
    "deepresearch-bench": {"X-With-Generated-Alt": "true"},
    "default": {},
}
READER_PROFILE_ALIASES = {"drb": "deepresearch-bench", "drb-fact": "deepresearch-bench"}


def reader_headers(specs: list[str]) -> dict[str, str]:
    """Reader options from ``--reader-header`` values: ``X-Name: value`` (or
    ``X-Name=value``), or a profile name from :data:`READER_PROFILES`; later ones win.
    Raises ValueError with a one-line reason for anything else."""
    out: dict[str, str] = {}
    for spec in specs:
        text = spec.strip()
        cut = min((i for i in (text.find(":"), text.find("=")) if i > 0), default=-1)
        if cut < 0:
            name = READER_PROFILE_ALIASES.get(text.lower(), text.lower())
            if name not in READER_PROFILES:
                known = ", ".join(sorted([*READER_PROFILES, *READER_PROFILE_ALIASES]))
                raise ValueError(f"{spec!r} is neither an X-Name: value header nor a reader "
                                 f"profile ({known})")
            out.update(READER_PROFILES[name])
            continue
        name, value = text[:cut].strip(), text[cut + 1:].strip()
        if not name.lower().startswith("x-") or not name[2:].replace("-", "").isalnum():
            raise ValueError(f"{spec!r}: reader options are X-* headers (X-Name: value)")
        out[name] = value
    return out
_TARGET_ERROR = re.compile(r"returned error (\d{3})")


class JinaReader:
    """Reads pages through Jina Reader, asking for JSON to get title and text apart.

    ``options`` are the ``X-*`` headers sent with every request (e.g.
    ``X-Return-Format: markdown``); they change the output, so they are part of the
    request key and written into the warcinfo.
    """

    name = "jina"

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        transport: Transport,
        options: dict[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.transport = transport
        self._options = dict(sorted((options or {}).items()))
        for key in self._options:
            if not key.lower().startswith("x-"):
                raise ValueError(f"Jina option {key!r} must be an X-* header")

    def options(self) -> dict[str, str]:
        return dict(self._options)

    def fetch_url(self, url: str) -> str:
        return f"{self.base_url}/{url}"

    def read(self, url: str) -> PageFetch:
        headers = {"Accept": "application/json", **self._options}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        exchange = self.transport.send("GET", self.fetch_url(url), headers=headers)
        result = PageFetch(url=url, exchanges=[exchange], status=exchange.status, final_url=url)
        if exchange.status is None:
            raise ServiceError(
                f"reader service at {self.base_url} is unreachable ({exchange.error})",
                hint="check JINA_BASE_URL and your network, or use --reader direct",
            )
        if exchange.status in (401, 402, 403):
            raise ServiceError(
                f"reader service refused the request (HTTP {exchange.status})",
                hint="check JINA_API_KEY and the account's balance",
            )
        if exchange.error is not None or not exchange.ok:
            result.error = exchange.error or f"HTTP {exchange.status}{_said(exchange)}"
            result.permanent = exchange.permanent
            return result
        body = result.body_of(exchange)
        if body is None:
            return result
        try:
            data = json.loads(body)
        except ValueError:
            return self._from_text(result, body.decode("utf-8", errors="replace"))
        payload = data.get("data") if isinstance(data, dict) else None
        if not isinstance(payload, dict):
            code = data.get("code") if isinstance(data, dict) else None
            result.error = f"reader returned no page data (code {code!r})"
            result.permanent = True
            return result
        warning = str(payload.get("warning") or "")
        failed = _TARGET_ERROR.search(warning)
        if failed:
            result.status = int(failed.group(1))
            result.error = f"target returned HTTP {result.status}"
            result.permanent = result.status not in (429, 500, 502, 503, 504)
            return result
        text = str(payload.get("content") or "").strip()
        result.text = text
        result.title = payload.get("title") or None
        result.final_url = payload.get("url") or url
        result.extractor = "jina"
        result.text_status = "ok" if text else "empty"
        return result

    @staticmethod
    def _from_text(result: PageFetch, body: str) -> PageFetch:
        """The reader's plain-text format: ``Title:`` / ``URL Source:`` header lines."""
        title = None
        marker = "Markdown Content:"
        head, sep, rest = body.partition(marker)
        if sep:
            for line in head.splitlines():
                if line.startswith("Title:"):
                    title = line[len("Title:") :].strip() or None
            body = rest
        text = body.strip()
        result.text = text
        result.title = title
        result.extractor = "jina"
        result.text_status = "ok" if text else "empty"
        return result


def _said(exchange: Exchange) -> str:
    """``: <the reader's own message>`` from a JSON error body, else nothing."""
    try:
        data = json.loads(exchange.decoded_body() or b"")
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    message = data.get("message") or data.get("readableMessage")
    if not isinstance(message, str) or not message.strip():
        return ""
    text = " ".join(message.split())
    return f": {text[:200]}{'…' if len(text) > 200 else ''}"
