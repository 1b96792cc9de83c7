"""Task files given with ``--task``: what the report was asked to answer.

Minimal format for now (the protocols issue extends it): a JSON object with optional
``id``, ``query``, ``evaluation_date`` (YYYY-MM-DD), ``questions`` (list of strings, the
accuracy questions claims are grouped under) and ``report`` (the report's file name, to
catch a task given with the wrong report).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ambereval.errors import InputError


def load_task(path: str | Path, report_name: str | None = None) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such task file")
    try:
        task = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON task file ({exc})") from None
    if not isinstance(task, dict):
        raise InputError(f"{path}: a task must be a JSON object")
    questions = task.get("questions", [])
    if not isinstance(questions, list) or not all(isinstance(q, str) for q in questions):
        raise InputError(f"{path}: 'questions' must be a list of strings")
    date = task.get("evaluation_date")
    if date is not None and not (isinstance(date, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}",
                                                                         date)):
        raise InputError(f"{path}: 'evaluation_date' must be YYYY-MM-DD")
    expected = task.get("report")
    if expected and report_name and Path(str(expected)).name != report_name:
        raise InputError(f"{path}: task is for report {expected!r}, not {report_name!r}",
                         hint="pass the task file that belongs to this report")
    return task
