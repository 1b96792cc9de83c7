"""The FAISS index above its size threshold: an 8-bit scan re-ranked exactly, HNSW above
the scan limit (and IVF for old runs' replays); deterministic, recall vs exact, recorded.

Vectors are synthetic (fixed seeds, normalised): an unstructured Gaussian with a decaying
spectrum, and a structured set of "pages" (sentences scattered around a topic vector).
The index is under test, not the embedder. Sizes are small so the tests stay quick; the
thresholds are lowered to match.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from ambereval.models import Chunk, VectorIndex
from ambereval.models.vector_index import IndexSpec, auto_ef_search

DIM = 48


def vectors(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    spectrum = (np.arange(1, DIM + 1) ** -0.6).astype(np.float32)
    x = rng.standard_normal((n, DIM)).astype(np.float32) * spectrum
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def clustered(n: int, topics: int = 300, seed: int = 0) -> np.ndarray:
    """``n`` vectors around ``topics`` random directions (a corpus of pages on topics)."""
    rng = np.random.default_rng(seed)
    centres = vectors(topics, seed=seed + 100)
    x = centres[rng.integers(0, topics, size=n)] + \
        0.25 * rng.standard_normal((n, DIM)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def chunks(n: int) -> list[Chunk]:
    return [Chunk(f"cap-{i % 97:03d}:{i:06d}", f"cap-{i % 97:03d}", 0, 1, f"text {i}", "")
            for i in range(n)]


class TableEncoder:
    """Returns the precomputed vector of each text ("text <i>") — stands in for the
    embedder, which these tests do not exercise."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = table

    def identity(self) -> dict[str, str]:
        return {"name": "table", "sha256": hashlib.sha256(self.table.tobytes()).hexdigest()}

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.table[[int(t.split()[1]) for t in texts]]


SPEC = IndexSpec(ann_threshold=1_000)
HNSW = IndexSpec(ann_threshold=1_000, approximate="IndexHNSWFlat")
IVF = IndexSpec(ann_threshold=1_000, approximate="IndexIVFFlat")
ALL = [SPEC, HNSW, IVF]
IDS = ["sq8-refine", "hnsw", "ivf"]


def approx(n: int = 6_000, spec: IndexSpec = SPEC, data: np.ndarray | None = None,
           ) -> tuple[VectorIndex, np.ndarray]:
    data = vectors(n) if data is None else data
    cs = chunks(len(data))
    manifest = VectorIndex.manifest_for(cs, TableEncoder(data), {}, DIM, spec)
    return VectorIndex(cs, data, manifest), data


def exact_of(data: np.ndarray) -> VectorIndex:
    return VectorIndex(chunks(len(data)), data, {"dim": DIM, "index": IndexSpec().resolve(10)})


def recall_at_5(index: VectorIndex, exact: VectorIndex, queries: np.ndarray) -> float:
    return float(np.mean([len({h.chunk.chunk_id for h in index.search(q, 5)}
                              & {h.chunk.chunk_id for h in exact.search(q, 5)}) / 5
                          for q in queries]))


def test_spec_is_exact_below_the_threshold_a_scan_above_and_hnsw_past_the_scan_limit(
) -> None:
    assert IndexSpec().resolve(20_000)["type"] == "IndexFlatIP"
    scan = IndexSpec().resolve(1_000_000)
    assert scan == {"type": "IndexRefineFlat", "metric": "inner_product",
                    "ann_threshold": 20_000, "scan_limit": 2_000_000, "base": "SQ8",
                    "k_factor": 10}
    assert IndexSpec().resolve(2_000_000)["type"] == "IndexRefineFlat"
    big = IndexSpec().resolve(2_000_001)
    assert big == {"type": "IndexHNSWFlat", "metric": "inner_product",
                   "ann_threshold": 20_000, "M": 32, "ef_construction": 40,
                   "ef_search": auto_ef_search(2_000_001), "build_threads": 1,
                   "insert_order": "chunk_id"}
    assert HNSW.resolve(100_000)["type"] == "IndexHNSWFlat"
    assert auto_ef_search(1_000_000) >= auto_ef_search(100_000) >= 64
    for count, params in ((1_000_000, scan), (2_000_001, big),
                          (100_000, HNSW.resolve(100_000))):
        assert IndexSpec.from_identity({"params": params}).resolve(count) == params
    recorded = IndexSpec(k_factor=4, scan_limit=50_000).resolve(30_000)
    assert IndexSpec.from_identity({"params": recorded}).resolve(30_000) == recorded
    assert IndexSpec.from_identity({"params": IndexSpec().resolve(10)}) == IndexSpec()
    assert IndexSpec(approximate="IndexHNSWFlat", ef_search=99).resolve(50_000)[
        "ef_search"] == 99
    assert IndexSpec().as_dict() == {"ann_threshold": 20_000, "approximate": "IndexRefineFlat",
                                     "base": "SQ8", "k_factor": 10, "scan_limit": 2_000_000,
                                     "M": 32, "ef_construction": 40, "ef_search": "auto"}
    with pytest.raises(ValueError, match="IndexLSH"):
        IndexSpec(approximate="IndexLSH")
    with pytest.raises(ValueError, match="k_factor"):
        IndexSpec(k_factor=0)
    with pytest.raises(ValueError, match="PQ4"):
        IndexSpec.from_identity({"params": {**scan, "base": "PQ4"}})


