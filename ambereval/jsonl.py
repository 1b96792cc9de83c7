"""Reading user JSONL files with errors that name the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ambereval.errors import InputError


def read_text_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file; a missing, directory or non-UTF-8 path is an error."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a file")
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def iter_objects(path: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``("file:line", object)`` for every non-blank line; each must be an object."""
    path = Path(path)
    for number, line in enumerate(read_text_lines(path), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected a JSON object")
        yield where, obj
