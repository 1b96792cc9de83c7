"""Loading report files (UTF-8 Markdown) into parsed reports."""

from __future__ import annotations

from pathlib import Path

from ambereval.engine.report import Report, parse_report
from ambereval.errors import InputError

MAX_REPORT_BYTES = 20 * 1024 * 1024


def load_report(path: str | Path) -> Report:
    """Read and parse a report; missing, non-UTF-8 or huge files are clear errors."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such report file")
    size = path.stat().st_size
    if size > MAX_REPORT_BYTES:
        raise InputError(f"{path}: report is {size} bytes, over the {MAX_REPORT_BYTES} limit")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (invalid byte at offset {exc.start})",
                         hint="convert it with iconv -t UTF-8") from None
    return parse_report(text)
