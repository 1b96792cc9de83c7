"""Retrieval is recorded: every passage choice of an evaluation, with its retriever."""

from __future__ import annotations

import json
from pathlib import Path

from replay_fixtures import landmarks_bundle
from scripted_judge import scripted_judge

from ambereval.engine.eval_context import EvalContext
from ambereval.engine.evidence import Page
from ambereval.models import ChunkParams, RetrieverSpec
from ambereval.models.chunker import chunk_text

FIXTURES = Path(__file__).parent / "fixtures"

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


def test_run_dir_holds_the_retrieval_record(tmp_path: Path) -> None:
    """A real run (scripted judge, real embedder, captured pages): each report has its
    retrieval file, written in a deterministic order, equal across two runs."""
    from ambereval.engine.runs.evaluate import evaluate_bundles
    from ambereval.models import Embedder

    bundle, tasks = landmarks_bundle(tmp_path)
    judge = scripted_judge({"Claim: The Eiffel": {"question": 1, "answer": "true"}})
    embedder = Embedder()
    texts = []
    for name in ("a", "b"):
        run = evaluate_bundles([bundle], tasks, ["dailyreport", "deepeval"], [("s", judge)],
                               tmp_path / name, embedder)
        assert "retrieval" not in run["reports"][0]  # split off into its own file
        [fname] = json.loads((tmp_path / name / "manifest.json").read_text())["reports"]
        path = tmp_path / name / "retrieval" / (Path(fname).stem + ".jsonl")
        texts.append(path.read_text())
    assert texts[0] == texts[1]
    lines = [json.loads(line) for line in texts[0].splitlines()]
    records = [r for r in lines if "step" not in r]  # passages picked from one page
    assert records, "the captured pages are longer than k chunks: something was retrieved"
    keys = [(r["capture_id"], r["query"], r["k"]) for r in records]
    assert keys == sorted(keys)
    assert lines[:len(records)] == records  # passage lines first, as before
    for r in records:
        assert r["retriever"]["name"] == "hybrid" and "dense" in r["retriever"]
        assert [h["rank"] for h in r["hits"]] == list(range(1, len(r["hits"]) + 1))
    # dailyreport's claim verification: its index, then every search it made
    [index] = [r for r in lines if r.get("step") == "verification-index"]
    searches = [r for r in lines if r.get("step") == "verification"]
    assert lines == records + [index] + searches
    assert index["chunks"] > 0 and index["captures"] == sorted(index["captures"])
    assert index["retriever"]["name"] == "hybrid" and index["chunking"]["max_tokens"] == 160
    assert searches and all(s["index"] == index["index"] for s in searches)
    summary = run["reports"][0]["judges"]["s"]["dailyreport"]["verification"]
    assert summary["retriever"] == index["retriever"] and summary["chunks"] == index["chunks"]
    questions = {q for c in run["reports"][0]["judges"]["s"]["dailyreport"]["verdicts"]
                 for q in [x["question"] for x in c["questions"]]}
    assert questions <= {s["query"] for s in searches}
    for s in searches:
        assert s["captures"] is None or len(s["captures"]) == 1
        assert [h["rank"] for h in s["hits"]] == list(range(1, len(s["hits"]) + 1))
        if s["captures"]:
            assert all(h["chunk_id"].startswith(s["captures"][0] + ":") for h in s["hits"])
