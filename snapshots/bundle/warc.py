"""Writing and reading WARC/1.1 records, one gzip member per record.

The writer returns a :class:`RecordRef` for every record: file, offset, length and
digests, which the SQLite index stores so any record is reachable by a single seek.
Ids and dates come from injectable factories so record bytes can be golden-tested.
"""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ambereval.snapshots.bundle.warcio_without_fsspec import (
    ArchiveIterator,
    ArcWarcRecord,
    StatusAndHeaders,
    WARCWriter,
    datetime_to_iso_date,
)

if TYPE_CHECKING:  # annotations only: reading a bundle needs no HTTP client
    from ambereval.snapshots.capture.transport import Exchange

IdFactory = Callable[[], str]
Clock = Callable[[], datetime]


def new_record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


def utc_now() -> datetime:
    return datetime.now(UTC)


def warc_date(moment: datetime) -> str:
    """WARC/1.1 date with microseconds, always UTC."""
    naive = moment.astimezone(UTC).replace(tzinfo=None)
    return datetime_to_iso_date(naive, use_micros=True)


@dataclass(frozen=True)
class RecordRef:
    """Where one record lives and what it claims about itself."""

    record_id: str
    warc_file: str
    offset: int
    length: int
    type: str
    target_uri: str | None
    date: str
    content_type: str | None
    block_digest: str | None
    payload_digest: str | None
    refers_to: str | None = None
    concurrent_to: str | None = None


class _Builder(WARCWriter):
    """warcio's writer with our id and clock factories."""

    def __init__(self, out: BinaryIO, ids: IdFactory, clock: Clock) -> None:
        super().__init__(out, gzip=True, warc_version="1.1")
        self._ids = ids
        self._clock = clock

    def _make_warc_id(self) -> str:  # type: ignore[override]
        return self._ids()

    def curr_warc_date(self) -> str:
        return warc_date(self._clock())


