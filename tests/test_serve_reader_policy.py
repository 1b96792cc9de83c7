"""The reader's header policy in ``amber serve``: a benchmark's own scraper, sending its
own reader options, is answered from a bundle captured with Amber's defaults (the
nearest capture, marked) and exactly from one captured with the benchmark's profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from serve_helpers import options

from ambereval.engine.serve.index import FrozenWeb
from ambereval.engine.serve.log import ServeLog
from ambereval.engine.serve.server import BaseUrlServer
from ambereval.snapshots import capture_urls
from ambereval.snapshots.capture.jina import reader_headers

from conftest import run_amber
from fakeweb import FakeWeb

#: what DeepResearch Bench's FACT scraper sends with every read (its utils/api.py)
DRB_HEADERS = {"Accept": "application/json", "Authorization": "jina_0123456789abcdef",
               "X-Timeout": "60000", "X-With-Generated-Alt": "true"}


def drb_read(base: str, url: str) -> dict:
    """A read the way that scraper does it: requests, status 200 or failure, the
    envelope's url/title/description/content indexed directly."""
    resp = requests.get(f"{base}/{url}", headers=DRB_HEADERS, timeout=30)
    assert resp.status_code == 200, resp.text
    data = resp.json()["data"]
    return {"url": data["url"], "title": data["title"], "description": data["description"],
            "content": data["content"], "match": resp.headers["X-Amber-Match"],
            "differ": resp.headers.get("X-Amber-Options-Differ")}


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("policy")
    with FakeWeb() as web:
        urls = [web.url("/pages/eiffel.html"), web.url("/pages/louvre.html")]
        capture_urls(root / "plain", urls, options(web.env(), reader="jina"))
        capture_urls(root / "drb", urls, options(
            web.env(), reader="jina", jina_options=reader_headers(["deepresearch-bench"])))
    with FakeWeb(jina_text_only=True) as web:
        text_urls = [web.url("/pages/eiffel.html")]
        capture_urls(root / "text", text_urls, options(web.env(), reader="jina"))
    return {"plain": root / "plain", "drb": root / "drb", "text": root / "text",
            "urls": urls, "text_urls": text_urls}  # type: ignore[dict-item]


def test_a_benchmark_scraper_gets_every_page_from_a_default_capture(bundles: dict,
                                                                   tmp_path: Path) -> None:
    log = ServeLog(tmp_path / "misses.jsonl")
    with BaseUrlServer(FrozenWeb([bundles["plain"]]), log=log) as server:
        pages = [drb_read(server.url, url) for url in bundles["urls"]]
    assert [p["match"] for p in pages] == ["nearest", "nearest"]
    assert {p["differ"] for p in pages} == {"x-with-generated-alt"}
    assert "completed in 1889" in pages[0]["content"] and pages[0]["url"] == bundles["urls"][0]
    assert log.summary()["nearest"] == 2 and log.summary()["miss"] == 0
    assert "2 nearest" in log.line()
    noted = [json.loads(line) for line in (tmp_path / "misses.jsonl").read_text().splitlines()]
    assert [n["match"] for n in noted] == ["nearest", "nearest"]
    assert noted[0]["options_differ"] == ["x-with-generated-alt"]


def test_strict_keeps_the_refusal(bundles: dict) -> None:
    with BaseUrlServer(FrozenWeb([bundles["plain"]], strict=True)) as server:
        resp = requests.get(f"{server.url}/{bundles['urls'][0]}", headers=DRB_HEADERS,
                            timeout=30)
    assert resp.status_code == 404 and "other reader options" in resp.headers["X-Amber-Miss"]


