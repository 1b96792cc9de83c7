"""The audit page in a real headless browser: Debian's chromium driven by Playwright (never
a downloaded browser). It loads from file:// with no console error and no request, a
click on a claim reveals the captured evidence with the passage marked, the injected
scripts in captured pages and in the report stay inert, and a screenshot is saved."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from auditruns import Runs, make_runs

from ambereval.engine.runs.audit import load_audit
from ambereval.engine.runs.audit_html import write_audit_html
from ambereval.models import Embedder

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip("no chromium installed (scripts/setup_browser.sh installs Debian's "
                    "package as root; elsewhere install chromium to run the browser tests)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is in the dev extra")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return make_runs(tmp_path_factory.mktemp("audit-browser"), Embedder())


def open_page(browser: Any, path: Path) -> tuple[Any, list[str], list[str]]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, errors, requests


def test_audit_page_in_chromium(browser: Any, runs: Runs, tmp_path: Path) -> None:
    path = write_audit_html(load_audit(runs.run), tmp_path / "audit.html")
    page, errors, requests = open_page(browser, path)
    assert requests == [path.as_uri()]  # the page itself, nothing else
    assert page.locator("#scores svg").count() >= 3  # one chart per protocol
    assert page.locator("#scores th", has_text="sysA (1)").count() == 1
    assert page.locator("#scores td", has_text="deepeval.coverage").count() == 1
    # the only report opens by itself; its claims are highlighted by verdict
    assert page.locator(".hl").count() >= 3
    fa = page.locator("li[data-item='fa.1']")
    fa.click()
    evidence = page.locator("#evidence")
    assert evidence.locator(".ev").count() >= 1
    assert evidence.locator("mark").count() >= 1
    assert "WARC file" in evidence.inner_text() and "urn:uuid:" in evidence.inner_text()
    page.locator(".hl").first.click()
    assert evidence.locator("h3").count() == 1
    # the injected page: shown as text, never run
    evil = page.locator("li", has_text="Its delta is described").first
    evil.click()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert "<script>window.__pwned" in page.locator("#reporttext").inner_text()
    page.screenshot(path=str(tmp_path / "audit.png"), full_page=False)
    # the address names the claim shown: a link to it opens that claim's evidence
    fa.click()
    assert page.url.endswith("#r=0&i=fa.1&j=fake")
    linked = browser.new_page()
    linked.goto(page.url)
    linked.wait_for_selector("#evidence .ev")
    assert "fa.1" in linked.locator("#evidence h3").inner_text()
    linked.close()
    assert (tmp_path / "audit.png").stat().st_size > 10_000
    assert errors == [] and requests == [path.as_uri()]
    if target := os.environ.get("AMBER_DOCS_SCREENSHOT"):
        fa.click()  # the picture of the docs: scores, the report, one claim's evidence
        page.wait_for_selector("#evidence .ev")
        page.evaluate("window.scrollTo(0, 0)")  # the scores first, as a reader sees them
        page.screenshot(path=target, full_page=False)
    page.close()


def test_verify_audit_page_in_chromium(browser: Any, runs: Runs, tmp_path: Path) -> None:
    audit = load_audit(runs.verify)
    path = write_audit_html(audit, tmp_path / "audit.html")
    page, errors, requests = open_page(browser, path)
    # the fake judge's answers hash the prompt, whose page URL carries the fake web's
    # port: which verdicts come out varies by run, so take the first judged claim
    judged = next(i for i in audit.reports[0].items if i.evidence and i.span)
    claim = page.locator(f'.hl[data-item="{judged.id}"]').first
    claim.click()
    shown = page.locator("#evidence").inner_text()
    assert "Evidence 1" in shown and "/pages/" in shown
    assert page.locator("#evidence mark").count() >= 1
    page.screenshot(path=str(tmp_path / "verify.png"))
    assert errors == [] and requests == [path.as_uri()]
    page.close()
