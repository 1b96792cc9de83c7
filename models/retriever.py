"""One retriever for verification and evaluation: dense, BM25, or both fused.

``hybrid`` (the default) fuses the dense ranking (MiniLM + FAISS) and the BM25 ranking
(bm25s) by reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009): a chunk's
score is the sum over the two rankings of ``1 / (rrf_k + rank)``, with ``rrf_k = 60``
(the constant of that paper) and the top ``depth`` chunks of each ranking taken part.
On WiCE it beats dense alone and ties BM25 alone on recall@5 and MRR
(docs/benchmarks.md, "Retrieval quality").

Every result is a :class:`Hit` (chunk id, capture id and character span through
``hit.chunk``, the score of the retriever, rank from 1); ties are broken by chunk id.
:meth:`Retriever.identity` names the retriever and all its parameters, including the
FAISS index type; summaries and run manifests record it, and
:meth:`RetrieverSpec.from_identity` rebuilds the same retriever for a replay.

    retriever = Retriever.build(chunks, Embedder(), ChunkParams().as_dict())
    hits = retriever.search("Who built the Eiffel Tower?", k=3, captures={"cap-a"})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ambereval.errors import ConfigError
from ambereval.models.bm25 import Bm25Index, Bm25Params
from ambereval.models.chunk_source import ChunkSource, as_source
from ambereval.models.chunker import Chunk
from ambereval.models.vector_index import Encoder, Hit, IndexSpec, Progress, VectorIndex

KINDS = ("hybrid", "dense", "bm25")
DEFAULT_RETRIEVER = "hybrid"
RRF_K = 60


@dataclass(frozen=True)
class RetrieverSpec:
    """Which retriever, with which parameters (all recorded by ``identity()``)."""

    kind: str = DEFAULT_RETRIEVER
    rrf_k: int = RRF_K
    depth: int = 50
    index: IndexSpec = field(default_factory=IndexSpec)
    bm25: Bm25Params = field(default_factory=Bm25Params)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"unknown retriever {self.kind!r}",
                              hint=f"choose one of {', '.join(KINDS)}")

    @classmethod
    def named(cls, kind: str) -> RetrieverSpec:
        return cls(kind=kind)

    @classmethod
    def from_identity(cls, identity: dict[str, Any]) -> RetrieverSpec:
        """The spec of a retriever recorded by :meth:`Retriever.identity` (replay)."""
        dense = identity.get("dense") or {}
        bm25 = (identity.get("bm25") or {}).get("params") or {}
        return cls(kind=identity["name"], rrf_k=int(identity.get("rrf_k", RRF_K)),
                   depth=int(identity.get("depth", 50)),
                   index=IndexSpec.from_identity(dense) if dense else IndexSpec(),
                   bm25=Bm25Params(float(bm25.get("k1", 1.5)), float(bm25.get("b", 0.75)),
                                   str(bm25.get("method", "lucene"))))

    def uses_dense(self) -> bool:
        return self.kind in ("dense", "hybrid")

    def uses_bm25(self) -> bool:
        return self.kind in ("bm25", "hybrid")

    def as_dict(self) -> dict[str, Any]:
        """The parameters that do not depend on the corpus (for a run manifest)."""
        out: dict[str, Any] = {"name": self.kind}
        if self.kind == "hybrid":
            out.update({"fusion": "rrf", "rrf_k": self.rrf_k, "depth": self.depth})
        if self.uses_dense():
            out["index"] = self.index.as_dict()
        if self.uses_bm25():
            out["bm25"] = self.bm25.as_dict()
        return out


class Retriever:
    """Chunks searchable by text; see the module docstring."""

    def __init__(self, chunks: list[Chunk], spec: RetrieverSpec, encoder: Encoder | None,
                 dense: VectorIndex | None, lexical: Bm25Index | None) -> None:
        self.chunks = sorted(chunks, key=lambda c: c.chunk_id)
        self.spec = spec
        self.encoder = encoder
        self.dense = dense
        self.lexical = lexical

    @classmethod
    def build(cls, chunks: list[Chunk] | ChunkSource, encoder: Encoder | None,
              params: dict[str, Any], spec: RetrieverSpec | None = None,
              progress: Progress | None = None) -> Retriever:
        """A source's texts are streamed once per ranker (models/chunk_source.py); the
        retriever keeps its chunks as the source gives them (text-less for a stream).
        ``progress(embedded, total)`` follows the embedding, the slow part."""
        spec = spec or RetrieverSpec()
        source = as_source(chunks)
        dense = None
        if spec.uses_dense():
            if encoder is None:
                raise ConfigError(f"the {spec.kind} retriever needs an embedder")
            dense = VectorIndex.build(source, encoder, params, spec.index, progress)
        lexical = Bm25Index(source, spec.bm25) if spec.uses_bm25() else None
        return cls(source.chunks, spec, encoder, dense, lexical)

    @classmethod
    def load_or_build(cls, directory: str | Path, chunks: list[Chunk] | ChunkSource,
                      encoder: Encoder | None, params: dict[str, Any],
                      spec: RetrieverSpec | None = None, progress: Progress | None = None
                      ) -> tuple[Retriever, bool]:
        """The dense index is cached in ``directory`` (reused when its manifest matches);
        BM25 is rebuilt, it takes a fraction of the embedding time. -> (retriever, reused)"""
        spec = spec or RetrieverSpec()
        source = as_source(chunks)
        if not spec.uses_dense():
            return cls.build(source, encoder, params, spec, progress), False
        if encoder is None:
            raise ConfigError(f"the {spec.kind} retriever needs an embedder")
        dense, reused = VectorIndex.load_or_build(directory, source, encoder, params,
                                                  spec.index, progress)
        lexical = Bm25Index(source, spec.bm25) if spec.uses_bm25() else None
        return cls(source.chunks, spec, encoder, dense, lexical), reused

    def __len__(self) -> int:
        return len(self.chunks)

    def identity(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.spec.kind}
        if self.spec.kind == "hybrid":
            out.update({"fusion": "rrf", "rrf_k": self.spec.rrf_k, "depth": self.spec.depth})
        if self.dense is not None:
            out["dense"] = self.dense.identity()
        if self.lexical is not None:
            out["bm25"] = self.lexical.identity()
        return out

    def search(self, query_text: str, k: int = 5,
               captures: set[str] | None = None) -> list[Hit]:
        """Top-k chunks for ``query_text`` (optionally only from ``captures``)."""
        return self.search_many([query_text], k, captures)[0]

    def search_many(self, queries: list[str], k: int = 5,
                    captures: set[str] | None = None) -> list[list[Hit]]:
        """:meth:`search` for several queries, embedding them in one batch."""
        if not queries:
            return []
        if k <= 0 or not self.chunks:
            return [[] for _ in queries]
        vectors = None
        if self.dense is not None and self.encoder is not None:
            vectors = self.encoder.embed(list(queries))
        out = []
        for i, query in enumerate(queries):
            if self.spec.kind == "dense":
                ranked = self.dense.scored(vectors[i], k, captures)  # type: ignore[union-attr]
            elif self.spec.kind == "bm25":
                ranked = self.lexical.scored(query, k, captures)  # type: ignore[union-attr]
            else:
                ranked = self._fused(vectors[i], query, k, captures)  # type: ignore[index]
            out.append([Hit(self.chunks[p], s, rank)
                        for rank, (s, p) in enumerate(ranked, start=1)])
        return out

    def _fused(self, vector: Any, query: str, k: int,
               captures: set[str] | None) -> list[tuple[float, int]]:
        depth = max(self.spec.depth, k)
        fused: dict[int, float] = {}
        for ranking in (self.dense.scored(vector, depth, captures),  # type: ignore[union-attr]
                        self.lexical.scored(query, depth, captures)):  # type: ignore[union-attr]
            for rank, (_, pos) in enumerate(ranking, start=1):
                fused[pos] = fused.get(pos, 0.0) + 1.0 / (self.spec.rrf_k + rank)
        ranked = sorted(fused.items(), key=lambda t: (-round(t[1], 9), self.chunks[t[0]].chunk_id))
        return [(score, pos) for pos, score in ranked[:k]]
