"""Crash safety: kill -9 mid-capture, then the next run repairs and completes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from ambereval.snapshots import Bundle, capture_urls, verify_bundle

from conftest import fast_options
from fakeweb import FakeWeb, html_page

N_PAGES = 24


def _captured(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute("SELECT COUNT(*) FROM captures").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


def test_kill_9_mid_capture_then_resume(tmp_path: Path) -> None:
    pages = {f"/pages/p{i:02d}.html": html_page(f"Page {i}", f"Fact number {i} about things.")
             for i in range(N_PAGES)}
    with FakeWeb(pages=pages, slow_delay=0.03) as web:
        urls = tmp_path / "urls.txt"
        urls.write_text("".join(web.url(p) + "\n" for p in sorted(pages)))
        out = tmp_path / "bundle"
        db = out / "evidence" / "amber.sqlite"
        cmd = [sys.executable, "-m", "ambereval.cli", "snapshot", "urls", str(urls),
               "--out", str(out), "--reader", "direct", "-j", "2", "--rate", "0",
               "--allow-private-addresses"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while _captured(db) < 6 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        before = {}
        conn = sqlite3.connect(db)
        for cid, rec in conn.execute("SELECT id, response_record FROM captures"):
            before[cid] = rec
        conn.close()
        assert 6 <= len(before) < N_PAGES, "the kill landed mid-capture"
        hits_before = len(web.seen)

        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        # only what was missing was fetched again
        assert len(web.seen) - hits_before <= N_PAGES - len(before) + 2
    with Bundle.open(out) as b:
        rows = b.index.rows("SELECT id, response_record, state FROM captures")
        assert len(rows) == N_PAGES and all(r["state"] == "ok" for r in rows)
        now = {r["id"]: r["response_record"] for r in rows}
        for cid, rec in before.items():
            assert now[cid] == rec  # nothing captured before the kill was lost or redone
            assert "Fact number" in (b.read_capture(cid).text or "")
    report = verify_bundle(out)
    assert report.ok, report.mismatch


def test_torn_tail_is_cut_and_capture_completes(web: FakeWeb, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    opts = fast_options(web, reader="direct")
    capture_urls(out, [web.url("/pages/tea.html")], opts)
    warc = next((out / "archive").glob("*.warc.gz"))
    good = warc.stat().st_size
    with open(warc, "ab") as fh:  # half a gzip member, as a crash mid-write leaves it
        fh.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03partial-record")
    assert not verify_bundle(out).ok
    summary = capture_urls(out, [web.url("/pages/tea.html"), web.url("/pages/rhine.html")], opts)
    assert summary.repaired == [f"{warc.name}: cut a torn tail of 24 bytes at offset {good}, "
                                f"kept in .amber-repaired/{warc.name}.tail-{good}"]
    assert summary.captured == 1 and summary.skipped == 1
    assert warc.stat().st_size == good
    assert verify_bundle(out).ok


def test_second_writer_is_refused(web: FakeWeb, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    capture_urls(out, [web.url("/pages/tea.html")], fast_options(web, reader="direct"))
    from ambereval.snapshots import BundleError
    with Bundle.create(out):
        try:
            Bundle.create(out)
        except BundleError as err:
            assert "another amber process" in str(err)
        else:
            raise AssertionError("a second writer was allowed")
