"""One place for CLI output: JSON, one-line errors, progress on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ambereval.errors import AmberError

stderr = Console(stderr=True, highlight=False, soft_wrap=True)
stdout = Console(highlight=False, soft_wrap=True)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def fail(message: str, hint: str | None = None, exit_code: int = 1) -> NoReturn:
    line = f"amber: error: {message}"
    if hint:
        line += f" (hint: {hint})"
    sys.stderr.write(line.replace("\n", " ") + "\n")
    raise typer.Exit(exit_code)


@contextmanager
def handled() -> Iterator[None]:
    """Turn library errors into one line on stderr and a stable exit code."""
    try:
        yield
    except AmberError as err:
        fail(str(err), err.hint, err.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("amber: interrupted; what was captured so far is kept\n")
        raise typer.Exit(130) from None
    except OSError as err:
        fail(f"{err.strerror or err}: {err.filename}" if err.filename else str(err))


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A progress callback drawing on stderr, silent when not a terminal or disabled."""
    if not enabled or not sys.stderr.isatty():
        yield lambda phase, done, total: None
        return
    columns = (TextColumn("{task.description:>8}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=stderr, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        yield update
