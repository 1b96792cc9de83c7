"""Indexes built from a chunk source that streams its text match ones built from lists."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ambereval.engine.eval_context import chunks_digest
from ambereval.engine.evidence import BundleChunks, load_page
from ambereval.errors import BundleError
from ambereval.models import ChunkParams, Embedder, Retriever, RetrieverSpec, VectorIndex
from ambereval.models import vector_index as vector_index_module
from ambereval.models.canonical import content_key
from ambereval.models.chunk_source import ChunkList
from ambereval.snapshots import Bundle, ClaimInput, capture_claims

from conftest import fast_options
from fakeweb import FakeWeb

PAGES = ("/pages/eiffel.html", "/pages/louvre.html", "/pages/rhine.html",
         "/pages/python.html", "/pages/tea.html")


class CountingEncoder:
    """The real embedder, with the batches it was asked for written down."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.calls = inner, []  # type: ignore[var-annotated]

    def identity(self) -> dict[str, str]:
        return self.inner.identity()

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture
def bundle(tmp_path: Path, web: FakeWeb) -> Path:
    out = tmp_path / "bundle"
    claims = [ClaimInput(f"c{i}", f"Claim {i}.", (web.url(p),)) for i, p in enumerate(PAGES)]
    capture_claims(out, claims, fast_options(web, reader="direct"))
    return out


def capture_ids(b: Bundle) -> list[str]:
    return [r["id"] for r in b.index.rows("SELECT id FROM captures WHERE kind = 'page' "
                                          "AND state = 'ok' ORDER BY id DESC")]


def test_bundle_source_holds_no_text_and_indexes_as_a_list(bundle: Path,
                                                           embedder: Embedder,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    params = ChunkParams(max_tokens=12, overlap=4)  # several chunks a page
    monkeypatch.setattr(vector_index_module, "EMBED_WINDOW", 4)
    with Bundle.open(bundle) as b:
        source = BundleChunks(b, params)
        full = []
        for cid in capture_ids(b):  # added out of order on purpose
            page = load_page(b, cid, "", params)
            assert page.valid and len(page.chunks) > 1
            full += page.chunks
            light = source.add(page)
            assert light.text == "" and all(c.text == "" for c in light.chunks)
        assert all(c.text == "" for c in source.chunks)
        listed = ChunkList(full)
        assert [c.chunk_id for c in source.chunks] == [c.chunk_id for c in listed.chunks]
        assert list(source.texts()) == [c.text for c in listed.chunks]
        assert source.digest == listed.digest == chunks_digest(full) == content_key(
            [[c.chunk_id, c.start, c.end, content_key(c.text)] for c in listed.chunks])

        counted = CountingEncoder(embedder)
        reported: list[tuple[int, int]] = []
        streamed = VectorIndex.build(source, counted, params.as_dict(),
                                     progress=lambda done, total: reported.append((done, total)))
        assert max(counted.calls) == 4 and sum(counted.calls) == len(full)
        assert reported == [(min(i, len(full)), len(full))
                            for i in range(4, len(full) + 4, 4)]
        whole = VectorIndex.build(full, embedder, params.as_dict())
        n = len(full)
        assert np.array_equal(streamed.index.reconstruct_n(0, n), whole.index.reconstruct_n(0, n))
        assert streamed.manifest == whole.manifest

        spec = RetrieverSpec.named("hybrid")
        a = Retriever.build(source, embedder, params.as_dict(), spec)
        b_ = Retriever.build(full, embedder, params.as_dict(), spec)
        for query in ("When was the Eiffel Tower completed?", "tea drink", "Rhine Basel"):
            for captures in (None, {source.chunks[0].capture_id}):
                got = a.search(query, 5, captures)
                want = b_.search(query, 5, captures)
                assert [(h.chunk.chunk_id, h.score, h.rank) for h in got] == \
                    [(h.chunk.chunk_id, h.score, h.rank) for h in want]
                assert all(h.chunk.text == "" for h in got)
        whole_page = source.page(source.chunks[0].capture_id)
        assert whole_page.text and whole_page.chunks[0].text


def test_bundle_source_notices_a_text_that_is_not_what_was_indexed(bundle: Path) -> None:
    """Texts are re-read by span; a text whose chunks differ from what was added (a
    bundle rewritten under the run) is an error, never a silently different passage."""
    with Bundle.open(bundle) as b:
        source = BundleChunks(b, ChunkParams())
        cid = capture_ids(b)[0]
        page = load_page(b, cid, "", ChunkParams())
        source.add(replace(page, chunks=[replace(c, text=c.text + " (edited)")
                                         for c in page.chunks]))
        with pytest.raises(BundleError, match="changed"):
            source.page(cid)
        with pytest.raises(BundleError, match="changed"):
            list(source.texts())
