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
import hashlib
import json
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ambereval.errors import AmberError, InputError
from ambereval.snapshots import Bundle

AUDIT_FORMAT = "amber-audit/1"
OUTCOMES = ("pass", "partial", "fail", "unknown", "info")
MIN_PASSAGE_CHARS = 24


@dataclass
class Passage:
    """A span of the page text shown to (or chosen for) the judge."""

    start: int
    end: int
    score: float | None = None
    chunk_id: str | None = None
    source: str = "run"  # "run": offsets recorded by the run; "prompt": found from the ledger


@dataclass
class Evidence:
    url: str
    capture_id: str | None = None
    captured_at: str | None = None
    warc_file: str | None = None
    warc_record_id: str | None = None  # the conversion (extracted text) record
    response_record_id: str | None = None
    question: str | None = None
    answer: str | None = None
    quote: str | None = None
    cited: bool | None = None
    ledger_key: str | None = None
    passages: list[Passage] = field(default_factory=list)


@dataclass
class AuditItem:
    id: str
    protocol: str
    dimension: str
    judge: str
    label: str
    outcome: str
    text: str
    span: list[int] | None = None
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    ledger_keys: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class AuditReport:
    key: str
    name: str
    report_id: str | None
    bundle: str
    system: str
    task: str | None
    text: str | None
    scores: dict[str, Any]
    items: list[AuditItem] = field(default_factory=list)


@dataclass
class Audit:
    kind: str  # "evaluate" | "verify"
    source: str
    columns: list[str]
    systems: list[dict[str, Any]]
    judges: dict[str, Any]
    reports: list[AuditReport]
    pages: dict[str, dict[str, Any]] = field(default_factory=dict)
    ledger: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"format": AUDIT_FORMAT, **_plain(self)}

    def report(self, key: str) -> AuditReport:
        return next(r for r in self.reports if r.key == key)


def _plain(obj: Any) -> Any:
    """Dataclasses to plain data, like ``asdict`` but without deep copies (large runs)."""
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _plain(v) for k, v in obj.__dict__.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


# -- reading the run's files --------------------------------------------------------------
def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: unreadable ({err})") from None


