"""The audit items of each protocol: one judged unit (a claim, a checklist item, a rubric,
a pairwise game, a cited URL) with its outcome, span, ledger keys and evidence."""

from __future__ import annotations

from typing import Any

from ambereval.engine.runs.audit_data import (
    AuditItem,
    RunLoader,
)
from ambereval.errors import AmberError
from ambereval.snapshots import Bundle


def _outcome_of_verdict(verdict: str) -> str:
    return {"Correct": "pass", "Incorrect": "fail"}.get(verdict, "unknown")


def _outcome_of_value(value: Any, top: float = 1) -> str:
    if value is None:
        return "unknown"
    if value >= top:
        return "pass"
    return "fail" if value <= 0 else "partial"


def _span_of(text: str | None, fragment: str) -> list[int] | None:
    if not text or not fragment:
        return None
    at = text.find(fragment)
    return [at, at + len(fragment)] if at >= 0 else None


def _support_answer(check: dict[str, Any]) -> str:
    """A support check's verdict, and where its answer is when the page's statements were
    asked together (engine/support_question.py, ``support_batch``)."""
    verdict = "supported" if check.get("supported") else "not supported"
    if check.get("of"):
        return f"{verdict} (answer {check.get('item')} of {check['of']} in one prompt)"
    return verdict


def _in_prompt(row: dict[str, Any]) -> str | None:
    """Where a checklist item's answer is when its checklist was asked together
    (engine/judging.py, rule ``checklists``)."""
    asked = row.get("asked")
    return f"answer {asked['item']} of {asked['of']} in one prompt" if asked else None


def claim_items(loader: RunLoader, bundle: Bundle | None, verdicts: list[dict[str, Any]],
                 protocol: str, dimension: str, judge: str) -> list[AuditItem]:
    items = []
    for v in verdicts:
        evidence = []
        for e in v.get("evidence") or []:
            evidence.append(loader.evidence(
                bundle, url=e.get("url", ""), record_id=e.get("warc_record_id"),
                capture_id=e.get("capture_id"), key=e.get("ledger_key"),
                passages=e.get("passages"), question=e.get("question"),
                answer=e.get("answer"), quote=e.get("quote"), cited=e.get("cited")))
        items.append(AuditItem(
            id=v["id"], protocol=protocol, dimension=dimension, judge=judge,
            label=v.get("verdict", "Unknown"), outcome=_outcome_of_verdict(v.get("verdict", "")),
            text=v.get("text", ""), span=v.get("span"), reason=v.get("reason"),
            detail={"questions": v.get("questions", []),
                    "consistency": v.get("consistency", [])},
            ledger_keys=[e.get("ledger_key") for e in v.get("evidence") or []
                         if e.get("ledger_key")],
            evidence=evidence))
    return items


def _simple(item_id: str, protocol: str, dimension: str, judge: str, label: Any,
            outcome: str, text: str, key: str | None = None, reason: str | None = None,
            **detail: Any) -> AuditItem:
    return AuditItem(id=item_id, protocol=protocol, dimension=dimension, judge=judge,
                     label=str(label), outcome=outcome, text=text, reason=reason,
                     detail={k: v for k, v in detail.items() if v is not None},
                     ledger_keys=[key] if key else [])


