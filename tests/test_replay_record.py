"""Retrieval is recorded: every passage choice of an evaluation, with its retriever."""

from __future__ import annotations

from ambereval.engine.eval_context import EvalContext
from ambereval.engine.evidence import Page
from ambereval.models import ChunkParams, RetrieverSpec
from ambereval.models.chunker import chunk_text

TEXT = "\n\n".join(
    f"Paragraph {i} is about {topic}. " * 3
    for i, topic in enumerate(["bridges", "rivers", "the Eiffel Tower", "bread", "glass"]))


def _context() -> EvalContext:
    # BM25 only: no embedding model is needed; passages() only asks that one is set.
    return EvalContext(name="r", report_id="r", text="", report=None, task=None,  # type: ignore[arg-type]
                       bundle=None, claims=[], embedder=object(),  # type: ignore[arg-type]
                       params=ChunkParams(max_tokens=12, overlap=0),
                       retriever=RetrieverSpec(kind="bm25"))


def test_retrieval_is_recorded_in_order() -> None:
    params = ChunkParams(max_tokens=12, overlap=0)
    page = Page("cap-a", "https://x.test/", True, None, text=TEXT,
                chunks=chunk_text(TEXT, "cap-a", params))
    assert len(page.chunks) > 3
    ctx = _context()
    passages = ctx.passages(page, "Eiffel Tower", k=2)
    ctx.passages(page, "bread", k=1)
    records = ctx.retrievals()
    assert [r["query"] for r in records] == ["Eiffel Tower", "bread"]
    first = records[0]
    assert first["capture_id"] == "cap-a" and first["k"] == 2
    assert first["retriever"]["name"] == "bm25"
    assert [h["rank"] for h in first["hits"]] == [1, 2]
    assert any("Eiffel" in page.text[h["start"]:h["end"]] for h in first["hits"])
    by_id = {c.chunk_id: c.text for c in page.chunks}
    assert sorted(passages) == sorted(by_id[h["chunk_id"]] for h in first["hits"])
    assert first["hits"][0]["score"] >= first["hits"][1]["score"]


def test_short_page_records_nothing() -> None:
    page = Page("cap-b", "https://y.test/", True, None, text="Short.",
                chunks=chunk_text("Short.", "cap-b"))
    ctx = _context()
    assert ctx.passages(page, "anything") == ["Short."]
    assert ctx.retrievals() == []