class LedgerReader:
    """Read-only access to a ledger file (never creates or migrates it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn: sqlite3.Connection | None = None
        if path.is_file():
            try:
                self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
                self.conn.row_factory = sqlite3.Row
                self.conn.execute("SELECT 1 FROM calls LIMIT 1")
            except sqlite3.DatabaseError as err:
                raise InputError(f"{path}: not a judge ledger ({err})") from None

    def get(self, key: str) -> dict[str, Any] | None:
        if self.conn is None:
            return None
        row = self.conn.execute("SELECT * FROM calls WHERE key = ?", [key]).fetchone()
        return dict(row) if row else None

    def rows(self) -> list[dict[str, Any]]:
        if self.conn is None:
            return []
        return [dict(r) for r in self.conn.execute("SELECT * FROM calls ORDER BY key")]

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def resolve_bundle(name: str, run_dir: Path, roots: list[Path] | None = None) -> Path | None:
    """Where a bundle named in a run is now: as recorded, else relative to the run
    directory, its parent, or one of ``roots`` (by path, then by folder name)."""
    given = Path(name)
    candidates = [given]
    if not given.is_absolute():
        candidates += [run_dir / given, run_dir.parent / given]
    for root in roots or []:
        candidates += [root / given, root / given.name]
    for c in candidates:
        if (c / "evidence" / "amber.sqlite").is_file():
            return c
    return None


def _datapackage_digest(path: Path) -> str | None:
    dp = path / "datapackage.json"
    return hashlib.sha256(dp.read_bytes()).hexdigest() if dp.is_file() else None


# -- locating passages ---------------------------------------------------------------------
_LISTING = re.compile(r"^\[\d+\]\s+")


def passages_in_prompt(messages: list[dict[str, Any]], page_text: str) -> list[Passage]:
    """The parts of the judge's prompt that are verbatim slices of the page text, as
    offsets: every blank-line separated block of the user message (a ``[n]`` listing
    prefix removed) found in the page, adjacent finds merged."""
    spans: list[tuple[int, int]] = []
    for m in messages:
        if m.get("role") != "user":
            continue
        for block in str(m.get("content", "")).split("\n\n"):
            lines = block.strip().split("\n")
            # a block may start with the prompt's own header lines ("Passages:")
            for drop in range(min(len(lines), 4)):
                piece = _LISTING.sub("", "\n".join(lines[drop:]).strip())
                if len(piece) < MIN_PASSAGE_CHARS and piece != page_text.strip():
                    continue
                at = page_text.find(piece)
                if at >= 0:
                    spans.append((at, at + len(piece)))
                    break
    merged: list[list[int]] = []
    for s, e in sorted(set(spans)):
        if merged and s <= merged[-1][1] + 2:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [Passage(s, e, source="prompt") for s, e in merged]


# -- the loader ----------------------------------------------------------------------------
class _Loader:
    def __init__(self, run_dir: Path, roots: list[Path] | None, pages: bool = True) -> None:
        self.run_dir = run_dir
        self.roots = roots
        self.with_pages = pages
        self.audit: Audit | None = None
        self.ledger = LedgerReader(run_dir / "ledger.sqlite")
        self.bundles: dict[str, Bundle | None] = {}
        self.pages: dict[str, dict[str, Any]] = {}
        self.answers: dict[str, dict[str, Any]] = {}
        self.warnings: list[str] = []
        self._tasks: dict[str, Any] | None = None

    def close(self) -> None:
        for b in self.bundles.values():
            if b is not None:
                b.close()
        self.ledger.close()

    # bundles and pages
    def bundle(self, name: str, digest: str | None = None) -> Bundle | None:
        if name not in self.bundles:
            path = resolve_bundle(name, self.run_dir, self.roots)
            if path is None:
                self.warnings.append(f"bundle {name} not found: its page and report texts "
                                     "are not shown (pass --bundles DIR)")
                self.bundles[name] = None
                return None
            if digest is not None and _datapackage_digest(path) != digest:
                self.warnings.append(f"bundle {path} changed since the run (datapackage.json "
                                     "digest differs): the evidence shown may not be what "
                                     "the judge saw")
            try:
                self.bundles[name] = Bundle.open(path)
            except AmberError as err:
                self.warnings.append(str(err))
                self.bundles[name] = None
        return self.bundles[name]

    def subtasks(self, manifest: dict[str, Any], bundle: Bundle | None,
                 report_id: str | None, task_id: str | None) -> dict[str, Any]:
        """The subtasks of the task a report was scored with, by id: from the run's tasks
        file while it still has the manifest's sha256, else the task frozen with the report
        in its bundle (with a warning), else none."""
        if self._tasks is None:
            self._tasks = self._load_tasks(manifest)
        task = self._tasks.get(task_id or "")
        if task is not None:
            return {s.id: s for s in task.subtasks}
        if bundle is None or report_id is None:
            return {}
        row = bundle.index.one("SELECT task FROM reports WHERE id = ?", [report_id])
        if not row or not row["task"]:
            return {}
        from ambereval.engine.tasks import task_from_json

        try:
            frozen = task_from_json(json.loads(row["task"]), f"{bundle.root}: frozen task")
        except (AmberError, ValueError):
            return {}
        return {s.id: s for s in frozen.subtasks}

    def _load_tasks(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """The run's tasks by id: its tasks file, looked for where the run was made
        (``invocation.json`` ``cwd``), beside the run and from here, and used only if it
        still has the manifest's sha256."""
        from ambereval.engine.tasks import load_tasks

        name, digest = manifest.get("tasks_file"), manifest.get("tasks_sha256")
        if not name:
            return {}
        given = Path(name)
        made_in = _made_in(self.run_dir)
        bases = [Path(made_in)] if made_in else []
        candidates = [given] if given.is_absolute() else \
            [base / given for base in (*bases, self.run_dir.parent, self.run_dir, Path("."))]
        found = [path for path in candidates if path.is_file()]
        for path in found:
            if hashlib.sha256(path.read_bytes()).hexdigest() == digest:
                try:
                    return {t.id: t for t in load_tasks(path)}
                except AmberError as err:
                    self.warnings.append(str(err))
                    return {}
        why = f"changed since the run ({found[0]})" if found else "not found"
        self.warnings.append(f"tasks file {name} {why}: subtask texts are from the tasks "
                             "frozen in the bundles, which may differ from those the run "
                             "scored with")
        return {}

    def page(self, bundle: Bundle | None, record_id: str | None,
             capture_id: str | None = None) -> dict[str, Any] | None:
        """Text and capture metadata for a conversion record (or a capture's text)."""
        if bundle is None or not self.with_pages:
            return None
        if record_id is None and capture_id:
            row = bundle.index.one("SELECT record_id FROM texts WHERE capture_id = ?",
                                   [capture_id])
            record_id = row["record_id"] if row else None
        if record_id is None:
            return None
        if record_id in self.pages:
            return self.pages[record_id]
        rec = bundle.index.record(record_id)
        if rec is None:
            self.warnings.append(f"record {record_id} is not in bundle {bundle.root}")
            return None
        text_row = bundle.index.one("SELECT * FROM texts WHERE record_id = ? "
                                    "ORDER BY capture_id LIMIT 1", [record_id])
        cap = bundle.index.capture(capture_id or (text_row or {}).get("capture_id") or "")
        response = None
        if cap and cap["response_record"]:
            response = bundle.index.record(cap["response_record"])
        text = bundle.read_record(record_id).body.decode("utf-8", errors="replace")
        page = {
            "record_id": record_id, "bundle": str(bundle.root),
            "url": (cap or {}).get("url") or rec.get("target_uri"),
            "final_url": (cap or {}).get("final_url"),
            "title": (text_row or {}).get("title"), "capture_id": (cap or {}).get("id"),
            "captured_at": (cap or {}).get("captured_at") or rec.get("date"),
            "status": (cap or {}).get("status"), "reader": (cap or {}).get("reader"),
            "warc_file": rec["warc_file"], "warc_offset": rec["offset"],
            "warc_length": rec["length"],
            "response_record_id": (cap or {}).get("response_record"),
            "response_warc_file": (response or {}).get("warc_file"),
            "response_warc_offset": (response or {}).get("offset"),
            "payload_sha256": (cap or {}).get("payload_sha256"),
            "text": text,
        }
        self.pages[record_id] = page
        return page

    def answer(self, key: str | None) -> dict[str, Any] | None:
        if not key:
            return None
        if key not in self.answers:
            row = self.ledger.get(key)
            if row is None:
                self.answers[key] = {"missing": True}
            else:
                self.answers[key] = {
                    "answer": json.loads(row["parsed"]) if row["parsed"] else None,
                    "error": row["error"], "model": row["model"],
                    "prompt_tokens": row["prompt_tokens"],
                    "completion_tokens": row["completion_tokens"]}
        return self.answers[key]

    def prompt_passages(self, key: str | None, page: dict[str, Any] | None) -> list[Passage]:
        if not key or page is None:
            return []
        row = self.ledger.get(key)
        if row is None:
            return []
        try:
            messages = json.loads(row["request"]).get("messages", [])
        except (ValueError, AttributeError):
            return []
        return passages_in_prompt(messages, page["text"])

    def evidence(self, bundle: Bundle | None, *, url: str, record_id: str | None,
                 capture_id: str | None = None, key: str | None = None,
                 passages: list[dict[str, Any]] | None = None,
                 **extra: Any) -> Evidence:
        page = self.page(bundle, record_id, capture_id)
        ev = Evidence(url=url, capture_id=capture_id or (page or {}).get("capture_id"),
                      captured_at=(page or {}).get("captured_at"),
                      warc_file=(page or {}).get("warc_file"),
                      warc_record_id=record_id or (page or {}).get("record_id"),
                      response_record_id=(page or {}).get("response_record_id"),
                      ledger_key=key, **extra)
        if passages:
            ev.passages = [Passage(p["start"], p["end"], p.get("score"), p.get("chunk_id"))
                           for p in passages if "start" in p and "end" in p]
        else:
            ev.passages = self.prompt_passages(key, page)
        self.answer(key)
        return ev