def test_hnsw_identities_recorded_before_the_scan_replay_with_hnsw() -> None:
    """Runs recorded while HNSW was the default above 20,000 chunks name it: the replay
    rebuilds that graph, not the scan that is the default now."""
    old = {"type": "IndexHNSWFlat", "metric": "inner_product", "ann_threshold": 20_000,
           "M": 32, "ef_construction": 40, "ef_search": 256, "build_threads": 1,
           "insert_order": "chunk_id"}
    assert IndexSpec.from_identity({"params": old}).resolve(100_000) == old


def test_old_ivf_identities_still_replay() -> None:
    """Runs recorded before HNSW name IndexIVFFlat: the replay rebuilds that index."""
    old = {"type": "IndexIVFFlat", "metric": "inner_product", "ann_threshold": 20_000,
           "nlist": 1024, "nprobe": 128, "train_sample": 40_960, "seed": 0}
    assert IVF.resolve(1_000_000)["nlist"] == 4096
    assert IndexSpec.from_identity({"params": old}).resolve(100_000) == old
    assert IVF.as_dict() == {"ann_threshold": 1_000, "approximate": "IndexIVFFlat",
                             "nlist": "auto", "nprobe": "auto", "seed": 0}


@pytest.mark.parametrize("spec", [SPEC, HNSW], ids=IDS[:2])
def test_recall_against_exact_is_at_least_0_99_on_a_structured_set(spec: IndexSpec) -> None:
    data = clustered(6_000)
    index, _ = approx(data=data, spec=spec)
    assert index.identity()["type"] == spec.approximate
    queries = clustered(200, seed=1)  # other sentences on the same topics
    assert recall_at_5(index, exact_of(data), queries) >= 0.99


@pytest.mark.parametrize("spec", [SPEC, HNSW], ids=IDS[:2])
def test_recall_on_unstructured_vectors(spec: IndexSpec) -> None:
    index, data = approx(spec=spec)
    assert recall_at_5(index, exact_of(data), vectors(200, seed=1)) >= 0.99


