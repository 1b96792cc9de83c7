"""``amber aggregate run RUN_DIR``: a run's system figures computed again from its
per-report documents, without a judge, with the aggregation switches as recorded or as
given (``depth_no_decisive``, ``deepeval_average``).

It also reads runs written before ``amber-run/3``: their per-report scores stay as that
amber computed them, but DeepEval depth is pooled from the games they recorded and the
summaries are taken from the column means, so their system figures can stand next to a
new run's (and the paper's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ambereval.engine.aggregation import run_table
from ambereval.engine.protocols.switches import from_manifest, parse_run_rules
from ambereval.engine.runs.run_dir import OLD_AGGREGATION, RUN_FORMAT
from ambereval.errors import InputError

#: the switches that act on aggregation (the others act while judging)
AGGREGATION_SWITCHES = ("depth_no_decisive", "deepeval_average")


def aggregate_run(run_dir: str | Path, rules: list[str] | None = None) -> dict[str, Any]:
    """-> {run, format, reports, missing, rules, aggregation, columns, systems}.

    Example: ``aggregate_run("runs/lrb", ["depth_no_decisive=zero"])["systems"]``
    """
    run = Path(run_dir)
    path = run / "manifest.json"
    if not path.is_file():
        raise InputError(f"{run}: no manifest.json (not a run directory)",
                         hint="give the directory `amber evaluate --out` wrote")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise InputError(f"{path}: not JSON") from None
    fmt = manifest.get("format")
    if fmt != RUN_FORMAT and fmt not in OLD_AGGREGATION:
        raise InputError(f"{run}: run directory format {fmt!r}, this amber aggregates "
                         f"{RUN_FORMAT} and {', '.join(sorted(OLD_AGGREGATION))}")
    chosen = from_manifest(manifest.get("rules"))
    for pair in rules or []:
        name = pair.partition("=")[0].strip()
        value = parse_run_rules([pair])[name]  # checks the name and the value
        if name not in AGGREGATION_SWITCHES:
            raise InputError(f"rule {name} acts inside `amber evaluate`, not on a run's "
                             "scores", hint=f"rules here: {', '.join(AGGREGATION_SWITCHES)}")
        chosen[name] = value
    docs, missing = [], []
    for fname in manifest.get("reports") or []:
        report = run / "reports" / fname
        if report.is_file():
            docs.append(json.loads(report.read_text(encoding="utf-8")))
        else:
            missing.append(fname)
    table = run_table(docs, list(manifest.get("protocols") or []), chosen)
    return {"run": str(run), "format": fmt, "reports": len(docs), "missing": missing,
            "rules": {k: chosen[k] for k in AGGREGATION_SWITCHES},
            "aggregation": table["aggregation"], "columns": table["columns"],
            "systems": table["systems"]}
