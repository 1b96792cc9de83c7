"""Importers that turn published benchmark data into Amber tasks (and bundles).

- LiveResearchBench: the checklist CSV (``qid, question, category, checklist_id,
  checklist``), baseline reports ``qid_<qid>_report.md``, reports ``<model>/qid_<qid>_report.md``.
- DR3-Eval: ``query.jsonl``; per task ``<NNN>/long_context_sampled_<size>.json`` (the
  sandbox corpus: ``[{title, page_body, url?}]``), ``<NNN>/useful_search.jsonl`` (the
  supportive pages), optional ``<NNN>/user_files/``; gold insights and checklists under
  ``evaluation/``. Each task's corpus becomes a snapshot bundle whose pages are WARC
  ``resource`` records with their titles, so DR3-Eval reads exactly its own corpus.
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path
from typing import Any

from ambereval.engine.tasks import ChecklistItem, RequiredDocument, Task
from ambereval.errors import InputError
from ambereval.snapshots import Bundle

LRB_COLUMNS = ("qid", "question", "checklist_id", "checklist")
TEXT_LIKE = (".pdf", ".docx", ".doc", ".md", ".txt", ".pptx", ".xlsx", ".csv", ".html",
             ".json", ".rtf", ".odt")


def import_lrb(checklist: str | Path, reports: str | Path | None = None,
               baselines: str | Path | None = None) -> list[Task]:
    """One task per qid with its coverage checklist, baseline and reports found."""
    checklist = Path(checklist)
    if checklist.is_dir():
        raise InputError(f"{checklist}: is a directory, not a checklist CSV file")
    if not checklist.is_file():
        raise InputError(f"{checklist}: no such checklist file")
    try:
        return _read_lrb(checklist, reports, baselines)
    except UnicodeDecodeError as exc:
        raise InputError(f"{checklist}: not UTF-8 text (byte {exc.start}): "
                         "expected the LiveResearchBench checklist CSV") from None
    except csv.Error as exc:
        raise InputError(f"{checklist}: not a readable CSV ({exc})") from None


def _read_lrb(checklist: Path, reports: str | Path | None,
              baselines: str | Path | None) -> list[Task]:
    with open(checklist, encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        missing_cols = [c for c in LRB_COLUMNS if c not in (reader.fieldnames or [])]
        if missing_cols:
            raise InputError(f"{checklist}: missing columns {', '.join(missing_cols)}")
        tasks: dict[str, Task] = {}
        for row in reader:
            line = reader.line_num
            empty = [c for c in LRB_COLUMNS if not (row.get(c) or "").strip()]
            if empty:
                raise InputError(f"{checklist}:{line}: row is missing {', '.join(empty)}")
            qid = row["qid"].strip()
            task = tasks.get(qid)
            if task is None:
                task = tasks[qid] = Task(id=qid, query=row["question"].strip(),
                                         report=f"qid_{qid}_report.md",
                                         meta={"category": (row.get("category") or "").strip()})
            item_id = row["checklist_id"].strip()
            if any(c.id == item_id for c in task.checklist):
                raise InputError(f"{checklist}:{line}: duplicate checklist id {item_id!r} "
                                 f"for qid {qid}")
            task.checklist.append(ChecklistItem(item_id, row["checklist"].strip(),
                                                (row.get("category") or "").strip() or None))
    if baselines:
        base = Path(baselines)
        if not base.is_dir():
            raise InputError(f"{base}: no such baselines directory")
        for task in tasks.values():
            path = base / f"qid_{task.id}_report.md"
            if path.is_file():
                task.baseline_report = str(path.resolve())
    if reports:
        root = Path(reports)
        if not root.is_dir():
            raise InputError(f"{root}: no such reports directory")
        for task in tasks.values():
            found = {p.parent.name: str(p.resolve())
                     for p in sorted(root.glob(f"*/qid_{task.id}_report.md"))}
            direct = root / f"qid_{task.id}_report.md"
            if direct.is_file():
                found[root.name] = str(direct.resolve())
            if found:
                task.meta["reports"] = found
    return list(tasks.values())


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: unreadable JSON ({exc})") from None


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [row for _, row in _numbered_jsonl(path)]


def _numbered_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; [] when the file is absent."""
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                row = json.loads(line)
            except ValueError:
                raise InputError(f"{path}:{n}: invalid JSON") from None
            if not isinstance(row, dict):
                raise InputError(f"{path}:{n}: expected a JSON object")
            rows.append((n, row))
    return rows


