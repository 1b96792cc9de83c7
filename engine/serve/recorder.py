"""``amber serve --record BUNDLE``: forward every request upstream with the client's own
credentials, answer with upstream's response, and write the exchange into BUNDLE.

What is written is what any bundle holds: a WARC ``response`` record and its
``request`` record (secrets redacted: key-bearing headers, cookies, ``key=`` query
values), the index rows that point at them (``captures`` for Serper, Jina Reader and
plain pages, ``judge_exchanges`` for OpenAI and Gemini, see
:mod:`ambereval.snapshots.bundle.exchanges`), and at the end the CDXJ index, pages and
the datapackage manifest. A stream (server-sent events) reaches the client chunk by
chunk as it comes and is recorded with its chunk lengths.

Rules (each named here, and in ``docs/recording.md``):

- ``NOT_FINAL_STATUS``: an answer with one of these statuses (or any 5xx) says "try
  again": it is archived (and listed in ``failures``) but does not answer the next
  identical request, which goes upstream again. Any other answer is final: the same
  request later in the recording is answered from the bundle, never forwarded, so the
  recording replays deterministically. Two identical requests in flight together are
  sent upstream once; the second waits for the first's answer.
- The address policy of capture applies to plain pages (proxy mode): loopback, private
  and link-local addresses are refused unless ``allow_private_addresses``; the service
  upstreams are the user's own choice and are not checked.

The bundle is locked while recording (a second recorder is refused), WARC bytes are
flushed before the index rows that name them are committed, and :meth:`Recorder.finish`
seals it; after a crash ``amber bundle finish`` repairs it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from ambereval.engine.serve.answer import HOP_HEADERS, Answer, Frozen, RecordLoc, replay
from ambereval.engine.serve.record_keys import RequestKey, request_key
from ambereval.engine.serve.recorded import chunk_lengths, exchange_item, replay_exchange
from ambereval.engine.serve.upstreams import (
    JUDGE_SERVICES,
    SERVICE_HOSTS,
    Upstreams,
    service_for_path,
)
from ambereval.errors import BundleError
from ambereval.snapshots.bundle import manifest
from ambereval.snapshots.bundle.exchanges import CHUNKS_URI, TABLE, ensure_table
from ambereval.snapshots.bundle.store import Bundle, dumps
from ambereval.snapshots.capture.address_policy import AddressPolicy
from ambereval.snapshots.capture.serper import parse_results
from ambereval.snapshots.capture.transport import (
    Exchange,
    archived_url,
    blocked_reason,
    http_client,
    redact_headers,
)

NOT_FINAL_STATUS = frozenset({401, 403, 407, 408, 409, 425, 429})
"""[our rule] Statuses (besides every 5xx) whose answer is archived but does not answer
a later identical request: rate limits, timeouts, and credentials the client may fix."""
REDACTED_ALSO = frozenset({"openai-organization", "openai-project"})
"""[our rule] Header names redacted in records besides the secret-bearing ones: account
identifiers that are not keys but name their owner."""
RECORD_TIMEOUT = 600.0  # seconds per upstream read: a judge may think long (OpenAI's SDK)
MAX_BODY_BYTES = 50 * 1024 * 1024  # a non-streamed answer larger than this is refused
_NOT_FORWARDED = HOP_HEADERS | {"host", "content-length", "expect"}
_STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"


def is_final(status: int) -> bool:
    return status < 500 and status not in NOT_FINAL_STATUS


def _redact(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, "[redacted]" if k.lower() in REDACTED_ALSO else v)
            for k, v in redact_headers(headers)]


def _raw(headers: httpx.Headers) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers.raw]


def _bare_client(policy: AddressPolicy | None) -> httpx.Client:
    """An httpx client that adds no header of its own (no Accept-Encoding the client did
    not ask for): what goes upstream is what the client sent."""
    client = http_client(RECORD_TIMEOUT, policy)
    for name in list(client.headers):
        del client.headers[name]
    return client


def _line(status: int, reason: str, service: str, message: str) -> Answer:
    body = f"amber serve --record: {message}\n".encode()
    return Answer(status, reason, [("Content-Type", "text/plain; charset=utf-8"),
                                   ("X-Amber-Match", "error")],
                  "error", service, body=body, length=len(body))


@dataclass
class _Call:
    """One request on its way upstream."""

    service: str
    method: str
    url: str  # upstream
    headers: list[tuple[str, str]]  # as the client sent them
    body: bytes
    ident: RequestKey
    started: datetime = field(default_factory=lambda: datetime.now(UTC))


class _Relay:
    """A streamed answer passed on chunk by chunk; ``on_end`` gets the chunks once it
    has been read to the end (None when the client or upstream left early)."""

    def __init__(self, response: httpx.Response,
                 on_end: Callable[[list[bytes] | None], None]) -> None:
        self._response = response
        self._on_end = on_end
        self._pieces: list[bytes] = []
        self._complete = False
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._response.iter_raw():
                if chunk:
                    self._pieces.append(chunk)
                    yield chunk
            self._complete = True
        except (httpx.HTTPError, OSError):
            pass  # upstream broke off: the client gets a short stream, nothing is recorded
        finally:
            self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._response.close()
        self._on_end(self._pieces if self._complete else None)


class Recorder:
    """Forwards and records into one bundle until :meth:`finish`.

    Example::

        recorder = Recorder("run.bundle", Upstreams.from_env())
        with BaseUrlServer(None, recorder=recorder) as server:
            ...  # point SERPER_BASE_URL, OPENAI_BASE_URL, ... at server.url
        recorder.finish()
    """

    def __init__(self, root: str | Path, upstreams: Upstreams,
                 allow_private_addresses: bool = False, mode: str = "base-url") -> None:
        self.upstreams = upstreams
        self.bundle = Bundle.create(root)
        try:
            ensure_table(self.bundle.index)
        except BaseException:
            self.bundle.close()
            raise
        self.root = self.bundle.root
        self._info = {"software": manifest.software(),
                      "amber-recorder": f"amber serve --record ({mode} mode)",
                      "amber-upstreams": json.dumps(dict(upstreams.bases), sort_keys=True)}
        self._services = _bare_client(None)
        self._policy = AddressPolicy(allow_private=allow_private_addresses)
        self._pages = _bare_client(self._policy)
        self._write_lock = threading.RLock()  # the WARC writer and the index connection
        self._flight_lock = threading.Lock()
        self._flights: dict[str, threading.Event] = {}
        self._closed = False
        self.counts: Counter[tuple[str, str]] = Counter()
        self._count_lock = threading.Lock()

    # -- the two ways in -------------------------------------------------------------
    def answer_base(self, method: str, target: str, headers: list[tuple[str, str]],
                    body: bytes) -> Answer:
        """A request to the base-URL server (``target``: path and query)."""
        service = service_for_path(target)
        url = self.upstreams.url(service, target)
        ident = request_key(service, method, target, headers, body)
        return self._answer(_Call(service, method, url, headers, body, ident))

    def answer_proxied(self, method: str, url: str, headers: list[tuple[str, str]],
                       body: bytes) -> Answer:
        """A request the proxy intercepted, by its absolute URL: the real service hosts
        go to their upstreams, any other URL is a plain page fetched as asked."""
        parts = urlsplit(url)
        service = SERVICE_HOSTS.get((parts.hostname or "").lower())
        if service is None:
            ident = request_key("direct", method, url, headers, body)
            return self._answer(_Call("direct", method, url, headers, body, ident))
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        ident = request_key(service, method, target, headers, body)
        upstream = self.upstreams.url(service, target)
        return self._answer(_Call(service, method, upstream, headers, body, ident))

    # -- answering ---------------------------------------------------------------------
    def _answer(self, call: _Call) -> Answer:
        key = call.ident.key
        if key is None:
            return self._forward(call, lambda: None)
        while True:
            with self._flight_lock:
                again = self._recorded(call.service, key, call.method)
                if again is not None:
                    self._count(call.service, "repeated")
                    return again
                waiting = self._flights.get(key)
                if waiting is None:
                    done = threading.Event()
                    self._flights[key] = done
                    break
            waiting.wait()

        def release() -> None:
            with self._flight_lock:
                self._flights.pop(key, None)
            done.set()

        try:
            return self._forward(call, release)
        except BaseException:
            release()
            raise

    def _recorded(self, service: str, key: str, method: str) -> Answer | None:
        """The final answer already in the bundle for ``key``, replayed from it."""
        with self._write_lock:
            if self._closed:
                return None
            index = self.bundle.index
            if service in JUDGE_SERVICES:
                row = index.one(f"SELECT * FROM {TABLE} WHERE request_key = ? AND final = 1",
                                [key])
                if row is None:
                    return None
                item = exchange_item(self.root, 0, index, row)
                answer = replay_exchange(item, chunk_lengths(row), method.upper() == "HEAD")
            else:
                row = index.one("SELECT * FROM captures WHERE request_key = ? AND "
                                "(state = 'ok' OR permanent = 1)", [key])
                if row is None or not row["response_record"]:
                    return None
                answer = replay(self._capture_item(service, row), method.upper() == "HEAD")
        answer.match = "repeated"
        return answer

    def _capture_item(self, service: str, row: dict[str, Any]) -> Frozen:
        rec = self.bundle.index.record(row["response_record"])
        if rec is None:
            raise BundleError(f"record {row['response_record']} is not in the index")
        loc = RecordLoc(self.root / "archive" / rec["warc_file"], rec["offset"],
                        rec["length"], rec["record_id"])
        return Frozen(service=service, key=row["request_key"], label=row["url"],
                      bundle=str(self.root), bundle_order=0, capture_id=row["id"],
                      captured_at=row["captured_at"], response=loc, payload=loc,
                      digest=row["payload_sha256"], status=row["status"], error=row["error"])

    def _forward(self, call: _Call, release: Callable[[], None]) -> Answer:
        client = self._pages if call.service == "direct" else self._services
        problem = self._policy.url_problem(call.url) if call.service == "direct" else None
        if problem is not None:
            release()
            self._count(call.service, "failed")
            return _line(403, "Forbidden", call.service, f"{archived_url(call.url)}: {problem}")
        sent = [(k, v) for k, v in call.headers
                if k.lower() not in _NOT_FORWARDED and not k.lower().startswith("proxy-")]
        try:
            request = client.build_request(call.method, call.url, headers=sent,
                                           content=call.body or None)
            response = client.send(request, stream=True)
        except (httpx.HTTPError, OSError, ValueError) as exc:
            release()
            self._count(call.service, "failed")
            reason = blocked_reason(exc)
            if reason is not None:
                return _line(403, "Forbidden", call.service,
                             f"{archived_url(call.url)}: {reason}")
            return _line(502, "Bad Gateway", call.service, f"upstream {call.service} "
                         f"({archived_url(call.url)}) did not answer: {type(exc).__name__}")
        sent_headers = _redact(_raw(request.headers))
        answer_headers = [(k, v) for k, v in _raw(response.headers)
                          if k.lower() not in HOP_HEADERS] + [("X-Amber-Match", "recorded")]
        answer = Answer(response.status_code, response.reason_phrase, answer_headers,
                        "recorded", call.service)

        def exchange(body: bytes) -> Exchange:
            return Exchange(call.method, archived_url(call.url), sent_headers, call.body,
                            call.started, response.status_code, response.reason_phrase,
                            response.http_version,
                            _redact([(k, v) for k, v in _raw(response.headers)
                                     if k.lower() != "transfer-encoding"]), body)

        if "text/event-stream" in (response.headers.get("content-type") or "").lower():
            def on_end(pieces: list[bytes] | None) -> None:
                try:
                    if pieces is None:
                        self._count(call.service, "unrecorded")
                    else:
                        self._write(call, exchange(b"".join(pieces)),
                                    [len(p) for p in pieces])
                finally:
                    release()

            answer.live = _Relay(response, on_end)
            return answer
        try:
            data = bytearray()
            for chunk in response.iter_raw():
                data += chunk
                if len(data) > MAX_BODY_BYTES:
                    release()
                    self._count(call.service, "failed")
                    return _line(502, "Bad Gateway", call.service,
                                 f"the answer is larger than {MAX_BODY_BYTES} bytes")
        except (httpx.HTTPError, OSError) as exc:
            release()
            self._count(call.service, "failed")
            return _line(502, "Bad Gateway", call.service,
                         f"upstream {call.service} broke off its answer ({type(exc).__name__})")
        finally:
            response.close()
        body = bytes(data)
        try:
            self._write(call, exchange(body), None)
        finally:
            release()
        answer.body = body
        answer.length = len(body)
        return answer

    # -- writing -----------------------------------------------------------------------
    def _write(self, call: _Call, exchange: Exchange, lengths: list[int] | None) -> None:
        """Archive one exchange: WARC records first (flushed), then its index rows in
        one transaction."""
        with self._write_lock:
            if self._closed:
                self._count(call.service, "unrecorded")
                return
            warc = self.bundle.warc(self._info)
            request_ref, response_ref = warc.write_exchange(exchange)
            refs = [response_ref, request_ref]
            chunks_ref = None
            if lengths is not None:
                chunks_ref = warc.write_metadata(
                    CHUNKS_URI + response_ref.record_id,
                    dumps({"amber": "stream-chunks", "lengths": lengths}),
                    refers_to=response_ref.record_id)
                refs.append(chunks_ref)
            warc.flush()
            final = is_final(exchange.status or 0) and call.ident.key is not None
            index = self.bundle.index
            with index.transaction():
                for ref in refs:
                    index.add_record(ref)
                if call.service in JUDGE_SERVICES:
                    self._judge_row(call, exchange, final, request_ref.record_id,
                                    response_ref.record_id, chunks_ref, lengths)
                else:
                    self._capture_row(call, exchange, final, request_ref.record_id,
                                      response_ref.record_id)
                if not final:  # archived, but never the answer to a replayed request
                    index.put("failures", {
                        "capture_key": call.ident.key or "", "url": exchange.url,
                        "at": call.started.strftime(_STAMP), "status": exchange.status,
                        "error": call.ident.why or f"HTTP {exchange.status} (not final)",
                        "permanent": 0, "attempts": 1,
                        "record_id": response_ref.record_id})
            self._count(call.service, "recorded")

    def _judge_row(self, call: _Call, exchange: Exchange, final: bool, request_id: str,
                   response_id: str, chunks_ref: Any, lengths: list[int] | None) -> None:
        key = call.ident.key or ""
        existing = self.bundle.index.one(f"SELECT final FROM {TABLE} WHERE request_key = ?",
                                         [key])
        if existing is not None and existing["final"]:
            return  # a final answer came first (two clients raced past the flight check)
        self.bundle.index.put(TABLE, {
            "id": f"jx-{key[:16]}", "request_key": key, "provider": call.service,
            "model": call.ident.model, "operation": call.ident.operation or "",
            "stream": int(lengths is not None), "status": exchange.status,
            "final": int(final), "url": exchange.url, "request_record": request_id,
            "response_record": response_id,
            "chunks_record": chunks_ref.record_id if chunks_ref is not None else None,
            "chunk_lengths": json.dumps(lengths) if lengths is not None else None,
            "payload_sha256": _sha256(exchange.body), "payload_bytes": len(exchange.body),
            "recorded_at": call.started.strftime(_STAMP)})

    def _capture_row(self, call: _Call, exchange: Exchange, final: bool, request_id: str,
                     response_id: str) -> None:
        key = call.ident.key
        if key is None:
            return  # archived and listed in failures: the replay never answers with it
        index = self.bundle.index
        existing = index.capture_by_key(key)
        if existing is not None and (existing["state"] == "ok" or existing["permanent"]):
            return
        cid = f"cap-{key[:16]}"
        ok = exchange.ok
        url = exchange.url if call.service in ("serper", "direct") else \
            archived_url(call.ident.url or exchange.url)
        index.upsert_capture({
            "id": cid, "request_key": key, "kind": "search" if call.service == "serper"
            else "page", "url": url, "fetch_url": exchange.url, "final_url": None,
            "reader": call.service, "state": "ok" if ok else "failed",
            "permanent": int(final and not ok), "status": exchange.status,
            "error": None if ok else f"HTTP {exchange.status}", "attempts": 1,
            "content_type": exchange.header("content-type"),
            "payload_sha256": _sha256(exchange.body), "payload_bytes": len(exchange.body),
            "request_record": request_id, "response_record": response_id,
            "revisit_of": None, "captured_at": call.started.strftime(_STAMP)})
        if call.service == "serper" and ok:
            index.db.conn.execute("DELETE FROM search_results WHERE capture_id = ?", [cid])
            try:
                results = parse_results(exchange.decoded_body())
            except (ValueError, TypeError, AttributeError):
                results = []
            for r in results:
                index.put("search_results", {"capture_id": cid, **r.__dict__})

    def _count(self, service: str, outcome: str) -> None:
        with self._count_lock:
            self.counts[(service, outcome)] += 1

    # -- the end -----------------------------------------------------------------------
    def finish(self) -> dict[str, Any]:
        """Seal the bundle (CDXJ index, pages, datapackage) and release it; answers still
        in flight afterwards reach their clients but are not recorded."""
        with self._write_lock:
            if self._closed:
                return self.summary()
            self._closed = True
            try:
                self.bundle.finalize()
            finally:
                self.bundle.close()
                self._services.close()
                self._pages.close()
        return self.summary()

    def summary(self) -> dict[str, Any]:
        with self._count_lock:
            counts = dict(self.counts)
        by_service: dict[str, dict[str, int]] = {}
        for (service, outcome), n in sorted(counts.items()):
            by_service.setdefault(service, {})[outcome] = n
        total = Counter[str]()
        for (_, outcome), n in counts.items():
            total[outcome] += n
        return {"bundle": str(self.root), "recorded": total["recorded"],
                "repeated": total["repeated"], "failed": total["failed"],
                "unrecorded": total["unrecorded"], "by_service": by_service}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
