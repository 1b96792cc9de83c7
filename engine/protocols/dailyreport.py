"""DailyReport (PROTOCOLS.md §1): ins / fac / rat per subtask, the cascade aggregates,
UserPref, and the reference metrics.

fac_k comes from the bundle's frozen claims and their offline verification: each claim
is assigned by the judge to the narrowest accuracy question it answers (or none), and
fac_k = Correct / assigned. A subtask whose accuracy questions got no claim has fac_k
undefined (``no_claims``) and is left out of Fac and o_k.
"""

from __future__ import annotations

from typing import Any

from ambereval.engine.eval_context import EvalContext
from ambereval.engine.judging import clip, judge_choice
from ambereval.engine.protocols.dailyreport_math import RULES, SubtaskScore, aggregate
from ambereval.engine.verification import verify_claims
from ambereval.errors import ModelError
from ambereval.models import Judge

INS_SYSTEM = (
    "You check whether a research report meets one instruction of its user. Judge only the "
    "body text: section titles alone and the reference list do not count, and do not "
    "fact-check. Score 1 if every subject, object and condition of the instruction is met; "
    "0.5 if only part of a multi-part requirement is met; 0 if it is not met or the report "
    "contradicts it. A figure the report says cannot be obtained counts as met. Reason from "
    "the evaluation date given, never from today's date."
)
RAT_SYSTEM = (
    "You judge only the analytical part of a research report (explanations, comparisons, "
    "causes, trade-offs, recommendations), not its factual claims. Score 1 if the analysis "
    "is coherent and justified, 0.5 if it has minor gaps, 0 if it is unreasonable, "
    "unsupported or irrelevant to the rubric."
)
ASSIGN_SYSTEM = (
    "You match a factual claim from a report to the question it answers. Pick the single "
    "narrowest question the claim answers, or 0 if it answers none of them."
)


def _assign(judge: Judge, claims: list[Any], questions: list[tuple[str, str]],
            date: str | None) -> dict[str, tuple[str | None, str]]:
    """claim id -> (subtask id or None, ledger key)."""
    if not questions:
        return {}
    listing = "\n".join(f"{i}. {q}" for i, (_, q) in enumerate(questions, start=1))
    schema = {"type": "object", "properties": {
        "question": {"type": "integer", "enum": list(range(len(questions) + 1))}},
        "required": ["question"], "additionalProperties": False}
    out = {}
    for claim in claims:
        messages = [{"role": "system", "content": ASSIGN_SYSTEM},
                    {"role": "user", "content": f"Questions:\n{listing}\n\n"
                                                f"Claim: {claim.text}"}]
        try:
            ans = judge.ask(messages, schema, max_tokens=16)
        except ModelError:  # unassigned: the claim counts for no subtask
            out[claim.id] = (None, judge.key(messages, schema, 16))
            continue
        n = ans.obj["question"]
        out[claim.id] = (questions[n - 1][0] if n else None, ans.key)
    return out


def reference_metrics(verdicts: list[dict[str, Any]], cited: dict[str, bool],
                      accuracy_rule: str = "valid-and-correct") -> dict[str, Any]:
    def ratio(a: int, b: int) -> float | None:
        return round(a / b, 6) if b else None

    with_c = [v for v in verdicts if cited.get(v["id"])]
    without = [v for v in verdicts if not cited.get(v["id"])]
    pairs = [(v, p) for v in verdicts for p in v["consistency"]]
    return {
        "reference_ratio": ratio(len(with_c), len(verdicts)),
        "reference_support": ratio(sum(v["verdict"] == "Correct" for v in with_c), len(with_c)),
        "no_reference_support": ratio(sum(v["verdict"] == "Correct" for v in without),
                                      len(without)),
        "refer_claim_consistency": ratio(sum(p["label"] == "support" for _, p in pairs),
                                         len(pairs)),
        "reference_accuracy": ratio(sum(
            1 for v, p in pairs if v["verdict"] == "Correct"
            and (accuracy_rule == "correct" or p["reason"] == "judged")), len(pairs)),
        "pairs": len(pairs),
    }


def evaluate_dailyreport(judge: Judge, ctx: EvalContext, max_chars: int = 12_000,
                         rules: dict[str, str] | None = None) -> dict[str, Any]:
    rules = rules or dict(RULES)
    task = ctx.task
    if not task.subtasks:
        return {"scores": None, "reason": "task has no subtasks (DailyReport needs them)"}
    report = clip(ctx.text, max_chars)
    date = task.evaluation_date
    when = f"Evaluation date: {date}\n" if date else ""
    # the claim index comes from the context: built once per report, every search
    # recorded in the run (replayed from that record)
    decided = ctx.verify_decision(judge.backend.identity()["model"])
    verification = verify_claims(ctx.bundle.root, judge, ctx.embedder,  # type: ignore[arg-type]
                                 index_for=ctx.claim_index, decided=decided) \
        if ctx.claims else {"claims": [], "summary": {}}
    verdicts = {v["id"]: v for v in verification["claims"]}
    questions = [(s.id, q) for s in task.subtasks for q in s.factuality]
    assignment = _assign(judge, ctx.claims, questions, date)
    rows, scores = [], []
    for sub in task.subtasks:
        ins, reason, key = judge_choice(judge, INS_SYSTEM, report,
                                        f"{when}Instruction: {sub.instruction}", [0, 0.5, 1])
        row: dict[str, Any] = {"id": sub.id, "importance": sub.importance, "group": sub.group,
                               "ins": ins, "ins_reason": reason, "ins_key": key}
        fac = None
        if sub.factuality:
            mine = [cid for cid, (sid, _) in assignment.items() if sid == sub.id]
            row["claims"] = [{"id": cid, "verdict": verdicts[cid]["verdict"],
                              "assign_key": assignment[cid][1]}
                             for cid in mine if cid in verdicts]
            if row["claims"]:
                fac = sum(c["verdict"] == "Correct" for c in row["claims"]) / len(row["claims"])
            else:
                row["fac_status"] = "no_claims"
                fac = 0.0 if rules["fac_no_claims"] == "zero" else None
        rat = None
        if sub.rationality:
            rat, r_reason, r_key = judge_choice(judge, RAT_SYSTEM, report,
                                                f"{when}Rubric: {sub.rationality}", [0, 0.5, 1])
            row.update(rat_reason=r_reason, rat_key=r_key)
        row.update(fac=fac, rat=rat)
        rows.append(row)
        scores.append(SubtaskScore(sub.id, sub.importance, float(ins), fac,
                                   None if rat is None else float(rat), sub.group,
                                   has_fac=bool(sub.factuality)))
    agg = aggregate(scores, rules)
    cited = {c.id: bool(c.cited or c.extra.get("citations")) for c in ctx.claims}
    return {
        "subtasks": rows,
        "scores": {k: agg[k] for k in ("ins", "fac", "rat", "subtask_pass", "user_pref")},
        "o": agg["o"], "rules": agg["rules"],
        "reference_metrics": reference_metrics(
            [verdicts[c.id] for c in ctx.claims if c.id in verdicts], cited,
            rules["reference_accuracy"]),
        "verification": verification["summary"],
        # every claim's verdict with its provenance, for `amber audit`
        "verdicts": verification["claims"],
    }