def _made_in(run_dir: Path) -> str | None:
    """The directory the run was made in (``invocation.json``), or None (older runs)."""
    from ambereval.engine.runs.invocation import read_invocation

    try:
        return read_invocation(run_dir).cwd
    except (AmberError, OSError):
        return None


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


def _claim_items(loader: _Loader, bundle: Bundle | None, verdicts: list[dict[str, Any]],
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


def _dailyreport_items(loader: _Loader, bundle: Bundle | None, result: dict[str, Any],
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
    items += _claim_items(loader, bundle, verdicts, p, "fac", judge)
    return items


def _dr3_items(loader: _Loader, bundle: Bundle | None, result: dict[str, Any], judge: str,
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
                answer="supported" if src.get("supported") else "not supported",
                quote=src.get("reason")))
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
                             row.get("ledger_key"), row.get("reason"), error=row.get("error")))
    dq = result.get("dq") or {}
    if dq:
        items.append(_simple("dq", p, "dq", judge, dq.get("raw"),
                             _outcome_of_value(dq.get("raw"), 10) if dq.get("raw") else "unknown",
                             "depth and quality (1-10)", dq.get("ledger_key"), dq.get("reason")))
    return items


def _deepeval_items(loader: _Loader, bundle: Bundle | None, result: dict[str, Any],
                    judge: str, text: str | None) -> list[AuditItem]:
    items: list[AuditItem] = []
    p = "deepeval"
    for row in (result.get("presentation") or {}).get("items") or []:
        ok = row.get("pass")
        items.append(_simple(f"presentation.{row['item']}", p, "presentation", judge,
                             "pass" if ok else "fail", "pass" if ok else "fail",
                             row.get("text", ""), row.get("ledger_key"),
                             row.get("reason") or f"decided by the {row.get('method')}",
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
                             row.get("text", ""), row.get("ledger_key"), row.get("reason"),
                             error=row.get("error")))
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
                                 answer="supported" if pair.get("supported") else
                                 "not supported")
            ok = pair.get("supported")
            items.append(AuditItem(
                id=f"citation_accuracy.{i}.{j}", protocol=p, dimension="citation_accuracy",
                judge=judge, label="supported" if ok else "E3",
                outcome="pass" if ok else "fail", text=pair.get("claim", ""),
                span=_span_of(text, pair.get("claim", "")), reason=f"cites {url}",
                ledger_keys=[k for k in (entry.get("relevance_key"), pair.get("ledger_key"))
                             if k], evidence=[ev]))
    return items


