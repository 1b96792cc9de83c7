"""Text extraction quality on real pages (../shared/data/html/trafilatura_eval)."""

from __future__ import annotations

import json

from ambereval.snapshots.capture.extract import extract_text

from conftest import shared


def test_extraction_keeps_the_article_and_drops_the_boilerplate() -> None:
    base = shared("html", "trafilatura_eval")
    cases = json.loads((base / "evaldata.subset.json").read_text(encoding="utf-8"))
    kept = kept_total = dropped = dropped_total = 0
    for case in cases.values():
        page = base / "html" / case["file"]
        text = extract_text(page.read_bytes(), "text/html", "").text
        kept += sum(s in text for s in case.get("with", []))
        kept_total += len(case.get("with", []))
        dropped += sum(s not in text for s in case.get("without", []))
        dropped_total += len(case.get("without", []))
    assert kept_total > 100 and dropped_total > 100
    # measured: 116/122 kept, 105/118 dropped with trafilatura 2.3
    assert kept / kept_total >= 0.9
    assert dropped / dropped_total >= 0.85


def test_extraction_is_deterministic() -> None:
    base = shared("html", "trafilatura_eval", "html")
    page = sorted(base.glob("*.html"))[0].read_bytes()
    assert extract_text(page, "text/html", "").text == extract_text(page, "text/html", "").text
