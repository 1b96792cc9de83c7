"""Capture benchmark: throughput at 1/4/16 concurrent fetches, bytes per page, verify MB/s.

Runs against the loopback fakes with a fixed per-page server latency (default 40 ms,
like a fast real site), so concurrency has something to hide. Every figure is measured
in this one run; one line per figure.

    .venv/bin/python scripts/bench_capture.py [--pages 120] [--latency 0.04]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from ambereval.snapshots import CaptureOptions, RetryPolicy, capture_urls, verify_bundle  # noqa: E402

from fakeweb import FakeWeb, Page, html_page, shared_html_pages  # noqa: E402


def corpus(n: int) -> dict[str, Page]:
    real = list(shared_html_pages(limit=40).values())
    pages: dict[str, Page] = {}
    for i in range(n):
        if real:
            src = real[i % len(real)]
            # make every payload distinct so dedup does not flatter the numbers
            pages[f"/pages/p{i:05d}.html"] = Page(src.body + f"<!-- {i} -->".encode())
        else:
            pages[f"/pages/p{i:05d}.html"] = html_page(f"Page {i}", f"Paragraph {i}. " * 200)
    return pages


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=120)
    ap.add_argument("--latency", type=float, default=0.04)
    args = ap.parse_args()
    pages = corpus(args.pages)
    work = Path(tempfile.mkdtemp(prefix="amber-bench-"))
    try:
        with FakeWeb(pages=pages, slow_delay=args.latency / 8) as web:
            urls = [web.url(p) for p in sorted(pages)]
            results = {}
            for conc in (1, 4, 16):
                out = work / f"c{conc}"
                opts = CaptureOptions(reader="direct", concurrency=conc, serper_rate=None,
                                      reader_rate=None, policy=RetryPolicy(timeout=30),
                                      allow_private_addresses=True)
                start = time.perf_counter()
                summary = capture_urls(out, urls, opts)
                elapsed = time.perf_counter() - start
                assert summary.captured == len(urls), summary.failures[:3]
                results[conc] = len(urls) / elapsed
                print(f"capture throughput, {conc:>2} concurrent: {results[conc]:7.1f} pages/s "
                      f"({len(urls)} pages, {args.latency * 1000:.0f} ms server latency)")
            print(f"speed-up 4 vs 1 concurrent: {results[4] / results[1]:.2f}x; "
                  f"16 vs 1: {results[16] / results[1]:.2f}x")
            out = work / "c16"
            total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
            warc = sum(p.stat().st_size for p in (out / "archive").glob("*.warc.gz"))
            raw = sum(len(p.body) for p in pages.values())
            print(f"bundle bytes per captured page: {total / len(urls):,.0f} "
                  f"(WARC {warc / len(urls):,.0f}; raw HTML {raw / len(urls):,.0f})")
            start = time.perf_counter()
            report = verify_bundle(out)
            elapsed = time.perf_counter() - start
            assert report.ok, report.mismatch
            print(f"bundle verify: {report.bytes / elapsed / 1e6:.1f} MB/s "
                  f"({report.bytes / 1e6:.1f} MB, {report.records} records)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