def test_a_capture_with_the_benchmark_profile_answers_exactly(bundles: dict) -> None:
    with BaseUrlServer(FrozenWeb([bundles["plain"], bundles["drb"]])) as server:
        pages = [drb_read(server.url, url) for url in bundles["urls"]]
        # Amber's own reads (no options) still get the default capture
        plain = requests.get(f"{server.url}/{bundles['urls'][0]}",
                             headers={"Accept": "application/json"}, timeout=30)
    assert [p["match"] for p in pages] == ["exact", "exact"]
    assert pages[0]["differ"] is None
    assert plain.headers["X-Amber-Match"] == "exact"
    assert plain.headers["X-Amber-Bundle"] == str(bundles["plain"])


def test_transport_headers_never_take_part_in_matching(bundles: dict) -> None:
    transport = {"X-Timeout": "5", "X-No-Cache": "true", "X-Cache-Tolerance": "0",
                 "X-Respond-Timing": "network-idle", "X-Proxy-Url": "http://p:1",
                 "X-Stainless-Retry-Count": "0", "Authorization": "Bearer k"}
    with BaseUrlServer(FrozenWeb([bundles["drb"]], strict=True)) as server:
        resp = requests.get(f"{server.url}/{bundles['urls'][0]}", timeout=30, headers={
            "Accept": "application/json", "X-With-Generated-Alt": "true", **transport})
        shaped = requests.get(f"{server.url}/{bundles['urls'][0]}", timeout=30, headers={
            "Accept": "application/json", "X-With-Generated-Alt": "true",
            "X-Target-Selector": "main"})
    assert resp.status_code == 200 and resp.headers["X-Amber-Match"] == "exact"
    assert shaped.status_code == 404  # an output-shaping option is compared


def test_a_text_capture_answers_a_json_request_with_a_rendered_envelope(bundles: dict
                                                                         ) -> None:
    with BaseUrlServer(FrozenWeb([bundles["text"]])) as server:
        text = requests.get(f"{server.url}/{bundles['text_urls'][0]}", timeout=30)
        page = drb_read(server.url, bundles["text_urls"][0])
        resp = requests.get(f"{server.url}/{bundles['text_urls'][0]}", timeout=30,
                            headers={"Accept": "application/json"})
    assert text.headers["X-Amber-Match"] == "exact"
    assert text.text.startswith("Title: ") and "Markdown Content:\n" in text.text
    assert resp.headers["X-Amber-Match"] == "rendered"
    data = resp.json()["data"]
    assert data["url"] == bundles["text_urls"][0] and data["description"] == ""
    assert data["publishedTime"] == "" and data["usage"] == {}
    assert text.text == f"Title: {data['title']}\n\nURL Source: {data['url']}\n\n" \
                        f"Markdown Content:\n{data['content']}\n"
    assert page["match"] == "nearest" and "completed in 1889" in page["content"]


def test_reader_header_flag_takes_headers_and_profiles(tmp_path: Path) -> None:
    assert reader_headers(["drb-fact", "X-Locale: fr", "X-Engine=browser"]) == {
        "X-With-Generated-Alt": "true", "X-Locale": "fr", "X-Engine": "browser"}
    with pytest.raises(ValueError, match="neither an X-Name: value header nor a reader"):
        reader_headers(["deep-research"])
    urls = tmp_path / "urls.txt"
    urls.write_text("https://example.org/a\n")
    bad = run_amber("snapshot", "urls", str(urls), "--out", str(tmp_path / "b"),
                    "--reader-header", "Accept: text/plain")
    assert bad.returncode == 2 and "reader options are X-* headers" in bad.stderr
    assert "Traceback" not in bad.stderr
    with FakeWeb() as web:
        (tmp_path / "u2.txt").write_text(web.url("/pages/eiffel.html") + "\n")
        done = run_amber("snapshot", "urls", str(tmp_path / "u2.txt"), "--out",
                         str(tmp_path / "c"), "--reader-header", "deepresearch-bench",
                         "--json", env=web.env())
        assert done.returncode == 0, done.stderr
        assert web.seen and any(s.headers.get("X-With-Generated-Alt") == "true"
                                for s in web.seen if s.service == "jina")