def dailyreport_items(loader: RunLoader, bundle: Bundle | None, result: dict[str, Any],
                       judge: str, subtasks: dict[str, Any]) -> list[AuditItem]:
    """``subtasks``: the task's subtasks by id, so an item shows the instruction and the
    rationality rubric the judge was given (their ids alone when the task is not found)."""
    items: list[AuditItem] = []
    p = "dailyreport"
    for sub in result.get("subtasks") or []:
        sid = sub["id"]
        task_sub = subtasks.get(sid)
        instruction = f"subtask {sid}: {task_sub.instruction}" if task_sub is not None \
            else f"instruction of subtask {sid}"
        items.append(_simple(f"{sid}.ins", p, "ins", judge, sub.get("ins"),
                             _outcome_of_value(sub.get("ins")), instruction,
                             sub.get("ins_key"), sub.get("ins_reason")))
        if sub.get("rat") is not None or sub.get("rat_key"):
            rubric = f"subtask {sid} rationality: {task_sub.rationality}" \
                if task_sub is not None and task_sub.rationality \
                else f"rationality rubric of subtask {sid}"
            items.append(_simple(f"{sid}.rat", p, "rat", judge, sub.get("rat"),
                                 _outcome_of_value(sub.get("rat")), rubric,
                                 sub.get("rat_key"), sub.get("rat_reason")))
    verdicts = result.get("verdicts")
    if verdicts is None:  # older runs kept only the verdict labels per subtask
        verdicts = [{"id": c["id"], "verdict": c["verdict"], "text": c["id"]}
                    for sub in result.get("subtasks") or [] for c in sub.get("claims") or []]
    items += claim_items(loader, bundle, verdicts, p, "fac", judge)
    return items


def dr3_items(loader: RunLoader, bundle: Bundle | None, result: dict[str, Any], judge: str,
               text: str | None) -> list[AuditItem]:
    items: list[AuditItem] = []
    p = "dr3"
    for dim in ("ir_uf", "ir_sc"):
        for i, row in enumerate((result.get(dim) or {}).get("items") or [], start=1):
            items.append(_simple(f"{dim}.{i}", p, dim, judge, row.get("score"),
                                 _outcome_of_value(row.get("score")), row.get("insight", ""),
                                 row.get("ledger_key"), row.get("reason")))
    for i, row in enumerate((result.get("cc") or {}).get("documents") or [], start=1):
        items.append(_simple(f"cc.{i}", p, "cc", judge, row.get("matched") or "not cited",
                             "pass" if row.get("matched") else "fail", row.get("title", ""),
                             reason="decided without the judge (name matching)",
                             kind=row.get("kind")))
    for i, claim in enumerate((result.get("fa") or {}).get("claims") or [], start=1):
        evidence = []
        for src in claim.get("sources") or []:
            page = loader.page(bundle, src.get("warc_record_id"))
            evidence.append(loader.evidence(
                bundle, url=(page or {}).get("url") or src.get("source", ""),
                record_id=src.get("warc_record_id"), key=src.get("ledger_key"),
                answer=_support_answer(src), quote=src.get("reason")))
        span = [claim["start"], claim["end"]] if "start" in claim and "end" in claim else None
        items.append(AuditItem(
            id=f"fa.{i}", protocol=p, dimension="fa", judge=judge,
            label="supported" if claim.get("supported") else "unsupported",
            outcome="pass" if claim.get("supported") else "fail", text=claim.get("claim", ""),
            span=span, reason="; ".join(
                f"{s.get('source')}: "
                f"{s.get('reason') or ('supports' if s.get('supported') else 'does not support')}"
                for s in claim.get("sources") or []) or "no source",
            ledger_keys=[s["ledger_key"] for s in claim.get("sources") or []
                         if s.get("ledger_key")], evidence=evidence))
    for row in (result.get("if") or {}).get("items") or []:
        items.append(_simple(f"if.{row['id']}", p, "if", judge,
                             "pass" if row.get("pass") else "fail",
                             "pass" if row.get("pass") else "fail", row.get("text", ""),
                             row.get("ledger_key"), row.get("reason") or _in_prompt(row),
                             error=row.get("error")))
    dq = result.get("dq") or {}
    if dq:
        items.append(_simple("dq", p, "dq", judge, dq.get("raw"),
                             _outcome_of_value(dq.get("raw"), 10) if dq.get("raw") else "unknown",
                             "depth and quality (1-10)", dq.get("ledger_key"), dq.get("reason")))
    return items


