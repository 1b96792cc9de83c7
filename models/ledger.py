"""The judge ledger: every judge call, keyed by its canonical request, in SQLite (WAL).

Modes: ``record`` calls the model and stores the answer (replacing an old one);
``reuse`` answers from the ledger when it can, else calls and stores; ``replay`` answers
only from the ledger and fails on a miss, naming the request. Several processes may
write one ledger at once, and several threads: each thread gets its own SQLite
connection. Rows are the same whatever order calls finished in; ``created`` and
``seconds`` are timings (they differ run to run), everything else is content.

A :class:`ShardLedger` is what a Ray worker writes: this run's new answers go to a shard
file of their own (kept when the worker dies, so its retry does not ask again), lookups
fall through to the run's ledger; the driver merges shards in key order (:meth:`Ledger.merge`).
"""

from __future__ import annotations

import json
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
CREATE TABLE IF NOT EXISTS notes (  -- what a client asked beside the key (amber serve)
  key TEXT NOT NULL, kind TEXT NOT NULL, note TEXT NOT NULL,
  PRIMARY KEY (key, kind, note));
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

    def note(self, key: str, kind: str, note: dict[str, Any]) -> None:
        """Keep what a client asked that is not part of the key (its own sampling
        parameters, the model name it asked for), once per distinct note."""
        self._conn().execute("INSERT OR IGNORE INTO notes VALUES (?, ?, ?)",
                             [key, kind, canonical_json(note)])

    def notes(self, key: str) -> list[dict[str, Any]]:
        return [{"kind": r["kind"], **json.loads(r["note"])}
                for r in self._conn().execute(
                    "SELECT kind, note FROM notes WHERE key = ? ORDER BY kind, note", [key])]

    def identities(self) -> list[dict[str, Any]]:
        """The distinct judges (backend, model, chat template, context) that answered the
        ledger's calls: what a replay without the model file keys its requests by."""
        found: dict[str, dict[str, Any]] = {}
        for (text,) in self._conn().execute("SELECT request FROM calls"):
            request = json.loads(text)
            ident = {k: request.get(k) for k in
                     ("backend", "model", "chat_template_sha256", "n_ctx")}
            found[canonical_json(ident)] = ident
        return [found[k] for k in sorted(found)]

    def rows(self) -> list[dict[str, Any]]:
        """Every call, in key order."""
        return [dict(r) for r in self._conn().execute("SELECT * FROM calls ORDER BY key")]

    def merge(self, rows: list[dict[str, Any]]) -> int:
        """Add rows from another ledger (a worker's shard) in key order, in one transaction;
        an existing key is replaced in ``record`` mode and kept otherwise. -> rows given."""
        verb = "INSERT OR REPLACE" if self.mode == "record" else "INSERT OR IGNORE"
        columns = [r[1] for r in self._conn().execute("PRAGMA table_info(calls)")]
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            for row in sorted(rows, key=lambda r: r["key"]):
                conn.execute(f"{verb} INTO calls ({', '.join(columns)}) VALUES "
                             f"({', '.join('?' for _ in columns)})", [row[c] for c in columns])
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return len(rows)

    def count(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class ShardLedger:
    """A worker's ledger: new answers go to ``shard``; lookups try the shard first (what an
    earlier, dead attempt already answered), then ``base`` unless the run records afresh.
    The judge sees mode ``reuse`` (``replay`` when the run replays)."""

    def __init__(self, shard: str | Path, base: str | Path | None, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown ledger mode {mode!r} (use one of {', '.join(MODES)})")
        self.shard = Ledger(shard, "reuse")
        use_base = base is not None and mode != "record" and Path(base).exists()
        self.base = Ledger(base, mode) if use_base and base is not None else None
        self.run_mode = mode
        self.mode = "replay" if mode == "replay" else "reuse"
        self.path = Path(base) if base is not None else self.shard.path

    def get(self, key: str) -> dict[str, Any] | None:
        hit = self.shard.get(key)
        if hit is None and self.base is not None:
            hit = self.base.get(key)
        return hit

    def put(self, *args: Any, **kwargs: Any) -> None:
        self.shard.put(*args, **kwargs)

    def close(self) -> None:
        self.shard.close()
        if self.base is not None:
            self.base.close()
