"""Decide, per judge, between generated verdicts and calibrated log-probability verdicts.

    .venv/bin/python scripts/make_judge_sets.py --per-set 120
    .venv/bin/python scripts/calibrate_judge.py [--judge NAME | --judge-model X.gguf]
        [--sets out/judge-sets] [--limit N]

Runs the judge exactly as ``amber verify`` asks it (engine/judge_bench.py) on the dev AND
test halves of every labeled set, twice per pair, one right after the other (the second
reuses the prompt's KV cache): decision ``generate`` (the schema-constrained answer) and
decision ``logprobs`` (the label log-probabilities, nothing generated). Every call goes
through one ledger in out/calibration/ (reuse mode), so a rerun only pays for what is new.

Calibration offsets for ``true`` and ``false`` (``none`` stays 0) are fitted on the DEV
halves only: the pair on a 0.25 grid that maximises the mean over the sets of balanced
accuracy and kappa (ties: the smaller offsets). The test halves are then scored with the
dev offsets, never refitted. The script prints one table per half (generate / logprobs
argmax / logprobs + dev offsets) and writes out/calibration/<judge>.json; an entry for
engine/calibration.py is printed only when the calibrated decision beats generation on
the dev halves in both mean balanced accuracy and mean kappa.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
from pathlib import Path
from typing import Any

from ambereval.engine.judge_bench import (
    BINARY,
    VERDICTS,
    load_pairs,
    metrics,
    run_judge_bench,
)
from ambereval.engine.judge_card import DEFAULT_RETRIEVE_K, has_pages, suite_files
from ambereval.models import Embedder, open_judge
from ambereval.models.decision import decide

GRID = [x / 4 for x in range(-24, 25)]
HALVES = ("dev", "test")


def rescore(rows: list[dict[str, Any]], labels: tuple[str, ...],
            bias: dict[str, float] | None) -> dict[str, Any]:
    """Metrics of log-probability rows re-decided with ``bias`` (no model needed)."""
    gold, pred = [], []
    for row in rows:
        verdict = VERDICTS[decide(row["logprobs"], bias)] if "logprobs" in row else "unknown"
        if labels == BINARY and verdict != "supported":
            verdict = "unsupported"
        gold.append(row["label"])
        pred.append(verdict)
    return metrics(gold, pred, labels)


def objective(per_set: dict[str, dict[str, Any]]) -> float:
    return sum(m["balanced_accuracy"] + m["kappa"] for m in per_set.values()) / (
        2 * len(per_set))


def fit(sets: dict[str, tuple[list[dict[str, Any]], tuple[str, ...]]]) -> dict[str, float]:
    best, best_value = {"true": 0.0, "false": 0.0}, float("-inf")
    # smallest offsets first, so ties keep the least intervention
    for t, f in sorted(itertools.product(GRID, GRID), key=lambda p: (abs(p[0]) + abs(p[1]), p)):
        bias = {"true": t, "false": f}
        value = objective({n: rescore(r, lab, bias) for n, (r, lab) in sets.items()})
        if value > best_value + 1e-9:
            best, best_value = bias, value
    return best


def means(per_set: dict[str, dict[str, Any]]) -> tuple[float, float]:
    n = len(per_set)
    return (sum(m["balanced_accuracy"] for m in per_set.values()) / n,
            sum(m["kappa"] for m in per_set.values()) / n)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--judge", default=None, help="a judge by name (amber models list)")
    ap.add_argument("--judge-model", default=None)
    ap.add_argument("--sets", type=Path, default=Path("out/judge-sets"))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    out = Path("out/calibration")
    out.mkdir(parents=True, exist_ok=True)
    judge = open_judge(args.judge_model, ledger=out / "ledger.sqlite", ledger_mode="reuse",
                       n_ctx=args.ctx, threads=args.threads, judge=args.judge)
    identity = judge.backend.identity()["model"]
    name = identity["name"]
    embedder = Embedder()
    results: dict[str, dict[str, Any]] = {}
    for half in HALVES:
        for set_name, path in suite_files(args.sets, half).items():
            pairs, labels = load_pairs(path, args.limit)
            lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()
                     if x.strip()][: len(pairs)]
            rows: dict[str, list[dict[str, Any]]] = {"generate": [], "logprobs": []}
            spent = {"generate": [0.0, 0], "logprobs": [0.0, 0]}
            for line in lines:
                one = out / f"pair-{os.getpid()}.jsonl"
                one.write_text(json.dumps(line) + "\n", encoding="utf-8")
                # both decisions on one pair in a row: the second reuses the prompt's KV
                for method in ("generate", "logprobs"):
                    before = judge.stats()
                    r = run_judge_bench(one, judge, decision=method, embedder=embedder,
                                        retrieve_k=DEFAULT_RETRIEVE_K if has_pages(path)
                                        else None)
                    after = judge.stats()
                    spent[method][0] += after["model_seconds"] - before["model_seconds"]
                    spent[method][1] += after["calls"] - before["calls"]
                    rows[method] += r["predictions"]
            for method, got in rows.items():
                m = metrics([x["label"] for x in got], [
                    v if labels != BINARY or v == "supported" else "unsupported"
                    for v in (x.get("answer", "unknown") for x in got)], labels)
                m["predictions"], m["labels"] = got, list(labels)
                m["seconds_per_call"] = round(spent[method][0] / spent[method][1], 3) \
                    if spent[method][1] else None
                results.setdefault(half, {}).setdefault(method, {})[set_name] = m
                print(f"{name} {half} {method:9} {set_name:18} n {m['n']:3} "
                      f"ba {m['balanced_accuracy']:.3f} k {m['kappa']:+.3f} "
                      f"s/call {m['seconds_per_call']}", flush=True)
    lp_dev = {n: (r["predictions"], tuple(r["labels"]))
              for n, r in results["dev"]["logprobs"].items()}
    bias = fit(lp_dev)
    summary: dict[str, Any] = {"judge": identity, "bias_fitted_on_dev": bias, "halves": {}}
    for half in HALVES:
        gen = {n: {k: r[k] for k in ("n", "accuracy", "balanced_accuracy", "kappa",
                                     "confusion", "seconds_per_call")}
               for n, r in results[half]["generate"].items()}
        lp = results[half]["logprobs"]
        plain = {n: rescore(r["predictions"], tuple(r["labels"]), None) for n, r in lp.items()}
        calibrated = {n: rescore(r["predictions"], tuple(r["labels"]), bias)
                      for n, r in lp.items()}
        for n, r in lp.items():
            plain[n]["seconds_per_call"] = calibrated[n]["seconds_per_call"] = \
                r["seconds_per_call"]
        summary["halves"][half] = {"generate": gen, "logprobs": plain,
                                   "logprobs+calibration": calibrated}
        print(f"\n{name}, {half} halves (calibration fitted on dev: {bias})")
        print("| decision | " + " | ".join(gen) + " | mean bal. acc. | mean kappa | s/call |")
        print("|---|" + "---|" * (len(gen) + 3))
        for label, table in summary["halves"][half].items():
            ba, k = means(table)
            spc = [m["seconds_per_call"] for m in table.values() if m["seconds_per_call"]]
            cells = " | ".join(f"{m['balanced_accuracy']:.3f} / {m['kappa']:+.3f}"
                               for m in table.values())
            print(f"| {label} | {cells} | {ba:.3f} | {k:+.3f} | "
                  f"{sum(spc) / len(spc) if spc else 0:.2f} |")
    dev = summary["halves"]["dev"]
    gen_ba, gen_k = means(dev["generate"])
    cal_ba, cal_k = means(dev["logprobs+calibration"])
    keep = cal_ba > gen_ba and cal_k > gen_k
    summary["keep_logprobs"] = keep
    print(f"\ndev: generate ba {gen_ba:.3f} k {gen_k:+.3f}; calibrated log-probs "
          f"ba {cal_ba:.3f} k {cal_k:+.3f} -> {'KEEP' if keep else 'do not keep'}")
    if keep:
        print(f'engine/calibration.py entry: "{identity["sha256"]}": {bias}')
    (out / f"{name}.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    judge.close()


if __name__ == "__main__":
    main()
