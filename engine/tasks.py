"""Choosing the task that goes with a report (``--task`` on snapshot and evaluate)."""

from __future__ import annotations

from pathlib import Path

from ambereval.engine.task_model import Task, load_tasks, task_for_report
from ambereval.errors import InputError


def load_task(path: str | Path, report_name: str | None = None) -> Task:
    """The task for ``report_name`` from a tasks file (format in ``task_model``)."""
    tasks = load_tasks(path)
    if report_name is None:
        if len(tasks) != 1:
            raise InputError(f"{path}: holds {len(tasks)} tasks; name the report")
        return tasks[0]
    if len(tasks) == 1 and tasks[0].report and Path(tasks[0].report).name != report_name:
        raise InputError(f"{path}: task is for report {tasks[0].report!r}, not {report_name!r}",
                         hint="pass the task file that belongs to this report")
    return task_for_report(tasks, report_name, None)
