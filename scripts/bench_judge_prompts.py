"""Compare judge prompt/decision variants on the DEV halves of the labeled sets.

    .venv/bin/python scripts/make_judge_sets.py --per-set 120
    .venv/bin/python scripts/bench_judge_prompts.py [--judge-model X.gguf] [--limit 60]
        [--variants verify-v1-gen,verify-v1-lp,...] [--half dev]

Every call goes through a ledger in out/judge-prompts/ (reuse mode), so a rerun only
pays for what is new. For the log-probability variants it also fits the calibration
offsets (for ``true`` and ``false``; ``none`` stays 0) that maximise the mean of balanced
accuracy and kappa over the sets on the half being measured, and prints both the plain
(argmax) and the calibrated figures. Calibrate on dev; apply the dev offsets to test
with ``--bias true=X,false=Y``.

The yes/no variants ask DR3 FA's support check (``fa-*``) and DeepEval citation
accuracy's (``e3-*``) and are scored binary (supported vs not): ``fa-gen``/``e3-gen``
the protocols' prompts as asked, generated; ``fa-lp``/``e3-lp`` the same prompts decided
by the ``true``/``false`` log-probabilities after ``{"supported":`` (plain argmax, with the
share of pairs on which it decides as its ``-gen`` twin, and calibrated: a ``true``
offset fitted as for verification, ``false`` at 0);
``fa-shared-rule-gen``/``e3-shared-gen`` a layout that would let both protocols share a
page as a prompt prefix (one system line, the passages, then each protocol's rule), and
``fa-shared-gen`` that layout with FA's own words as the rule. Neither was taken:
docs/benchmarks.md, "Judge cost per report".
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any

from ambereval.engine.judge_bench import BINARY, TERNARY, load_pairs, metrics
from ambereval.engine.protocols.deepeval import support_messages
from ambereval.engine.protocols.dr3 import FA_SYSTEM, fa_messages
from ambereval.models import open_judge
from ambereval.models.decision import boolean_logprob_schema, decide, label_logprob_schema

SETS = ("factcheck_gpt", "climate_fever", "wice", "attributionbench")
LABELS = ("true", "false", "none")
TO_GOLD = {"true": "supported", "false": "contradicted", "none": "unknown"}

OLD_VERIFY = (
    "You check claims against passages from one web page. Use only these passages, never "
    "your own knowledge. For the question asked, answer 'true' if the passages clearly "
    "support a yes, 'false' if they clearly contradict it, and 'none' if they do not "
    "settle it. Numbers must match: the same number of significant digits exactly; a "
    "rounder number is fine (100 vs 100.1), a different one is not (100 vs 110). Judge "
    "dates by what the page says, not by today's date. Quote the sentence you relied on."
)
OLD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "enum": ["true", "false", "none"]},
        "passage": {"type": "integer"},
        "evidence": {"type": "string", "maxLength": 300},
    },
    "required": ["answer", "passage", "evidence"],
    "additionalProperties": False,
}
# A layout tried and not taken: one system line and the page's passages first, each
# protocol's rule after them, so DR3 FA and DeepEval E3 share the page as a prompt prefix.
SHARED_SYSTEM = (
    "You check statements from a research report against passages of a source the report "
    "cites. Use only the passages, never your own knowledge, and apply the rule given "
    "with the statement."
)
FA_SHARED_RULE = ("Be lenient: the statement is supported unless the passages directly "
                  "contradict it or contain nothing related to it.")
E3_SHARED_RULE = "The statement is supported only if the passages state what it says."


def shared_page(evidence: str, rule: str, claim: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SHARED_SYSTEM},
            {"role": "user", "content": f"Source: evidence\nPassages:\n{evidence}\n\n"
                                        f"Rule: {rule}\nStatement: {claim}"}]


SHORT_Q = (
    "Answer the question from the passages only, not from your own knowledge: 'true' if "
    "they say yes, 'false' if they say no, 'none' if they do not say."
)
SHORT_CLAIM = (
    "Does the evidence support the claim? Use only the evidence, not your own knowledge. "
    "Answer 'true' if it supports the claim, 'false' if it contradicts it, 'none' if it "
    "does not say."
)


def passages_of(evidence: str) -> str:
    parts = [p.strip() for p in evidence.split("\n\n") if p.strip()]
    return "\n\n".join(f"[{i}] {p}" for i, p in enumerate(parts, start=1))


def question_of(claim: str) -> str:
    return f"Is it true that {claim.rstrip('.。')}?"


def messages(variant: str, claim: str, evidence: str) -> list[dict[str, str]]:
    listing = passages_of(evidence)
    if variant.startswith("verify-v1"):
        user = (f"Passages:\n\n{listing}\n\nReport sentence: {claim}\nClaim: {claim}\n"
                f"Question: {question_of(claim)}")
        return [{"role": "system", "content": OLD_VERIFY}, {"role": "user", "content": user}]
    if variant.startswith("short-q"):
        return [{"role": "system", "content": SHORT_Q},
                {"role": "user", "content": f"Passages:\n\n{listing}\n\n"
                                            f"Question: {question_of(claim)}"}]
    if variant.startswith("fa-shared-"):  # one page prefix for FA and E3, FA's rule after
        return shared_page(evidence, FA_SHARED_RULE if variant.startswith("fa-shared-rule")
                           else FA_SYSTEM, claim)
    if variant.startswith("e3-shared-"):
        return shared_page(evidence, E3_SHARED_RULE, claim)
    if variant.startswith("fa-"):  # dr3.factual_accuracy's prompt
        return fa_messages("evidence", evidence, claim)
    if variant.startswith("e3-"):  # deepeval.citation_accuracy's prompt
        return support_messages("the source", evidence, claim)
    if variant.startswith("short-claim"):
        return [{"role": "system", "content": SHORT_CLAIM},
                {"role": "user", "content": f"Evidence:\n\n{listing}\n\nClaim: {claim}"}]
    raise SystemExit(f"unknown variant {variant}")


YES_NO_SCHEMA = {"type": "object", "properties": {"supported": {"type": "boolean"}},
                 "required": ["supported"], "additionalProperties": False}


def yes_no(variant: str) -> bool:
    return variant.startswith(("fa-", "e3-"))


def to_label(answer: str, labels: tuple[str, ...]) -> str:
    verdict = TO_GOLD[answer]
    return verdict if labels == TERNARY or verdict == "supported" else "unsupported"


def score(rows: dict[str, list[tuple[str, dict[str, float] | str]]],
          bias: dict[str, float] | None, binary: bool = False) -> dict[str, dict[str, Any]]:
    out = {}
    for name, items in rows.items():
        labels = TERNARY if any(g in ("contradicted", "unknown") for g, _ in items) else BINARY
        if binary:
            labels = BINARY
        gold = [g if g == "supported" or not binary else "unsupported" for g, _ in items]
        pred = [to_label(a if isinstance(a, str) else decide(a, bias), labels)
                for _, a in items]
        out[name] = metrics(gold, pred, labels)
    return out


def fit_bias(rows: dict[str, list[tuple[str, Any]]], binary: bool = False
             ) -> dict[str, float]:
    grid = [x / 4 for x in range(-24, 25)]
    best, best_value = {"true": 0.0, "false": 0.0}, -9.0
    # yes/no: only the difference of the two offsets matters; keep false at 0
    for t, f in itertools.product(grid, [0.0] if binary else grid):
        bias = {"true": t, "false": f}
        m = score(rows, bias, binary)
        value = sum(v["balanced_accuracy"] + v["kappa"] for v in m.values()) / (2 * len(m))
        if value > best_value + 1e-9:
            best, best_value = bias, value
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--judge-model", default=None)
    ap.add_argument("--sets", type=Path, default=Path("out/judge-sets"))
    ap.add_argument("--half", default="dev")
    ap.add_argument("--limit", type=int, default=60)
    ap.add_argument("--variants", default="verify-v1-gen,verify-v1-lp,short-q-lp,short-claim-lp")
    ap.add_argument("--bias", default=None, help="true=X,false=Y: apply, do not fit")
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    out = Path("out/judge-prompts")
    out.mkdir(parents=True, exist_ok=True)
    judge = open_judge(args.judge_model, ledger=out / "ledger.sqlite", ledger_mode="reuse",
                       n_ctx=args.ctx, threads=args.threads)
    name = judge.backend.identity()["model"]["name"]
    lp_schema = label_logprob_schema("answer", LABELS)
    report: dict[str, Any] = {"judge": name, "half": args.half, "variants": {}}
    variants = args.variants.split(",")
    rows: dict[str, dict[str, list[tuple[str, Any]]]] = {v: {} for v in variants}
    seconds = dict.fromkeys(variants, 0.0)
    # pair by pair, variants in turn: variants sharing a prompt reuse its KV cache
    for set_name in SETS:
        pairs, _ = load_pairs(args.sets / f"{set_name}.{args.half}.jsonl", args.limit)
        for pair in pairs:
            for variant in variants:
                start = time.perf_counter()
                msgs = messages(variant, pair.claim, pair.evidence)
                if yes_no(variant) and variant.endswith("-lp"):  # kept for calibration
                    ans = judge.ask(msgs, boolean_logprob_schema("supported"), 24
                                    ).obj["logprobs"]
                elif yes_no(variant):
                    ans = "true" if judge.ask(msgs, YES_NO_SCHEMA, 24).obj["supported"] \
                        else "false"
                elif variant.endswith("-gen"):
                    ans = judge.ask(msgs, OLD_SCHEMA, 160).obj["answer"]
                else:
                    ans = judge.ask(msgs, lp_schema, 16).obj["logprobs"]
                seconds[variant] += time.perf_counter() - start
                rows[variant].setdefault(set_name, []).append((pair.label, ans))
    for variant in variants:
        result: dict[str, Any] = {"plain": score(rows[variant], None, yes_no(variant)),
                                  "seconds": round(seconds[variant], 1)}
        twin = variant[:-3] + "-gen"
        if yes_no(variant) and variant.endswith("-lp") and twin in rows:
            same = [decide(a) == b for s in SETS for (_, a), (_, b)
                    in zip(rows[variant][s], rows[twin][s], strict=True)]
            result["same_as_generated"] = [sum(same), len(same)]
            print(f"{name[:14]} {args.half} {variant:16} decides as {twin} on "
                  f"{sum(same)}/{len(same)} pairs", flush=True)
        if variant.endswith("-lp"):
            if args.bias:
                bias = {k: float(v) for k, v in (x.split("=") for x in args.bias.split(","))}
            else:
                bias = fit_bias(rows[variant], yes_no(variant))
            result["bias"] = bias
            result["calibrated"] = score(rows[variant], bias, yes_no(variant))
        report["variants"][variant] = result
        for kind in ("plain", "calibrated"):
            if kind not in result:
                continue
            cells = "  ".join(f"{s[:10]:>10} ba {m['balanced_accuracy']:.3f} k {m['kappa']:+.3f}"
                              for s, m in result[kind].items())
            mean_ba = sum(m["balanced_accuracy"] for m in result[kind].values()) / len(SETS)
            mean_k = sum(m["kappa"] for m in result[kind].values()) / len(SETS)
            print(f"{name[:14]} {args.half} {variant:16} {kind:10} mean ba {mean_ba:.3f} "
                  f"k {mean_k:+.3f} | {cells} {result.get('bias', '') if kind != 'plain' else ''}",
                  flush=True)
    (out / f"{name}.{args.half}.json").write_text(json.dumps(report, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
