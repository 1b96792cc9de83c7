"""Requests per second through ``amber serve``: base-URL mode and proxy mode (mitmproxy,
TLS to https://r.jina.ai and https://google.serper.dev), at 1 and 32 concurrent clients.

A bundle is captured from the loopback fakes (tests/fakeweb.py): ``--pages`` pages of
about 20 KB read through the Jina fake, and ``--searches`` Serper searches. The fakes are
stopped, ``amber serve`` is started as a real subprocess, and each client (a thread with
its own keep-alive ``requests`` session) asks for pages (Jina JSON) and searches in turn
for ``--seconds``. Clients and server share the machine's cores, so the figures are a
floor for the server.

    .venv/bin/python scripts/bench_serve.py [--pages 40] [--searches 10] [--seconds 8]
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from serve_helpers import free_port, options  # noqa: E402

from ambereval.engine.serve.index import FrozenWeb  # noqa: E402
from ambereval.snapshots import RetryPolicy, capture_claims  # noqa: E402
from ambereval.snapshots.capture.claims_input import ClaimInput  # noqa: E402

from fakeweb import FakeWeb, html_page  # noqa: E402

WORDS = ("river", "tower", "museum", "tea", "python", "bridge", "harbour", "forest")


def build_bundle(out: Path, pages: int, searches: int) -> tuple[list[str], list[str]]:
    site = {}
    for i in range(pages):
        word = WORDS[i % len(WORDS)]
        paragraphs = [f"Page {i} is about the {word} number {i}. " * 8 for _ in range(30)]
        site[f"/pages/p{i:03d}.html"] = html_page(f"Page {i} {word}", *paragraphs)
    with FakeWeb(site) as web:
        urls = [web.url(p) for p in sorted(site)]
        queries = [f"{WORDS[i % len(WORDS)]} number {i}" for i in range(searches)]
        claims = [ClaimInput(id=f"c{i}", text="x", urls=tuple(urls[i::searches]),
                             queries=(queries[i],)) for i in range(searches)]
        capture_claims(out, claims, options(web.env(), reader="jina", top_k=0, concurrency=8,
                                            policy=RetryPolicy(attempts=2, timeout=120)))
    return urls, queries


def start(bundle: Path, port: int, proxy: bool, ca: Path) -> tuple[subprocess.Popen, dict]:
    args = [sys.executable, "-m", "ambereval.cli", "serve", str(bundle), "--port", str(port)]
    if proxy:
        args += ["--proxy", "--ca-dir", str(ca)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [proc.stdout.readline() for _ in range(8 if proxy else 2)]
    env = dict(line[len("export "):].strip().split("=", 1) for line in lines)
    return proc, env


def client(proxy: bool, env: dict[str, str], urls: list[str], queries: list[str],
           stop: float, counts: list[int], errors: list[int], seed: int) -> None:
    session = requests.Session()
    session.trust_env = False
    if proxy:
        session.proxies = {"http": env["HTTP_PROXY"], "https": env["HTTPS_PROXY"]}
        session.verify = env["REQUESTS_CA_BUNDLE"]
        jina, serper = "https://r.jina.ai", "https://google.serper.dev"
    else:
        jina = serper = env["JINA_BASE_URL"]
    work = itertools.cycle([("page", u) for u in urls] + [("search", q) for q in queries])
    for _ in range(seed):
        next(work)
    done = bad = 0
    while time.perf_counter() < stop:
        kind, item = next(work)
        if kind == "page":
            r = session.get(f"{jina}/{item}", headers={"Accept": "application/json"})
        else:
            r = session.post(f"{serper}/search", json={"q": item},
                             headers={"X-API-KEY": "unused"})
        r.content  # noqa: B018 (read the whole body)
        done += 1
        bad += r.status_code != 200 or r.headers.get("X-Amber-Match") not in ("exact",
                                                                                 "rendered")
    counts.append(done)
    errors.append(bad)


def measure(proxy: bool, env: dict[str, str], urls: list[str], queries: list[str],
            clients: int, seconds: float) -> dict[str, Any]:
    counts: list[int] = []
    errors: list[int] = []
    began = time.perf_counter()
    stop = began + seconds
    threads = [threading.Thread(target=client, args=(proxy, env, urls, queries, stop, counts,
                                                     errors, i * 7)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    total = sum(counts)
    return {"mode": "proxy" if proxy else "base-url", "clients": clients, "requests": total,
            "errors": sum(errors), "seconds": wall, "rps": total / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--searches", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "bundle"
        urls, queries = build_bundle(bundle, args.pages, args.searches)
        size = sum(f.stat().st_size for f in (bundle / "archive").glob("*.warc.gz"))
        print(f"bundle: {len(urls)} pages, {len(queries)} searches, {size} WARC bytes; "
              f"{os.cpu_count()} cores shared by server and clients")
        began = time.perf_counter()
        FrozenWeb([bundle])
        print(f"index loaded in {time.perf_counter() - began:.3f} s")
        rows = []
        for proxy in (False, True):
            proc, env = start(bundle, free_port(), proxy, Path(tmp) / "ca")
            try:
                measure(proxy, env, urls, queries, 1, 1.0)  # warm-up: CA, page cache
                for clients in (1, 32):
                    rows.append(measure(proxy, env, urls, queries, clients, args.seconds))
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=60)
    print(f"{'mode':<9} {'clients':>7} {'requests':>9} {'errors':>6} {'req/s':>8} "
          f"{'vs 1 client':>11}")
    for row in rows:
        base = next(r for r in rows if r["mode"] == row["mode"] and r["clients"] == 1)
        print(f"{row['mode']:<9} {row['clients']:>7} {row['requests']:>9} {row['errors']:>6} "
              f"{row['rps']:>8.1f} {row['rps'] / base['rps']:>10.2f}x")
    base_1 = next(r for r in rows if r["mode"] == "base-url" and r["clients"] == 1)
    proxy_1 = next(r for r in rows if r["mode"] == "proxy" and r["clients"] == 1)
    print(f"proxy / base-url at 1 client: {proxy_1['rps'] / base_1['rps']:.2f}")


if __name__ == "__main__":
    main()
