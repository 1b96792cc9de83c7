"""Chunking by structure: exact offsets, budgets, overlap, headings (property-tested)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ambereval.models.chunker import ChunkParams, chunk_text

PAGE = """# Eiffel Tower

The tower was completed in 1889. It is 330 metres tall.

## Visitors

Millions of people visit every year. Most take the lift.

## Engineering

""" + " ".join(f"Rivet fact {i}." for i in range(120))


def test_offsets_headings_and_budget() -> None:
    chunks = chunk_text(PAGE, "cap-x", ChunkParams(max_tokens=40, overlap=8))
    assert [c.chunk_id for c in chunks] == [f"cap-x:{i:05d}" for i in range(len(chunks))]
    for c in chunks:
        assert PAGE[c.start : c.end] == c.text and c.capture_id == "cap-x"
        assert len(c.text.split()) <= 40
    assert chunks[0].heading == "Eiffel Tower"
    assert chunks[-1].heading == "Eiffel Tower > Engineering"
    assert any(a.end > b.start for a, b in zip(chunks, chunks[1:], strict=False))  # overlap


def test_empty_and_whitespace() -> None:
    assert chunk_text("", "c") == []
    assert chunk_text(" \n\n \n", "c") == []


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("ab .#\n\t!?é")), max_size=600),
       budget=st.integers(min_value=1, max_value=30), overlap=st.integers(0, 10))
def test_chunks_slice_back_and_cover_every_word(text: str, budget: int, overlap: int) -> None:
    chunks = chunk_text(text, "c", ChunkParams(budget, overlap))
    covered = set()
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert len(c.text.split()) <= budget
        covered.update(range(c.start, c.end))
    for i, ch in enumerate(text):
        if not ch.isspace():
            assert i in covered
    assert chunks == chunk_text(text, "c", ChunkParams(budget, overlap))