class WarcFile:
    """An open ``.warc.gz`` being appended to; warcinfo is written on creation."""

    def __init__(
        self,
        path: Path,
        info: dict[str, str],
        ids: IdFactory = new_record_id,
        clock: Clock = utc_now,
    ) -> None:
        self.path = path
        self.name = path.name
        self._fh = open(path, "xb")  # noqa: SIM115 (kept open; never clobbers)
        self._builder = _Builder(self._fh, ids, clock)
        record = self._builder.create_warcinfo_record(self.name, info)
        self.warcinfo = self._write(record)

    @property
    def size(self) -> int:
        return self._fh.tell()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()

    def flush(self) -> None:
        """Bytes on disk before the index commit that points at them (SQLite is FULL-synced
        too, so a power cut cannot leave the index ahead of the WARC)."""
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def _write(self, record: ArcWarcRecord) -> RecordRef:
        offset = self._fh.tell()
        self._builder.write_record(record)
        length = self._fh.tell() - offset
        h = record.rec_headers
        return RecordRef(
            record_id=h.get_header("WARC-Record-ID"),
            warc_file=self.name,
            offset=offset,
            length=length,
            type=record.rec_type,
            target_uri=h.get_header("WARC-Target-URI"),
            date=h.get_header("WARC-Date"),
            content_type=h.get_header("Content-Type"),
            block_digest=h.get_header("WARC-Block-Digest"),
            payload_digest=h.get_header("WARC-Payload-Digest"),
            refers_to=h.get_header("WARC-Refers-To"),
            concurrent_to=h.get_header("WARC-Concurrent-To"),
        )

    def write_exchange(self, exchange: Exchange) -> tuple[RecordRef, RecordRef]:
        """Write the response, then its request pointing at it. Returns (request, response)."""
        date = warc_date(exchange.started)
        response = self._builder.create_warc_record(
            exchange.url,
            "response",
            payload=io.BytesIO(exchange.body),
            length=len(exchange.body),
            http_headers=_response_headers(exchange),
            warc_headers_dict={"WARC-Date": date, **({"WARC-Truncated": "length"}
                                                     if exchange.truncated else {})},
        )
        response_ref = self._write(response)
        request_ref = self._write_request(exchange, date, response_ref.record_id)
        return request_ref, response_ref

    def write_request_only(self, exchange: Exchange) -> RecordRef:
        """A request that got no response (timeout, refused, DNS)."""
        return self._write_request(exchange, warc_date(exchange.started), None)

    def _write_request(self, exchange: Exchange, date: str, concurrent: str | None) -> RecordRef:
        from urllib.parse import urlsplit

        parts = urlsplit(exchange.url)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        headers = list(exchange.request_headers)
        http = StatusAndHeaders(
            f"{exchange.method} {target} HTTP/1.1", headers, protocol="", is_http_request=True
        )
        extra = {"WARC-Date": date}
        if concurrent:
            extra["WARC-Concurrent-To"] = concurrent
        request = self._builder.create_warc_record(
            exchange.url,
            "request",
            payload=io.BytesIO(exchange.request_body),
            length=len(exchange.request_body),
            http_headers=http,
            warc_headers_dict=extra,
        )
        return self._write(request)

    def write_conversion(self, uri: str, text: str, refers_to: str, date: str) -> RecordRef:
        data = text.encode("utf-8")
        record = self._builder.create_warc_record(
            uri,
            "conversion",
            payload=io.BytesIO(data),
            length=len(data),
            warc_content_type="text/plain; charset=utf-8",
            warc_headers_dict={"WARC-Refers-To": refers_to, "WARC-Date": date},
        )
        return self._write(record)

    def write_metadata(self, uri: str, body: bytes, refers_to: str | None = None) -> RecordRef:
        extra = {"WARC-Refers-To": refers_to} if refers_to else {}
        record = self._builder.create_warc_record(
            uri,
            "metadata",
            payload=io.BytesIO(body),
            length=len(body),
            warc_content_type="application/json",
            warc_headers_dict=extra,
        )
        return self._write(record)

    def write_resource(self, uri: str, body: bytes, content_type: str) -> RecordRef:
        record = self._builder.create_warc_record(
            uri,
            "resource",
            payload=io.BytesIO(body),
            length=len(body),
            warc_content_type=content_type,
        )
        return self._write(record)

    def write_revisit(
        self, exchange: Exchange, original: RecordRef, payload_digest: str
    ) -> tuple[RecordRef, RecordRef]:
        """An identical-payload revisit: headers kept, body stored once elsewhere."""
        date = warc_date(exchange.started)
        record = self._builder.create_revisit_record(
            exchange.url,
            payload_digest,
            original.target_uri or "",
            original.date,
            http_headers=_response_headers(exchange),
            warc_headers_dict={"WARC-Date": date, "WARC-Refers-To": original.record_id},
        )
        revisit_ref = self._write(record)
        request_ref = self._write_request(exchange, date, revisit_ref.record_id)
        return request_ref, revisit_ref


def _response_headers(exchange: Exchange) -> StatusAndHeaders:
    status_line = f"{exchange.status} {exchange.reason}".strip()
    return StatusAndHeaders(status_line, exchange.response_headers,
                            protocol=exchange.http_version or "HTTP/1.1")


@dataclass
class StoredRecord:
    """A record read back by offset."""

    record_id: str
    type: str
    target_uri: str | None
    date: str
    warc_headers: list[tuple[str, str]]
    status: int | None
    http_headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        for k, v in self.http_headers:
            if k.lower() == name.lower():
                return v
        return None


def read_record(path: Path, offset: int, length: int) -> StoredRecord:
    """Read exactly one record at ``offset``; decodes chunking/content-encoding."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read(length)
    if len(data) != length:
        raise EOFError(f"{path.name}: record at offset {offset} runs past end of file")
    for record in ArchiveIterator(io.BytesIO(data), check_digests=False):
        status = None
        http_headers: list[tuple[str, str]] = []
        if record.http_headers is not None:
            http_headers = list(record.http_headers.headers)
            code = record.http_headers.get_statuscode()
            status = int(code) if code and code.isdigit() else None
        body = record.content_stream().read()
        h = record.rec_headers
        return StoredRecord(
            record_id=h.get_header("WARC-Record-ID"),
            type=record.rec_type,
            target_uri=h.get_header("WARC-Target-URI"),
            date=h.get_header("WARC-Date"),
            warc_headers=list(h.headers),
            status=status,
            http_headers=http_headers,
            body=body,
        )
    raise EOFError(f"{path.name}: no record at offset {offset}")
