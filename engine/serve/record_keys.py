"""What makes two requests "the same request" for ``amber serve --record``: the key
under which an answer is recorded, and which the replay of the bundle matches.

The keys are the replay's own matching keys (:mod:`.match` for Serper and Jina Reader,
:func:`.recorded.judge_call` for the judges), so an answer the recording gave twice is
the answer the replay gives. A request with no such key (a Serper batch, a reader
``POST``, a streamed reader answer, a page asked with anything but ``GET``) is
forwarded and archived but never answered from the recording, and the replay answers
it with a logged miss.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ambereval.engine.serve.match import (
    NotASearch,
    normalize_url,
    options_key,
    reader_options,
    reader_targets,
    search_body,
    search_params,
    wants_json,
    wants_stream,
)
from ambereval.engine.serve.recorded import judge_call
from ambereval.engine.serve.upstreams import JUDGE_SERVICES
from ambereval.snapshots.bundle.store import dumps


@dataclass(frozen=True)
class RequestKey:
    """The identity of a recorded request (``key`` None: never answered again from the
    recording, with ``why``), and what the index lists it under."""

    service: str
    key: str | None
    why: str | None = None
    url: str | None = None  # the page a reader read, the search endpoint
    model: str | None = None
    operation: str | None = None
    stream: bool = False


def _digest(obj: object) -> str:
    return hashlib.sha256(dumps(obj)).hexdigest()


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


def request_key(service: str, method: str, target: str, headers: list[tuple[str, str]],
                body: bytes) -> RequestKey:
    """The key of one request; ``target`` is the path and query after the host, or the
    whole URL for a plain page (``direct``)."""
    method = method.upper()
    if service in JUDGE_SERVICES:
        call = judge_call(service, method, target, body)
        return RequestKey(service, call.key, model=call.model, operation=call.operation,
                          stream=call.stream)
    if service == "serper":
        if method != "POST":
            return RequestKey(service, None, f"{method} /search (only POST is replayed)")
        try:
            queries = search_body(body)
            if body.lstrip()[:1] == b"[":
                return RequestKey(service, None, "a batch of searches (replayed one by one)")
            match, num = search_params(queries[0])
        except NotASearch as exc:
            return RequestKey(service, None, f"not a search request ({exc})")
        return RequestKey(service, _digest({"recorded": "serper", "key": match, "num": num}))
    if service == "jina":
        accept = _header(headers, "accept")
        if method != "GET":
            return RequestKey(service, None, f"{method} to the reader (only GET is replayed)")
        if wants_stream(accept):
            return RequestKey(service, None, "a streamed reader answer")
        candidates = reader_targets(target[1:] if target.startswith("/") else target)
        if not candidates:
            return RequestKey(service, None, "no target URL after the reader's /")
        options = options_key(reader_options(headers))
        return RequestKey(service, _digest({"recorded": "jina", "url": candidates[0],
                                            "options": options, "json": wants_json(accept)}),
                          url=candidates[0])
    if method != "GET":
        return RequestKey(service, None, f"{method} of a page (only GET is replayed)")
    url = normalize_url(target)
    return RequestKey(service, _digest({"recorded": "direct", "url": url}), url=url)
