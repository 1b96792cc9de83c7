"""Generated tokens per judge call, per kind of call, with the schemas before and after
the decision-only change (the cost is the generated tokens; the prompt is cheap).

    .venv/bin/python scripts/bench_schema_tokens.py [--judge-model X.gguf] [--chars 1200]

Each kind of protocol call is asked once with its old schema and once with today's, on
the same messages: an excerpt of a real LiveResearchBench report (../shared/data/lrb)
as the report, and one of its sentences as the statement to check. A ledger in
out/schema-tokens/ keeps the answers, so a rerun costs nothing.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ambereval.engine.judging import CHECK_SCHEMA, CHECK_SYSTEM, DECISION_TOKENS, LIST_ITEM_CHARS
from ambereval.engine.protocols.dailyreport import INS_SYSTEM
from ambereval.engine.protocols.deepeval import CONSISTENCY_SYSTEM, SUPPORT_SCHEMA
from ambereval.engine.verification import VerifyOptions
from ambereval.engine.verify_question import VERIFY_LOGPROB_SCHEMA, VERIFY_PROMPT, VERIFY_SCHEMA
from ambereval.errors import ModelError
from ambereval.models import open_judge

LRB = Path(__file__).resolve().parents[2] / "shared" / "data" / "lrb" / "reference_reports"
OLD_STRING = {"type": "string", "maxLength": 200}


def obj(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": sorted(props),
            "additionalProperties": False}


def kinds(report: str, statement: str) -> list[tuple[str, list[dict[str, str]],
                                                     list[tuple[str, dict[str, Any], int]]]]:
    def ask(system: str, user: str) -> list[dict[str, str]]:
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    score = {"type": "number", "enum": [0, 0.5, 1]}
    old_list = obj({"items": {"type": "array", "maxItems": 20,
                              "items": {"type": "string", "maxLength": 100}}})
    new_list = obj({"items": {"type": "array", "maxItems": 20,
                              "items": {"type": "string", "maxLength": LIST_ITEM_CHARS}}})
    verify_user = (f"Passages:\n\n[1] {report[:700]}\n\nReport sentence: {statement}\n"
                   f"Claim: {statement}\nQuestion: Is it true that {statement.rstrip('.')}?")
    old_verify = obj({"answer": {"type": "string", "enum": ["true", "false", "none"]},
                      "passage": {"type": "integer"},
                      "evidence": {"type": "string", "maxLength": 300}})
    return [
        ("checklist item", ask(CHECK_SYSTEM, f"Report:\n{report}\n\nRequirement: The report "
                               "gives market size figures with their years."),
         [("before", obj({"pass": {"type": "boolean"}, "reason": OLD_STRING}), 320),
          ("after", CHECK_SCHEMA, DECISION_TOKENS)]),
        ("rubric score", ask(INS_SYSTEM, f"Report:\n{report}\n\nInstruction: Compare the "
                             "main vendors by market share."),
         [("before", obj({"score": score, "reason": {"type": "string", "maxLength": 240}}),
           360), ("after", obj({"score": score}), DECISION_TOKENS)]),
        ("support check", ask("Decide whether the page passages support the statement from "
                              "a report. Use only the passages.",
                              f"Passages:\n{report[:700]}\n\nStatement: {statement}"),
         [("before", obj({"supported": {"type": "boolean"}, "reason": OLD_STRING}), 280),
          ("after", SUPPORT_SCHEMA, DECISION_TOKENS)]),
        ("finding list", ask(CONSISTENCY_SYSTEM, f"Report:\n{report}\n\nList the report's "
                             "internal contradictions."),
         [("before", old_list, 832), ("after", new_list, LIST_ITEM_CHARS * 20 // 2 + 32)]),
        ("verify question", ask(VERIFY_PROMPT, verify_user),
         [("before", old_verify, 160), ("after", VERIFY_SCHEMA, VerifyOptions().max_tokens),
          ("after, logprobs", VERIFY_LOGPROB_SCHEMA, DECISION_TOKENS)]),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--judge-model", default=None)
    ap.add_argument("--qid", default="marketDEJL1uDRvx5UqKKm")
    ap.add_argument("--chars", type=int, default=1200)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    out = Path("out/schema-tokens")
    out.mkdir(parents=True, exist_ok=True)
    judge = open_judge(args.judge_model, ledger=out / "ledger.sqlite", ledger_mode="reuse",
                       n_ctx=4096, threads=args.threads)
    text = (LRB / f"qid_{args.qid}_report.md").read_text(encoding="utf-8")
    report = text[: text.rfind("\n\n", 0, args.chars)]
    statement = next(s.strip() + "." for s in report.split(". ")
                     if any(ch.isdigit() for ch in s) and len(s) > 60)
    for kind, messages, variants in kinds(report, statement):
        for label, schema, cap in variants:
            start = time.perf_counter()
            try:
                answer = judge.ask(messages, schema, cap)
            except ModelError as err:
                print(f"{kind:16} {label:16} unusable: {err}", flush=True)
                continue
            seconds = time.perf_counter() - start
            where = " (ledger)" if answer.source == "ledger" else ""
            print(f"{kind:16} {label:16} generated {answer.usage['completion_tokens']:4d} "
                  f"tokens (cap {cap:3d}), prompt {answer.usage['prompt_tokens']:5d}, "
                  f"{seconds:6.1f} s{where}", flush=True)


if __name__ == "__main__":
    main()
