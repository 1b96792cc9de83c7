"""WARC bytes: golden file with fixed ids and clock; write -> index -> read round trips."""

from __future__ import annotations

import hashlib
import itertools
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ambereval.snapshots.bundle.warc import WarcFile, read_record
from ambereval.snapshots.capture.transport import Exchange

GOLDEN = Path(__file__).parent / "golden" / "exchange.warc.gz"
MOMENT = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)


def fixed_ids() -> object:
    counter = itertools.count(1)
    return lambda: f"<urn:uuid:00000000-0000-4000-8000-{next(counter):012d}>"


def sample_exchange(body: bytes = b"<html><body><p>Hello</p></body></html>") -> Exchange:
    return Exchange(
        method="GET", url="https://example.org/page?q=1",
        request_headers=[("Host", "example.org"), ("X-API-KEY", "[redacted]")],
        request_body=b"", started=MOMENT, status=200, reason="OK",
        response_headers=[("Content-Type", "text/html; charset=utf-8"),
                          ("Content-Length", str(len(body)))],
        body=body,
    )


def write_sample(path: Path) -> None:
    warc = WarcFile(path, {"software": "amber-eval golden"}, ids=fixed_ids(), clock=lambda: MOMENT)
    _, response = warc.write_exchange(sample_exchange())
    warc.write_conversion("https://example.org/page?q=1", "Hello", response.record_id,
                          "2026-01-02T03:04:05.600000Z")
    warc.write_metadata("urn:amber:claim:c1", b'{"claim":"c1"}')
    warc.close()


def test_golden_bytes(tmp_path: Path) -> None:
    out = tmp_path / "x.warc.gz"
    write_sample(out)
    if os.environ.get("AMBER_UPDATE_GOLDEN"):
        GOLDEN.write_bytes(out.read_bytes())
    assert hashlib.sha256(out.read_bytes()).hexdigest() == \
        hashlib.sha256(GOLDEN.read_bytes()).hexdigest(), \
        "WARC bytes changed: bump the format version and regenerate with AMBER_UPDATE_GOLDEN=1"


header_text = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E,
                                             exclude_characters=":"), min_size=1, max_size=20)


@settings(max_examples=60, deadline=None)
@given(body=st.binary(max_size=3000), text=st.text(max_size=500),
       extra=st.lists(st.tuples(header_text, header_text), max_size=4))
def test_round_trip_write_index_read(body: bytes, text: str, extra: list[tuple[str, str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.warc.gz"
        warc = WarcFile(path, {"software": "t"})
        ex = sample_exchange(body)
        ex.response_headers = [("Content-Type", "application/octet-stream"), *extra]
        request, response = warc.write_exchange(ex)
        conversion = warc.write_conversion(ex.url, text, response.record_id, response.date)
        warc.close()
        got = read_record(path, response.offset, response.length)
        assert got.body == body and got.status == 200 and got.record_id == response.record_id
        assert got.http_headers[1:] == [(k, v.strip()) for k, v in extra]
        req = read_record(path, request.offset, request.length)
        assert req.type == "request"
        assert ("WARC-Concurrent-To", response.record_id) in req.warc_headers
        conv = read_record(path, conversion.offset, conversion.length)
        assert conv.body.decode("utf-8") == text
        assert ("WARC-Refers-To", response.record_id) in conv.warc_headers
