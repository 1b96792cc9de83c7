"""How the audit page copes with a large run: 100 reports x 100 claims (a synthetic audit
with 10 evidence pages of ~6 KB per report), written and opened in Debian's chromium.

    .venv/bin/python scripts/bench_audit.py [--reports 100] [--claims 100]

Prints the page size, the time to write it, and in the browser the time until the page
has loaded (scores, chart and report list drawn), to open one report (its text with every
claim highlighted) and to open one claim's evidence.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from ambereval.engine.runs.audit_data import Audit, AuditItem, AuditReport, Evidence, Passage
from ambereval.engine.runs.audit_html import write_audit_html

WORDS = ["river", "tower", "museum", "opened", "completed", "metres", "north", "sea", "city",
         "report", "claim", "source", "evidence", "page", "capture", "year", "million",
         "visitors", "built", "designed", "engineer"]


def sentence(rng: random.Random, n: int = 14) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def synthetic(reports: int, claims: int, pages_per_report: int = 10) -> Audit:
    rng = random.Random(0)
    pages: dict[str, dict] = {}
    reps = []
    outcomes = ("pass", "fail", "unknown", "partial")
    for r in range(reports):
        page_ids = []
        for p in range(pages_per_report):
            rid = f"<urn:uuid:{r:04d}-{p:04d}>"
            text = "\n\n".join(sentence(rng, 40) for _ in range(25))
            pages[rid] = {"record_id": rid, "url": f"https://example.org/{r}/{p}",
                          "title": f"Page {p}", "captured_at": "2026-01-01T00:00:00Z",
                          "capture_id": f"cap-{r:04d}{p:04d}", "warc_file": "a.warc.gz",
                          "warc_offset": 1000 * p, "response_record_id": None,
                          "payload_sha256": "0" * 64, "text": text}
            page_ids.append(rid)
        sentences = [sentence(rng) for _ in range(claims)]
        text = "# Report\n\n" + " ".join(sentences)
        items = []
        pos = len("# Report\n\n")
        for c, s in enumerate(sentences):
            rid = page_ids[c % pages_per_report]
            ev = Evidence(url=pages[rid]["url"], capture_id=pages[rid]["capture_id"],
                          captured_at="2026-01-01T00:00:00Z", warc_file="a.warc.gz",
                          warc_record_id=rid, answer="true", quote="",
                          ledger_key=f"{r:04d}{c:04d}" + "0" * 56,
                          passages=[Passage(0, 300, 0.8), Passage(900, 1200, 0.7)])
            outcome = outcomes[c % len(outcomes)]
            items.append(AuditItem(id=f"c{c + 1}", protocol="verify", dimension="claims",
                                   judge="judge", label=outcome, outcome=outcome, text=s,
                                   span=[pos, pos + len(s)], evidence=[ev],
                                   ledger_keys=[ev.ledger_key]))
            pos += len(s) + 1
        reps.append(AuditReport(key=f"r{r}", name=f"report-{r:03d}.md", report_id=None,
                                bundle=f"b{r}", system=f"system-{r % 4}", task=None,
                                text=text, scores={"verify.correct": 25.0}, items=items))
    systems = [{"system": f"system-{s}", "reports": reports // 4, "verify.correct": 25.0}
               for s in range(4)]
    return Audit("verify", "synthetic", ["verify.correct"], systems, {"judge": "x"}, reps,
                 pages=pages, ledger={})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reports", type=int, default=100)
    ap.add_argument("--claims", type=int, default=100)
    args = ap.parse_args()
    audit = synthetic(args.reports, args.claims)
    out = Path(tempfile.mkdtemp()) / "audit.html"
    t0 = time.perf_counter()
    write_audit_html(audit, out)
    written = time.perf_counter() - t0
    print(f"{args.reports} reports x {args.claims} claims: page {out.stat().st_size / 1e6:.1f} "
          f"MB, written in {written:.2f} s")
    chromium = shutil.which("chromium")
    if chromium is None:
        print("no chromium: browser timings skipped")
        return
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                     args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        t0 = time.perf_counter()
        page.goto(out.as_uri())
        page.wait_for_selector("nav.reports button")
        loaded = time.perf_counter() - t0
        t0 = time.perf_counter()
        page.locator("nav.reports button").nth(args.reports // 2).click()
        page.wait_for_selector(".hl")
        report = time.perf_counter() - t0
        t0 = time.perf_counter()
        page.locator(".hl").nth(args.claims // 2).click()
        page.wait_for_selector("#evidence mark")
        claim = time.perf_counter() - t0
        browser.close()
    print(f"chromium: page loaded in {loaded:.2f} s, a report opened in {report:.2f} s, "
          f"a claim's evidence in {claim:.2f} s")


if __name__ == "__main__":
    main()
