"""``amber evaluate``: run the benchmark protocols offline over bundles, write a run dir.

Run directory::

    RUN_DIR/manifest.json     code version, bundles (datapackage sha256), judges, embedder,
                              protocols, every [our rule], prompts' sha256
    RUN_DIR/reports/<n>.json  per report: task, per judge every dimension and sub-score
                              (per subtask, checklist item, claim) with ledger keys, and the
                              mean over judges
    RUN_DIR/run.json, run.csv the table: one row per report, and the mean per system
    RUN_DIR/ledger.sqlite     every judge call (replayable)
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ambereval import __version__
from ambereval.engine.eval_context import open_context, reports_in, stored_task_id
from ambereval.engine.tasks import load_tasks, task_for_report
from ambereval.errors import InputError
from ambereval.models import Embedder, Judge
from ambereval.snapshots import Bundle

PROTOCOLS = ("dailyreport", "dr3", "deepeval")
Progress = Callable[[str, int, int], None]


def _runner(protocol: str) -> Callable[..., dict[str, Any]]:
    if protocol == "dailyreport":
        from ambereval.engine.protocols.dailyreport import evaluate_dailyreport
        return evaluate_dailyreport
    if protocol == "dr3":
        from ambereval.engine.protocols.dr3 import evaluate_dr3
        return evaluate_dr3
    if protocol == "deepeval":
        from ambereval.engine.protocols.deepeval import evaluate_deepeval
        return evaluate_deepeval
    raise InputError(f"unknown protocol {protocol!r} (dailyreport, dr3, deepeval or all)")


SUMMARY_KEYS = ("avg", "average")  # recomputed from the averaged dimensions
NOT_DIMENSIONS = ("user_pref",)  # an ordinal: averaged too, but not part of the average


def _mean_scores(per_judge: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean over judges per dimension; the overall average is then recomputed from those
    means (not the mean of each judge's average)."""
    keys = sorted({k for s in per_judge if s for k in s} - set(SUMMARY_KEYS))
    out: dict[str, Any] = {}
    for k in keys:
        values = [s[k] for s in per_judge if s and isinstance(s.get(k), (int, float))
                  and not isinstance(s.get(k), bool)]
        out[k] = round(sum(values) / len(values), 4) if values else None
    for summary in SUMMARY_KEYS:
        if any(s and summary in s for s in per_judge):
            dims = [v for k, v in out.items() if v is not None and k not in NOT_DIMENSIONS]
            out[summary] = round(sum(dims) / len(dims), 4) if dims else None
    return out


def _digest(path: Path) -> str | None:
    manifest = path / "datapackage.json"
    return hashlib.sha256(manifest.read_bytes()).hexdigest() if manifest.is_file() else None


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "report"


