"""Real run directories for the audit, diff and drift tests: a small report whose evidence
(and whose own text) carries HTML/script injection attempts, captured from the loopback
fakes, then verified and evaluated with the loopback OpenAI-compatible fake judge."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from fakejudge import FakeJudgeServer
from scripted_judge import scripted_judge

from ambereval.engine.runs.evaluate import evaluate_bundles
from ambereval.engine.snapshot_report import snapshot_report
from ambereval.engine.verification import verify_claims, write_results
from ambereval.models import Embedder, open_judge

from conftest import fast_options
from fakeweb import FakeWeb, default_pages, html_page

INJECTION = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned=2\">"
REPORT = """# Landmarks of Western Europe

## Paris

The Eiffel Tower in Paris was completed in 1889 [1]. The Louvre opened as a public museum \
in 1793 [2].

## Rivers

The Rhine flows about 1,230 kilometres to the North Sea [3]. Its delta is described in \
</script><script>window.__pwned = 3</script> notes \x1b]0;pwned\x07\x1b[2J[4].

## Sources
[1] Eiffel Tower facts: {ORIGIN}/pages/eiffel.html
[2] The Louvre museum: {ORIGIN}/pages/louvre.html
[3] The river Rhine: {ORIGIN}/pages/rhine.html
[4] Delta notes: {ORIGIN}/pages/evil.html
"""
TASK = {"id": "landmarks", "query": "A brief on landmarks of Western Europe",
        "report": "landmarks.md",
        "checklist": [{"id": "k1", "text": "Gives the Eiffel Tower's completion year."},
                      {"id": "k2", "text": "Names the sea the Rhine flows into."}],
        "subtasks": [
            {"id": "s1", "instruction": "Gives the Eiffel Tower's completion year.",
             "factuality": ["When was the Eiffel Tower completed?"], "importance": "P0"},
            {"id": "s2", "instruction": "Describes the Rhine.", "importance": "P1",
             "rationality": "Explains why the Rhine matters."}]}


def evil_page() -> object:
    return html_page("Delta notes", f"The Rhine delta {INJECTION} lies in the Netherlands "
                     "and the river flows about 1,230 kilometres to the North Sea.",
                     "Rotterdam sits on the delta.")


def web_pages() -> dict[str, object]:
    pages = default_pages()
    pages["/pages/evil.html"] = evil_page()
    return pages


@dataclass
class Runs:
    bundle: Path
    tasks: Path
    verify: Path
    run: Path


def make_bundle(tmp: Path, web: FakeWeb) -> tuple[Path, Path]:
    report = tmp / "landmarks.md"
    report.write_text(REPORT.replace("{ORIGIN}", web.origin_url), encoding="utf-8")
    tasks = tmp / "tasks.json"
    tasks.write_text(json.dumps(TASK), encoding="utf-8")
    bundle = tmp / "sysA" / "bundle"
    snapshot_report(report, bundle, scripted_judge(),
                    fast_options(web, reader="direct", top_k=0), tasks, extractor="sentences")
    return bundle, tasks


def make_runs(tmp: Path, embedder: Embedder, protocols: list[str] | None = None,
              judge_name: str = "fake", run_name: str = "run") -> Runs:
    """Capture the report with the fakes, then (offline) verify and evaluate it."""
    with FakeWeb(pages=web_pages()) as web:  # type: ignore[arg-type]
        bundle, tasks = make_bundle(tmp, web)
    with FakeJudgeServer() as server:
        judge = open_judge(None, server.url, judge_name, tmp / "verify" / "ledger.sqlite",
                           "reuse")
        write_results(verify_claims(bundle, judge, embedder, cache_dir=tmp / "verify" / "faiss"),
                      tmp / "verify")
        judge.close()
        run = tmp / run_name
        judge = open_judge(None, server.url, judge_name, run / "ledger.sqlite", "reuse")
        evaluate_bundles([bundle], tasks, protocols or ["dailyreport", "dr3", "deepeval"],
                         [(judge_name, judge)], run, embedder)
        judge.close()
    return Runs(bundle, tasks, tmp / "verify", run)
