"""What must be identical between two run directories of the same inputs (run_dir.py):
every file byte for byte, except stats.json (timings) and the ledger, whose rows are
compared in key order without their timing columns. Also: a small multi-system DR3 run's
inputs."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ambereval.engine.importers import import_dr3
from ambereval.engine.tasks import dump_tasks

FIXTURES = Path(__file__).parent / "fixtures"

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


def dr3_bundles(tmp: Path, systems: int = 3) -> tuple[list[Path], Path]:
    """The DR3 fixture task, answered by ``systems`` systems with different reports."""
    base = (FIXTURES / "dr3" / "reports" / "32k" / "model-a" / "001" / "final_report.md"
            ).read_text(encoding="utf-8")
    bundles, tasks = [], []
    for s in range(systems):
        folder = tmp / "reports" / f"model-{s}" / "001"
        folder.mkdir(parents=True)
        paragraphs = base.split("\n\n")
        text = "\n\n".join(paragraphs[: len(paragraphs) - s]) + \
            f"\n\nSystem {s} adds that the network grew every year.\n"
        (folder / "final_report.md").write_text(text, encoding="utf-8")
        tasks = import_dr3(FIXTURES / "dr3", tmp / f"sys-{s}", reports=folder.parent)
        bundles.append(tmp / f"sys-{s}" / "bundles" / "001")
    return bundles, dump_tasks(tasks, tmp / "tasks.json")