def evaluate_bundles(bundles: list[str | Path], tasks_path: str | Path, protocols: list[str],
                     judges: list[tuple[str, Judge]], out: str | Path,
                     embedder: Embedder | None = None,
                     progress: Progress | None = None,
                     max_chars: int = 12_000,
                     rules: dict[str, str] | None = None) -> dict[str, Any]:
    progress = progress or (lambda phase, done, total: None)
    out = Path(out)
    tasks = load_tasks(tasks_path)
    runners = {p: _runner(p) for p in protocols}
    work = []
    for path in bundles:
        bundle = Bundle.open(path)
        rows = reports_in(bundle)
        if not rows:
            bundle.close()
            raise InputError(f"{path}: bundle holds no report",
                             hint="freeze one with `amber snapshot report`")
        for row in rows:
            task = task_for_report(tasks, Path(row["name"]).name, stored_task_id(row))
            work.append((Path(path), bundle, row, task))
    (out / "reports").mkdir(parents=True, exist_ok=True)
    results = []
    total = len(work) * len(judges) * len(protocols)
    done = 0
    for path, bundle, row, task in work:
        ctx = open_context(bundle, row, task, embedder)
        per_judge: dict[str, dict[str, Any]] = {}
        for name, judge in judges:
            per_judge[name] = {}
            for protocol, run in runners.items():
                if protocol == "dailyreport":
                    per_judge[name][protocol] = run(judge, ctx, max_chars, rules)
                else:
                    per_judge[name][protocol] = run(judge, ctx, max_chars)
                done += 1
                progress("evaluate", done, total)
        means = {p: _mean_scores([per_judge[n][p].get("scores") or {} for n, _ in judges])
                 for p in protocols}
        system = (json.loads(row["meta"]).get("system") if row.get("meta") else None) \
            or path.parent.name or "default"
        doc = {"report": row["name"], "report_id": row["id"], "bundle": str(path),
               "system": system, "task": task.id, "scores": means, "judges": per_judge}
        fname = (f"{_safe(path.parent.name)}--{_safe(path.name)}--"
                 f"{_safe(Path(row['name']).stem)}--{row['id'][:12]}.json")
        (out / "reports" / fname).write_text(json.dumps(doc, indent=2, ensure_ascii=False,
                                                        sort_keys=True) + "\n")
        results.append(doc)
    for _, bundle, _, _ in work:
        bundle.close()
    table = _table(results, protocols)
    manifest = {
        "software": f"amber-eval {__version__}", "protocols": protocols,
        "bundles": {str(p): _digest(p) for p, _, _, _ in work},
        "tasks_file": str(tasks_path),
        "tasks_sha256": hashlib.sha256(Path(tasks_path).read_bytes()).hexdigest(),
        "judges": {n: j.backend.identity()["model"] for n, j in judges},
        "seed": judges[0][1].seed if judges else None,
        "embedder": embedder.identity() if embedder else None,
        "rules": _rules(protocols, rules),
        "report_clip_chars": max_chars,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    (out / "run.json").write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")
    _write_csv(out / "run.csv", table)
    return {"manifest": manifest, "table": table, "reports": results}


def _rules(protocols: list[str], chosen: dict[str, str] | None) -> dict[str, Any]:
    from ambereval.engine.protocols.dailyreport_math import RULES as DR_RULES
    from ambereval.engine.protocols.dr3 import RULES as DR3_RULES
    from ambereval.engine.verification import VerifyOptions

    rules: dict[str, Any] = {}
    if "dailyreport" in protocols:
        rules["dailyreport"] = {**DR_RULES, **(chosen or {}),
                                "verify": VerifyOptions().as_dict()}
    if "dr3" in protocols:
        rules["dr3"] = dict(DR3_RULES)
    if "deepeval" in protocols:
        rules["deepeval"] = {"depth_tie_margin": 1, "depth_clip_chars": 6000}
    return rules


def _table(results: list[dict[str, Any]], protocols: list[str]) -> dict[str, Any]:
    rows = []
    for r in results:
        row: dict[str, Any] = {"system": r["system"], "report": r["report"], "task": r["task"]}
        for p in protocols:
            for k, v in (r["scores"].get(p) or {}).items():
                row[f"{p}.{k}"] = v
        rows.append(row)
    columns = sorted({k for row in rows for k in row} - {"system", "report", "task"})
    systems: dict[str, dict[str, Any]] = {}
    for name in sorted({row["system"] for row in rows}):
        mine = [row for row in rows if row["system"] == name]
        means: dict[str, Any] = {"system": name, "reports": len(mine)}
        for c in columns:
            values = [row[c] for row in mine if isinstance(row.get(c), (int, float))]
            means[c] = round(sum(values) / len(values), 4) if values else None
        systems[name] = means
    return {"columns": columns, "rows": rows, "systems": list(systems.values())}


def _write_csv(path: Path, table: dict[str, Any]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["system", "report", "task", *table["columns"]])
        for row in table["rows"]:
            writer.writerow([row["system"], row["report"], row["task"],
                             *["" if row.get(c) is None else row[c] for c in table["columns"]]])
