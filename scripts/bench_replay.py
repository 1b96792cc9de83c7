"""How much faster `amber replay` is than the live run it replays, on a real report.

    .venv/bin/python scripts/bench_replay.py [--qid rankliDwyJ6ePJgm8znsQh] [--repeats 5]
        [--reuse]

A ~2,000-word LiveResearchBench baseline report (../shared/data/lrb) is frozen offline
into a bundle exactly as ``scripts/bench_report_cost.py`` does it (its ``lrb_bundle``:
every cited URL served by a loopback fake page), then ``amber evaluate --protocol all``
runs live with the default judge (SmolLM2 in-process, the default embedder), once, timed;
then ``amber replay`` of that run directory, timed ``--repeats`` times (median). Each is
a separate ``amber`` process, as a user runs it, so the replay time includes Python's
start-up and imports. Wall and CPU seconds (user + system of the child process) are
printed side by side with their ratios: on a shared machine the wall times are upper
bounds, CPU seconds are steadier. ``--reuse`` keeps an existing live run (its recorded
live time) and only re-times the replays. Results go to OUT/bench-replay.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from bench_report_cost import lrb_bundle  # noqa: E402

AMBER = [sys.executable, "-m", "ambereval.cli"]


def timed(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall seconds, CPU seconds of the child, the finished process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ""})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[3:5])}: exit {done.returncode}: "
                         f"{done.stderr.strip()[-600:]}")
    return wall, cpu, done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qid", default="rankliDwyJ6ePJgm8znsQh")
    ap.add_argument("--filler-qid", default="marketDEJL1uDRvx5UqKKm")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-replay")
    ap.add_argument("--threads", type=int, default=None,
                    help="llama.cpp threads for the live run (default: llama.cpp's); on a "
                         "shared machine 1 avoids its threads spinning against other work")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the live run already in OUT; only re-time the replays")
    args = ap.parse_args()
    work = args.out / args.qid
    run, saved = work / "run", work / "live.json"
    if args.reuse and (run / "run.json").is_file() and saved.is_file():
        live = json.loads(saved.read_text())
        print(f"{args.qid}: reusing the live run in {run}", flush=True)
    else:
        shutil.rmtree(work, ignore_errors=True)
        made = lrb_bundle(args.qid, args.filler_qid, work)
        print(f"{args.qid}: {made['words']} words, {made['claims']} claims, "
              f"{made['cited_urls']} cited URLs; evaluating live (minutes)...", flush=True)
        wall, cpu, _ = timed([*AMBER, "evaluate", str(made["bundle"]), "--task",
                              str(made["tasks"]), "--protocol", "all", "--out", str(run),
                              "--json", *(["--threads", str(args.threads)] if args.threads
                                          else [])])
        stats = json.loads((run / "stats.json").read_text())
        live = {"qid": args.qid, "words": made["words"], "claims": made["claims"],
                "wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
                "judge_calls": stats["totals"]["calls"], "threads": args.threads,
                "load_average": os.getloadavg()[0]}
        saved.write_text(json.dumps(live, indent=1, sort_keys=True))
    walls, cpus, inner = [], [], []
    for _ in range(args.repeats):
        wall, cpu, done = timed([*AMBER, "replay", str(run), "--json"])
        result = json.loads(done.stdout)
        if not result["identical"]:
            raise SystemExit(f"replay differs: {result['difference']}")
        walls.append(wall)
        cpus.append(cpu)
        inner.append(result["seconds"])
    replay = {"wall_seconds": round(statistics.median(walls), 3),
              "cpu_seconds": round(statistics.median(cpus), 3),
              "in_process_seconds": round(statistics.median(inner), 3),
              "ledger_answers": result["ledger_hits"], "reports": result["reports"],
              "repeats": args.repeats}
    ratio_wall = live["wall_seconds"] / replay["wall_seconds"]
    ratio_cpu = live["cpu_seconds"] / replay["cpu_seconds"]
    load = os.getloadavg()[0]
    print(f"live   amber evaluate --protocol all: {live['wall_seconds']:8.1f} s wall "
          f"{live['cpu_seconds']:8.1f} s CPU  ({live['judge_calls']} judge calls, threads "
          f"{live.get('threads') or 'default'}, load average {live.get('load_average')})")
    print(f"replay amber replay (median of {args.repeats}):  {replay['wall_seconds']:8.2f} s "
          f"wall {replay['cpu_seconds']:8.2f} s CPU  (in-process "
          f"{replay['in_process_seconds']:.2f} s, {replay['ledger_answers']} ledger answers)")
    print(f"ratio  live / replay:               {ratio_wall:8.0f}x wall "
          f"{ratio_cpu:7.0f}x CPU   (load average now {load:.1f} on "
          f"{os.cpu_count()} cores)")
    report: dict[str, Any] = {"live": live, "replay": replay,
                              "ratio_wall": round(ratio_wall, 1),
                              "ratio_cpu": round(ratio_cpu, 1), "load_average": load}
    (work / "bench-replay.json").write_text(json.dumps(report, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
