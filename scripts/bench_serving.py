"""Judge calls per second against a served judge, by --judge-concurrency.

A loopback fake OpenAI-compatible server (tests/fakejudge.py: real HTTP, every request
takes --latency seconds, at most --capacity at once, 429 + Retry-After beyond) is asked
through the real client path: Judge -> AdaptiveLimit -> OpenAIBackend (httpx) -> schema
validation -> ledger (SQLite, record mode). For each N the script prints calls/s and
the ratio to the ideal N x (the N=1 rate). Client and server share this machine's cores,
so the ratio also shows where the CPU saturates.

    .venv/bin/python scripts/bench_serving.py                 # N = 1, 4, 16, 64
    .venv/bin/python scripts/bench_serving.py --n 1 4 16 64 128 --json
    .venv/bin/python scripts/bench_serving.py --evaluate 8   # whole `evaluate` runs too

``--evaluate K`` also times ``evaluate_bundles`` (DR3 + DeepEval) over K reports built
from the DR3 test fixture, at N = 1 and at the largest N, against the same server.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fakejudge import FakeJudgeServer  # noqa: E402

from ambereval.models import Judge, Ledger  # noqa: E402
from ambereval.models.openai_backend import OpenAIBackend  # noqa: E402

SCHEMA = {"type": "object", "properties": {
    "answer": {"type": "string", "enum": ["true", "false", "none"]},
    "passage": {"type": "integer"}, "evidence": {"type": "string", "maxLength": 300}},
    "required": ["answer", "passage", "evidence"], "additionalProperties": False}


def calls_per_second(url: str, n: int, calls: int, ledger_dir: Path) -> dict[str, float]:
    judge = Judge(OpenAIBackend(url, "fake"), Ledger(ledger_dir / f"n{n}.sqlite", "record"),
                  concurrency=n)
    batch = [([{"role": "system", "content": "Check the claim against the passages."},
               {"role": "user", "content": f"Passages: ... Claim number {n}-{i}."}],
              SCHEMA, 160) for i in range(calls)]
    judge.map(batch[:n])  # warm up: connections open, threads started
    start = time.perf_counter()
    answers = judge.map(batch)
    seconds = time.perf_counter() - start
    judge.close()
    failed = sum(1 for a in answers if isinstance(a, Exception))
    stats = judge.stats()
    return {"n": n, "calls": calls, "seconds": round(seconds, 3),
            "calls_per_s": round(calls / seconds, 2), "failed": failed,
            "throttled": stats["throttled"], "peak_in_flight": stats["peak_in_flight"]}


def evaluate_seconds(url: str, reports: int, widths: list[int], tmp: Path) -> list[dict]:
    from test_concurrency import dr3_bundles

    from ambereval.engine.runs.evaluate import evaluate_bundles
    from ambereval.models import Embedder, open_judge

    bundles, tasks = dr3_bundles(tmp / "inputs", reports)
    embedder = Embedder()
    rows = []
    for n in widths:
        out = tmp / f"run-{n}"
        judge = open_judge(None, url, "fake", out / "ledger.sqlite", "record", concurrency=n)
        start = time.perf_counter()
        result = evaluate_bundles(bundles, tasks, ["dr3", "deepeval"], [("fake", judge)], out,
                                  embedder)
        rows.append({"n": n, "reports": reports, "seconds": round(time.perf_counter() - start, 2),
                     "judge_calls": result["stats"]["totals"]["calls"]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--capacity", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=6,
                        help="calls per run = rounds x N (at least 10)")
    parser.add_argument("--evaluate", type=int, default=0, metavar="K",
                        help="also time whole evaluate runs over K reports")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows, runs = [], []
    with FakeJudgeServer(latency=args.latency, capacity=args.capacity) as server, \
            tempfile.TemporaryDirectory() as tmp:
        for n in args.n:
            rows.append(calls_per_second(server.url, n, max(10, args.rounds * n), Path(tmp)))
        if args.evaluate:
            runs = evaluate_seconds(server.url, args.evaluate, [1, max(args.n)], Path(tmp))
    base = next((r["calls_per_s"] for r in rows if r["n"] == 1), None)
    for r in rows:
        r["ideal"] = round(r["n"] * base, 2) if base else None
        r["of_ideal"] = round(r["calls_per_s"] / r["ideal"], 3) if base else None
    if args.json:
        print(json.dumps({"latency_s": args.latency, "capacity": args.capacity,
                          "cpus": os.cpu_count(), "rows": rows, "evaluate": runs}, indent=2))
        return
    print(f"fake server: {args.latency * 1000:.0f} ms per request, capacity {args.capacity}; "
          f"{os.cpu_count()} CPUs shared by client and server")
    print(f"{'N':>4} {'calls':>6} {'seconds':>8} {'calls/s':>8} {'ideal':>8} {'of ideal':>9} "
          f"{'throttled':>9}")
    for r in rows:
        print(f"{r['n']:>4} {r['calls']:>6} {r['seconds']:>8.2f} {r['calls_per_s']:>8.2f} "
              f"{r['ideal']:>8.2f} {r['of_ideal']:>9.1%} {r['throttled']:>9}")
    for r in runs:
        print(f"evaluate, {r['reports']} reports (dr3 + deepeval), N={r['n']:>3}: "
              f"{r['seconds']:7.2f} s, {r['judge_calls']} judge calls")


if __name__ == "__main__":
    main()

