"""The audit's model (:class:`Audit` and its items, format ``amber-audit/1``) and the
reading of a run's files, ledger and bundles that fills it; :mod:`.audit` documents the
model and assembles it."""

from __future__ import annotations

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
def read_json(path: Path) -> Any:
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


def datapackage_digest(path: Path) -> str | None:
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
class RunLoader:
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
            if digest is not None and datapackage_digest(path) != digest:
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
        origin = made_in(self.run_dir)
        bases = [Path(origin)] if origin else []
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


def made_in(run_dir: Path) -> str | None:
    """The directory the run was made in (``invocation.json``), or None (older runs)."""
    from ambereval.engine.runs.invocation import read_invocation

    try:
        return read_invocation(run_dir).cwd
    except (AmberError, OSError):
        return None
