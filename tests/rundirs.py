"""What must be identical between two run directories of the same inputs (run_dir.py):
every file byte for byte, except stats.json (timings) and the ledger, whose rows are
compared in key order without their timing columns."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

TIMING_COLUMNS = ("created", "seconds")


def ledger_rows(path: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(str(path))
    conn.row_factory = sqlite3.Row
    try:
        rows = [dict(r) for r in conn.execute("SELECT * FROM calls ORDER BY key")]
    finally:
        conn.close()
    return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rows]


def run_contents(run: Path) -> dict[str, Any]:
    files = {}
    for path in sorted(run.rglob("*")):
        rel = path.relative_to(run).as_posix()
        if not path.is_file() or rel == "stats.json" or rel.startswith("ledger.sqlite"):
            continue
        files[rel] = path.read_bytes()
    return {"files": files, "ledger": ledger_rows(run / "ledger.sqlite")}
