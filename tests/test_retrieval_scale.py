"""The FAISS index above its size threshold: IVF, deterministic, recall vs exact, recorded.

Vectors are synthetic (a fixed-seed Gaussian with a decaying spectrum, normalised): the
index is under test, not the embedder. Sizes are small so the tests stay quick; the
thresholds are lowered to match.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from ambereval.models import Chunk, VectorIndex
from ambereval.models.vector_index import IndexSpec

DIM = 48


def vectors(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    spectrum = (np.arange(1, DIM + 1) ** -0.6).astype(np.float32)
    x = rng.standard_normal((n, DIM)).astype(np.float32) * spectrum
    return x / np.linalg.norm(x, axis=1, keepdims=True)


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


def ivf(n: int = 6_000, spec: IndexSpec = SPEC) -> tuple[VectorIndex, np.ndarray]:
    data = vectors(n)
    cs = chunks(n)
    manifest = VectorIndex.manifest_for(cs, TableEncoder(data), {}, DIM, spec)
    return VectorIndex(cs, data, manifest), data


def test_spec_is_exact_below_the_threshold_and_ivf_above() -> None:
    assert IndexSpec().resolve(20_000)["type"] == "IndexFlatIP"
    big = IndexSpec().resolve(100_000)
    assert big == {"type": "IndexIVFFlat", "metric": "inner_product", "ann_threshold": 20_000,
                   "nlist": 1024, "nprobe": 128, "train_sample": 40_960, "seed": 0}
    assert (IndexSpec().resolve(1_000_000)["nlist"], IndexSpec().resolve(1_000_000)["nprobe"]) \
        == (4096, 256)
    assert IndexSpec.from_identity({"params": big}).resolve(100_000) == big
    assert IndexSpec.from_identity({"params": IndexSpec().resolve(10)}) == IndexSpec()


def test_ivf_recall_against_exact_is_at_least_0_99() -> None:
    index, data = ivf()
    assert index.identity()["type"] == "IndexIVFFlat"
    exact = VectorIndex(chunks(len(data)), data, {"dim": DIM, "index": IndexSpec().resolve(10)})
    queries = vectors(200, seed=1)
    found = [len({h.chunk.chunk_id for h in index.search(q, 5)}
                 & {h.chunk.chunk_id for h in exact.search(q, 5)}) / 5 for q in queries]
    assert float(np.mean(found)) >= 0.99


def test_ivf_build_is_deterministic(tmp_path: Path) -> None:
    first, _ = ivf()
    second, _ = ivf()
    first.save(tmp_path / "a")
    second.save(tmp_path / "b")
    assert (tmp_path / "a" / "index.faiss").read_bytes() == \
        (tmp_path / "b" / "index.faiss").read_bytes()
    q = vectors(1, seed=7)[0]
    assert first.search(q, 5) == second.search(q, 5)


def test_filtered_search_is_exact_on_an_ivf_index() -> None:
    index, data = ivf()
    exact = VectorIndex(chunks(len(data)), data, {"dim": DIM, "index": IndexSpec().resolve(10)})
    for q in vectors(20, seed=2):
        pages = {"cap-003", "cap-050"}
        got = index.search(q, 5, captures=pages)
        assert [h.chunk.chunk_id for h in got] == \
            [h.chunk.chunk_id for h in exact.search(q, 5, captures=pages)]
        assert {h.chunk.capture_id for h in got} <= pages


def test_ties_are_broken_by_chunk_id_on_an_ivf_index() -> None:
    data = vectors(3_000)
    data[2_000:2_010] = data[5]  # ten copies of chunk 5's vector
    cs = chunks(3_000)
    index = VectorIndex(cs, data, VectorIndex.manifest_for(cs, TableEncoder(data), {}, DIM,
                                                           SPEC))
    hits = index.search(data[5], 8)
    tied = sorted([cs[5].chunk_id] + [c.chunk_id for c in cs[2_000:2_010]])
    assert [h.chunk.chunk_id for h in hits] == tied[:8]


def test_index_type_and_parameters_are_recorded_and_reused(tmp_path: Path) -> None:
    data = vectors(3_000)
    cs = chunks(3_000)
    encoder = TableEncoder(data)
    built, reused = VectorIndex.load_or_build(tmp_path, cs, encoder, {"rule": "x"}, SPEC)
    assert not reused
    params = built.identity()["params"]
    assert params["type"] == "IndexIVFFlat" and params["nprobe"] >= 32
    again, reused = VectorIndex.load_or_build(tmp_path, cs, encoder, {"rule": "x"}, SPEC)
    assert reused and again.identity() == built.identity()
    q = vectors(1, seed=3)[0]
    assert again.search(q, 5) == built.search(q, 5)
    replay = IndexSpec.from_identity(built.identity())
    _, reused = VectorIndex.load_or_build(tmp_path, cs, encoder, {"rule": "x"}, replay)
    assert reused  # the recorded identity rebuilds the same index: the cache matches
    other = IndexSpec(ann_threshold=1_000, nprobe=params["nprobe"] * 2)
    changed, reused = VectorIndex.load_or_build(tmp_path, cs, encoder, {"rule": "x"}, other)
    assert not reused and changed.identity()["params"]["nprobe"] == params["nprobe"] * 2


@pytest.mark.parametrize("n", [0, 1, 5])
def test_tiny_indexes_stay_exact(n: int) -> None:
    data = vectors(max(n, 1))[:n]
    cs = chunks(n)
    index = VectorIndex(cs, data, VectorIndex.manifest_for(cs, TableEncoder(vectors(1)), {},
                                                           DIM))
    assert index.identity()["type"] == "IndexFlatIP"
    assert len(index.search(vectors(1, seed=9)[0], 3)) == min(n, 3)