def test_the_scan_returns_exact_scores_and_recall_1_on_isotropic_noise() -> None:
    """The hardest shape for a graph or clusters -- uniformly random directions -- is
    no harder for the re-ranked scan: the top 5 of 8,000 match exact search, and every
    returned score is the exact cosine, not the 8-bit estimate."""
    rng = np.random.default_rng(4)
    data = rng.standard_normal((8_000, DIM)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    index, _ = approx(data=data)
    exact = exact_of(data)
    queries = rng.standard_normal((100, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    assert recall_at_5(index, exact, queries) == 1.0
    for q in queries[:10]:
        for hit in index.search(q, 5):
            pos = int(hit.chunk.chunk_id.split(":")[1])
            assert hit.score == pytest.approx(float(data[pos] @ q), abs=1e-6)


def test_ivf_recall_against_exact_is_at_least_0_99() -> None:
    index, data = approx(spec=IVF)
    assert index.identity()["type"] == "IndexIVFFlat"
    assert recall_at_5(index, exact_of(data), vectors(200, seed=1)) >= 0.99


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_build_is_deterministic(tmp_path: Path, spec: IndexSpec) -> None:
    """Same vectors, same index bytes -- also when FAISS may use several threads (HNSW
    inserts on one thread whatever the setting, which is restored afterwards; the scan's
    training is a min/max and its codes do not depend on threads)."""
    faiss = pytest.importorskip("faiss")
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(2)
    try:
        first, _ = approx(n=4_000, spec=spec)
        assert faiss.omp_get_max_threads() == 2
        faiss.omp_set_num_threads(1)
        second, _ = approx(n=4_000, spec=spec)
    finally:
        faiss.omp_set_num_threads(before)
    first.save(tmp_path / "a")
    second.save(tmp_path / "b")
    assert (tmp_path / "a" / "index.faiss").read_bytes() == \
        (tmp_path / "b" / "index.faiss").read_bytes()
    for q in vectors(10, seed=7):
        assert first.search(q, 5) == second.search(q, 5)


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_filtered_search_is_exact_on_an_approximate_index(spec: IndexSpec) -> None:
    index, data = approx(spec=spec)
    exact = exact_of(data)
    for q in vectors(20, seed=2):
        pages = {"cap-003", "cap-050"}
        got = index.search(q, 5, captures=pages)
        assert [h.chunk.chunk_id for h in got] == \
            [h.chunk.chunk_id for h in exact.search(q, 5, captures=pages)]
        assert {h.chunk.capture_id for h in got} <= pages


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_ties_are_broken_by_chunk_id_on_an_approximate_index(spec: IndexSpec) -> None:
    data = vectors(3_000)
    data[2_000:2_010] = data[5]  # ten copies of chunk 5's vector
    cs = chunks(3_000)
    index = VectorIndex(cs, data, VectorIndex.manifest_for(cs, TableEncoder(data), {}, DIM,
                                                           spec))
    assert index.identity()["type"] == spec.approximate
    hits = index.search(data[5], 8)
    tied = sorted([cs[5].chunk_id] + [c.chunk_id for c in cs[2_000:2_010]])
    assert [h.chunk.chunk_id for h in hits] == tied[:8]


def test_index_type_and_parameters_are_recorded_and_reused(tmp_path: Path) -> None:
    data = vectors(3_000)
    cs = chunks(3_000)
    encoder = TableEncoder(data)
    built, reused = VectorIndex.load_or_build(tmp_path, cs, encoder, {"rule": "x"}, HNSW)
    assert not reused
    params = built.identity()["params"]
    assert params == {**HNSW.resolve(3_000), "type": "IndexHNSWFlat"}
    assert built.index.hnsw.efSearch == params["ef_search"]
    again, reused = VectorIndex.load_or_build(tmp_path, cs, encoder, {"rule": "x"}, HNSW)
    assert reused and again.identity() == built.identity()
    assert again.index.hnsw.efSearch == params["ef_search"]
    q = vectors(1, seed=3)[0]
    assert again.search(q, 5) == built.search(q, 5)
    replay = IndexSpec.from_identity(built.identity())
    _, reused = VectorIndex.load_or_build(tmp_path, cs, encoder, {"rule": "x"}, replay)
    assert reused  # the recorded identity rebuilds the same index: the cache matches
    other = IndexSpec(ann_threshold=1_000, approximate="IndexHNSWFlat",
                      ef_search=params["ef_search"] * 2)
    changed, reused = VectorIndex.load_or_build(tmp_path, cs, encoder, {"rule": "x"}, other)
    assert not reused and changed.identity()["params"]["ef_search"] == params["ef_search"] * 2
    assert changed.index.hnsw.efSearch == params["ef_search"] * 2
    ivf, reused = VectorIndex.load_or_build(tmp_path, cs, encoder, {"rule": "x"}, IVF)
    assert not reused and ivf.identity()["type"] == "IndexIVFFlat"


def test_the_scan_is_recorded_and_reused_with_its_k_factor(tmp_path: Path) -> None:
    data = vectors(3_000)
    cs = chunks(3_000)
    encoder = TableEncoder(data)
    built, reused = VectorIndex.load_or_build(tmp_path, cs, encoder, {}, SPEC)
    assert not reused and built.identity()["params"] == SPEC.resolve(3_000)
    again, reused = VectorIndex.load_or_build(tmp_path, cs, encoder, {}, SPEC)
    assert reused and again.index.k_factor == SPEC.k_factor
    q = vectors(1, seed=3)[0]
    assert again.search(q, 5) == built.search(q, 5)
    replay = IndexSpec.from_identity(again.identity())
    assert VectorIndex.load_or_build(tmp_path, cs, encoder, {}, replay)[1]
    wider = IndexSpec(ann_threshold=1_000, k_factor=40)
    changed, reused = VectorIndex.load_or_build(tmp_path, cs, encoder, {}, wider)
    assert not reused and changed.index.k_factor == 40
    assert changed.identity()["params"]["k_factor"] == 40


@pytest.mark.parametrize("n", [0, 1, 5])
def test_tiny_indexes_stay_exact(n: int) -> None:
    data = vectors(max(n, 1))[:n]
    cs = chunks(n)
    index = VectorIndex(cs, data, VectorIndex.manifest_for(cs, TableEncoder(vectors(1)), {},
                                                           DIM))
    assert index.identity()["type"] == "IndexFlatIP"
    assert len(index.search(vectors(1, seed=9)[0], 3)) == min(n, 3)


@pytest.mark.parametrize("n", [21, 30, 50])
def test_a_scan_over_fewer_chunks_than_it_asks_for_equals_exact_search(n: int) -> None:
    """Just above the threshold the scan's candidate list (k x k_factor) is longer than
    the corpus: it then returns exactly what exact search returns, at every k."""
    data = vectors(n)
    cs = chunks(n)
    spec = IndexSpec(ann_threshold=20)
    index = VectorIndex(cs, data, VectorIndex.manifest_for(cs, TableEncoder(data), {}, DIM,
                                                           spec))
    assert index.identity()["type"] == "IndexRefineFlat"
    exact = exact_of(data)
    q = vectors(1, seed=5)[0]
    for k in (1, 5, 20, 100):
        got = [(h.chunk.chunk_id, round(h.score, 5)) for h in index.search(q, k)]
        assert got == [(h.chunk.chunk_id, round(h.score, 5)) for h in exact.search(q, k)]
        assert len(got) == min(k, n)
