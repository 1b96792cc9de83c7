"""How per-judge, per-report scores become a report's scores and a system's figures, as
the benchmarks' published tables were computed (docs/aggregation.md).

A report, several judges: per dimension the mean of the judges' non-null values; the
protocol's summary (DR3 ``avg``, DeepEval ``average``) is then the mean of those means
over the summary's dimensions (not the mean of each judge's summary).

A system, per column: the mean over its reports of the non-null values, with the count
of reports behind it (``valid``), except

- ``deepeval.depth``: the pairwise games are pooled over all the system's reports, per
  judge: win rate = Σ wins / Σ (wins + losses) × 100 (ties not in the denominator), then
  the mean of the judges' pooled rates, as LiveResearchBench's batch evaluator and its
  two-judge averaging compute Fig. 7. A judge with no decisive game pooled: null [our
  rule ``depth_no_decisive=null``; ``zero`` gives the reference code's 0];
- the summaries ``dr3.avg`` and ``deepeval.average``: the mean of the system's own column
  means over the summary's dimensions (the papers' Avg columns), the null ones listed in
  ``null_columns``.

Only the standard library: the run, the audit, diff, rerun and ``amber aggregate`` all
aggregate through this module.
"""

from __future__ import annotations

from typing import Any

from ambereval.engine.protocols.switches import switch

#: Amber's aggregation generation; recorded in run.json (runs written before it have none)
AGGREGATION = "amber-agg/2"
DR3_DIMENSIONS = ("ir_uf", "ir_sc", "cc", "fa", "if", "dq")
TABLE1 = ("presentation", "consistency", "coverage", "citation_association")
DEEPEVAL_DIMENSIONS = (*TABLE1, "depth", "citation_accuracy")
#: per-report figures averaged like the others but never part of a summary
NOT_DIMENSIONS = ("user_pref", "e1_invalid_urls", "e2_irrelevant_urls",
                  "e3_unsupported_pairs")


def summary_of(protocol: str, rules: dict[str, Any] | None) -> tuple[str, tuple[str, ...]] | None:
    """(summary key, the dimensions it averages) for ``protocol``, or None."""
    if protocol == "dr3":
        return "avg", DR3_DIMENSIONS
    if protocol == "deepeval":
        six = switch(rules, "deepeval_average") == "all6"
        return "average", DEEPEVAL_DIMENSIONS if six else TABLE1
    return None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def summarise(protocol: str, scores: dict[str, Any],
              rules: dict[str, Any] | None) -> float | None:
    """The protocol's summary of ``scores`` (its dimensions' non-null values, averaged)."""
    summary = summary_of(protocol, rules)
    if summary is None:
        return None
    return _mean([scores[d] for d in summary[1] if _number(scores.get(d))])


def report_scores(protocol: str, per_judge: list[dict[str, Any]],
                  rules: dict[str, Any] | None = None) -> dict[str, Any]:
    """One report's scores for ``protocol`` from each judge's ``scores``: per dimension
    the mean over judges of the non-null values; the summary recomputed from those."""
    summary = summary_of(protocol, rules)
    skip = {summary[0]} if summary else set()
    keys = sorted({k for s in per_judge if s for k in s} - skip)
    out: dict[str, Any] = {}
    for k in keys:
        out[k] = _mean([s[k] for s in per_judge if s and _number(s.get(k))])
    if summary and any(s and summary[0] in s for s in per_judge):
        out[summary[0]] = summarise(protocol, out, rules)
    return out


