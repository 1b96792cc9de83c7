"""``amber snapshot report``: extract a report's claims, then capture their evidence.

The report text, the claims (spans, rewritten text, citations, questions, search strings,
the judge ledger keys behind them) and every capture land in one bundle, so later
evaluations — with any judge — run on exactly the same claims.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ambereval.engine.claims import (
    EXTRACT_PROMPT,
    EXTRACT_SCHEMA,
    Progress,
    extract_report_claims,
)
from ambereval.engine.report import load_report
from ambereval.engine.tasks import load_task
from ambereval.errors import InputError
from ambereval.models import Judge
from ambereval.models.canonical import content_key
from ambereval.snapshots import Bundle, CaptureOptions, CaptureSummary, ClaimInput, capture_claims
from ambereval.snapshots.bundle.store import report_key
from ambereval.snapshots.capture.pipeline import stored_claim_sources

_EXTRACTED_ID = re.compile(r"c\d+")  # the ids claim extraction gives


def snapshot_report(report_path: str | Path, out: str | Path, judge: Judge,
                    options: CaptureOptions, task_path: str | Path | None = None,
                    progress: Progress | None = None,
                    extractor: str = "judge",
                    ) -> tuple[CaptureSummary, list[Any], dict[str, Any]]:
    """Freeze the report and its claims into the bundle ``out``, then capture their
    evidence. Returns the capture summary, the claims, and the extraction account
    (claims per extractor, the sentence extractor's count, fallbacks, a warning)."""
    report_path = Path(report_path)
    report = load_report(report_path)
    if not report.text.strip():
        raise InputError(f"{report_path}: the report is empty")
    task = load_task(task_path, report_path.name) if task_path else None
    _refuse_another_input(Path(out), report_path, report_key(report.text))
    claims, account = extract_report_claims(report, judge, extractor, progress)
    meta = {"extractor": extractor, "judge": judge.backend.identity()["model"],
            "extract_prompt_sha256": content_key([EXTRACT_PROMPT, EXTRACT_SCHEMA]),
            "claims": len(claims), "extraction": account}
    with Bundle.create(out) as bundle:
        report_id = bundle.store_report(report_path.name, report.text,
                                        task.to_json() if task else None, meta)
        bundle.finalize()
    search = options.top_k > 0
    inputs = [ClaimInput(c.id, c.text, tuple(c.urls), tuple(c.searches) if search else (),
                         {**c.as_dict(), "report_id": report_id}) for c in claims]
    if not inputs:
        return CaptureSummary(str(out)), claims, account
    summary = capture_claims(out, inputs, options, progress)
    return summary, claims, account


def _refuse_another_input(out: Path, report_path: Path, report_id: str) -> None:
    """Claim ids (c1, c2, ...) are the bundle's keys: claims the bundle holds from another
    report, or from a claims file under ids this report's claims would take (``c<n>``),
    would be overwritten. Refused before the judge runs; the same report again goes on."""
    others = [(cid, source) for cid, source in stored_claim_sources(out)
              if source != report_id and (source is not None or _EXTRACTED_ID.fullmatch(cid))]
    if others:
        first, source = others[0]
        with Bundle.open(out) as bundle:
            names = {r["id"]: r["name"] for r in bundle.index.rows("SELECT id, name FROM reports")}
        what = (f"an earlier version of {report_path.name}" if names.get(source or "")
                == report_path.name else "another report" if source else "a claims file")
        raise InputError(
            f"{out}: holds {len(others)} claim{'s' if len(others) != 1 else ''} from {what} "
            f"(first: {first!r}) that {report_path.name}'s claims would overwrite",
            hint="give each report its own --out bundle")