def _task_id(raw: Any) -> str:
    """DR3-Eval's task folder name for a query row's id: ``7`` -> ``007``."""
    return f"{int(raw):03d}" if str(raw).isdigit() else str(raw)


def _listed(path: Path, key: str, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """``{key: [{field: text, ...}, ...]}`` read from ``path``, or one line saying what a
    DR3-Eval evaluation file must look like."""
    doc = _read_json(path)
    items = doc.get(key) if isinstance(doc, dict) else None
    shape = f'{{"{key}": [{{{", ".join(f"{f!r}: ..." for f in fields)}}}, ...]}}'
    if not isinstance(items, list):
        raise InputError(f"{path}: expected {shape}")
    for n, item in enumerate(items):
        if not isinstance(item, dict) or any(
                not isinstance(item.get(f), str | int) or item.get(f) == "" for f in fields):
            raise InputError(f"{path}: {key}[{n}]: expected {shape}")
        if not isinstance(item[fields[-1]], str):
            raise InputError(f"{path}: {key}[{n}].{fields[-1]}: expected text")
    return items


def _check_corpus(corpus: Any, path: Path) -> None:
    """A sandbox corpus is a list of page objects whose title and body are text."""
    if not isinstance(corpus, list):
        raise InputError(f"{path}: expected a list of pages")
    for n, page in enumerate(corpus):
        if not isinstance(page, dict):
            raise InputError(f"{path}: page {n}: expected an object "
                             '{"title": ..., "page_body": ..., "url"?: ...}')
        for field in ("title", "page_body", "content", "url"):
            if page.get(field) is not None and not isinstance(page[field], str):
                raise InputError(f"{path}: page {n}: {field!r} must be text")


def _find(root: Path, task_id: str, name: str) -> Path | None:
    hits = sorted(p for p in (root / "evaluation").rglob(name) if task_id in p.parts)
    return hits[0] if hits else None


def import_dr3(dataset: str | Path, out: str | Path, size: str = "32k",
               reports: str | Path | None = None, system: str | None = None) -> list[Task]:
    """Tasks for every DR3-Eval task folder, and one bundle per task under ``out/bundles``.
    With ``reports`` (a ``<ctx>/<model>`` folder), each ``<NNN>/final_report.md`` is
    stored in its task's bundle, ready for ``amber evaluate --protocol dr3``, as the
    report of ``system`` (default: the ``<model>`` folder's name), which names its column
    in a run's table."""
    dataset, out = Path(dataset), Path(out)
    if system is not None and (reports is None or not system.strip()):
        raise InputError("--system names the system of --reports: give both, and a "
                         "non-empty name")
    if reports is not None and not Path(reports).is_dir():
        raise InputError(f"{reports}: no such reports directory",
                         hint="give the <context>/<model> folder holding NNN/final_report.md")
    queries = _numbered_jsonl(dataset / "query.jsonl")
    if not queries:
        raise InputError(f"{dataset}: no query.jsonl (is this a DR3-Eval dataset folder?)")
    for line, q in queries:  # every row first: a bad row is named before any work
        if q.get("id", q.get("number")) is None or not q.get("query"):
            raise InputError(f"{dataset / 'query.jsonl'}:{line}: the row lacks "
                             "id (or number) or query")
    ids = [_task_id(q.get("id", q.get("number"))) for _, q in queries]
    if reports is not None and not any((Path(reports) / i / "final_report.md").is_file()
                                       for i in ids):
        raise InputError(f"{reports}: holds no NNN/final_report.md for these tasks",
                         hint="give the <context>/<model> folder, e.g. reports/32k/model-a")
    tasks: list[Task] = []
    for _, q in queries:
        task_id = _task_id(q.get("id", q.get("number")))
        folder = dataset / task_id
        corpus_path = folder / f"long_context_sampled_{size}.json"
        if not corpus_path.is_file():
            raise InputError(f"{corpus_path}: missing sandbox corpus for task {task_id}")
        corpus = _read_json(corpus_path)
        _check_corpus(corpus, corpus_path)
        task = Task(id=task_id, query=str(q["query"]), meta={"corpus_size": size})
        for page in _jsonl(folder / "useful_search.jsonl"):
            title = str(page.get("title") or "").strip()
            if title:
                task.required_documents.append(RequiredDocument(title, "page"))
        files = folder / "user_files"
        if files.is_dir():
            for f in sorted(files.iterdir()):
                if f.suffix.lower() in TEXT_LIKE:
                    task.required_documents.append(RequiredDocument(f.stem, "file", f.name))
        sandbox = _find(dataset, task_id, "gold_insights_from_long_context.json")
        source = _find(dataset, task_id, "gold_insights_from_source.json")
        if sandbox:
            task.insights_sandbox = [i["insight"] for i in
                                     _listed(sandbox, "gold_insights", ("insight",))]
        if source:
            task.insights_user_files = [i["insight"] for i in
                                        _listed(source, "gold_insights", ("insight",))]
        checklist = _find(dataset, task_id, "checklist.json")
        if checklist:
            task.checklist = [ChecklistItem(str(c["id"]), c["requirement"], c.get("category"))
                              for c in _listed(checklist, "checklist", ("id", "requirement"))]
        root = corpus_bundle(corpus, out / "bundles" / task_id, task_id, corpus_path)
        report = Path(reports) / task_id / "final_report.md" if reports else None
        if report is not None and report.is_file():
            with Bundle.create(root) as bundle:
                bundle.store_report(f"{task_id}/final_report.md",
                                    report.read_text(encoding="utf-8"), task.to_json(),
                                    {"source": str(report),
                                     "system": system or Path(reports).resolve().name})
                bundle.finalize()
            task.report = f"{task_id}/final_report.md"
        tasks.append(task)
    return tasks


def corpus_bundle(pages: list[dict[str, Any]], root: Path, task_id: str, source: Path) -> Path:
    """Store a sandbox corpus as a bundle of ``resource`` records (one per page)."""
    with Bundle.create(root) as bundle:
        warc = bundle.warc({"software": "amber-eval dr3 import", "amber-source": str(source)})
        for i, page in enumerate(pages):
            title = str(page.get("title") or f"page {i}")
            body = str(page.get("page_body") or page.get("content") or "")
            url = str(page.get("url") or f"urn:dr3:{task_id}:{i:05d}")
            key = hashlib.sha256(f"dr3\0{task_id}\0{i}\0{title}".encode()).hexdigest()
            cid = f"cap-{key[:16]}"
            if bundle.index.capture(cid):
                continue
            data = body.encode("utf-8")
            ref = warc.write_resource(url, data, "text/plain; charset=utf-8")
            warc.flush()
            with bundle.index.transaction():
                bundle.index.add_record(ref)
                bundle.index.upsert_capture({
                    "id": cid, "request_key": key, "kind": "page", "url": url,
                    "fetch_url": url, "final_url": url, "reader": "import", "state": "ok",
                    "permanent": 1, "status": None, "error": None, "attempts": 0,
                    "content_type": "text/plain", "payload_sha256":
                        hashlib.sha256(data).hexdigest(), "payload_bytes": len(data),
                    "request_record": None, "response_record": None, "revisit_of": None,
                    "captured_at": ref.date})
                bundle.index.put("texts", {
                    "capture_id": cid, "record_id": ref.record_id, "extractor": "import",
                    "title": title, "chars": len(body),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "status": "ok" if body.strip() else "empty"})
        bundle.finalize()
    return root
