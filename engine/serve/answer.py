"""What ``amber serve`` sends back: a captured response streamed from its WARC offset, a
response rendered from a captured one (fewer Serper results, Jina's text format from its
JSON envelope), or a miss.

Every answer carries ``X-Amber-Match`` (``exact``, ``rendered`` or ``miss``) and, when it
came from the bundle, ``X-Amber-Record`` (the WARC-Record-ID of the response record),
``X-Amber-Bundle``, ``X-Amber-Capture`` and ``X-Amber-Captured-At``.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.limitreader import LimitReader

from ambereval.errors import BundleError
from ambereval.snapshots.capture.transport import REDACTED

CHUNK = 64 * 1024
# never replayed: they describe one hop's connection, not the captured resource
HOP_HEADERS = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "trailer",
                         "upgrade", "proxy-authenticate", "proxy-authorization",
                         "proxy-connection", "content-length"})


@dataclass(frozen=True)
class RecordLoc:
    """One WARC record: file, offset and length of its gzip member, and its id."""

    path: Path
    offset: int
    length: int
    record_id: str


@dataclass(frozen=True)
class Frozen:
    """One captured exchange the server can answer with."""

    service: str  # serper | jina | direct
    key: str
    label: str  # the URL or query, for messages
    bundle: str
    bundle_order: int
    capture_id: str | None
    captured_at: str
    response: RecordLoc | None  # status and headers (a revisit for a deduplicated body)
    payload: RecordLoc | None  # the record holding the body (the original for a revisit)
    digest: str | None  # identity of the bytes, to tell conflicts from duplicates
    status: int | None
    error: str | None
    num: int | None = None  # Serper: results asked at capture time
    content_type: str | None = None  # of the captured response

    def provenance(self) -> list[tuple[str, str]]:
        out = [("X-Amber-Bundle", self.bundle)]
        if self.response is not None:
            out.append(("X-Amber-Record", self.response.record_id))
        if self.payload is not None and self.response is not None \
                and self.payload.record_id != self.response.record_id:
            out.append(("X-Amber-Payload-Record", self.payload.record_id))
        if self.capture_id:
            out.append(("X-Amber-Capture", self.capture_id))
        out.append(("X-Amber-Captured-At", self.captured_at))
        return out


class _Opened:
    """A record opened at its offset: HTTP headers parsed, payload left on the stream."""

    def __init__(self, loc: RecordLoc) -> None:
        self._fh: BinaryIO = open(loc.path, "rb")  # noqa: SIM115 (closed by close())
        try:
            self._fh.seek(loc.offset)
            records = ArchiveIterator(LimitReader(self._fh, loc.length), check_digests=False)
            self.record = next(iter(records))
        except (ArchiveLoadFailed, StopIteration, EOFError, OSError, ValueError,
                zlib.error) as exc:
            self._fh.close()
            raise BundleError(f"{loc.path.name}: no readable record {loc.record_id} at "
                              f"offset {loc.offset} ({type(exc).__name__})",
                              hint="run `amber bundle verify`") from None
        except BaseException:
            self._fh.close()
            raise

    def close(self) -> None:
        self._fh.close()


@dataclass
class Answer:
    """A response ready to send; ``chunks()`` streams it and closes what it opened."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    match: str
    service: str
    body: bytes | None = None
    miss_reason: str | None = None
    record_id: str | None = None
    #: for a ``nearest`` answer: the output options in which the capture differs
    nearest: list[str] | None = None
    _stream: Any = None
    _opened: list[_Opened] = field(default_factory=list)
    length: int = 0
    # a stream (server-sent events): sent with chunked transfer coding, one HTTP chunk per
    # piece, in these sizes (of ``body``, or of a recorded stream) or as ``live`` yields
    # them (a live one)
    chunk_sizes: list[int] | None = None
    live: Iterable[bytes] | None = None

    @property
    def chunked(self) -> bool:
        return self.chunk_sizes is not None or self.live is not None

    def chunks(self) -> Iterator[bytes]:
        try:
            if self.live is not None:
                yield from self.live
                return
            if self.body is not None:
                start = 0
                for size in self.chunk_sizes or [len(self.body)]:
                    if size:
                        yield self.body[start:start + size]
                    start += size
                return
            if self.chunk_sizes is not None:
                for size in self.chunk_sizes:
                    piece = self._stream.read(size)
                    while 0 < len(piece) < size:
                        more = self._stream.read(size - len(piece))
                        if not more:
                            break
                        piece += more
                    if not piece:
                        break
                    yield piece
                return
            left = self.length
            while left > 0:
                data = self._stream.read(min(CHUNK, left))
                if not data:
                    break
                left -= len(data)
                yield data
        finally:
            self.close()

    def read(self) -> bytes:
        return b"".join(self.chunks())

    def close(self) -> None:
        close = getattr(self.live, "close", None)
        if close is not None:
            close()  # a live stream left early: its finally clause runs now
        for opened in self._opened:
            opened.close()
        self._opened.clear()

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None


def miss(service: str, reason: str) -> Answer:
    """404 with a one-line reason; nothing was fetched from anywhere."""
    line = f"amber serve: not in the bundle: {reason}\n".encode()
    return Answer(404, "Not Found", [("Content-Type", "text/plain; charset=utf-8"),
                                     ("X-Amber-Match", "miss"),
                                     ("X-Amber-Miss", reason.encode("ascii", "replace")
                                      .decode("ascii"))],
                  "miss", service, body=line, miss_reason=reason, length=len(line))


