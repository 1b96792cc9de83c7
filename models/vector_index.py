"""Exact dense retrieval with FAISS (IndexFlatIP over normalised vectors).

Chunks are added in chunk-id order, so FAISS's own tie order (lower position first) is
the chunk-id order; results are also sorted by (-score, chunk_id) after the search. The
index persists beside a manifest (embedder id and hash, chunking parameters, chunk
count and digest) and is reused only when the manifest matches; otherwise it is rebuilt.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import faiss
import numpy as np

from ambereval.models.canonical import canonical_json, content_key
from ambereval.models.chunker import Chunk

MANIFEST_VERSION = 1


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


class Encoder(Protocol):
    def identity(self) -> dict[str, str]: ...
    def embed(self, texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float
    rank: int


class VectorIndex:
    """A FAISS index over chunks; search can be limited to a set of captures."""

    def __init__(self, chunks: list[Chunk], vectors: np.ndarray, manifest: dict[str, Any]):
        order = sorted(range(len(chunks)), key=lambda i: chunks[i].chunk_id)
        self.chunks = [chunks[i] for i in order]
        vectors = np.ascontiguousarray(vectors[order] if len(order) else vectors,
                                       dtype=np.float32)
        self.manifest = manifest
        dim = int(manifest["dim"])
        self.index = faiss.IndexFlatIP(dim)
        if len(self.chunks):
            self.index.add(vectors)
        self._by_capture: dict[str, list[int]] = {}
        for pos, chunk in enumerate(self.chunks):
            self._by_capture.setdefault(chunk.capture_id, []).append(pos)

    @staticmethod
    def manifest_for(chunks: list[Chunk], encoder: Encoder, params: dict[str, Any],
                     dim: int) -> dict[str, Any]:
        ids = sorted(c.chunk_id for c in chunks)
        digest = content_key([[c.chunk_id, c.start, c.end, content_key(c.text)]
                              for c in sorted(chunks, key=lambda c: c.chunk_id)])
        return {"version": MANIFEST_VERSION, "embedder": encoder.identity(), "chunking": params,
                "count": len(ids), "chunks_sha256": digest, "dim": dim,
                "metric": "inner_product", "index": "IndexFlatIP"}

    @classmethod
    def build(cls, chunks: list[Chunk], encoder: Encoder, params: dict[str, Any]) -> VectorIndex:
        ordered = sorted(chunks, key=lambda c: c.chunk_id)
        vectors = encoder.embed([c.text for c in ordered])
        dim = vectors.shape[1] if vectors.ndim == 2 and vectors.shape[0] else \
            int(getattr(encoder, "dim", 0))
        return cls(ordered, vectors, cls.manifest_for(ordered, encoder, params, dim))

    @classmethod
    def load_or_build(cls, directory: str | Path, chunks: list[Chunk], encoder: Encoder,
                      params: dict[str, Any]) -> tuple[VectorIndex, bool]:
        """Reuse ``directory`` when its manifest matches; else build and save. -> (index, reused)"""
        directory = Path(directory)
        ordered = sorted(chunks, key=lambda c: c.chunk_id)
        probe_dim = None
        stored = directory / "manifest.json"
        if stored.is_file() and (directory / "index.faiss").is_file():
            try:
                saved = json.loads(stored.read_text())
                probe_dim = saved.get("dim")
                want = cls.manifest_for(ordered, encoder, params, int(probe_dim or 0))
                want["index_sha256"] = saved.get("index_sha256")
                fresh = (canonical_json(saved) == canonical_json(want)
                         and _sha256(directory / "index.faiss") == saved.get("index_sha256"))
            except (ValueError, OSError, AttributeError):
                fresh = False  # an unreadable cache is a miss, never an error
            if fresh:
                index = faiss.read_index(str(directory / "index.faiss"))
                if index.ntotal == len(ordered):
                    vectors = index.reconstruct_n(0, index.ntotal) if index.ntotal else \
                        np.zeros((0, index.d), dtype=np.float32)
                    return cls(ordered, vectors, saved), True
        built = cls.build(ordered, encoder, params)
        built.save(directory)
        return built, False

    def save(self, directory: str | Path) -> None:
        """Manifest removed first and written last (with the index's sha256), so a reader
        never pairs a manifest with another run's vectors."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "manifest.json").unlink(missing_ok=True)
        tag = f"{os.getpid()}.{id(self)}"
        tmp = directory / f".index.faiss.{tag}.tmp"
        faiss.write_index(self.index, str(tmp))
        os.replace(tmp, directory / "index.faiss")
        rows = "".join(json.dumps({k: v for k, v in asdict(c).items() if k != "text"},
                                  sort_keys=True) + "\n" for c in self.chunks)
        (directory / "chunks.jsonl").write_text(rows, encoding="utf-8")
        self.manifest = {**self.manifest, "index_sha256": _sha256(directory / "index.faiss")}
        tmp_manifest = directory / f".manifest.{tag}.tmp"
        tmp_manifest.write_text(json.dumps(self.manifest, indent=2, sort_keys=True) + "\n")
        os.replace(tmp_manifest, directory / "manifest.json")

    def __len__(self) -> int:
        return len(self.chunks)

    def search(self, query_vector: np.ndarray, k: int = 5,
               captures: set[str] | None = None) -> list[Hit]:
        """Top-k chunks by cosine similarity, ties broken by chunk id."""
        if not self.chunks or k <= 0:
            return []
        q = np.ascontiguousarray(query_vector.reshape(1, -1), dtype=np.float32)
        params = None
        pool = len(self.chunks)
        if captures is not None:
            allowed = sorted(p for c in captures for p in self._by_capture.get(c, []))
            if not allowed:
                return []
            pool = len(allowed)
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(
                np.asarray(allowed, dtype=np.int64)))
        want = min(pool, k + 16)  # a margin so ties at the cut-off are resolved by id
        scores, ids = self.index.search(q, want, params=params) if params else \
            self.index.search(q, want)
        found = [(float(s), int(i)) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0]
        found.sort(key=lambda t: (-round(t[0], 6), self.chunks[t[1]].chunk_id))
        return [Hit(self.chunks[i], s, rank) for rank, (s, i) in enumerate(found[:k], start=1)]
