"""Lexical retrieval: BM25 over chunks with bm25s (Lucene's BM25 variant).

Text is tokenised the same way for chunks and queries: lower-cased ``\\w+`` words minus
bm25s's English stop-word list, no stemming (``TOKENIZER``). Positions are chunk-id
order, the same as :class:`~ambereval.models.vector_index.VectorIndex`, so both rankers
name a chunk by the same integer. Only chunks sharing at least one term with the query
(score > 0) are ranked; ties are broken by chunk id.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import asdict, dataclass
from typing import Any

from ambereval.models.chunk_source import ChunkSource, as_source
from ambereval.models.chunker import Chunk

TOKENIZER = "lower-words-minus-bm25s-en-stopwords-v1"
_WORD = re.compile(r"\w+")


def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def tokens(text: str, stop: frozenset[str] | None = None) -> list[str]:
    stop = _stopwords() if stop is None else stop
    return [w for w in _WORD.findall(text.lower()) if w not in stop]


@dataclass(frozen=True)
class Bm25Params:
    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "library": "bm25s", "tokenizer": TOKENIZER}


class Bm25Index:
    """BM25 scores for a fixed list of chunks (sorted by chunk id)."""

    def __init__(self, chunks: list[Chunk] | ChunkSource,
                 params: Bm25Params | None = None) -> None:
        """Texts are tokenised as the source streams them; only their token ids are kept
        (numbered in order of first appearance) until bm25s has indexed them."""
        import bm25s

        source = as_source(chunks)
        self.chunks = source.chunks
        self.params = params or Bm25Params()
        self._stop = _stopwords()
        self._model = bm25s.BM25(k1=self.params.k1, b=self.params.b, method=self.params.method)
        if self.chunks:
            vocab: dict[str, int] = {}
            ids = [array("i", (vocab.setdefault(t, len(vocab)) for t in tokens(text, self._stop)))
                   for text in source.texts()]
            if len(ids) != len(self.chunks):
                raise ValueError(f"{len(ids)} texts for {len(self.chunks)} chunks")
            self._model.index((ids, vocab), show_progress=False)
        self._by_capture: dict[str, list[int]] = {}
        for pos, chunk in enumerate(self.chunks):
            self._by_capture.setdefault(chunk.capture_id, []).append(pos)

    def __len__(self) -> int:
        return len(self.chunks)

    def identity(self) -> dict[str, Any]:
        return {"type": "bm25", "params": self.params.as_dict(), "count": len(self.chunks)}

    def scored(self, query: str, want: int,
               captures: set[str] | None = None) -> list[tuple[float, int]]:
        """Up to ``want`` (score, position) pairs with score > 0, best first, ties by id."""
        if not self.chunks or want <= 0:
            return []
        terms = [t for t in tokens(query, self._stop) if t in self._model.vocab_dict]
        if not terms:
            return []
        scores = self._model.get_scores(terms)
        if captures is not None:
            positions = sorted(p for c in captures for p in self._by_capture.get(c, []))
        else:
            positions = [int(p) for p in scores.nonzero()[0]]
        found = [(float(scores[p]), p) for p in positions if scores[p] > 0]
        found.sort(key=lambda t: (-round(t[0], 6), self.chunks[t[1]].chunk_id))
        return found[:want]
