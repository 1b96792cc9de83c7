"""WARCs Amber writes are accepted by tools no one here wrote, and Amber reads theirs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from ambereval.snapshots import Bundle, ClaimInput, capture_claims, capture_urls
from ambereval.snapshots.bundle.warc import read_record

from conftest import example_claims, fast_options, shared
from fakeweb import FakeWeb, shared_html_pages

BIN = Path(sys.executable).parent


def tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / name), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("interop") / "bundle"
    with FakeWeb() as web:
        claims = [ClaimInput(c["id"], c["text"], tuple(c.get("urls", ())),  # type: ignore[arg-type]
                             tuple(c.get("queries", ())))  # type: ignore[arg-type]
                  for c in example_claims(web)]
        capture_claims(out, claims, fast_options(web, reader="direct"))
        capture_urls(out, [web.url("/pages/dup-a.html"), web.url("/pages/dup-b.html")],
                     fast_options(web, reader="direct"))
        capture_urls(out, [web.url("/redirect"), "http://127.0.0.1:9/x"],
                     fast_options(web, reader="jina"))
    return out


def test_warcio_check_accepts_every_warc(bundle: Path) -> None:
    warcs = sorted((bundle / "archive").glob("*.warc.gz"))
    assert len(warcs) == 3
    for warc in warcs:
        done = tool("warcio", "check", "-v", str(warc))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "digest pass" in done.stdout and "digest fail" not in done.stdout


def test_warcio_index_matches_our_index(bundle: Path) -> None:
    with Bundle.open(bundle) as b:
        ours = {(r["warc_file"], r["offset"], r["length"], r["record_id"])
                for r in b.index.rows("SELECT * FROM records")}
    theirs = set()
    for warc in sorted((bundle / "archive").glob("*.warc.gz")):
        done = tool("warcio", "index", "-f", "offset,length,warc-record-id", str(warc))
        assert done.returncode == 0, done.stderr
        for line in done.stdout.splitlines():
            row = json.loads(line)
            theirs.add((warc.name, int(row["offset"]), int(row["length"]),
                        row["warc-record-id"]))
    assert ours == theirs


def test_cdxj_indexer_indexes_them(bundle: Path) -> None:
    warcs = [str(p) for p in sorted((bundle / "archive").glob("*.warc.gz"))]
    done = tool("cdxj-indexer", *warcs)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any("/pages/eiffel.html" in line and '"status": "200"' in line for line in lines)
    assert any('"mime": "warc/revisit"' in line for line in lines)


def test_our_reader_reads_real_third_party_warcs() -> None:
    for rel in ("pywb/iana.warc.gz", "warcio/example.warc.gz", "pywb/example-wpull.warc.gz"):
        path = shared("warc", *rel.split("/"))
        done = tool("warcio", "index", "-f", "offset,length,warc-type,warc-target-uri",
                    str(path))
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        assert rows, rel
        with open(path, "rb") as fh:
            it = ArchiveIterator(fh)
            bodies = {}
            for record in it:
                if record.rec_type in ("response", "resource", "request"):
                    bodies[it.get_record_offset()] = record.content_stream().read()
        for row in rows:
            rec = read_record(path, int(row["offset"]), int(row["length"]))
            assert rec.type == row["warc-type"]
            assert rec.target_uri == row.get("warc-target-uri")
            if int(row["offset"]) in bodies:
                assert rec.body == bodies[int(row["offset"])]


def test_real_pages_served_and_extracted(tmp_path: Path) -> None:
    pages = shared_html_pages(limit=6)
    if not pages:
        pytest.skip("shared html pages not available")
    with FakeWeb() as web:
        urls = [web.url(p) for p in sorted(pages)]
        capture_urls(tmp_path / "b", urls, fast_options(web, reader="direct"))
    with Bundle.open(tmp_path / "b") as b:
        texts = [b.read_capture(u) for u in urls]
    assert all(t.state == "ok" for t in texts)
    assert sum(1 for t in texts if t.text_status == "ok" and len(t.text or "") > 500) >= 5

