"""Agreement with human labels: the shared support question against each protocol's own.

    .venv/bin/python scripts/make_judge_sets.py --per-set 120
    .venv/bin/python scripts/bench_support_question.py --judge qwen2.5-coder-1.5b \
        --per-set 20 [--batch 4] [--half test] [--threads 2]

For every labelled pair (FactCheck-GPT, WiCE, AttributionBench; gold read binary:
supported vs not) it asks three prompts: DR3 FA's own yes/no question, DeepEval E3's own
yes/no question (both as ``support_question=separate`` asks them), and the shared
three-way question (engine/support_question.py), read by FA's lenient rule and by E3's
strict rule; and the shared question with ``--batch`` statements a prompt, as a run asks
it with ``support_batch`` (``fa_batch``, ``e3_batch``): each set's pairs, in a fixed
shuffled order (seed 0), go in groups of that many, the group's evidence texts are the
source's passages (as a page's passages are chosen for all its statements) and every
claim of the group is one numbered statement. It prints, per reading, balanced accuracy
and Cohen's kappa on the pooled sample with 95% bootstrap intervals (pairs resampled
within each set, 2,000 draws, seed 0), and the intervals of the paired differences
shared - own and batch - own. The sample is balanced: the first ``--per-set / 2``
supported and unsupported pairs of each set's half in file order (the sets are sampled
by sha256 of the id). Every call goes through the ledger out/support-question/
ledger.sqlite, so a rerun pays only for what is new.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from ambereval.engine import support_question as sq
from ambereval.engine.judge_bench import BINARY, load_pairs, metrics
from ambereval.engine.judging_rules import BATCH_DEFAULT
from ambereval.engine.protocols.deepeval import SUPPORT_SCHEMA, support_messages
from ambereval.engine.protocols.dr3 import FA_SCHEMA, fa_messages
from ambereval.models import open_judge

SETS = ("factcheck_gpt", "wice", "attributionbench")
READINGS = ("fa_own", "fa_shared", "fa_batch", "e3_own", "e3_shared", "e3_batch")
DIFFS = {"fa_diff": ("fa_shared", "fa_own"), "e3_diff": ("e3_shared", "e3_own"),
         "fa_batch_diff": ("fa_batch", "fa_own"), "e3_batch_diff": ("e3_batch", "e3_own")}
DRAWS = 2000


def sample(path: Path, per_set: int) -> list[Any]:
    pairs, _ = load_pairs(path)
    yes = [p for p in pairs if p.label == "supported"][: per_set // 2]
    no = [p for p in pairs if p.label != "supported"][: per_set - per_set // 2]
    mixed = yes + no
    random.Random(0).shuffle(mixed)  # groups of --batch mix labels
    return mixed


def figures(rows: list[dict[str, Any]], reading: str) -> tuple[float, float]:
    gold = [r["gold"] for r in rows]
    pred = ["supported" if r[reading] else "unsupported" for r in rows]
    m = metrics(gold, pred, BINARY)
    return m["balanced_accuracy"], m["kappa"]


def bootstrap(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Point figures and 95% percentile intervals, pairs resampled within each set."""
    rng = random.Random(0)
    by_set: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_set.setdefault(r["set"], []).append(r)
    draws: dict[str, list[tuple[float, float]]] = {k: [] for k in (*READINGS, *DIFFS)}
    for _ in range(DRAWS):
        pick = [rng.choice(items) for items in by_set.values() for _ in items]
        got = {k: figures(pick, k) for k in READINGS}
        for k in READINGS:
            draws[k].append(got[k])
        for k, (new, own) in DIFFS.items():
            draws[k].append((got[new][0] - got[own][0], got[new][1] - got[own][1]))

    def interval(values: list[float]) -> list[float]:
        values = sorted(values)
        return [round(values[int(0.025 * len(values))], 3),
                round(values[int(0.975 * len(values)) - 1], 3)]

    out: dict[str, Any] = {}
    for k, values in draws.items():
        if k in READINGS:
            ba, kappa = figures(rows, k)
        else:
            new, own = (figures(rows, r) for r in DIFFS[k])
            ba, kappa = new[0] - own[0], new[1] - own[1]
        out[k] = {"balanced_accuracy": round(ba, 3),
                  "ba_ci95": interval([v[0] for v in values]),
                  "kappa": round(kappa, 3), "kappa_ci95": interval([v[1] for v in values])}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--judge", default=None, help="a judge by name (amber models list)")
    ap.add_argument("--judge-model", default=None)
    ap.add_argument("--sets", type=Path, default=Path("out/judge-sets"))
    ap.add_argument("--half", default="test")
    ap.add_argument("--per-set", type=int, default=18)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--batch", type=int, default=BATCH_DEFAULT,
                    help="statements a prompt for the grouped reading")
    ap.add_argument("--ctx", type=int, default=8192, help="the judge's context (tokens)")
    ap.add_argument("--only-batch", action="store_true",
                    help="ask only the grouped prompts (try a prompt on a dev half)")
    args = ap.parse_args()
    out = Path("out/support-question")
    out.mkdir(parents=True, exist_ok=True)
    judge = open_judge(args.judge_model, judge=args.judge, ledger=out / "ledger.sqlite",
                       ledger_mode="reuse", threads=args.threads, n_ctx=args.ctx)
    name = judge.backend.identity()["model"]["name"]
    rows: list[dict[str, Any]] = []
    seconds = {"fa": 0.0, "e3": 0.0, "shared": 0.0, "batch": 0.0}
    calls = {"batch": 0}
    for set_name in SETS:
        pairs = sample(args.sets / f"{set_name}.{args.half}.jsonl", args.per_set)
        grouped: dict[str, str] = {}
        for group in sq.groups(pairs, args.batch):
            start = time.perf_counter()
            claims = [p.claim for p in group]
            obj = judge.ask(sq.batch_messages("the source", "\n\n".join(
                p.evidence for p in group), claims), sq.batch_schema(claims),
                sq.batch_max_tokens(claims)).obj
            seconds["batch"] += time.perf_counter() - start
            calls["batch"] += 1
            grouped.update({p.id: label for p, label in
                            zip(group, sq.batch_answers(obj, len(group)), strict=True)})
        for pair in pairs:
            row: dict[str, Any] = {"set": set_name, "id": pair.id,
                                   "gold": "supported" if pair.label == "supported"
                                   else "unsupported"}
            if args.only_batch:
                label = grouped[pair.id]
                rows.append({**row, "batch_answer": label, "fa_batch": sq.fa_supported(label),
                             "e3_batch": sq.e3_supported(label)})
                continue
            start = time.perf_counter()
            row["fa_own"] = bool(judge.ask(fa_messages("evidence", pair.evidence, pair.claim),
                                           FA_SCHEMA, 24).obj["supported"])
            seconds["fa"] += time.perf_counter() - start
            start = time.perf_counter()
            row["e3_own"] = bool(judge.ask(support_messages("the source", pair.evidence,
                                                            pair.claim),
                                           SUPPORT_SCHEMA, 24).obj["supported"])
            seconds["e3"] += time.perf_counter() - start
            start = time.perf_counter()
            answer = judge.ask(sq.messages("the source", pair.evidence, pair.claim),
                               sq.SCHEMA, sq.MAX_TOKENS).obj["answer"]
            seconds["shared"] += time.perf_counter() - start
            row.update(answer=answer, fa_shared=sq.fa_supported(answer),
                       e3_shared=sq.e3_supported(answer), batch_answer=grouped[pair.id],
                       fa_batch=sq.fa_supported(grouped[pair.id]),
                       e3_batch=sq.e3_supported(grouped[pair.id]))
            rows.append(row)
            print(f"{len(rows):3} {set_name:16} {row['gold']:11} fa {row['fa_own']!s:5} "
                  f"e3 {row['e3_own']!s:5} shared {answer:24} grouped {row['batch_answer']}",
                  flush=True)
    if args.only_batch:
        got = {k: figures(rows, k) for k in ("fa_batch", "e3_batch")}
        print(f"{name[:20]} {args.half} batch {args.batch}: "
              + "; ".join(f"{k} ba {v[0]:.3f} kappa {v[1]:+.3f}" for k, v in got.items())
              + f"; answers { {a: sum(r['batch_answer'] == a for r in rows) for a in sq.LABELS} }"
              + f"; {calls['batch']} calls, {seconds['batch']:.0f} s", flush=True)
        return
    result = {"judge": name, "half": args.half, "per_set": args.per_set, "pairs": len(rows),
              "batch": args.batch, "batch_calls": calls["batch"],
              "seconds": {k: round(v, 1) for k, v in seconds.items()},
              "answers": {a: sum(r["answer"] == a for r in rows) for a in sq.LABELS},
              "figures": bootstrap(rows), "rows": rows}
    for k, v in result["figures"].items():
        print(f"{name[:20]} {k:13} ba {v['balanced_accuracy']:+.3f} {v['ba_ci95']}  "
              f"kappa {v['kappa']:+.3f} {v['kappa_ci95']}", flush=True)
    print(f"model seconds {result['seconds']}; shared answers {result['answers']}")
    (out / f"{name}.{args.half}.json").write_text(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
