"""Requests per second through ``amber serve --record``, against calling the upstream
directly, side by side in one run, at 1 and 32 concurrent clients.

The upstream is the loopback OpenAI-compatible fake (tests/fakellm.py). Each client (a
thread with its own keep-alive ``requests`` session) sends chat completions for
``--seconds``:

- ``direct``: straight to the fake;
- ``recorded``: through ``amber serve --record`` (a real subprocess), every request new,
  so each one is forwarded, answered and written (WARC pair fsynced, index committed);
- ``repeated``: the requests of the ``recorded`` round again, answered from the
  recording without going upstream.

Clients, recorder and fake share the machine's cores, so the figures are a floor.

    .venv/bin/python scripts/bench_record.py [--seconds 6] [--clients 1 32] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakellm import OPENAI_KEY, FakeOpenAI  # noqa: E402


def body(i: int) -> dict[str, Any]:
    return {"model": "gpt-fake", "temperature": 0,
            "messages": [{"role": "user", "content": f"Grade claim number {i}."}]}


def rate(base: str, clients: int, seconds: float, next_id: Callable[[], int]) -> float:
    """Requests per second of ``clients`` threads for ``seconds``."""
    done = [0] * clients
    stop = time.monotonic() + seconds
    errors: list[str] = []

    def client(slot: int) -> None:
        with requests.Session() as session:
            session.headers["Authorization"] = f"Bearer {OPENAI_KEY}"
            while time.monotonic() < stop:
                r = session.post(f"{base}/chat/completions", json=body(next_id()), timeout=60)
                if r.status_code != 200:
                    errors.append(f"{r.status_code} {r.text[:80]}")
                    return
                done[slot] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"bench_record: a request failed: {errors[0]}")
    return sum(done) / (time.monotonic() - started)


def counter(start: int = 0) -> Callable[[], int]:
    ids = itertools.count(start)
    lock = threading.Lock()

    def next_id() -> int:
        with lock:
            return next(ids)

    return next_id


def replaying(limit: int) -> Callable[[], int]:
    """The ids of requests already recorded, round and round."""
    ids = itertools.cycle(range(limit))
    lock = threading.Lock()

    def next_id() -> int:
        with lock:
            return next(ids)

    return next_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with FakeOpenAI() as api, tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "OPENAI_BASE_URL": api.url + "/v1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "ambereval.cli", "serve", "--record",
             str(Path(tmp) / "bench.bundle"), "--port", "0", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        url = json.loads(proc.stdout.readline())["url"] + "/v1"
        try:
            fresh = counter()
            for clients in args.clients:
                direct = rate(api.url + "/v1", clients, args.seconds, counter(10**9))
                before = api.served
                first = fresh()
                recorded = rate(url, clients, args.seconds, fresh)
                recorded_n = fresh() - first
                repeated = rate(url, clients, args.seconds, replaying(max(1, recorded_n)))
                assert api.served - before <= recorded_n + clients, "repeats went upstream"
                rows.append({"clients": clients, "direct_rps": round(direct, 1),
                             "recorded_rps": round(recorded, 1),
                             "repeated_rps": round(repeated, 1),
                             "recorded_vs_direct": round(recorded / direct, 3)})
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
        stop = json.loads(out.strip().splitlines()[-1])
    if args.json:
        print(json.dumps({"rows": rows, "recorder": stop}, indent=2, sort_keys=True))
        return
    print(f"{'clients':>7} {'direct rps':>11} {'recorded rps':>13} {'ratio':>6} "
          f"{'repeated rps':>13}")
    for r in rows:
        print(f"{r['clients']:>7} {r['direct_rps']:>11} {r['recorded_rps']:>13} "
              f"{r['recorded_vs_direct']:>6} {r['repeated_rps']:>13}")
    print(f"recorder: {stop['recorded']} recorded, {stop['repeated']} repeats answered "
          "from the recording")


if __name__ == "__main__":
    main()
