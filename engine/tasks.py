"""The task model: what a report was asked to do, in the shape every protocol needs.

Format ``amber-task/1`` (JSON; JSON Schema in :data:`TASK_SCHEMA`, examples in
``examples/tasks/``). A tasks file is ``{"format": "amber-task/1", "tasks": [...]}``, a
single task object, or JSONL with one task per line. Fields of a task:

``id``                 unique id (LiveResearchBench: the qid; DR3-Eval: the task number)
``query``              the user's request, as given to the research agent
``evaluation_date``    YYYY-MM-DD: the date judges reason from (never their own clock)
``report``             optional file name of the report this task belongs to
``subtasks``           DailyReport: ``id``, ``instruction`` (rubric, required),
                       ``factuality`` (accuracy questions; empty = no factuality rubric),
                       ``rationality`` (rubric text or null), ``importance``
                       (P0, P1, P2(a), P2) and ``group`` (P2(a) only)
``checklist``          items judged pass/fail: ``id``, ``text``, ``category``
                       (LiveResearchBench coverage; DR3-Eval instruction following)
``gold_insights``      DR3-Eval: ``user_files`` and ``sandbox`` lists of short facts
``required_documents`` DR3-Eval: ``title``, ``kind`` (page or file), ``file_name``
``baseline_report``    path of the baseline report for pairwise depth (DeepEval)
``meta``               anything else the source carried (category, …)
"""

from __future__ import annotations

import datetime
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from ambereval.errors import InputError

TASK_FORMAT = "amber-task/1"
IMPORTANCE = ("P0", "P1", "P2(a)", "P2")

_STR_LIST = {"type": "array", "items": {"type": "string"}}
TASK_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://amber-eval.org/schemas/task-1.json",
    "title": "Amber task (amber-task/1)",
    "type": "object",
    "required": ["id", "query"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "query": {"type": "string", "minLength": 1},
        "evaluation_date": {"type": ["string", "null"], "pattern": r"^\d{4}-\d{2}-\d{2}$"},
        "report": {"type": ["string", "null"]},
        "subtasks": {"type": "array", "items": {
            "type": "object",
            "required": ["id", "instruction", "importance"],
            "additionalProperties": False,
            "properties": {
                "id": {"type": "string", "minLength": 1},
                "instruction": {"type": "string", "minLength": 1},
                "factuality": _STR_LIST,
                "rationality": {"type": ["string", "null"]},
                "importance": {"enum": list(IMPORTANCE)},
                "group": {"type": ["string", "null"]},
            }}},
        "checklist": {"type": "array", "items": {
            "type": "object", "required": ["id", "text"], "additionalProperties": False,
            "properties": {"id": {"type": "string", "minLength": 1},
                           "text": {"type": "string", "minLength": 1},
                           "category": {"type": ["string", "null"]}}}},
        "gold_insights": {"type": "object", "additionalProperties": False,
                          "properties": {"user_files": _STR_LIST, "sandbox": _STR_LIST}},
        "required_documents": {"type": "array", "items": {
            "type": "object", "required": ["title"], "additionalProperties": False,
            "properties": {"title": {"type": "string", "minLength": 1},
                           "kind": {"enum": ["page", "file"]},
                           "file_name": {"type": ["string", "null"]}}}},
        "baseline_report": {"type": ["string", "null"]},
        "meta": {"type": "object"},
    },
}


@dataclass(frozen=True)
class Subtask:
    id: str
    instruction: str
    importance: str
    factuality: tuple[str, ...] = ()
    rationality: str | None = None
    group: str | None = None


@dataclass(frozen=True)
class ChecklistItem:
    id: str
    text: str
    category: str | None = None


@dataclass(frozen=True)
class RequiredDocument:
    title: str
    kind: str = "page"
    file_name: str | None = None


@dataclass
class Task:
    id: str
    query: str
    evaluation_date: str | None = None
    report: str | None = None
    subtasks: list[Subtask] = field(default_factory=list)
    checklist: list[ChecklistItem] = field(default_factory=list)
    insights_user_files: list[str] | None = None
    insights_sandbox: list[str] | None = None
    required_documents: list[RequiredDocument] = field(default_factory=list)
    baseline_report: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "query": self.query}
        if self.evaluation_date:
            out["evaluation_date"] = self.evaluation_date
        if self.report:
            out["report"] = self.report
        if self.subtasks:
            out["subtasks"] = [{**asdict(s), "factuality": list(s.factuality)}
                               for s in self.subtasks]
        if self.checklist:
            out["checklist"] = [asdict(c) for c in self.checklist]
        insights = {k: v for k, v in (("user_files", self.insights_user_files),
                                      ("sandbox", self.insights_sandbox)) if v is not None}
        if insights:
            out["gold_insights"] = insights
        if self.required_documents:
            out["required_documents"] = [asdict(d) for d in self.required_documents]
        if self.baseline_report:
            out["baseline_report"] = self.baseline_report
        if self.meta:
            out["meta"] = self.meta
        return out


