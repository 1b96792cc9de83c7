"""Audit a run: for every verdict, the judge's answer and the captured bytes behind it.

Works on both kinds of output directory:

- a run directory of ``amber evaluate`` (``manifest.json``, ``reports/*.json``, ``run.json``,
  ``ledger.sqlite``; format in ``run_dir.py``);
- the output directory of ``amber verify`` (``verdicts.jsonl``, ``summary.json``,
  ``ledger.sqlite``).

Everything is normalised into one model, :class:`Audit` (format ``amber-audit/1``):

``reports``   per report: its stored text (read from its bundle), its scores, and its
              ``items``: every judged unit (a claim, a checklist item, a subtask rubric, a
              pairwise game, a cited URL ...), each with
  ``id``          stable within the report: the claim id (``c3``) or
                  ``<dimension>.<n>`` (``coverage.4``, ``fa.2``, ``citation_accuracy.3.1``)
  ``protocol``, ``dimension``, ``judge``
  ``label``       the verdict as the protocol states it (``Correct``, ``pass``, ``0.5``)
  ``outcome``     ``pass`` | ``partial`` | ``fail`` | ``unknown`` | ``info`` (colour)
  ``span``        [start, end] of the claim in the report text, when it has one
  ``ledger_keys`` the judge calls behind it (answers in ``ledger``)
  ``evidence``    per page: URL, capture id and time, WARC file, conversion and response
                  record ids, the judge's answer and quote, and ``passages`` as character
                  offsets into the page text (given by the run, or, where a protocol did
                  not record them, located in the page text from the judge's prompt in the
                  ledger: ``source: "prompt"``)
``pages``     page text and capture metadata per conversion record id (stored once)
``ledger``    per ledger key: the parsed answer, the error, token counts
``warnings``  what could not be checked (a bundle moved or changed since the run ...)

The audit only reads: the run directory, its ledger (read-only) and the bundles.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from ambereval.engine.aggregation import system_rows
from ambereval.engine.protocols.switches import from_manifest
from ambereval.engine.runs.audit_data import (
    OUTCOMES,
    Audit,
    AuditItem,
    AuditReport,
    Passage,
    RunLoader,
    read_json,
)
from ambereval.engine.runs.audit_items import (
    claim_items,
    dailyreport_items,
    deepeval_items,
    dr3_items,
    flat_scores,
    report_text,
)
from ambereval.errors import InputError


def _load_evaluate(loader: RunLoader, run_dir: Path) -> Audit:
    manifest = read_json(run_dir / "manifest.json")
    fmt = str(manifest.get("format", ""))
    if not fmt.startswith("amber-run/"):
        raise InputError(f"{run_dir}: manifest.json has format {fmt!r}, not an Amber run "
                         "directory")
    from ambereval.engine.runs.run_dir import RUN_FORMAT

    if fmt != RUN_FORMAT:
        loader.warnings.append(f"run format {fmt} (this Amber writes {RUN_FORMAT}): "
                               "fields it lacks are not shown")
    digests = manifest.get("bundles") or {}
    reports: list[AuditReport] = []
    docs: list[dict[str, Any]] = []
    for fname in manifest.get("reports") or []:
        path = run_dir / "reports" / fname
        if not path.is_file():
            loader.warnings.append(f"reports/{fname} missing: the run did not finish")
            continue
        doc = read_json(path)
        docs.append(doc)
        bundle = loader.bundle(doc["bundle"], digests.get(doc["bundle"]))
        text = report_text(bundle, doc.get("report_id"))
        rep = AuditReport(key=fname, name=doc.get("report", fname),
                          report_id=doc.get("report_id"), bundle=doc["bundle"],
                          system=doc.get("system", "default"), task=doc.get("task"),
                          text=text, scores=flat_scores(doc.get("scores") or {}))
        for judge, per_protocol in sorted((doc.get("judges") or {}).items()):
            for protocol, result in per_protocol.items():
                if not isinstance(result, dict):
                    continue
                if protocol == "dailyreport":
                    rep.items += dailyreport_items(
                        loader, bundle, result, judge,
                        loader.subtasks(manifest, bundle, doc.get("report_id"), doc.get("task")))
                elif protocol == "dr3":
                    rep.items += dr3_items(loader, bundle, result, judge, text)
                elif protocol == "deepeval":
                    rep.items += deepeval_items(loader, bundle, result, judge, text)
        reports.append(rep)
    table_path = run_dir / "run.json"
    if table_path.is_file():
        table = read_json(table_path)
        columns, systems = table.get("columns", []), table.get("systems", [])
    else:
        loader.warnings.append("run.json missing: the run did not finish; scores are "
                               "from the reports written so far")
        columns = sorted({c for r in reports for c in r.scores})
        systems = _systems(docs, manifest, columns)
    inputs = {k: manifest.get(k) for k in ("protocols", "judges", "embedder", "seed",
                                           "rules", "tasks_sha256", "software",
                                           "report_clip_chars", "retriever", "prompts")
              if k in manifest}
    return Audit("evaluate", str(run_dir), columns, systems, manifest.get("judges") or {},
                 reports, inputs=inputs)


def _systems(docs: list[dict[str, Any]], manifest: dict[str, Any],
             columns: list[str]) -> list[dict[str, Any]]:
    """The system rows of a run that did not finish, from the reports it wrote, as the
    run would have aggregated them (``engine/aggregation.py``: DeepEval depth pooled)."""
    protocols = list(manifest.get("protocols") or
                     sorted({c.partition(".")[0] for c in columns}))
    return system_rows(docs, protocols, from_manifest(manifest.get("rules")), columns)


VERIFY_COLUMNS = ["verify.correct", "verify.incorrect", "verify.unknown"]


def _load_verify(loader: RunLoader, run_dir: Path) -> Audit:
    summary = read_json(run_dir / "summary.json")
    verdicts = []
    for n, line in enumerate((run_dir / "verdicts.jsonl").read_text(encoding="utf-8")
                             .splitlines(), start=1):
        if line.strip():
            try:
                verdicts.append(json.loads(line))
            except ValueError:
                raise InputError(f"{run_dir / 'verdicts.jsonl'}:{n}: not JSON") from None
    name = str(summary.get("bundle", ""))
    bundle = loader.bundle(name)
    text = report_id = None
    report_name = Path(name).name or "claims"
    if bundle is not None:
        rows = bundle.index.rows("SELECT id, name FROM reports ORDER BY stored_at, id")
        if len(rows) == 1:
            report_id, report_name = rows[0]["id"], rows[0]["name"]
            text = report_text(bundle, report_id)
    identity = summary.get("judge")
    judge = str((identity.get("name") if isinstance(identity, dict) else identity) or "judge")
    total = len(verdicts) or 1
    scores = {c: round(100.0 * sum(v.get("verdict") == c.split(".")[1].capitalize()
                                   for v in verdicts) / total, 4) for c in VERIFY_COLUMNS}
    system = Path(name).parent.name or Path(name).name or "default"
    rep = AuditReport(key=Path(name).name or "bundle", name=report_name, report_id=report_id,
                      bundle=name, system=system, task=None, text=text, scores=scores)
    rep.items = claim_items(loader, bundle, verdicts, "verify", "claims", judge)
    inputs = {k: summary.get(k) for k in ("judge", "embedder", "options", "prompt_sha256",
                                          "retriever") if k in summary}
    return Audit("verify", str(run_dir), list(VERIFY_COLUMNS),
                 [{"system": system, "reports": 1, **scores}], {judge: identity}, [rep],
                 inputs=inputs)


def load_audit(run_dir: str | Path, bundles: list[str | Path] | None = None,
               pages: bool = True) -> Audit:
    """Everything an auditor needs from an ``amber evaluate`` run directory or an
    ``amber verify`` output directory. ``pages=False`` skips reading page texts (the
    verdicts and scores alone, e.g. for a diff).

    Example: ``load_audit("run/").reports[0].items[0].evidence[0].passages``
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: no such run directory")
    roots = [Path(b) for b in bundles or []]
    loader = RunLoader(run_dir, roots, pages)
    try:
        if (run_dir / "manifest.json").is_file():
            audit = _load_evaluate(loader, run_dir)
        elif (run_dir / "verdicts.jsonl").is_file() and (run_dir / "summary.json").is_file():
            audit = _load_verify(loader, run_dir)
        else:
            raise InputError(f"{run_dir}: neither a run directory (manifest.json) nor a "
                             "verify output (verdicts.jsonl, summary.json)",
                             hint="pass the --out directory of `amber evaluate` or "
                                  "`amber verify`")
        for rep in audit.reports:
            for item in rep.items:
                for key in item.ledger_keys:
                    loader.answer(key)
        if not loader.ledger.path.is_file():
            loader.warnings.append(f"{loader.ledger.path} missing: judge answers not shown")
        missing = sorted(k for k, v in loader.answers.items() if v.get("missing"))
        if missing and loader.ledger.conn is not None:
            loader.warnings.append(f"{len(missing)} ledger key(s) not in {loader.ledger.path}"
                                   f", e.g. {missing[0]}")
        audit.pages = loader.pages
        audit.ledger = {k: v for k, v in sorted(loader.answers.items())}
        audit.warnings = list(dict.fromkeys(loader.warnings))
        return audit
    finally:
        loader.close()