def _report_text(bundle: Bundle | None, report_id: str | None) -> str | None:
    if bundle is None:
        return None
    try:
        return bundle.report_text(report_id)[1]
    except AmberError:
        return None


def _flat_scores(scores: dict[str, Any]) -> dict[str, Any]:
    return {f"{p}.{k}": v for p, dims in (scores or {}).items() for k, v in (dims or {}).items()}


def _load_evaluate(loader: _Loader, run_dir: Path) -> Audit:
    manifest = _read_json(run_dir / "manifest.json")
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
    for fname in manifest.get("reports") or []:
        path = run_dir / "reports" / fname
        if not path.is_file():
            loader.warnings.append(f"reports/{fname} missing: the run did not finish")
            continue
        doc = _read_json(path)
        bundle = loader.bundle(doc["bundle"], digests.get(doc["bundle"]))
        text = _report_text(bundle, doc.get("report_id"))
        rep = AuditReport(key=fname, name=doc.get("report", fname),
                          report_id=doc.get("report_id"), bundle=doc["bundle"],
                          system=doc.get("system", "default"), task=doc.get("task"),
                          text=text, scores=_flat_scores(doc.get("scores") or {}))
        for judge, per_protocol in sorted((doc.get("judges") or {}).items()):
            for protocol, result in per_protocol.items():
                if not isinstance(result, dict):
                    continue
                if protocol == "dailyreport":
                    rep.items += _dailyreport_items(
                        loader, bundle, result, judge,
                        loader.subtasks(manifest, bundle, doc.get("report_id"), doc.get("task")))
                elif protocol == "dr3":
                    rep.items += _dr3_items(loader, bundle, result, judge, text)
                elif protocol == "deepeval":
                    rep.items += _deepeval_items(loader, bundle, result, judge, text)
        reports.append(rep)
    table_path = run_dir / "run.json"
    if table_path.is_file():
        table = _read_json(table_path)
        columns, systems = table.get("columns", []), table.get("systems", [])
    else:
        loader.warnings.append("run.json missing: the run did not finish; scores are "
                               "from the reports written so far")
        columns = sorted({c for r in reports for c in r.scores})
        systems = _systems(reports, columns)
    inputs = {k: manifest.get(k) for k in ("protocols", "judges", "embedder", "seed",
                                           "rules", "tasks_sha256", "software",
                                           "report_clip_chars", "retriever", "prompts")
              if k in manifest}
    return Audit("evaluate", str(run_dir), columns, systems, manifest.get("judges") or {},
                 reports, inputs=inputs)


def _systems(reports: list[AuditReport], columns: list[str]) -> list[dict[str, Any]]:
    out = []
    for name in sorted({r.system for r in reports}):
        mine = [r for r in reports if r.system == name]
        row: dict[str, Any] = {"system": name, "reports": len(mine)}
        for c in columns:
            values = [r.scores[c] for r in mine if isinstance(r.scores.get(c), (int, float))]
            row[c] = round(sum(values) / len(values), 4) if values else None
        out.append(row)
    return out


VERIFY_COLUMNS = ["verify.correct", "verify.incorrect", "verify.unknown"]


def _load_verify(loader: _Loader, run_dir: Path) -> Audit:
    summary = _read_json(run_dir / "summary.json")
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
            text = _report_text(bundle, report_id)
    identity = summary.get("judge")
    judge = str((identity.get("name") if isinstance(identity, dict) else identity) or "judge")
    total = len(verdicts) or 1
    scores = {c: round(100.0 * sum(v.get("verdict") == c.split(".")[1].capitalize()
                                   for v in verdicts) / total, 4) for c in VERIFY_COLUMNS}
    system = Path(name).parent.name or Path(name).name or "default"
    rep = AuditReport(key=Path(name).name or "bundle", name=report_name, report_id=report_id,
                      bundle=name, system=system, task=None, text=text, scores=scores)
    rep.items = _claim_items(loader, bundle, verdicts, "verify", "claims", judge)
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
    loader = _Loader(run_dir, roots, pages)
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
