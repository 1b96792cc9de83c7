"""Replaying recorded judge exchanges: the answers an API judge (OpenAI Chat
Completions, Gemini) gave while ``amber serve --record`` ran, sent back byte for byte,
streams in the pieces they came in. No model runs: the judge's own words are in the
bundle.

A request is matched by :func:`judge_call`'s key, the one the recorder stored: the
service, method, path, query (secrets left out) and JSON body with sorted keys. Headers
are not part of it, so whatever key a replaying client sends is ignored.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ambereval.engine.serve.answer import Answer, Frozen, RecordLoc, miss, replay
from ambereval.engine.serve.upstreams import openai_path
from ambereval.snapshots.bundle.exchanges import exchange_rows
from ambereval.snapshots.bundle.index import Index
from ambereval.snapshots.bundle.store import Bundle, dumps
from ambereval.snapshots.capture.transport import is_secret

_GEMINI_MODEL = re.compile(r"/(?:models|tunedModels)/([^/:]+)(?::([A-Za-z]+))?")


@dataclass(frozen=True)
class JudgeCall:
    """What identifies one judge request, and what it is for the listings."""

    service: str  # openai | gemini
    key: str  # sha256 of the canonical request
    model: str | None
    operation: str
    stream: bool


def judge_call(service: str, method: str, target: str, body: bytes) -> JudgeCall:
    """The canonical identity of an OpenAI or Gemini request (``target``: path and query
    after the host, e.g. ``/v1/chat/completions``)."""
    parts = urlsplit(target)
    path = parts.path or "/"
    if service == "openai":
        path = openai_path(path)
    query = sorted((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                   if not is_secret(k))
    try:
        parsed: Any = json.loads(body) if body.strip() else None
    except (ValueError, UnicodeDecodeError):
        parsed = {"sha256": hashlib.sha256(body).hexdigest()}
    key = hashlib.sha256(dumps({"service": service, "method": method.upper(), "path": path,
                                "query": query, "body": parsed})).hexdigest()
    model: str | None = None
    stream = False
    if service == "gemini":
        found = _GEMINI_MODEL.search(path)
        model = found.group(1) if found else None
        operation = (found.group(2) if found and found.group(2) else
                     "models" if "/models" in path else path.strip("/"))
        stream = operation == "streamGenerateContent"
    else:
        segments = [s for s in path.split("/") if s]
        operation = ".".join(segments[:2]) or "/"
        if isinstance(parsed, dict) and isinstance(parsed.get("model"), str):
            model = parsed["model"]
        elif segments[:1] == ["models"] and len(segments) > 1:
            model, operation = segments[1], "models"
        stream = isinstance(parsed, dict) and parsed.get("stream") is True
    return JudgeCall(service, key, model, operation, stream)


def exchange_item(root: Path, order: int, index: Index, row: dict[str, Any]) -> Frozen:
    """A recorded judge exchange as an answerable item (metadata only)."""
    rec = index.record(row["response_record"])
    loc = None
    if rec is not None:
        loc = RecordLoc(root / "archive" / rec["warc_file"], rec["offset"], rec["length"],
                        rec["record_id"])
    label = f"{row['provider']} {row['operation']} {row['model'] or ''}".strip()
    return Frozen(service=row["provider"], key=row["request_key"], label=label,
                  bundle=str(root), bundle_order=order, capture_id=row["id"],
                  captured_at=row["recorded_at"], response=loc, payload=loc,
                  digest=row["payload_sha256"], status=row["status"], error=None,
                  content_type=None)


def replay_exchange(item: Frozen, chunk_lengths: list[int] | None,
                    head_only: bool = False) -> Answer:
    """The recorded answer; a stream is sent in its recorded chunks."""
    answer = replay(item, head_only)
    if chunk_lengths is not None and not head_only:
        answer.chunk_sizes = list(chunk_lengths)
    return answer


def chunk_lengths(row: dict[str, Any]) -> list[int] | None:
    return json.loads(row["chunk_lengths"]) if row.get("chunk_lengths") else None


class RecordedJudges:
    """The judge exchanges of several bundles; the earliest recording of a request
    answers it."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[Frozen, list[int] | None]] = {}

    def load(self, bundle: Bundle, order: int) -> None:
        for row in exchange_rows(bundle.index):
            item = exchange_item(bundle.root, order, bundle.index, row)
            known = self._items.get(item.key)
            if known is not None and (known[0].captured_at, known[0].bundle_order) <= \
                    (item.captured_at, item.bundle_order):
                continue
            self._items[item.key] = (item, chunk_lengths(row))

    def __len__(self) -> int:
        return len(self._items)

    def answer(self, service: str, method: str, target: str, body: bytes) -> Answer:
        call = judge_call(service, method, target, body)
        found = self._items.get(call.key)
        if found is None:
            what = f"{call.operation} {call.model}" if call.model else call.operation
            return miss(service, f"this {service} {what} request was never recorded")
        item, lengths = found
        return replay_exchange(item, lengths, head_only=method.upper() == "HEAD")
