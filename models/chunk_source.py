"""Chunks an index is built from, with their text either held or streamed.

An index needs every chunk's id, capture and span for as long as it lives, but each
chunk's text only while it is embedded or tokenised. A :class:`ChunkSource` gives both
separately: ``chunks`` in chunk-id order (their ``text`` may be empty), ``texts()`` the
texts in that same order, one at a time, as often as asked, and ``digest``, the sha256
naming the chunks and their texts. :class:`ChunkList` is the in-memory source; a source
over a bundle re-reads its pages on each ``texts()`` pass
(``ambereval.engine.evidence.BundleChunks``), so a whole bundle can be indexed without
its text ever being in memory at once.

The digest is the same whatever the source: ``content_key`` of
``[[chunk_id, start, end, content_key(text)], ...]`` in chunk-id order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Protocol

from ambereval.models.canonical import canonical_json, content_key
from ambereval.models.chunker import Chunk


class ChunkSource(Protocol):
    @property
    def chunks(self) -> list[Chunk]: ...  # chunk-id order; text may be "" (see texts())
    @property
    def digest(self) -> str: ...
    def texts(self) -> Iterator[str]: ...


def text_key(text: str) -> str:
    return content_key(text)


class Digest:
    """``content_key([[chunk_id, start, end, content_key(text)], ...])`` computed a chunk
    at a time (the canonical JSON of the list, hashed as it is written)."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256(b"[")
        self._first = True

    def add(self, chunk: Chunk, text_key: str) -> None:
        """``text_key``: ``content_key`` of the chunk's text (:func:`text_key`)."""
        row = canonical_json([chunk.chunk_id, chunk.start, chunk.end, text_key])
        self._sha.update(row.encode("utf-8") if self._first else b"," + row.encode("utf-8"))
        self._first = False

    def hexdigest(self) -> str:
        sha = self._sha.copy()
        sha.update(b"]")
        return sha.hexdigest()


class ChunkList:
    """Chunks held in memory with their text."""

    def __init__(self, chunks: Iterable[Chunk]) -> None:
        self.chunks = sorted(chunks, key=lambda c: c.chunk_id)
        self._digest: str | None = None

    @property
    def digest(self) -> str:
        if self._digest is None:
            digest = Digest()
            for c in self.chunks:
                digest.add(c, text_key(c.text))
            self._digest = digest.hexdigest()
        return self._digest

    def texts(self) -> Iterator[str]:
        return (c.text for c in self.chunks)


def as_source(chunks: list[Chunk] | ChunkSource) -> ChunkSource:
    return ChunkList(chunks) if isinstance(chunks, list) else chunks
