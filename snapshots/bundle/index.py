"""The bundle's SQLite evidence index (``evidence/amber.sqlite``).

Schema version 1. Every table, column by column:

``meta``            key/value: ``schema_version``, ``created``, ``software``.
``warc_files``      one row per WARC file: ``name``, ``created``, ``warcinfo_id``.
``records``         every WARC record Amber wrote: ``record_id`` (WARC-Record-ID),
                    ``warc_file``, ``offset`` and ``length`` of its gzip member, ``type``,
                    ``target_uri``, ``date``, ``content_type``, ``block_digest``,
                    ``payload_digest``, ``refers_to``, ``concurrent_to``.
``captures``        one row per distinct request: ``id`` (``cap-`` + 16 hex of
                    ``request_key``), ``request_key`` (sha256 of the canonical request,
                    secrets excluded), ``kind`` (``search``/``page``), ``url`` (the page URL,
                    or the search endpoint), ``fetch_url`` (what was requested, e.g. the
                    Jina URL), ``final_url`` (after redirects), ``reader``
                    (``serper``/``jina``/``direct``/``import``), ``state`` (``ok``/``failed``),
                    ``permanent`` (1: a rerun will not try again), ``status`` (HTTP status, or
                    NULL when nothing came back), ``error``, ``attempts``, ``content_type``,
                    ``payload_sha256`` and ``payload_bytes`` (body as archived),
                    ``request_record``, ``response_record`` (a ``revisit`` for a duplicate
                    payload), ``revisit_of`` (the capture holding the payload),
                    ``captured_at``.
``texts``           extracted text per capture: ``capture_id``, ``record_id`` (the
                    ``conversion`` record), ``extractor`` (``trafilatura``/``jina``/``plain``),
                    ``title``, ``chars``, ``sha256`` of the UTF-8 text, ``status``
                    (``ok``/``empty``/``unsupported``).
``failures``        every failed attempt, never deleted: ``capture_key``, ``url``, ``at``,
                    ``status``, ``error``, ``permanent``, ``attempts``, ``record_id`` (the
                    WARC record documenting it).
``reports``         a report snapshotted with its claims: ``id`` (sha256 of the UTF-8 text),
                    ``name`` (file name), ``chars``, ``record_id`` (the WARC ``resource``
                    record holding the text), ``task`` (JSON), ``meta`` (JSON: extractor
                    judge, prompts' sha256), ``stored_at``.
``claims``          ``id``, ``ordinal`` (input order), ``text``, ``extra`` (JSON of any
                    other input fields), ``input_sha256`` (digest of the claim as given: text, URLs,
                    queries, search parameters), ``links_sha256`` (digest of the last link
                    record written for it).
``claim_urls``      URLs a claim cites: ``claim_id``, ``ordinal``, ``url``.
``queries``         ``id`` (``<claim>#q<n>``), ``claim_id``, ``ordinal``, ``q``, ``params``
                    (JSON: gl, hl, num, tbs, page), ``capture_id`` of the search.
``search_results``  organic results per search capture: ``capture_id``, ``rank`` (1-based),
                    ``title``, ``link``, ``snippet``, ``date``, ``position``.
``links``           claim -> query -> rank -> capture: ``claim_id``, ``source``
                    (``cited``/``search``), ``query_id``, ``rank``, ``url``, ``capture_id``,
                    ``record_id`` (the ``metadata`` record stating the link).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS warc_files (
  name TEXT PRIMARY KEY, created TEXT NOT NULL, warcinfo_id TEXT);
CREATE TABLE IF NOT EXISTS records (
  record_id TEXT PRIMARY KEY,
  warc_file TEXT NOT NULL REFERENCES warc_files(name),
  offset INTEGER NOT NULL, length INTEGER NOT NULL, type TEXT NOT NULL,
  target_uri TEXT, date TEXT NOT NULL, content_type TEXT,
  block_digest TEXT, payload_digest TEXT, refers_to TEXT, concurrent_to TEXT);
CREATE INDEX IF NOT EXISTS records_file_offset ON records(warc_file, offset);
CREATE INDEX IF NOT EXISTS records_target ON records(target_uri);
CREATE TABLE IF NOT EXISTS captures (
  id TEXT PRIMARY KEY, request_key TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL CHECK (kind IN ('search', 'page')),
  url TEXT NOT NULL, fetch_url TEXT NOT NULL, final_url TEXT, reader TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('ok', 'failed')),
  permanent INTEGER NOT NULL DEFAULT 0, status INTEGER, error TEXT,
  attempts INTEGER NOT NULL DEFAULT 0, content_type TEXT,
  payload_sha256 TEXT, payload_bytes INTEGER,
  request_record TEXT REFERENCES records(record_id),
  response_record TEXT REFERENCES records(record_id),
  revisit_of TEXT REFERENCES captures(id),
  captured_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS captures_url ON captures(url);
CREATE INDEX IF NOT EXISTS captures_payload ON captures(payload_sha256);
CREATE TABLE IF NOT EXISTS texts (
  capture_id TEXT PRIMARY KEY REFERENCES captures(id),
  record_id TEXT NOT NULL REFERENCES records(record_id),
  extractor TEXT NOT NULL, title TEXT, chars INTEGER NOT NULL, sha256 TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('ok', 'empty', 'unsupported')));
CREATE TABLE IF NOT EXISTS failures (
  id INTEGER PRIMARY KEY, capture_key TEXT NOT NULL, url TEXT NOT NULL, at TEXT NOT NULL,
  status INTEGER, error TEXT NOT NULL, permanent INTEGER NOT NULL, attempts INTEGER NOT NULL,
  record_id TEXT REFERENCES records(record_id));
CREATE INDEX IF NOT EXISTS failures_key ON failures(capture_key);
CREATE TABLE IF NOT EXISTS reports (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, chars INTEGER NOT NULL,
  record_id TEXT NOT NULL REFERENCES records(record_id), task TEXT, meta TEXT,
  stored_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS claims (
  id TEXT PRIMARY KEY, ordinal INTEGER NOT NULL, text TEXT NOT NULL, extra TEXT,
  input_sha256 TEXT NOT NULL, links_sha256 TEXT);
CREATE TABLE IF NOT EXISTS claim_urls (
  claim_id TEXT NOT NULL REFERENCES claims(id), ordinal INTEGER NOT NULL, url TEXT NOT NULL,
  PRIMARY KEY (claim_id, ordinal));
CREATE TABLE IF NOT EXISTS queries (
  id TEXT PRIMARY KEY, claim_id TEXT NOT NULL REFERENCES claims(id),
  ordinal INTEGER NOT NULL, q TEXT NOT NULL, params TEXT NOT NULL,
  capture_id TEXT REFERENCES captures(id), UNIQUE (claim_id, ordinal));
CREATE INDEX IF NOT EXISTS queries_claim ON queries(claim_id);
CREATE TABLE IF NOT EXISTS search_results (
  capture_id TEXT NOT NULL REFERENCES captures(id), rank INTEGER NOT NULL,
  title TEXT, link TEXT NOT NULL, snippet TEXT, date TEXT, position INTEGER,
  PRIMARY KEY (capture_id, rank));
CREATE INDEX IF NOT EXISTS search_results_link ON search_results(link);
CREATE TABLE IF NOT EXISTS links (
  claim_id TEXT NOT NULL REFERENCES claims(id),
  source TEXT NOT NULL CHECK (source IN ('cited', 'search')),
  query_id TEXT REFERENCES queries(id), rank INTEGER, url TEXT NOT NULL,
  capture_id TEXT REFERENCES captures(id), record_id TEXT REFERENCES records(record_id));
CREATE INDEX IF NOT EXISTS links_claim ON links(claim_id);
CREATE INDEX IF NOT EXISTS links_capture ON links(capture_id);
"""