def deepeval_items(loader: RunLoader, bundle: Bundle | None, result: dict[str, Any],
                    judge: str, text: str | None) -> list[AuditItem]:
    items: list[AuditItem] = []
    p = "deepeval"
    for row in (result.get("presentation") or {}).get("items") or []:
        ok = row.get("pass")
        items.append(_simple(f"presentation.{row['item']}", p, "presentation", judge,
                             "pass" if ok else "fail", "pass" if ok else "fail",
                             row.get("text", ""), row.get("ledger_key"),
                             row.get("reason") or ", ".join(filter(None, (
                                 f"decided by the {row.get('method')}", _in_prompt(row)))),
                             method=row.get("method")))
    for dim in ("consistency", "citation_association"):
        r = result.get(dim) or {}
        if r:
            found = r.get("items") or []
            items.append(_simple(dim, p, dim, judge, r.get("score"),
                                 _outcome_of_value(r.get("score"), 100) if r.get("score")
                                 is not None else "unknown",
                                 f"{len(found)} finding(s)", r.get("ledger_key"),
                                 r.get("reason") or "; ".join(found) or "none found",
                                 findings=found))
    for row in (result.get("coverage") or {}).get("items") or []:
        ok = row.get("pass")
        items.append(_simple(f"coverage.{row['id']}", p, "coverage", judge,
                             "pass" if ok else "fail", "pass" if ok else "fail",
                             row.get("text", ""), row.get("ledger_key"),
                             row.get("reason") or _in_prompt(row), error=row.get("error")))
    for game in (result.get("depth") or {}).get("games") or []:
        outcome = {"win": "pass", "loss": "fail", "tie": "partial"}.get(game["outcome"],
                                                                        "unknown")
        items.append(_simple(f"depth.{game['order']}", p, "depth", judge, game["outcome"],
                             outcome, f"pairwise game against the baseline ({game['order']})",
                             game.get("ledger_key"), game.get("error"),
                             target=game.get("target"), baseline=game.get("baseline")))
    for i, entry in enumerate((result.get("citation_accuracy") or {}).get("urls") or [],
                              start=1):
        url = entry["url"]
        if entry.get("error") in ("E1", "E2"):
            item = _simple(f"citation_accuracy.{i}", p, "citation_accuracy", judge,
                           entry["error"], "fail", url, entry.get("relevance_key"),
                           entry.get("reason"), claims=entry.get("claims"))
            if entry["error"] == "E2" and entry.get("capture_id"):
                # the page the judge found irrelevant, with the opening it was shown
                item.evidence = [loader.evidence(
                    bundle, url=url, record_id=None, capture_id=entry["capture_id"],
                    key=entry.get("relevance_key"), answer="irrelevant")]
            items.append(item)
            continue
        for j, pair in enumerate(entry.get("pairs") or [], start=1):
            ev = loader.evidence(bundle, url=url, record_id=pair.get("warc_record_id"),
                                 capture_id=entry.get("capture_id"), key=pair.get("ledger_key"),
                                 answer=_support_answer(pair))
            ok = pair.get("supported")
            items.append(AuditItem(
                id=f"citation_accuracy.{i}.{j}", protocol=p, dimension="citation_accuracy",
                judge=judge, label="supported" if ok else "E3",
                outcome="pass" if ok else "fail", text=pair.get("claim", ""),
                span=_span_of(text, pair.get("claim", "")), reason=f"cites {url}",
                ledger_keys=[k for k in (entry.get("relevance_key"), pair.get("ledger_key"))
                             if k], evidence=[ev]))
    return items


def report_text(bundle: Bundle | None, report_id: str | None) -> str | None:
    if bundle is None:
        return None
    try:
        return bundle.report_text(report_id)[1]
    except AmberError:
        return None


def flat_scores(scores: dict[str, Any]) -> dict[str, Any]:
    return {f"{p}.{k}": v for p, dims in (scores or {}).items() for k, v in (dims or {}).items()}
