"""``amber diff RUN_A RUN_B``: what differs in two runs' inputs, and which verdicts and
scores moved, largest first.

Both directories must be of one kind: two ``amber evaluate`` run directories, or two
``amber verify`` output directories. Inputs compared: the manifest's (or summary's)
judges, bundles (by their datapackage digest, each named by its shortest folder-name
tail unique across both runs: ``t1``, or ``modelA/t1`` beside ``modelB/t1``), task
file digest, seed, embedder,
retriever, options and rules (leaf by leaf), software version, and the prompts — the
sha256 of every distinct system prompt the judge was given, read from each run's ledger,
plus any prompt digests the run records. Reports are matched by report id (the sha256 of
their text) and task; judged items by report, judge and item id (see ``audit.py``).
When the two runs' judges have different names but the same number, they are paired in
manifest order (a different judge is itself an input difference).

Output format ``amber-diff/1``:
  ``identical``  no input, score or verdict differs
  ``inputs``     [{field, a, b}] for every differing input leaf (``rules.dr3.cc_fuzzy``)
  ``prompts``    {only_a, only_b}: system-prompt digests with the prompt's first words;
                 ``not_compared`` says why when a side has no ledger.sqlite
  ``reports``    {only_a, only_b}: report names present in one run only
  ``scores``     [{report, system, column, a, b, delta}] sorted by |delta| (None last)
  ``systems``    the same per system mean
  ``verdicts``   [{report, system, judge, item, dimension, text, a, b, change}] most
                 severe first: pass <-> fail, then a step to or from partial/unknown
  ``systems_compared``  every system of either run, sorted
  ``aggregation`` null, or {a, b, note} when the two runs were aggregated differently
                 (one written before ``amber-run/3``): their scores are then not
                 compared (``scores`` and ``systems`` empty), as a change of
                 arithmetic is not a move of the judges; verdicts still are
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path, PurePath
from typing import Any

from ambereval.engine.judging import REPORT_SYSTEM
from ambereval.engine.runs.audit import load_audit
from ambereval.engine.runs.audit_data import (
    Audit,
    LedgerReader,
    datapackage_digest,
    resolve_bundle,
)
from ambereval.engine.runs.run_dir import OLD_AGGREGATION, RUN_FORMAT
from ambereval.errors import InputError

DIFF_FORMAT = "amber-diff/1"
OUTCOME_VALUE = {"pass": 1.0, "partial": 0.5, "fail": 0.0}


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict) and obj:
        out: dict[str, Any] = {}
        for k in sorted(obj):
            out.update(_flatten(obj[k], f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: obj}


def prompt_digests(run_dir: Path) -> dict[str, str]:
    """sha256 of every distinct system prompt in the run's ledger -> its first words (a
    report-level call's criterion instructions, which follow the report)."""
    ledger = LedgerReader(run_dir / "ledger.sqlite")
    out: dict[str, str] = {}
    try:
        for row in ledger.rows():
            try:
                messages = json.loads(row["request"]).get("messages", [])
            except (ValueError, AttributeError):
                continue
            users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
            for m in messages:
                if m.get("role") == "system":
                    text = str(m.get("content", ""))
                    if text == REPORT_SYSTEM and users:  # report first: the criterion's
                        text = users[-1].split("\n\n")[-2].strip()  # instructions follow
                    out[hashlib.sha256(text.encode()).hexdigest()] = " ".join(
                        text.split()[:12])
    finally:
        ledger.close()
    return dict(sorted(out.items()))


def _short_names(*runs: list[str]) -> dict[str, str]:
    """Each bundle path of ``runs`` -> its last ``n`` folder names, with the smallest
    ``n`` that tells every run's bundles apart (``t1``; ``modelA/t1`` when a run also
    holds ``modelB/t1``). One ``n`` for all, so a bundle has the same name in both runs
    wherever each run found it, and two bundles of one name never collide."""
    parts = {p: PurePath(p).parts for paths in runs for p in paths}
    longest = max((len(v) for v in parts.values()), default=1)
    n = next((k for k in range(1, longest + 1)
              if all(len({parts[p][-k:] for p in paths}) == len(set(paths))
                     for paths in runs)), longest)
    return {p: PurePath(*v[-n:]).as_posix() for p, v in parts.items()}


