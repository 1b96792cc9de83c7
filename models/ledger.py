"""The judge ledger: every judge call, keyed by its canonical request, in SQLite (WAL).

Modes: ``record`` calls the model and stores the answer (replacing an old one);
``reuse`` answers from the ledger when it can, else calls and stores; ``replay`` answers
only from the ledger and fails on a miss, naming the request. Several processes may
write one ledger at once.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ambereval.models.canonical import canonical_json

MODES = ("record", "reuse", "replay")
LEDGER_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
  key TEXT PRIMARY KEY,          -- sha256 of the canonical request
  backend TEXT NOT NULL,
  model TEXT NOT NULL,           -- model file sha256, or server model name
  request TEXT NOT NULL,         -- the canonical request (JSON)
  response TEXT NOT NULL,        -- raw text the model produced
  parsed TEXT NOT NULL,          -- the parsed JSON object
  prompt_tokens INTEGER, completion_tokens INTEGER,
  truncation TEXT,               -- JSON: what the context rule cut, or NULL
  seconds REAL, created TEXT NOT NULL,
  error TEXT);                   -- why the answer was unusable (replayed as the same error)
"""


class Ledger:
    """A SQLite ledger file; safe to share between threads and processes."""

    def __init__(self, path: str | Path, mode: str = "reuse") -> None:
        if mode not in MODES:
            raise ValueError(f"unknown ledger mode {mode!r} (use one of {', '.join(MODES)})")
        self.path = Path(path)
        self.mode = mode
        if mode == "replay" and not self.path.exists():
            from ambereval.errors import InputError

            raise InputError(f"{self.path}: no such ledger to replay from")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        conn = self._conn()
        conn.executescript(_SCHEMA)
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('ledger_version', ?)",
                     [str(LEDGER_VERSION)])

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(str(self.path), timeout=60, isolation_level=None)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA busy_timeout = 60000")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    def get(self, key: str) -> dict[str, Any] | None:
        row = self._conn().execute("SELECT * FROM calls WHERE key = ?", [key]).fetchone()
        return dict(row) if row else None

    def put(self, key: str, request: dict[str, Any], response: str, parsed: Any,
            usage: dict[str, int], truncation: dict[str, Any] | None, seconds: float,
            error: str | None = None) -> None:
        verb = "INSERT OR REPLACE" if self.mode == "record" else "INSERT OR IGNORE"
        model = request.get("model", {})
        self._conn().execute(
            f"{verb} INTO calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [key, request.get("backend", ""), model.get("sha256") or model.get("name", ""),
             canonical_json(request), response, canonical_json(parsed),
             usage.get("prompt_tokens"), usage.get("completion_tokens"),
             canonical_json(truncation) if truncation else None, seconds,
             datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), error])

    def count(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
