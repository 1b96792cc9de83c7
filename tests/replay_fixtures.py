"""The landmarks report snapshotted over fake pages whose Eiffel page is long enough
(many chunks) for retrieval to choose among: the bundle the replay tests evaluate."""

from __future__ import annotations

import json
from pathlib import Path

from scripted_judge import scripted_judge

from conftest import fast_options
from fakeweb import FakeWeb, default_pages, html_page

FIXTURES = Path(__file__).parent / "fixtures"


def long_pages() -> dict:
    pages = default_pages()
    filler = [f"Section {i}: the {w} of the city is described here at length, with dates, "
              f"names and places, over and over, so the page holds many chunks. " * 4
              for i, w in enumerate(["bridges", "markets", "parks", "trams", "schools",
                                     "bakeries", "museums", "rivers"])]
    pages["/pages/eiffel.html"] = html_page(
        "Eiffel Tower facts", *filler[:4],
        "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.", *filler[4:])
    return pages


def landmarks_bundle(tmp: Path, report_text: str | None = None) -> tuple[Path, Path]:
    """The bundle and task file; ``report_text`` replaces the fixture report (``{ORIGIN}``
    stands for the fake web's origin)."""
    web = FakeWeb(long_pages())
    web.start()
    report = tmp / "landmarks.md"
    text = report_text or (FIXTURES / "report.md").read_text()
    report.write_text(text.replace("{ORIGIN}", web.origin_url))
    task = {"format": "amber-task/1", "tasks": [{
        "id": "landmarks", "query": "Landmarks brief", "report": "landmarks.md",
        "evaluation_date": "2025-01-01",
        "subtasks": [{"id": "s1", "instruction": "Gives the Eiffel Tower's completion year.",
                      "factuality": ["When was the Eiffel Tower completed?"],
                      "importance": "P0"}]}]}
    tasks = tmp / "tasks.json"
    tasks.write_text(json.dumps(task))
    bundle = tmp / "bundle"
    judge = scripted_judge({"Claim: The Eiffel": {"question": 1, "answer": "true"}})
    from ambereval.engine.snapshot_report import snapshot_report
    try:
        snapshot_report(report, bundle, judge, fast_options(web, reader="direct", top_k=0),
                        tasks, extractor="sentences")
    finally:
        web.stop()
    return bundle, tasks