class _Database:
    """The few calls the index makes, on a plain sqlite3 connection. (This used to be
    ``sqlite_utils.Database``; importing sqlite-utils also imports numpy, which cost
    every ``amber bundle`` command about 0.3 s of start-up for four thin methods.)"""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def executescript(self, sql: str) -> sqlite3.Cursor:
        return self.conn.executescript(sql)

    def query(self, sql: str, params: Any = ()) -> Iterator[dict[str, Any]]:
        cursor = self.conn.execute(sql, params)
        keys = [d[0] for d in cursor.description or ()]
        for row in cursor:
            yield dict(zip(keys, row, strict=True))


class Index:
    """Thin access layer over the evidence database (plain sqlite3)."""

    def __init__(self, path: Path, create: bool = False) -> None:
        self.path = path
        if not create and not path.exists():
            raise FileNotFoundError(path)
        conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("PRAGMA synchronous = FULL")
        self.db = _Database(conn)
        if create:
            self.db.executescript(_SCHEMA)
            if self.meta("schema_version") is None:
                self.set_meta("schema_version", str(SCHEMA_VERSION))
        version = self.meta("schema_version")
        if version != str(SCHEMA_VERSION):
            raise ValueError(f"unsupported index schema version {version!r}")

    def close(self) -> None:
        self.db.conn.close()

    # -- generic helpers -------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        except sqlite3.OperationalError:
            return None
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.put("meta", {"key": key, "value": value})

    def rows(self, sql: str, params: list[Any] | tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in self.db.query(sql, params)]

    def one(self, sql: str, params: list[Any] | tuple[Any, ...] = ()) -> dict[str, Any] | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    def transaction(self) -> sqlite3.Connection:
        """``with index.transaction():`` commits atomically (or rolls back)."""
        return _Tx(self.db.conn)  # type: ignore[return-value]

    # -- records and files -----------------------------------------------------------
    def put(self, table: str, row: dict[str, Any]) -> None:
        """INSERT OR REPLACE one row. Plain SQL so it joins an open transaction
        (sqlite-utils' writers commit on their own)."""
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self.db.conn.execute(
            f"INSERT OR REPLACE INTO {table} ({cols}) VALUES ({marks})", list(row.values())
        )

    def add_warc_file(self, name: str, created: str, warcinfo_id: str) -> None:
        self.put("warc_files", {"name": name, "created": created, "warcinfo_id": warcinfo_id})

    def add_record(self, ref: Any) -> None:
        self.put("records", dict(ref.__dict__))

    def record(self, record_id: str) -> dict[str, Any] | None:
        return self.one("SELECT * FROM records WHERE record_id = ?", [record_id])

    # -- captures --------------------------------------------------------------------
    def capture_by_key(self, key: str) -> dict[str, Any] | None:
        return self.one("SELECT * FROM captures WHERE request_key = ?", [key])

    def capture(self, capture_id: str) -> dict[str, Any] | None:
        return self.one("SELECT * FROM captures WHERE id = ?", [capture_id])

    def upsert_capture(self, row: dict[str, Any]) -> None:
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        updates = ", ".join(f"{c} = excluded.{c}" for c in row if c != "id")
        self.db.conn.execute(
            f"INSERT INTO captures ({cols}) VALUES ({marks}) "
            f"ON CONFLICT(id) DO UPDATE SET {updates}",
            list(row.values()),
        )

    def original_for_payload(self, sha256: str) -> dict[str, Any] | None:
        return self.one(
            "SELECT * FROM captures WHERE payload_sha256 = ? AND state = 'ok' "
            "AND revisit_of IS NULL ORDER BY captured_at, id LIMIT 1",
            [sha256],
        )


class _Tx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        else:
            self.conn.execute("ROLLBACK")
