"""Capture benchmark: throughput at 1/4/16 concurrent fetches, bytes per page, verify MB/s.

Runs against the loopback fakes with a fixed per-page server latency (default 40 ms,
like a fast real site), so concurrency has something to hide. Every figure is measured
in this one run; one line per figure.

    .venv/bin/python scripts/bench_capture.py [--pages 120] [--latency 0.04]
        [--before /tmp/old] [--repeat 3]

With ``--before`` (the PYTHONPATH of an older copy of the code, laid out as the package
``ambereval``), capture at 16 concurrent fetches and ``verify_bundle`` on the captured
bundle are also timed in child processes of both versions, alternately, ``--repeat``
times each; the best times and their ratios are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
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


# run by each version in a child process: capture (16 concurrent), then verify, timed
CHILD = """
import json, sys, time
from pathlib import Path
from ambereval.snapshots import CaptureOptions, RetryPolicy, capture_urls, verify_bundle
urls, out = json.loads(sys.argv[1]), Path(sys.argv[2])
opts = CaptureOptions(reader="direct", concurrency=16, serper_rate=None, reader_rate=None,
                      policy=RetryPolicy(timeout=30), allow_private_addresses=True)
start = time.perf_counter()
summary = capture_urls(out, urls, opts)
capture = time.perf_counter() - start
assert summary.captured == len(urls)
start = time.perf_counter()
report = verify_bundle(out)
verify = time.perf_counter() - start
assert report.ok, report.mismatch
import ambereval
print(json.dumps({"capture": capture, "verify": verify, "bytes": report.bytes,
                  "code": ambereval.__file__}))
"""


def compare_versions(urls: list[str], before: Path, work: Path, repeat: int) -> None:
    """Best-of-``repeat`` capture and verify times of this code and of ``before``."""
    before = before.resolve()  # the children run elsewhere
    versions = {"now": {**os.environ}, "before": {**os.environ, "PYTHONPATH": str(before)}}
    best: dict[str, dict[str, float]] = {}
    for i in range(repeat):
        for name, env in versions.items():
            out = work / f"{name}-{i}"
            done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(urls), str(out)],
                                  env=env, cwd=work, capture_output=True, text=True,
                                  check=True)  # cwd: not the checkout, which would shadow
            got = json.loads(done.stdout.strip().splitlines()[-1])
            if name == "before" and str(before) not in got["code"]:
                raise SystemExit(f"--before did not load: the child ran {got['code']}")
            mine = best.setdefault(name, {"capture": float("inf"), "verify": float("inf")})
            for key in ("capture", "verify"):
                mine[key] = min(mine[key], got[key])
            mine["bytes"] = got["bytes"]
            shutil.rmtree(out, ignore_errors=True)
    for key, what in (("capture", "capture, 16 concurrent"), ("verify", "bundle verify")):
        now, old = best["now"][key], best["before"][key]
        print(f"{what}: {now:.2f} s now, {old:.2f} s before: {now / old:.2f}x the time "
              f"(best of {repeat}; {len(urls)} pages, {best['now']['bytes'] / 1e6:.1f} MB)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=120)
    ap.add_argument("--latency", type=float, default=0.04)
    ap.add_argument("--before", type=Path, help="PYTHONPATH of an older copy of the code")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
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
            if args.before:
                compare_versions(urls, args.before, work, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
