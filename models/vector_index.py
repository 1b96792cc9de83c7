"""Dense retrieval with FAISS: exact below a size threshold, approximate above it.

- Up to ``IndexSpec.ann_threshold`` chunks (20,000 by default) the index is exact
  (``IndexFlatIP`` over normalised vectors, cosine = inner product).
- Above it, up to ``IndexSpec.scan_limit`` chunks (2,000,000): a compressed scan with
  exact re-ranking (``IndexRefineFlat`` over an 8-bit ``IndexScalarQuantizer``, FAISS's
  "SQ8,RFlat"). Every vector is scored from its 8-bit code (a quarter of the bytes an
  exact scan reads), the best ``k_factor`` x k candidates are re-scored from the stored
  float vectors, and those exact scores are what a search returns. Recall does not
  depend on how the corpus is shaped (no graph or clusters to miss a neighbour in), the
  build is a per-dimension min/max and an encoding pass (seconds at 1M, any thread
  count, same bytes), and the time grows linearly with the corpus.
- Above ``scan_limit``, and for runs that recorded it, a graph index (``IndexHNSWFlat``,
  inner product): ``M`` links a node, ``ef_construction`` candidates while building,
  ``ef_search`` candidates per query. Vectors are stored uncompressed, so scores are
  exact; only the neighbourhood search is approximate. The graph is built on ONE OpenMP
  thread (FAISS inserts nodes in parallel otherwise, and the result then depends on
  thread timing), in chunk-id order, with FAISS's fixed level seed: the same chunks and
  the same embedder give the same index bytes. ``ef_search`` grows with the corpus.
- Indexes recorded by older runs as ``IndexIVFFlat`` (nlist k-means cells on a seeded
  sample, nprobe cells scanned per query) are still rebuilt exactly for a replay.
- A search limited to some captures (``captures=``) is always exact: the allowed vectors
  are scored directly, so an approximate index never loses a page's own passages.

scripts/bench_retrieval.py measures every trade-off above; docs/benchmarks.md reports it.
Chunks are added in chunk-id order and results are sorted by (-score rounded to 1e-6,
chunk_id), so ties are broken by chunk id whatever the index type. The index persists
beside a manifest (embedder id and hash, chunking parameters, chunk count and digest,
index type and parameters) and is reused only when the manifest matches; otherwise it
is rebuilt. :meth:`VectorIndex.identity` is what summaries and run manifests record.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ambereval.models.canonical import canonical_json
from ambereval.models.chunk_source import ChunkSource, as_source
from ambereval.models.chunker import Chunk

MANIFEST_VERSION = 3
#: chunk texts embedded per call, in chunk-id order: a text's vector depends on the batch
#: it is embedded with (padding, matrix shapes), so the batches are fixed by the chunks
#: alone, and a streamed source (texts read page by page) embeds exactly as a list does;
#: progress is reported after each window
EMBED_WINDOW = 256
Progress = Callable[[int, int], None]


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _faiss() -> Any:
    import faiss  # imported on first use: commands that never search start fast

    return faiss


class Encoder(Protocol):
    def identity(self) -> dict[str, str]: ...
    def embed(self, texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float
    rank: int


APPROXIMATE_TYPES = ("IndexRefineFlat", "IndexHNSWFlat", "IndexIVFFlat")
REFINE_BASE = "SQ8"  # the 8-bit code IndexRefineFlat scans (FAISS factory name)


@dataclass(frozen=True)
class IndexSpec:
    """How the dense index is built; every field is recorded in the manifest.

    ``approximate`` is the index type above ``ann_threshold``: ``IndexRefineFlat`` (the
    default: an 8-bit scan, the best ``k_factor`` x k re-scored exactly; above
    ``scan_limit`` chunks HNSW takes over), ``IndexHNSWFlat`` (at every size above the
    threshold) or ``IndexIVFFlat`` (what runs before HNSW recorded; kept for replays).
    HNSW: ``ef_search`` 0 means "derived from the chunk count" (:func:`auto_ef_search`).
    IVF: ``nlist``/``nprobe`` of 0 mean derived: nlist = the power of two nearest to
    4·sqrt(n) (at least 64), nprobe = nlist / 8 between 32 and 256.
    Measured recall@5 against exact search and latencies: docs/benchmarks.md.
    """

    ann_threshold: int = 20_000
    approximate: str = "IndexRefineFlat"
    scan_limit: int = 2_000_000
    k_factor: int = 10
    hnsw_m: int = 32
    ef_construction: int = 40
    ef_search: int = 0
    nlist: int = 0
    nprobe: int = 0
    train_per_cell: int = 40
    seed: int = 0

    def __post_init__(self) -> None:
        if self.approximate not in APPROXIMATE_TYPES:
            raise ValueError(f"unknown approximate index type {self.approximate!r}")
        if self.k_factor < 1:
            raise ValueError(f"k_factor must be at least 1, not {self.k_factor}")

    def resolve(self, count: int) -> dict[str, Any]:
        """The concrete index type and parameters for ``count`` chunks."""
        if count <= self.ann_threshold:
            return {"type": "IndexFlatIP", "metric": "inner_product",
                    "ann_threshold": self.ann_threshold}
        if self.approximate == "IndexRefineFlat" and count <= self.scan_limit:
            return {"type": "IndexRefineFlat", "metric": "inner_product",
                    "ann_threshold": self.ann_threshold, "scan_limit": self.scan_limit,
                    "base": REFINE_BASE, "k_factor": self.k_factor}
        if self.approximate in ("IndexRefineFlat", "IndexHNSWFlat"):
            return {"type": "IndexHNSWFlat", "metric": "inner_product",
                    "ann_threshold": self.ann_threshold, "M": self.hnsw_m,
                    "ef_construction": self.ef_construction,
                    "ef_search": self.ef_search or auto_ef_search(count),
                    "build_threads": 1, "insert_order": "chunk_id"}
        nlist = self.nlist or max(64, 2 ** round(math.log2(4 * math.sqrt(count))))
        nlist = min(nlist, max(1, count // 39))  # FAISS wants >= 39 training points a cell
        nprobe = min(nlist, self.nprobe or min(256, max(32, nlist // 8)))
        return {"type": "IndexIVFFlat", "metric": "inner_product",
                "ann_threshold": self.ann_threshold, "nlist": nlist, "nprobe": nprobe,
                "train_sample": min(count, nlist * self.train_per_cell), "seed": self.seed}

    def as_dict(self) -> dict[str, Any]:
        """The parameters that do not depend on the corpus (for a run manifest)."""
        out: dict[str, Any] = {"ann_threshold": self.ann_threshold,
                               "approximate": self.approximate}
        if self.approximate == "IndexRefineFlat":
            out.update({"base": REFINE_BASE, "k_factor": self.k_factor,
                        "scan_limit": self.scan_limit})
        if self.approximate in ("IndexRefineFlat", "IndexHNSWFlat"):
            out.update({"M": self.hnsw_m, "ef_construction": self.ef_construction,
                        "ef_search": self.ef_search or "auto"})
        else:
            out.update({"nlist": self.nlist or "auto", "nprobe": self.nprobe or "auto",
                        "seed": self.seed})
        return out

    @classmethod
    def from_identity(cls, identity: dict[str, Any]) -> IndexSpec:
        """The spec that rebuilds an index recorded by :meth:`VectorIndex.identity`."""
        params = identity.get("params", identity)
        threshold = int(params.get("ann_threshold", cls.ann_threshold))
        if params.get("type") == "IndexRefineFlat":
            if params.get("base", REFINE_BASE) != REFINE_BASE:
                raise ValueError(f"unknown re-ranked base index {params['base']!r}")
            return cls(ann_threshold=threshold, scan_limit=int(params["scan_limit"]),
                       k_factor=int(params["k_factor"]))
        if params.get("type") == "IndexHNSWFlat":
            return cls(ann_threshold=threshold, approximate="IndexHNSWFlat",
                       hnsw_m=int(params["M"]),
                       ef_construction=int(params["ef_construction"]),
                       ef_search=int(params["ef_search"]))
        if params.get("type") == "IndexIVFFlat":
            return cls(ann_threshold=threshold, approximate="IndexIVFFlat",
                       nlist=int(params["nlist"]), nprobe=int(params["nprobe"]),
                       seed=int(params.get("seed", 0)))
        if params.get("type") not in (None, "IndexFlatIP"):
            raise ValueError(f"unknown index type {params['type']!r}")
        return cls(ann_threshold=threshold)


def auto_ef_search(count: int) -> int:
    """HNSW candidates per query for ``count`` chunks (chosen from the measurements
    of scripts/bench_retrieval.py; docs/benchmarks.md)."""
    if count <= 50_000:
        return 128
    return 256 if count <= 300_000 else 512


def _build_faiss(vectors: np.ndarray, dim: int, params: dict[str, Any]) -> Any:
    faiss = _faiss()
    if params["type"] == "IndexFlatIP":
        index = faiss.IndexFlatIP(dim)
        if len(vectors):
            index.add(vectors)
        return index
    if params["type"] == "IndexRefineFlat":
        index = faiss.index_factory(dim, f"{REFINE_BASE},RFlat", faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)  # per-dimension min/max over every vector: no sampling
        index.add(vectors)
        index.k_factor = float(params["k_factor"])
        return index
    if params["type"] == "IndexHNSWFlat":
        index = faiss.IndexHNSWFlat(dim, int(params["M"]), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = int(params["ef_construction"])
        index.hnsw.efSearch = int(params["ef_search"])
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)  # parallel insertion is not reproducible
        try:
            index.add(vectors)
        finally:
            faiss.omp_set_num_threads(threads)
        return index
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, params["nlist"], faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(params["seed"])
    sample = np.sort(rng.choice(len(vectors), size=params["train_sample"], replace=False))
    index.cp.seed = params["seed"]
    index.cp.max_points_per_centroid = params["train_sample"]  # train on our sample as is
    index.train(np.ascontiguousarray(vectors[sample]))
    index.add(vectors)
    index.nprobe = params["nprobe"]
    return index


class VectorIndex:
    """A FAISS index over chunks; search can be limited to a set of captures."""

    def __init__(self, chunks: list[Chunk], vectors: np.ndarray, manifest: dict[str, Any],
                 index: Any = None):
        """``vectors`` are row-aligned with ``chunks``; with a loaded ``index`` (chunks
        already in id order) they are not needed."""
        order = sorted(range(len(chunks)), key=lambda i: chunks[i].chunk_id)
        self.chunks = [chunks[i] for i in order]
        if "index" not in manifest or not isinstance(manifest["index"], dict):
            manifest = {**manifest, "index": IndexSpec().resolve(len(self.chunks))}
        self.manifest = manifest
        self.params: dict[str, Any] = manifest["index"]
        if index is None:
            if order != list(range(len(order))):
                vectors = vectors[order]
            vectors = np.ascontiguousarray(vectors, dtype=np.float32)
            index = _build_faiss(vectors, int(manifest["dim"]), self.params)
        self.index = index
        if self.params["type"] == "IndexIVFFlat":
            self.index.nprobe = self.params["nprobe"]
            self.index.make_direct_map()  # reconstruct() for exact filtered searches
        elif self.params["type"] == "IndexHNSWFlat":
            self.index.hnsw.efSearch = int(self.params["ef_search"])
        elif self.params["type"] == "IndexRefineFlat":
            self.index.k_factor = float(self.params["k_factor"])
        self._by_capture: dict[str, list[int]] = {}
        for pos, chunk in enumerate(self.chunks):
            self._by_capture.setdefault(chunk.capture_id, []).append(pos)

    @staticmethod
    def manifest_for(chunks: list[Chunk] | ChunkSource, encoder: Encoder,
                     params: dict[str, Any], dim: int, spec: IndexSpec | None = None
                     ) -> dict[str, Any]:
        source = as_source(chunks)
        count = len(source.chunks)
        return {"version": MANIFEST_VERSION, "embedder": encoder.identity(), "chunking": params,
                "count": count, "chunks_sha256": source.digest, "dim": dim,
                "embed_window": EMBED_WINDOW, "metric": "inner_product",
                "index": (spec or IndexSpec()).resolve(count)}

    def identity(self) -> dict[str, Any]:
        """What a run records about this index: type, parameters, size, embedder."""
        return {"type": self.params["type"], "params": dict(self.params),
                "count": len(self.chunks), "dim": int(self.manifest["dim"]),
                "embedder": self.manifest.get("embedder")}

    @classmethod
    def build(cls, chunks: list[Chunk] | ChunkSource, encoder: Encoder,
              params: dict[str, Any], spec: IndexSpec | None = None,
              progress: Progress | None = None) -> VectorIndex:
        """Embeds the chunks' texts ``EMBED_WINDOW`` at a time as the source streams them;
        ``progress(embedded, total)`` after each window."""
        source = as_source(chunks)
        total = len(source.chunks)
        parts, window = [], []

        def embed() -> None:
            parts.append(encoder.embed(window))
            if progress is not None:
                progress(sum(len(p) for p in parts), total)

        for text in source.texts():
            window.append(text)
            if len(window) == EMBED_WINDOW:
                embed()
                window = []
        if window or not parts:
            embed()
        vectors = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if len(vectors) != len(source.chunks):
            raise ValueError(f"{len(vectors)} texts for {len(source.chunks)} chunks")
        dim = vectors.shape[1] if vectors.ndim == 2 and vectors.shape[0] else \
            int(getattr(encoder, "dim", 0))
        return cls(source.chunks, vectors, cls.manifest_for(source, encoder, params, dim, spec))

    @classmethod
    def load_or_build(cls, directory: str | Path, chunks: list[Chunk] | ChunkSource,
                      encoder: Encoder, params: dict[str, Any], spec: IndexSpec | None = None,
                      progress: Progress | None = None) -> tuple[VectorIndex, bool]:
        """Reuse ``directory`` when its manifest matches; else build and save. -> (index, reused)"""
        directory = Path(directory)
        source = as_source(chunks)
        ordered = source.chunks
        stored = directory / "manifest.json"
        if stored.is_file() and (directory / "index.faiss").is_file():
            try:
                saved = json.loads(stored.read_text())
                want = cls.manifest_for(source, encoder, params, int(saved.get("dim") or 0),
                                        spec)
                want["index_sha256"] = saved.get("index_sha256")
                fresh = (canonical_json(saved) == canonical_json(want)
                         and _sha256(directory / "index.faiss") == saved.get("index_sha256"))
            except (ValueError, OSError, AttributeError, TypeError):
                fresh = False  # an unreadable cache is a miss, never an error
            if fresh:
                index = _faiss().read_index(str(directory / "index.faiss"))
                if index.ntotal == len(ordered):
                    return cls(ordered, np.zeros((0, index.d), dtype=np.float32), saved,
                               index=index), True
        built = cls.build(source, encoder, params, spec, progress)
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
        _faiss().write_index(self.index, str(tmp))
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

    def allowed(self, captures: set[str]) -> list[int]:
        """Positions of the chunks of ``captures``, ascending (= chunk-id order)."""
        return sorted(p for c in captures for p in self._by_capture.get(c, []))

    def scored(self, query_vector: np.ndarray, want: int,
               captures: set[str] | None = None) -> list[tuple[float, int]]:
        """Up to ``want`` (score, position) pairs, best first, ties by chunk id."""
        if not self.chunks or want <= 0:
            return []
        q = np.ascontiguousarray(query_vector.reshape(1, -1), dtype=np.float32)
        if captures is not None:
            allowed = self.allowed(captures)
            if not allowed:
                return []
            ids = np.asarray(allowed, dtype=np.int64)
            scores = self.index.reconstruct_batch(ids) @ q[0]
            found = list(zip(scores.tolist(), allowed, strict=True))
        else:
            scores, ids = self.index.search(q, min(len(self.chunks), want + 16))
            found = [(float(s), int(i)) for s, i in zip(scores[0], ids[0], strict=True)
                     if i >= 0]  # the margin lets ties at the cut-off be resolved by id
        found.sort(key=lambda t: (-round(t[0], 6), self.chunks[t[1]].chunk_id))
        return found[:want]

    def search(self, query_vector: np.ndarray, k: int = 5,
               captures: set[str] | None = None) -> list[Hit]:
        """Top-k chunks by cosine similarity, ties broken by chunk id."""
        return [Hit(self.chunks[i], s, rank)
                for rank, (s, i) in enumerate(self.scored(query_vector, k, captures), start=1)]