# -- choosing what to show ---------------------------------------------------------------
def _did_you_mean(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=3)
    shown = close or options[:8]
    return ("did you mean " if close else "one of: ") + ", ".join(shown)


def select_reports(audit: Audit, report: str | None) -> list[AuditReport]:
    """Reports matching ``report``: the per-report file name, the report's name, its
    system's name (all of that system's reports), a prefix of its id (6+ characters), or
    a part of its name."""
    if report is None:
        return list(audit.reports)
    exact = [r for r in audit.reports if report in (r.key, r.name, Path(r.name).name, r.system)
             or (r.report_id and len(report) >= 6 and r.report_id.startswith(report))]
    found = exact or [r for r in audit.reports if report in r.name or report in r.key]
    if not found:
        known = list(dict.fromkeys([r.name for r in audit.reports]
                                   + [r.system for r in audit.reports]))
        raise InputError(f"no report {report!r} in {audit.source}",
                         hint=_did_you_mean(report, known))
    return found


def _dimension_names(item: AuditItem) -> set[str]:
    return {item.dimension, f"{item.protocol}.{item.dimension}", item.protocol}


def select_items(audit: Audit, report: str | None = None, claim: str | None = None,
                 dimension: str | None = None) -> list[tuple[AuditReport, AuditItem]]:
    """(report, item) pairs for ``--claim ID`` (an item id, e.g. ``c3`` or ``coverage.2``)
    or ``--dimension NAME`` (``coverage`` or ``deepeval.coverage``), in report order."""
    if claim is not None and dimension is not None:
        raise InputError("give --claim or --dimension, not both")
    reports = select_reports(audit, report)
    pairs = [(r, i) for r in reports for i in r.items]
    if claim is not None:
        found = [(r, i) for r, i in pairs if i.id == claim]
        if not found:
            raise InputError(f"no claim or item {claim!r}",
                             hint=_did_you_mean(claim, sorted({i.id for _, i in pairs})))
        return found
    if dimension is not None:
        found = [(r, i) for r, i in pairs if dimension in _dimension_names(i)]
        if not found:
            names = sorted({n for _, i in pairs for n in _dimension_names(i)})
            raise InputError(f"no dimension {dimension!r}", hint=_did_you_mean(dimension, names))
        return found
    return pairs


def excerpt(page: dict[str, Any] | None, passage: Passage, limit: int = 600) -> str:
    """The passage's text read from the stored page text by its offsets."""
    if page is None:
        return ""
    text = page["text"][passage.start : passage.end]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def counts(items: list[AuditItem]) -> dict[str, int]:
    return {o: sum(1 for i in items if i.outcome == o) for o in OUTCOMES}