def pooled_depth(docs: list[dict[str, Any]], rules: dict[str, Any] | None
                 ) -> tuple[float | None, dict[str, dict[str, Any]]]:
    """DeepEval depth for the reports ``docs`` of one system: (the mean over judges of
    each judge's pooled win rate, {judge: wins, losses, ties, decisive, win_rate})."""
    zero = switch(rules, "depth_no_decisive") == "zero"
    pools: dict[str, dict[str, Any]] = {}
    for doc in docs:
        for judge, by_protocol in sorted((doc.get("judges") or {}).items()):
            depth = ((by_protocol or {}).get("deepeval") or {}).get("depth") or {}
            if not _number(depth.get("wins")):
                continue  # not played: no baseline, or the report is the baseline
            pool = pools.setdefault(judge, {"wins": 0, "losses": 0, "ties": 0, "reports": 0})
            pool["reports"] += 1
            for k in ("wins", "losses", "ties"):
                pool[k] += int(depth.get(k) or 0)
    for pool in pools.values():
        pool["decisive"] = pool["wins"] + pool["losses"]
        pool["win_rate"] = (round(100.0 * pool["wins"] / pool["decisive"], 4)
                            if pool["decisive"] else (0.0 if zero else None))
    rates = [p["win_rate"] for p in pools.values() if p["win_rate"] is not None]
    return _mean(rates), dict(sorted(pools.items()))


def _played(doc: dict[str, Any]) -> bool:
    """Whether any judge played a depth game on this report."""
    return any(_number((((by or {}).get("deepeval") or {}).get("depth") or {}).get("wins"))
               for by in (doc.get("judges") or {}).values())


def report_row(doc: dict[str, Any], protocols: list[str]) -> dict[str, Any]:
    """A per-report row of the run table: system, report, task, ``protocol.dimension``."""
    row: dict[str, Any] = {"system": doc["system"], "report": doc["report"],
                           "task": doc["task"]}
    for p in protocols:
        for k, v in ((doc.get("scores") or {}).get(p) or {}).items():
            row[f"{p}.{k}"] = v
    return row


def system_rows(docs: list[dict[str, Any]], protocols: list[str],
                rules: dict[str, Any] | None = None,
                columns: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per system (sorted) from the per-report documents ``docs`` (as
    ``RUN_DIR/reports/*.json`` hold them). ``columns``: the table's columns (default:
    every ``protocol.dimension`` the reports have)."""
    rows = [report_row(d, protocols) for d in docs]
    if columns is None:
        columns = sorted({k for r in rows for k in r} - {"system", "report", "task"})
    out = []
    for name in sorted({d["system"] for d in docs}):
        mine = [r for r in rows if r["system"] == name]
        row: dict[str, Any] = {"system": name, "reports": len(mine)}
        valid: dict[str, int] = {}
        for c in columns:
            values = [r[c] for r in mine if _number(r.get(c))]
            row[c], valid[c] = _mean(values), len(values)
        pooled: dict[str, Any] = {}
        if "deepeval" in protocols and "deepeval.depth" in columns:
            mine_docs = [d for d in docs if d["system"] == name]
            row["deepeval.depth"], games = pooled_depth(mine_docs, rules)
            pooled["deepeval.depth"] = games
            valid["deepeval.depth"] = sum(1 for d in mine_docs if _played(d))
        nulls: dict[str, list[str]] = {}
        for p in protocols:
            summary = summary_of(p, rules)
            if summary is None or f"{p}.{summary[0]}" not in columns:
                continue
            dims = {d: row.get(f"{p}.{d}") for d in summary[1]}
            row[f"{p}.{summary[0]}"] = summarise(p, dims, rules)
            nulls[p] = [d for d, v in dims.items() if v is None]
        row["valid"] = valid
        if pooled:
            row["pooled"] = pooled
        if nulls:
            row["null_columns"] = nulls
        out.append(row)
    return out


def run_table(docs: list[dict[str, Any]], protocols: list[str],
              rules: dict[str, Any] | None = None) -> dict[str, Any]:
    """``run.json``: columns, one row per report (run order), one row per system."""
    rows = [report_row(d, protocols) for d in docs]
    columns = sorted({k for row in rows for k in row} - {"system", "report", "task"})
    return {"aggregation": AGGREGATION, "columns": columns, "rows": rows,
            "systems": system_rows(docs, protocols, rules, columns)}
