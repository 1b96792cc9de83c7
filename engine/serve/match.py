"""How a request is recognised as one the bundle captured: the matching keys of
``amber serve``, one per service, the same whichever base URL the capture used.

- Serper: the JSON body (or GET query), parsed, secrets dropped, ``q`` with its
  whitespace collapsed, Serper's defaults filled in (``gl=us``, ``hl=en``, ``page=1``,
  ``type=search``, ``autocorrect=true``). ``num`` is kept apart: a request for fewer
  results than captured is answered with the captured top ones.
- Jina Reader: the target URL (normalised) plus the ``X-*`` headers that change the
  output (``X-Return-Format: markdown`` is the default and counts as absent).
- Direct pages (proxy mode): the normalised URL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from ambereval.snapshots.capture.transport import REDACTED, is_secret

SERPER_DEFAULTS: dict[str, Any] = {"gl": "us", "hl": "en", "num": 10, "page": 1,
                                   "type": "search", "autocorrect": True}
# The reader's header policy (README, "Rerun a benchmark's own code offline"): headers that
# only say how or when to fetch never take part in matching; every other X-* header shapes
# the output and is compared. Authorization, Accept and the client's own headers are not
# X-* headers and never compared either (Accept picks text or the JSON envelope).
JINA_TRANSPORT = frozenset({"x-timeout", "x-no-cache", "x-cache-tolerance", "x-respond-timing",
                            "x-proxy-url", "x-request-id", "x-real-ip", "x-forwarded-for",
                            "x-forwarded-host", "x-forwarded-proto", "x-forwarded-port",
                            "x-amzn-trace-id", "x-server-timeout", "x-should-retry"})
#: client and proxy header families (SDK telemetry, gateways): transport too
JINA_TRANSPORT_PREFIXES = ("x-forwarded-", "x-stainless-", "x-goog-", "x-amber-", "x-client-",
                           "x-b3-", "x-datadog-", "x-cloud-trace")
JINA_DEFAULTS = {"x-return-format": "markdown"}
_INT_FIELDS = ("num", "page")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class NotASearch(ValueError):
    """A Serper request body that is not a JSON object (or list of objects) with ``q``."""


def search_params(raw: Mapping[str, Any]) -> tuple[str, int]:
    """(matching key, number of results asked) for one Serper query object."""
    if not isinstance(raw, Mapping):
        raise NotASearch("a search must be a JSON object")
    params: dict[str, Any] = {}
    for name, value in raw.items():
        if value is None or value == "" or is_secret(str(name)):
            continue
        params[str(name)] = value
    if "q" not in params:
        raise NotASearch("the search has no 'q'")
    params["q"] = " ".join(str(params["q"]).split())
    for name in _INT_FIELDS:
        if name in params:
            try:
                params[name] = int(params[name])
            except (TypeError, ValueError):
                raise NotASearch(f"'{name}' must be a number") from None
    for name in ("gl", "hl"):
        if isinstance(params.get(name), str):
            params[name] = params[name].lower()
    if isinstance(params.get("autocorrect"), str):
        params["autocorrect"] = params["autocorrect"].lower() != "false"
    full = {**SERPER_DEFAULTS, **params}
    num = full.pop("num")
    return json.dumps(full, sort_keys=True, separators=(",", ":"), ensure_ascii=False), num


def search_body(body: bytes) -> list[dict[str, Any]]:
    """The query objects of a Serper POST body (a batch is a JSON list)."""
    try:
        data = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError):
        raise NotASearch("the body is not JSON") from None
    items = data if isinstance(data, list) else [data]
    if not items or not all(isinstance(i, dict) for i in items):
        raise NotASearch("the body must be a JSON object or a list of objects")
    return items


def search_query(query: str) -> dict[str, Any]:
    """A Serper GET's query string as a query object (``apiKey`` and the like dropped)."""
    return {k: v for k, v in parse_qsl(query, keep_blank_values=False)}


def normalize_url(url: str) -> str:
    """Scheme and host lower-cased, default port and fragment dropped, ``/`` for an empty
    path; path and query kept byte for byte (servers may treat them case-sensitively)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def reader_targets(raw: str) -> list[str]:
    """Candidate target URLs for what follows the reader's ``/``, best first.

    Jina accepts ``https://x``, ``https:/x`` (a proxy or client folded the slashes),
    a percent-encoded URL, and a bare ``example.com/page`` (tried as https, then http).
    """
    target = raw.lstrip("/")
    if target[:8].lower().startswith(("http%3a", "https%3a")):
        target = unquote(target)
    low = target.lower()
    for scheme in ("https:", "http:"):
        if low.startswith(scheme) and not low.startswith(scheme + "//"):
            target = scheme + "//" + target[len(scheme):].lstrip("/")
            break
    if not target:
        return []
    tries = [target] if "://" in target.split("?")[0] else \
        ["https://" + target, "http://" + target]
    out = []
    for url in tries:
        try:
            out.append(normalize_url(url))
        except ValueError:  # not a URL at all (a bracket in the host ...): nothing to read
            continue
    return out


def reader_options(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The output-changing ``X-*`` headers, lower-cased names, defaults dropped.

    Secret-bearing names (keys, tokens, proxies, cookies) are left out on both sides:
    the archive holds them redacted, so they cannot be compared.
    """
    out: dict[str, str] = {}
    for name, value in headers:
        low = name.lower().strip()
        if not low.startswith("x-") or low in JINA_TRANSPORT \
                or low.startswith(JINA_TRANSPORT_PREFIXES):
            continue
        if is_secret(low) or value == REDACTED:
            continue
        value = value.strip()
        if low == "x-return-format":
            value = value.lower()
        if JINA_DEFAULTS.get(low) == value:
            continue
        out[low] = value
    return dict(sorted(out.items()))


def differing_options(asked: Mapping[str, str], captured: Mapping[str, str]) -> list[str]:
    """The output-shaping options in which a capture differs from a request, sorted."""
    return sorted(k for k in set(asked) | set(captured) if asked.get(k) != captured.get(k))


def options_key(options: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(options.items())), sort_keys=True, separators=(",", ":"))


def wants_json(accept: str | None) -> bool:
    return "application/json" in (accept or "").lower()


def wants_stream(accept: str | None) -> bool:
    return "text/event-stream" in (accept or "").lower()


#: Gemini's model methods (the judge APIs of amber serve)
GEMINI_PATH = re.compile(r"^/(v1|v1beta|v1alpha)/models(?:/([^/:]+))?"
                         r"(?::(generateContent|streamGenerateContent|countTokens))?/?$")
