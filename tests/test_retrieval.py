"""Embeddings (offline, default MiniLM) and the FAISS index: persistence, filters, ties."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ambereval.errors import ModelError
from ambereval.models import ChunkParams, Embedder, VectorIndex, chunk_text


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def corpus() -> list:
    pages = {
        "cap-a": "The Eiffel Tower in Paris was completed in 1889.\n\nIt is 330 metres tall.",
        "cap-b": "China is the largest producer of tea.\n\nIndia and Kenya follow.",
        "cap-c": "The Rhine flows to the North Sea.\n\nIt passes Basel and Cologne.",
        "cap-d": "China is the largest producer of tea.",  # same text as a cap-b chunk
    }
    return [c for cid, text in pages.items() for c in chunk_text(text, cid, ChunkParams(8, 0))]


def test_embeddings_are_offline_normalised_and_deterministic(embedder: Embedder) -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1" or embedder._model is None
    a = embedder.embed(["The Eiffel Tower is in Paris.", "Tea grows in Kenya."])
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert a.shape == (2, 384) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(a, embedder.embed(["The Eiffel Tower is in Paris.",
                                             "Tea grows in Kenya."]))
    assert len(embedder.identity()["sha256"]) == 64


def test_search_ranks_filters_and_breaks_ties_by_id(embedder: Embedder, tmp_path: Path) -> None:
    chunks = corpus()
    index, reused = VectorIndex.load_or_build(tmp_path / "faiss", chunks, embedder,
                                              ChunkParams(8, 0).as_dict())
    assert not reused and len(index) == len(chunks)
    q = embedder.embed(["Which country produces the most tea?"])[0]
    hits = index.search(q, k=3)
    assert [h.rank for h in hits] == [1, 2, 3]
    top = [h.chunk.chunk_id for h in hits[:2]]
    assert top == ["cap-b:00000", "cap-d:00000"]  # identical text: tie broken by chunk id
    assert hits[0].score == pytest.approx(hits[1].score, abs=1e-6)
    only = index.search(q, k=5, captures={"cap-a", "cap-c"})
    assert {h.chunk.capture_id for h in only} <= {"cap-a", "cap-c"} and len(only) == 4
    assert index.search(q, k=5, captures={"nope"}) == []


def test_index_reused_when_manifest_matches_rebuilt_otherwise(embedder: Embedder,
                                                             tmp_path: Path) -> None:
    chunks = corpus()
    params = ChunkParams(8, 0).as_dict()
    first, reused = VectorIndex.load_or_build(tmp_path, chunks, embedder, params)
    assert not reused
    second, reused = VectorIndex.load_or_build(tmp_path, chunks, embedder, params)
    assert reused and second.manifest == first.manifest
    q = embedder.embed(["Rhine"])[0]
    assert [h.chunk.chunk_id for h in second.search(q, 3)] == \
        [h.chunk.chunk_id for h in first.search(q, 3)]
    _, reused = VectorIndex.load_or_build(tmp_path, chunks[:-1], embedder, params)
    assert not reused
    _, reused = VectorIndex.load_or_build(tmp_path, chunks[:-1], embedder,
                                          ChunkParams(9, 0).as_dict())
    assert not reused


def test_not_a_sentence_transformers_dir(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not a sentence-transformers model"):
        Embedder(tmp_path)
    with pytest.raises(ModelError, match="not found"):
        Embedder(tmp_path / "missing")
    (tmp_path / "modules.json").write_text("[]")
    with pytest.raises(ModelError, match="could not load the embedder"):
        Embedder(tmp_path).embed(["x"])
