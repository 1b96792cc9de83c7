"""A checklist asked one item a prompt against asked together (rule ``checklists``), with
the same judge, on LiveResearchBench's baseline reports and coverage checklists.

    .venv/bin/python scripts/bench_checklists.py --judge qwen2.5-coder-1.5b [--reports 12]

No human labels exist for these checklists, so each report is asked twice: with its own
checklist, and with the checklist of another task (``mismatched``: the task half the
list away, another domain), whose items the report should mostly fail. Per pairing:
the share of items with the same verdict both ways and Cohen's kappa (None when both
ways give one verdict throughout), each way's pass rate, the mean absolute difference
of a report's coverage score, and (together) the pass rate by an item's place in its
prompt, where a judge answering by position would show a slope. On mismatched
checklists a lower pass rate is better. The reports are the first ``--reports`` of the
checklist's qids (sorted) whose baseline report exists, clipped as a run clips them;
coverage's own prompt and system line, as a run asks them. Every call goes through a
ledger in out/checklists/ (reuse), so a rerun pays only for what is new.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from ambereval.engine.importers import import_lrb
from ambereval.engine.judging import CHECK_SYSTEM, checklist_score, clip, judge_checklist
from ambereval.models import open_judge

ROOT = Path(__file__).resolve().parents[1]
LRB = ROOT.parent / "shared" / "data" / "lrb"


def kappa(a: list[bool], b: list[bool]) -> float | None:
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    chance = pa * pb + (1 - pa) * (1 - pb)
    return round((observed - chance) / (1 - chance), 3) if chance < 1 else None


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    each = [r["each"] for r in rows]
    together = [r["together"] for r in rows]
    by_report: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_report.setdefault(r["qid"], []).append(r)
    gaps = [abs(sum(x["each"] for x in rs) - sum(x["together"] for x in rs)) * 100 / len(rs)
            for rs in by_report.values()]
    places: dict[str, list[bool]] = {}
    for r in rows:
        third = "1 first third" if r["item"] <= r["of"] / 3 else \
            "3 last third" if r["item"] > 2 * r["of"] / 3 else "2 middle third"
        places.setdefault(third, []).append(r["together"])
    return {"reports": len(by_report), "items": len(rows),
            "same_verdict": round(sum(a == b for a, b in zip(each, together, strict=True))
                                  / len(rows), 3),
            "kappa": kappa(each, together),
            "pass_rate": {"each": round(sum(each) / len(rows), 3),
                          "together": round(sum(together) / len(rows), 3)},
            "coverage_abs_diff_mean": round(sum(gaps) / len(gaps), 1),
            "together_pass_rate_by_place": {k: round(sum(v) / len(v), 3)
                                            for k, v in sorted(places.items())}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--judge", default=None, help="a judge by name (amber models list)")
    ap.add_argument("--judge-model", default=None)
    ap.add_argument("--reports", type=int, default=12)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "checklists")
    args = ap.parse_args()
    if not LRB.is_dir():
        raise SystemExit(f"{LRB}: the shared LiveResearchBench data is not here")
    args.out.mkdir(parents=True, exist_ok=True)
    tasks = [t for t in import_lrb(LRB / "coverage_checklist.csv",
                                   baselines=LRB / "reference_reports")
             if t.baseline_report and Path(t.baseline_report).is_file() and
             len(t.checklist) > 1]
    tasks = sorted(tasks, key=lambda t: t.id)[: args.reports]
    judge = open_judge(args.judge_model, judge=args.judge,
                       ledger=args.out / "ledger.sqlite", n_ctx=4096)
    rows: dict[str, list[dict[str, Any]]] = {"own": [], "mismatched": []}
    start = time.perf_counter()
    for k, task in enumerate(tasks):
        report = clip(Path(task.baseline_report).read_text(encoding="utf-8"))
        other = tasks[(k + len(tasks) // 2) % len(tasks)]
        for pairing, checklist in (("own", task.checklist), ("mismatched", other.checklist)):
            each = judge_checklist(judge, report, checklist, CHECK_SYSTEM, per_prompt=1)
            together = judge_checklist(judge, report, checklist, CHECK_SYSTEM,
                                       per_prompt=None)
            for a, b in zip(each, together, strict=True):
                if a.get("error") or b.get("error"):
                    continue
                rows[pairing].append({"qid": task.id, "item": b["asked"]["item"],
                                      "of": b["asked"]["of"], "each": a["pass"],
                                      "together": b["pass"]})
            print(f"{task.id} ({pairing} checklist): {len(checklist)} items, coverage each "
                  f"{checklist_score(each)} together {checklist_score(together)} "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
    result = {"judge": args.judge or args.judge_model or "default",
              **{pairing: summary(got) for pairing, got in rows.items()},
              "seconds": round(time.perf_counter() - start, 1)}
    (args.out / "checklists.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
