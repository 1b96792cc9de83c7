"""Capturing claims against the loopback fakes: links, failures, dedup, resume, faults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ambereval.snapshots import Bundle, ClaimInput, capture_claims, capture_urls, verify_bundle

from conftest import example_claims, fast_options, run_amber
from fakeweb import FakeWeb


def claims_of(web: FakeWeb) -> list[ClaimInput]:
    return [ClaimInput(c["id"], c["text"], tuple(c.get("urls", ())),  # type: ignore[arg-type]
                       tuple(c.get("queries", ())))  # type: ignore[arg-type]
            for c in example_claims(web)]


@pytest.mark.parametrize("reader", ["direct", "jina"])
def test_capture_links_claims_queries_results_and_captures(web: FakeWeb, tmp_path: Path,
                                                           reader: str) -> None:
    out = tmp_path / "b"
    summary = capture_claims(out, claims_of(web), fast_options(web, reader=reader, top_k=2))
    assert summary.searches == 2
    assert summary.failed == 1  # /missing
    with Bundle.open(out) as b:
        links = b.links_for_claim("c1")
        cited = [lk for lk in links if lk["source"] == "cited"]
        found = [lk for lk in links if lk["source"] == "search"]
        assert [lk["url"] for lk in cited] == [web.url("/pages/eiffel.html")]
        assert found and all(lk["query_id"] == "c1#q1" for lk in found)
        assert [lk["rank"] for lk in found] == list(range(1, len(found) + 1))
        assert found[0]["url"] == web.url("/pages/eiffel.html")  # the best match ranks first
        for link in links:
            assert b.index.capture(link["capture_id"]) is not None
            meta = b.read_record(link["record_id"])
            assert meta.type == "metadata"
            assert json.loads(meta.body)["claim"]["id"] == "c1"
        results = b.index.rows("SELECT * FROM search_results ORDER BY capture_id, rank")
        assert all(r["link"].startswith(web.origin_url) for r in results)
        stored = b.read_capture(web.url("/pages/eiffel.html"))
        assert stored.status == 200 and "completed in 1889" in (stored.text or "")
        assert stored.title == "Eiffel Tower facts"
        light = b.read_capture(web.url("/pages/eiffel.html"), body=False)
        assert light.body == b"" and light.response_headers == [] and stored.body
        assert (light.text, light.title, light.text_record, light.warc_file, light.offset) == \
            (stored.text, stored.title, stored.text_record, stored.warc_file, stored.offset)
    assert verify_bundle(out).ok


def test_whole_serper_response_is_kept(web: FakeWeb, tmp_path: Path) -> None:
    out = tmp_path / "b"
    capture_claims(out, claims_of(web), fast_options(web, reader="direct"))
    with Bundle.open(out) as b:
        search = b.index.one("SELECT * FROM captures WHERE kind = 'search' ORDER BY id LIMIT 1")
        doc = json.loads(b.read_capture(search["id"]).body)
        assert {"organic", "answerBox", "searchParameters"} <= set(doc)
        first = doc["organic"][0]
        assert {"title", "link", "snippet", "position"} <= set(first)
        request = b.read_record(search["request_record"])
        sent = json.loads(request.body)
        assert sent["gl"] == "us" and sent["hl"] == "en" and sent["num"] == 10


def test_failed_captures_are_recorded_never_passed_as_text(web: FakeWeb, tmp_path: Path) -> None:
    out = tmp_path / "b"
    urls = [web.url("/missing"), web.url("/gone"), "http://127.0.0.1:9/refused",
            web.url("/loop")]
    summary = capture_urls(out, urls, fast_options(web, reader="direct"))
    assert summary.failed == 4 and summary.captured == 0
    with Bundle.open(out) as b:
        missing = b.read_capture(web.url("/missing"))
        assert missing.state == "failed" and missing.status == 404 and missing.text is None
        assert b"404 Not Found" in missing.body  # the error page is archived, as evidence
        refused = b.find_capture("http://127.0.0.1:9/refused")
        assert refused["state"] == "failed" and refused["status"] is None
        assert refused["permanent"] == 0  # a rerun will try again
        assert b.index.one("SELECT COUNT(*) AS n FROM texts")["n"] == 0
        failures = b.index.rows("SELECT * FROM failures ORDER BY url")
        assert len(failures) == 4
        for f in failures:
            assert b.read_record(f["record_id"]).type == "metadata"
    assert verify_bundle(out).ok


def test_jina_target_404_is_a_failed_capture(web: FakeWeb, tmp_path: Path) -> None:
    out = tmp_path / "b"
    capture_urls(out, [web.url("/missing")], fast_options(web, reader="jina"))
    with Bundle.open(out) as b:
        cap = b.read_capture(web.url("/missing"))
        assert cap.state == "failed" and cap.status == 404 and cap.text is None


def test_a_reader_error_says_what_the_reader_said(web: FakeWeb, tmp_path: Path) -> None:
    dead = "http://127.0.0.1:9/gone"  # the reader cannot reach it: HTTP 422 with a message
    summary = capture_urls(tmp_path / "b", [dead], fast_options(web, reader="jina"))
    [failure] = summary.failures
    assert failure["error"] == (f"HTTP 422: Failed to goto {dead}: "
                                "net::ERR_CONNECTION_REFUSED")


def test_text_status_for_empty_plain_and_unsupported_pages(web: FakeWeb, tmp_path: Path) -> None:
    out = tmp_path / "b"
    urls = [web.url(p) for p in ("/pages/empty.html", "/pages/notes.txt", "/pages/report.pdf")]
    capture_urls(out, urls, fast_options(web, reader="direct"))
    with Bundle.open(out) as b:
        assert b.read_capture(urls[0]).text_status == "empty"
        plain = b.read_capture(urls[1])
        assert plain.text_status == "ok" and plain.text.startswith("Plain text notes")
        assert b.read_capture(urls[2]).text_status == "unsupported"


def test_same_request_captured_once_and_same_payload_stored_once(web: FakeWeb,
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "b"
    claims = [ClaimInput("a", "x", (web.url("/pages/dup-a.html"), web.url("/pages/tea.html"))),
              ClaimInput("b", "y", (web.url("/pages/tea.html"), web.url("/pages/dup-b.html")))]
    summary = capture_claims(out, claims, fast_options(web, reader="direct"))
    assert web.hits("origin", "/pages/tea.html") == 1
    assert summary.deduplicated == 1
    with Bundle.open(out) as b:
        a = b.find_capture(web.url("/pages/dup-a.html"))
        b_row = b.find_capture(web.url("/pages/dup-b.html"))
        dup, orig = (a, b_row) if a["revisit_of"] else (b_row, a)
        assert dup["revisit_of"] == orig["id"]
        assert b.read_record(dup["response_record"]).type == "revisit"
        assert b.read_capture(dup["id"]).text == b.read_capture(orig["id"]).text
        assert b.index.one("SELECT COUNT(*) AS n FROM records WHERE type = 'conversion'")["n"] == 2
    assert verify_bundle(out).ok


def test_redirects_and_gzip_are_archived_faithfully(web: FakeWeb, tmp_path: Path) -> None:
    out = tmp_path / "b"
    capture_urls(out, [web.url("/redirect"), web.url("/gzip/pages/tea.html")],
                 fast_options(web, reader="direct"))
    with Bundle.open(out) as b:
        hop = b.find_capture(web.url("/redirect"))
        assert hop["final_url"] == web.url("/pages/louvre.html")
        responses = b.index.rows("SELECT target_uri FROM records WHERE type = 'response' "
                                 "ORDER BY target_uri")
        assert {r["target_uri"] for r in responses} >= {web.url("/redirect"),
                                                        web.url("/pages/louvre.html")}
        assert b.read_capture(web.url("/redirect")).final_url == web.url("/pages/louvre.html")
        gz = b.read_capture(web.url("/gzip/pages/tea.html"))
        assert "largest producer of tea" in (gz.text or "")
        assert ("Content-Encoding", "gzip") in gz.response_headers
        assert gz.final_url is None  # not redirected
    shown = run_amber("bundle", "show", str(out), web.url("/redirect"))
    assert f"final_url: {web.url('/pages/louvre.html')}" in shown.stdout.splitlines()
    assert "final_url" not in run_amber("bundle", "show", str(out),
                                        web.url("/gzip/pages/tea.html")).stdout


def test_rerun_fetches_only_what_is_missing(web: FakeWeb, tmp_path: Path) -> None:
    out = tmp_path / "b"
    opts = fast_options(web, reader="direct")
    web.inject("origin", "500", times=10, match="/pages/louvre.html")
    first = capture_claims(out, claims_of(web), opts)
    assert any(f["url"] == web.url("/pages/louvre.html") for f in first.failures)
    before = len(web.seen)
    web.faults.clear()
    second = capture_claims(out, claims_of(web), opts)
    fetched = [s.path for s in web.seen[before:]]
    assert fetched == ["/pages/louvre.html"]  # the transient failure, and nothing else
    assert second.captured == 1 and second.failed == 0
    third = capture_claims(out, claims_of(web), opts)
    assert third.captured == 0 and len(web.seen) == before + 1
    with Bundle.open(out) as b:
        assert b.read_capture(web.url("/pages/louvre.html")).state == "ok"
        assert b.index.one("SELECT COUNT(*) AS n FROM failures WHERE url LIKE '%louvre%'")["n"] == 1
    assert verify_bundle(out).ok


@pytest.mark.parametrize("kind", ["429", "500", "timeout", "reset", "malformed", "slow"])
def test_search_faults_are_retried(web: FakeWeb, tmp_path: Path, kind: str) -> None:
    web.inject("serper", kind, times=1, delay=1.5 if kind == "timeout" else 0.4)
    out = tmp_path / "b"
    claims = [ClaimInput("c", "Rhine", queries=("Rhine North Sea",))]
    summary = capture_claims(out, claims, fast_options(web, reader="direct", top_k=1))
    assert summary.failed == 0
    assert web.hits("serper") == 2 if kind != "slow" else web.hits("serper") == 1
    with Bundle.open(out) as b:
        assert b.index.one("SELECT COUNT(*) AS n FROM search_results")["n"] >= 1


@pytest.mark.parametrize("kind", ["429", "500", "timeout"])
def test_reader_faults_are_retried(web: FakeWeb, tmp_path: Path, kind: str) -> None:
    web.inject("jina", kind, times=2, delay=1.5)
    out = tmp_path / "b"
    summary = capture_urls(out, [web.url("/pages/rhine.html")], fast_options(web, reader="jina"))
    assert summary.captured == 1 and web.hits("jina") == 3


def test_exhausted_retries_record_a_transient_failure(web: FakeWeb, tmp_path: Path) -> None:
    web.inject("serper", "malformed", times=5)
    out = tmp_path / "b"
    summary = capture_claims(out, [ClaimInput("c", "t", queries=("tea",))],
                             fast_options(web, reader="direct"))
    assert summary.failed == 1
    assert summary.failures[0]["error"] == "malformed JSON from search service"
    with Bundle.open(out) as b:
        row = b.index.one("SELECT * FROM captures WHERE kind = 'search'")
        assert row["state"] == "failed" and row["permanent"] == 0 and row["attempts"] == 3


def test_changed_claim_gets_new_links(web: FakeWeb, tmp_path: Path) -> None:
    out = tmp_path / "b"
    opts = fast_options(web, reader="direct")
    capture_claims(out, [ClaimInput("c", "t", (web.url("/pages/tea.html"),))], opts)
    capture_claims(out, [ClaimInput("c", "t", (web.url("/pages/rhine.html"),))], opts)
    with Bundle.open(out) as b:
        assert [lk["url"] for lk in b.links_for_claim("c")] == [web.url("/pages/rhine.html")]
        metas = b.index.one("SELECT COUNT(*) AS n FROM records WHERE type = 'metadata' "
                            "AND target_uri = 'urn:amber:claim:c'")["n"]
        assert metas == 2  # both link statements stay in the archive


def test_secret_options_and_url_credentials_are_not_archived(web: FakeWeb, tmp_path: Path) -> None:
    import gzip

    out = tmp_path / "b"
    opts = fast_options(web, reader="jina", jina_options={"X-Set-Cookie": "sid=TOPSECRET",
                                                         "X-Return-Format": "markdown"})
    capture_urls(out, [web.url("/pages/tea.html")], opts)
    blob = b"".join(gzip.decompress(p.read_bytes()) for p in (out / "archive").glob("*.gz"))
    assert b"TOPSECRET" not in blob and b"X-Return-Format" in blob


def test_corrupt_content_encoding_is_a_failed_capture(web: FakeWeb, tmp_path: Path) -> None:
    from fakeweb import Page

    web.pages["/pages/bad-gzip.html"] = Page(b"not gzip at all",
                                             headers={"Content-Encoding": "gzip"})
    summary = capture_urls(tmp_path / "b", [web.url("/pages/bad-gzip.html")],
                           fast_options(web, reader="direct"))
    assert summary.failed == 1 and "does not decode" in summary.failures[0]["error"]
