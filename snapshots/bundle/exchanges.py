"""Judge exchanges: the API judge calls ``amber serve --record`` froze (OpenAI Chat
Completions, Gemini), as a table of the evidence index beside ``captures``.

Each exchange is a WARC ``request``/``response`` pair like any capture (the response
first, the request pointing at it with ``WARC-Concurrent-To``); a streamed answer
(server-sent events) also gets a ``metadata`` record, ``WARC-Refers-To`` its response,
holding the lengths of the chunks as they arrived, so a replay sends the same stream in
the same pieces.

Table ``judge_exchanges`` (created on the first recording; an older bundle has none),
column by column:

``id``              ``jx-`` + 16 hex of ``request_key``.
``request_key``     sha256 of the canonical request: service, method, path (OpenAI's
                    ``/v1`` prefix dropped), query without secret parameters, and the JSON
                    body parsed and re-serialised with sorted keys (the sha256 of the raw
                    bytes when it is not JSON); headers are never part of it.
``provider``        ``openai`` or ``gemini``.
``model``           the model asked for (OpenAI: the body's ``model``; Gemini: the path's
                    ``models/<model>``), NULL when there is none (``GET /v1/models``).
``operation``       ``chat.completions``, ``models``, ``generateContent``,
                    ``streamGenerateContent``, ``countTokens``, ...
``stream``          1 when the answer was a server-sent-event stream.
``status``          the upstream's HTTP status.
``final``           1 when this answer answers every later identical request (0 for a
                    status that says "try again": see ``NOT_FINAL_STATUS`` in the recorder).
``url``             the upstream URL, secrets removed.
``request_record``, ``response_record``  the WARC pair.
``chunks_record``   the ``metadata`` record with the chunk lengths (streams only).
``chunk_lengths``   JSON list of the chunk lengths (streams only; the record's copy).
``payload_sha256``, ``payload_bytes``  of the body as archived.
``recorded_at``     when the request was sent (UTC).
"""

from __future__ import annotations

import json
from typing import Any

from ambereval.snapshots.bundle.index import Index

TABLE = "judge_exchanges"
CHUNKS_URI = "urn:amber:stream-chunks:"  # + the response record's id

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
  id TEXT PRIMARY KEY, request_key TEXT NOT NULL UNIQUE,
  provider TEXT NOT NULL, model TEXT, operation TEXT NOT NULL,
  stream INTEGER NOT NULL DEFAULT 0, status INTEGER NOT NULL, final INTEGER NOT NULL,
  url TEXT NOT NULL,
  request_record TEXT NOT NULL REFERENCES records(record_id),
  response_record TEXT NOT NULL REFERENCES records(record_id),
  chunks_record TEXT REFERENCES records(record_id), chunk_lengths TEXT,
  payload_sha256 TEXT NOT NULL, payload_bytes INTEGER NOT NULL,
  recorded_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS {TABLE}_model ON {TABLE}(provider, model);
"""


def ensure_table(index: Index) -> None:
    """Create the table in a bundle opened for writing (a no-op when it is there)."""
    index.db.executescript(_SCHEMA)


def has_table(index: Index) -> bool:
    return index.one("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?",
                     [TABLE]) is not None


def exchange_rows(index: Index) -> list[dict[str, Any]]:
    """Every judge exchange, oldest first (none for a bundle that never recorded one)."""
    if not has_table(index):
        return []
    return index.rows(f"SELECT * FROM {TABLE} ORDER BY recorded_at, id")


def judge_summary(index: Index) -> list[dict[str, Any]]:
    """Judge exchanges per provider and model: how many, how many streamed, which
    operations, and how many ended in an error status."""
    if not has_table(index):
        return []
    rows = index.rows(
        f"SELECT provider, COALESCE(model, '') AS model, COUNT(*) AS exchanges, "
        f"SUM(stream) AS streamed, SUM(status >= 400) AS errors, "
        f"GROUP_CONCAT(DISTINCT operation) AS operations FROM {TABLE} "
        f"GROUP BY provider, COALESCE(model, '') ORDER BY provider, model")
    for row in rows:
        row["operations"] = sorted((row["operations"] or "").split(","))
        row["model"] = row["model"] or None
    return rows


def find_exchange(index: Index, ref: str) -> dict[str, Any] | None:
    """A judge exchange by id (``jx-...``) or by its response record id."""
    if not has_table(index):
        return None
    return index.one(f"SELECT * FROM {TABLE} WHERE id = ? OR response_record = ?",
                     [ref, ref])


def check_exchanges(index: Index, payloads: dict[str, str],
                    read_body: Any) -> tuple[str | None, str] | None:
    """(record id, problem) for the first judge exchange whose index row disagrees with
    its WARC records, or None. ``payloads`` maps each response record to the sha256 of
    its payload (from the record pass of verify); ``read_body(record_id)`` reads a
    record's body (the chunk lengths)."""
    for row in exchange_rows(index):
        rid = row["response_record"]
        response = index.record(rid)
        request = index.record(row["request_record"])
        if response is None or response["type"] != "response":
            return rid, f"judge exchange {row['id']}: response_record is not a response"
        if request is None or request["type"] != "request":
            return row["request_record"], (f"judge exchange {row['id']}: request_record "
                                           "is not a request")
        if request["concurrent_to"] != rid:
            return request["record_id"], (f"judge exchange {row['id']}: its request record "
                                          "belongs to another response")
        if payloads.get(rid) != row["payload_sha256"]:
            return rid, (f"judge exchange {row['id']}: the index's payload sha256 differs "
                         "from its WARC response")
        if row["stream"]:
            problem = _check_chunks(index, row, read_body)
            if problem is not None:
                return row["chunks_record"], f"judge exchange {row['id']}: {problem}"
    return None


def _check_chunks(index: Index, row: dict[str, Any], read_body: Any) -> str | None:
    ref = index.record(row["chunks_record"]) if row["chunks_record"] else None
    if ref is None or ref["type"] != "metadata" or ref["refers_to"] != row["response_record"]:
        return "its chunk lengths have no metadata record referring to its response"
    try:
        lengths = json.loads(read_body(row["chunks_record"]))["lengths"]
    except (ValueError, KeyError, TypeError):
        return "its chunk-lengths record is not readable"
    if json.dumps(lengths) != json.dumps(json.loads(row["chunk_lengths"] or "null")):
        return "the index's chunk lengths differ from its WARC record"
    if sum(lengths) != row["payload_bytes"]:
        return "its chunk lengths do not add up to the payload"
    return None


def read_exchange(bundle: Any, ref: str) -> dict[str, Any] | None:
    """One judge exchange read back from its WARC records, for ``amber bundle show``:
    the index row, the request as archived (headers redacted) and the answer, or None
    when ``ref`` names no judge exchange. ``bundle`` is an open :class:`Bundle`."""
    row = find_exchange(bundle.index, ref)
    if row is None:
        return None
    request = bundle.read_record(row["request_record"])
    response = bundle.read_record(row["response_record"])
    return {**row, "chunk_lengths": json.loads(row["chunk_lengths"] or "null"),
            "request_headers": request.http_headers,
            "request_body": request.body.decode("utf-8", "replace"),
            "response_headers": response.http_headers,
            "response_body": response.body.decode("utf-8", "replace")}
