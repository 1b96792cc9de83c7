"""The Retriever: dense, BM25 (bm25s) and their reciprocal rank fusion, with the real
default embedder; identity round trip; filters; ties; cache reuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from ambereval.errors import ConfigError
from ambereval.models import ChunkParams, Embedder, Retriever, RetrieverSpec, chunk_text
from ambereval.models.bm25 import Bm25Index, tokens
from ambereval.models.retriever import RRF_K

PARAMS = ChunkParams(12, 0)
PAGES = {
    "cap-a": "The Eiffel Tower in Paris was completed in 1889.\n\nIt is 330 metres tall.\n\n"
             "Gustave Eiffel's company designed the wrought-iron lattice.",
    "cap-b": "China is the largest producer of tea.\n\nIndia and Kenya follow with large harvests "
             "every single year.\n\n"
             "Tea plants grow best in acidic soil.",
    "cap-c": "The Rhine flows to the North Sea.\n\nIt passes Basel and Cologne.\n\n"
             "Barges carry coal on the Rhine.",
    "cap-d": "China is the largest producer of tea.",  # same text as a cap-b chunk
}


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture(scope="module")
def chunks() -> list:
    return [c for cid, text in PAGES.items() for c in chunk_text(text, cid, PARAMS)]


def test_tokens_drop_stopwords_and_case() -> None:
    assert tokens("Which country produces THE most tea?") == \
        ["which", "country", "produces", "most", "tea"]  # the Lucene English stop list


def test_bm25_ranks_term_matches_ties_by_id_and_filters(chunks: list) -> None:
    index = Bm25Index(chunks)
    ranked = index.scored("largest producer of tea", 10)
    ids = [index.chunks[p].chunk_id for _, p in ranked]
    assert ids[:2] == ["cap-b:00000", "cap-d:00000"]  # identical text: tie broken by id
    assert ranked[0][0] == pytest.approx(ranked[1][0])
    assert all(score > 0 for score, _ in ranked)
    assert {index.chunks[p].capture_id for _, p in index.scored("tea", 10, {"cap-d"})} == \
        {"cap-d"}
    assert index.scored("zebra quantum", 5) == []
    assert index.scored("tea", 5, {"nope"}) == []


@pytest.mark.parametrize("kind", ["dense", "bm25", "hybrid"])
def test_every_retriever_finds_the_obvious_passage(kind: str, embedder: Embedder,
                                                   chunks: list) -> None:
    retriever = Retriever.build(chunks, embedder, PARAMS.as_dict(), RetrieverSpec(kind))
    hits = retriever.search("When was the Eiffel Tower completed?", k=3)
    assert hits[0].chunk.chunk_id == "cap-a:00000"
    # BM25 ranks only chunks sharing a term with the query
    assert [h.rank for h in hits] == ([1, 2] if kind == "bm25" else [1, 2, 3])
    assert hits[0].chunk.text == PAGES["cap-a"][hits[0].chunk.start:hits[0].chunk.end]
    only = retriever.search("Rhine barges", k=5, captures={"cap-c"})
    assert only and {h.chunk.capture_id for h in only} == {"cap-c"}
    assert retriever.search("tea", k=0) == []
    assert retriever.identity()["name"] == kind


def test_hybrid_is_the_rrf_of_the_two_rankings(embedder: Embedder, chunks: list) -> None:
    query = "Which country grows the most tea?"
    hybrid = Retriever.build(chunks, embedder, PARAMS.as_dict())
    assert hybrid.spec.kind == "hybrid" and hybrid.spec.rrf_k == RRF_K == 60
    q = embedder.embed([query])[0]
    dense = hybrid.dense.scored(q, 50)  # type: ignore[union-attr]
    lexical = hybrid.lexical.scored(query, 50)  # type: ignore[union-attr]
    expected: dict[str, float] = {}
    for ranking in (dense, lexical):
        for rank, (_, pos) in enumerate(ranking, start=1):
            cid = hybrid.chunks[pos].chunk_id
            expected[cid] = expected.get(cid, 0.0) + 1 / (60 + rank)
    want = sorted(expected, key=lambda c: (-round(expected[c], 9), c))[:4]
    hits = hybrid.search(query, k=4)
    assert [h.chunk.chunk_id for h in hits] == want
    assert [h.score for h in hits] == pytest.approx([expected[c] for c in want])
    assert hits == hybrid.search_many([query, "Rhine"], k=4)[0]


def test_identity_records_everything_and_rebuilds_the_same(embedder: Embedder,
                                                          chunks: list) -> None:
    retriever = Retriever.build(chunks, embedder, PARAMS.as_dict())
    ident = retriever.identity()
    assert ident["fusion"] == "rrf" and ident["rrf_k"] == 60
    assert ident["dense"]["type"] == "IndexFlatIP"
    assert ident["dense"]["embedder"] == embedder.identity()
    assert ident["bm25"]["params"]["library"] == "bm25s"
    again = Retriever.build(chunks, embedder, PARAMS.as_dict(),
                            RetrieverSpec.from_identity(ident))
    assert again.identity() == ident
    assert again.search("tea in Kenya", 3) == retriever.search("tea in Kenya", 3)


def test_cache_reuse_and_errors(embedder: Embedder, chunks: list, tmp_path: Path) -> None:
    first, reused = Retriever.load_or_build(tmp_path, chunks, embedder, PARAMS.as_dict())
    assert not reused
    second, reused = Retriever.load_or_build(tmp_path, chunks, embedder, PARAMS.as_dict())
    assert reused and second.search("Basel", 2) == first.search("Basel", 2)
    with pytest.raises(ConfigError, match="unknown retriever 'sparse'"):
        RetrieverSpec("sparse")
    with pytest.raises(ConfigError, match="needs an embedder"):
        Retriever.build(chunks, None, PARAMS.as_dict())
    lexical_only = Retriever.build(chunks, None, PARAMS.as_dict(), RetrieverSpec("bm25"))
    assert lexical_only.search("Basel Cologne", 1)[0].chunk.capture_id == "cap-c"