def _bundle_digests(run_dir: Path, audit: Audit) -> dict[str, Any]:
    """Bundle path as the run names it -> datapackage digest (as recorded, else as
    found now)."""
    if audit.kind == "evaluate":
        manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
        return dict(manifest.get("bundles") or {})
    out = {}
    for rep in audit.reports:
        found = resolve_bundle(rep.bundle, run_dir)
        out[rep.bundle] = datapackage_digest(found) if found else None
    return out


def _inputs_of_both(run_a: Path, a: Audit, run_b: Path, b: Audit
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each run's inputs, flattened; bundles keyed by names shared by both runs."""
    digests_a, digests_b = _bundle_digests(run_a, a), _bundle_digests(run_b, b)
    names = _short_names(list(digests_a), list(digests_b))

    def inputs(audit: Audit, digests: dict[str, Any]) -> dict[str, Any]:
        bundles = dict(sorted((names[k], v) for k, v in digests.items()))
        return _flatten({**audit.inputs, "judges": audit.judges, "bundles": bundles})

    return inputs(a, digests_a), inputs(b, digests_b)


def _unshared_rule(field: str, a: Audit, b: Audit) -> bool:
    """A protocol's rules are inputs only where both runs ran that protocol: when one run
    did not, the ``protocols`` row already says so, and listing each of its rules as
    "missing" would bury the inputs that did change."""
    parts = field.split(".")
    if len(parts) < 2 or parts[0] != "rules":
        return False
    ran_a, ran_b = a.inputs.get("protocols"), b.inputs.get("protocols")
    if not isinstance(ran_a, list) or not isinstance(ran_b, list):
        return False
    return parts[1] not in set(ran_a) & set(ran_b)


def _run_format(run_dir: Path, audit: Audit) -> str | None:
    if audit.kind != "evaluate":
        return None
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    return str(manifest.get("format"))


def aggregation_change(run_a: Path, a: Audit, run_b: Path, b: Audit) -> dict[str, Any] | None:
    """{a, b, note} when one run predates the aggregation the other used, else None."""
    fa, fb = _run_format(run_a, a), _run_format(run_b, b)
    if fa == fb or not ({fa, fb} & set(OLD_AGGREGATION)):
        return None
    old = fa if fa in OLD_AGGREGATION else fb
    return {"a": fa, "b": fb, "note": (
        f"the aggregation changed between {old} (amber-eval {OLD_AGGREGATION[old]}) and "
        f"{RUN_FORMAT}: scores are not compared, verdicts are; evaluate both with one "
        "amber to compare scores")}


def _report_key(rep: Any) -> tuple[str, str]:
    return (rep.report_id or rep.name, rep.task or "")


def _severity(a: str, b: str) -> float:
    va, vb = OUTCOME_VALUE.get(a), OUTCOME_VALUE.get(b)
    if va is not None and vb is not None:
        return abs(va - vb)
    return 0.5


def diff_runs(run_a: str | Path, run_b: str | Path) -> dict[str, Any]:
    """Compare two runs of one kind; see the module docstring for the result.

    Example: ``diff_runs("run-smol/", "run-qwen/")["verdicts"][:5]``
    """
    run_a, run_b = Path(run_a), Path(run_b)
    a, b = load_audit(run_a, pages=False), load_audit(run_b, pages=False)
    if a.kind != b.kind:
        raise InputError(f"cannot compare an `amber {a.kind}` output ({run_a}) with an "
                         f"`amber {b.kind}` output ({run_b})")
    ia, ib = _inputs_of_both(run_a, a, run_b, b)
    inputs = [{"field": k, "a": ia.get(k), "b": ib.get(k)}
              for k in sorted(set(ia) | set(ib))
              if ia.get(k) != ib.get(k) and not _unshared_rule(k, a, b)]
    prompts: dict[str, Any] = {"only_a": [], "only_b": []}
    missing = [f"{side} ({path}) has no ledger.sqlite" for side, path in
               (("a", run_a), ("b", run_b)) if not (path / "ledger.sqlite").is_file()]
    if missing:  # a verify run given --ledger elsewhere: its prompts are not here to compare
        prompts["not_compared"] = "; ".join(missing)
    else:
        pa, pb = prompt_digests(run_a), prompt_digests(run_b)
        prompts["only_a"] = [{"sha256": k, "starts": v} for k, v in pa.items() if k not in pb]
        prompts["only_b"] = [{"sha256": k, "starts": v} for k, v in pb.items() if k not in pa]

    reps_a = {_report_key(r): r for r in a.reports}
    reps_b = {_report_key(r): r for r in b.reports}
    common = [k for k in reps_a if k in reps_b]
    reports = {"only_a": [reps_a[k].name for k in reps_a if k not in reps_b],
               "only_b": [reps_b[k].name for k in reps_b if k not in reps_a]}

    aggregation = aggregation_change(run_a, a, run_b, b)
    scores = []
    for k in common if aggregation is None else []:
        ra, rb = reps_a[k], reps_b[k]
        for col in sorted(set(ra.scores) | set(rb.scores)):
            va, vb = ra.scores.get(col), rb.scores.get(col)
            if va != vb:
                scores.append({"report": ra.name, "system": ra.system, "column": col,
                               "a": va, "b": vb, "delta": _delta(va, vb)})
    scores.sort(key=_by_delta)
    systems = []
    sys_b = {s["system"]: s for s in b.systems}
    for sa in a.systems if aggregation is None else []:
        sb = sys_b.get(sa["system"])
        if sb is None:
            continue
        for col in sorted(set(a.columns) | set(b.columns)):
            if sa.get(col) != sb.get(col):
                systems.append({"system": sa["system"], "column": col, "a": sa.get(col),
                                "b": sb.get(col), "delta": _delta(sa.get(col), sb.get(col))})
    systems.sort(key=_by_delta)

    pairing = _pair_judges(list(a.judges), list(b.judges))
    verdicts = []
    for k in common:
        ra, rb = reps_a[k], reps_b[k]
        items_b = {(i.judge, i.id): i for i in rb.items}
        for ia_ in ra.items:
            ib_ = items_b.get((pairing.get(ia_.judge, ia_.judge), ia_.id))
            if ib_ is None or (ia_.label, ia_.outcome) == (ib_.label, ib_.outcome):
                continue
            verdicts.append({"report": ra.name, "system": ra.system, "judge": ia_.judge,
                             "item": ia_.id,
                             "dimension": f"{ia_.protocol}.{ia_.dimension}",
                             "text": ia_.text[:200], "a": ia_.label, "b": ib_.label,
                             "change": f"{ia_.outcome} -> {ib_.outcome}",
                             "severity": _severity(ia_.outcome, ib_.outcome)})
    verdicts.sort(key=lambda v: (-v["severity"], v["report"], v["judge"], v["item"]))
    identical = not (inputs or prompts["only_a"] or prompts["only_b"] or scores
                     or verdicts or reports["only_a"] or reports["only_b"] or aggregation)
    return {"format": DIFF_FORMAT, "a": str(run_a), "b": str(run_b), "kind": a.kind,
            "identical": identical, "inputs": inputs, "prompts": prompts,
            "reports": reports, "judges_paired": pairing if any(
                k != v for k, v in pairing.items()) else {},
            "aggregation": aggregation,
            "scores": scores, "systems": systems, "verdicts": verdicts,
            "systems_compared": sorted({r.system for r in a.reports + b.reports}),
            "warnings": [f"a: {w}" for w in a.warnings] + [f"b: {w}" for w in b.warnings]}


def _pair_judges(a: list[str], b: list[str]) -> dict[str, str]:
    if set(a) == set(b) or len(a) != len(b):
        return {j: j for j in a}
    return dict(zip(a, b, strict=True))


def _delta(a: Any, b: Any) -> float | None:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        return round(b - a, 6)
    return None


def _by_delta(row: dict[str, Any]) -> tuple[Any, ...]:
    d = row["delta"]
    return (d is None, -abs(d) if d is not None else 0, row.get("report", row.get("system")),
            row["column"])