def no_response(item: Frozen) -> Answer:
    """The capture got no response at all (timeout, refused, DNS): a 502 naming why."""
    error = item.error or "no response"
    line = f"amber serve: the capture got no response: {error}\n".encode()
    headers = [("Content-Type", "text/plain; charset=utf-8"), ("X-Amber-Match", "exact"),
               ("X-Amber-Error", error.encode("ascii", "replace").decode("ascii")),
               *item.provenance()]
    return Answer(502, "Bad Gateway", headers, "exact", item.service, body=line,
                  length=len(line))


def replay(item: Frozen, head_only: bool = False) -> Answer:
    """The captured response, status and headers as archived, body streamed by offset."""
    if item.response is None:
        return no_response(item)
    opened = _Opened(item.response)
    answer = Answer(0, "", [], "exact", item.service, record_id=item.response.record_id)
    answer._opened.append(opened)
    try:
        http = opened.record.http_headers
        code = http.get_statuscode() if http is not None else None
        answer.status = int(code) if code and code.isdigit() else 200
        answer.reason = http.statusline.partition(" ")[2] if http is not None else ""
        headers = list(http.headers) if http is not None else []
        answer.headers = [(k, v) for k, v in headers
                          if k.lower() not in HOP_HEADERS and v != REDACTED]
        answer.headers += [("X-Amber-Match", "exact"), *item.provenance()]
        source = opened
        if item.payload is not None and item.payload.record_id != item.response.record_id:
            source = _Opened(item.payload)
            answer._opened.append(source)
        if head_only:
            answer.body = b""
            answer.length = max(0, source.record.payload_length)
            return answer
        answer._stream = source.record.raw_stream
        answer.length = max(0, source.record.payload_length)
    except BaseException:
        answer.close()
        raise
    return answer


def decoded_payload(item: Frozen) -> tuple[int, list[tuple[str, str]], bytes]:
    """(status, headers, body with content-encoding undone) of a capture, read whole
    (only for small service answers that are rendered, never for pages)."""
    answer = replay(item)
    body = answer.read()
    encoding = (answer.header("content-encoding") or "").lower().strip()
    if encoding in ("gzip", "x-gzip"):
        body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        try:
            body = zlib.decompress(body)
        except zlib.error:
            body = zlib.decompress(body, -zlib.MAX_WBITS)
    return answer.status, answer.headers, body


def rendered(item: Frozen, body: bytes, content_type: str, why: str) -> Answer:
    headers = [("Content-Type", content_type), ("X-Amber-Match", "rendered"),
               ("X-Amber-Rendered", why), *item.provenance()]
    return Answer(200, "OK", headers, "rendered", item.service, body=body,
                  record_id=item.response.record_id if item.response else None,
                  length=len(body))


def serper_top(item: Frozen, num: int) -> Answer:
    """The captured search cut to its top ``num`` organic results."""
    _, _, body = decoded_payload(item)
    data = json.loads(body)
    data["organic"] = list(data.get("organic") or [])[:num]
    if isinstance(data.get("searchParameters"), dict) and "num" in data["searchParameters"]:
        data["searchParameters"]["num"] = num
    out = json.dumps(data, ensure_ascii=False).encode("utf-8")
    return rendered(item, out, "application/json; charset=utf-8",
                    f"top {num} of {item.num} captured results")


def jina_envelope(body: bytes) -> dict[str, Any] | None:
    """The ``data`` object of a Jina JSON answer, or None when the body is not one."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    data = doc.get("data") if isinstance(doc, dict) else None
    return data if isinstance(data, dict) else None


def jina_text(data: dict[str, Any]) -> bytes:
    """Jina Reader's plain-text answer, from the fields of its JSON envelope."""
    lines = [f"Title: {data.get('title') or ''}", "", f"URL Source: {data.get('url') or ''}",
             ""]
    if data.get("publishedTime"):
        lines += [f"Published Time: {data['publishedTime']}", ""]
    if data.get("warning"):
        lines += [f"Warning: {data['warning']}", ""]
    lines += ["Markdown Content:", str(data.get("content") or "")]
    return ("\n".join(lines) + "\n").encode("utf-8")


_TEXT_FIELDS = {"Title": "title", "URL Source": "url", "Published Time": "publishedTime",
                "Warning": "warning", "Description": "description"}


def jina_fields(body: bytes) -> dict[str, Any]:
    """The fields of Jina Reader's JSON envelope, read back from its plain-text answer
    (``Title:``, ``URL Source:``, ``Published Time:`` ... ``Markdown Content:``). Fields
    the text does not carry are present and empty, as a client indexing them expects."""
    text = body.decode("utf-8", errors="replace")
    fields: dict[str, Any] = {"title": "", "description": "", "url": "", "content": "",
                              "publishedTime": "", "usage": {}}
    head, marker, content = text.partition("Markdown Content:\n")
    if not marker:
        head, content = "", text
    for line in head.splitlines():
        name, sep, value = line.partition(": ")
        if sep and name in _TEXT_FIELDS:
            fields[_TEXT_FIELDS[name]] = value.strip()
    fields["content"] = content.removesuffix("\n")
    return fields