def task_from_json(obj: Any, where: str) -> Task:
    """Validate one task (schema, then meaning); errors name the task and the field."""
    name = f"{where}: task {obj.get('id')!r}" if isinstance(obj, dict) else where
    try:
        jsonschema.validate(obj, TASK_SCHEMA)
    except jsonschema.ValidationError as err:
        path = "/".join(str(p) for p in err.absolute_path) or "(top)"
        raise InputError(f"{name}: {path}: {err.message}") from None
    date = obj.get("evaluation_date")
    if date:
        try:
            datetime.date.fromisoformat(date)
        except ValueError:
            raise InputError(f"{name}: evaluation_date: {date!r} is not a calendar date "
                             "(YYYY-MM-DD)") from None
    subtasks = []
    seen: set[str] = set()
    for s in obj.get("subtasks", []):
        if s["id"] in seen:
            raise InputError(f"{name}: duplicate subtask id {s['id']!r}")
        seen.add(s["id"])
        if s["importance"] == "P2(a)" and not s.get("group"):
            raise InputError(f"{name}: subtask {s['id']!r} is P2(a) but has no group")
        subtasks.append(Subtask(s["id"], s["instruction"], s["importance"],
                                tuple(s.get("factuality", [])), s.get("rationality"),
                                s.get("group") if s["importance"] == "P2(a)" else None))
    insights = obj.get("gold_insights", {})
    return Task(
        id=obj["id"], query=obj["query"], evaluation_date=obj.get("evaluation_date"),
        report=obj.get("report"), subtasks=subtasks,
        checklist=[ChecklistItem(c["id"], c["text"], c.get("category"))
                   for c in obj.get("checklist", [])],
        insights_user_files=insights.get("user_files"), insights_sandbox=insights.get("sandbox"),
        required_documents=[RequiredDocument(d["title"], d.get("kind", "page"),
                                             d.get("file_name"))
                            for d in obj.get("required_documents", [])],
        baseline_report=obj.get("baseline_report"), meta=obj.get("meta", {}))


def load_tasks(path: str | Path) -> list[Task]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such task file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    try:
        doc = json.loads(text)
        items = doc["tasks"] if isinstance(doc, dict) and "tasks" in doc else [doc]
        if isinstance(doc, dict) and doc.get("format", TASK_FORMAT) != TASK_FORMAT:
            raise InputError(f"{path}: unsupported task format {doc.get('format')!r}")
    except json.JSONDecodeError:
        try:
            items = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not a JSON task file ({exc.msg} at line "
                             f"{exc.lineno})") from None
    if not isinstance(items, list) or not items:
        raise InputError(f"{path}: no tasks found")
    tasks, seen = [], set()
    for i, obj in enumerate(items):
        task = task_from_json(obj, f"{path}#{i + 1}")
        if task.id in seen:
            raise InputError(f"{path}: duplicate task id {task.id!r}")
        seen.add(task.id)
        tasks.append(task)
    return tasks


def dump_tasks(tasks: list[Task], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"format": TASK_FORMAT, "tasks": [t.to_json() for t in tasks]}
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def changed_fields(frozen: dict[str, Any] | None, task: Task) -> list[str]:
    """The top-level fields in which ``task`` differs from ``frozen``, the task stored with
    a report when it was snapshotted or imported (empty when none was stored). ``report``,
    the path a task file may add later, is not compared."""
    if not isinstance(frozen, dict):
        return []
    now = task.to_json()
    names = sorted((set(frozen) | set(now)) - {"report"})
    return [name for name in names if frozen.get(name) != now.get(name)]


def task_for_report(tasks: list[Task], report_name: str, stored_task_id: str | None) -> Task:
    """The task a report belongs to: by stored task id, the task's ``report`` field, or the
    LiveResearchBench file name ``qid_<id>_report.md``."""
    by_id = {t.id: t for t in tasks}
    if stored_task_id and stored_task_id in by_id:
        return by_id[stored_task_id]
    for t in tasks:
        if t.report and Path(t.report).name == report_name:
            return t
    if report_name.startswith("qid_") and report_name.endswith("_report.md"):
        qid = report_name[len("qid_") : -len("_report.md")]
        if qid in by_id:
            return by_id[qid]
        raise InputError(f"qid not found: task {qid!r} (from {report_name}) is not in the "
                         "task file",
                         hint="check --task")
    if len(tasks) == 1:
        return tasks[0]
    raise InputError(f"no task matches report {report_name!r}",
                     hint="name the report in the task's 'report' field")

def load_task(path: str | Path, report_name: str | None = None) -> Task:
    """The task for ``report_name`` from a tasks file (format in this module's docstring)."""
    tasks = load_tasks(path)
    if report_name is None:
        if len(tasks) != 1:
            raise InputError(f"{path}: holds {len(tasks)} tasks; name the report")
        return tasks[0]
    if len(tasks) == 1 and tasks[0].report and Path(tasks[0].report).name != report_name:
        raise InputError(f"{path}: task is for report {tasks[0].report!r}, not {report_name!r}",
                         hint="pass the task file that belongs to this report")
    return task_for_report(tasks, report_name, None)
