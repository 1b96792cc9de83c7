"""Shared pieces of the ``amber serve`` tests: bundles captured from the loopback fakes,
and the evidence of a bundle as comparable data."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path
from typing import Any

from ambereval.snapshots import Bundle, CaptureOptions, RetryPolicy, capture_claims, capture_urls
from ambereval.snapshots.capture.claims_input import ClaimInput

from fakeweb import FakeWeb

FAST = RetryPolicy(attempts=2, backoff=0.01, timeout=5.0)


def options(env: dict[str, str], **kw: Any) -> CaptureOptions:
    # loopback pages are the test site: lift the capture's private-address rule
    policy = kw.pop("policy", FAST)
    return CaptureOptions.from_env({**env, "AMBER_ALLOW_PRIVATE_ADDRESSES": "1"},
                                   policy=policy, serper_rate=None, reader_rate=None, **kw)


def claims_for(web: FakeWeb) -> list[ClaimInput]:
    return [
        ClaimInput(id="c1", text="The Eiffel Tower was completed in 1889.",
                   urls=(web.url("/pages/eiffel.html"),),
                   queries=("Eiffel Tower completed 1889",)),
        ClaimInput(id="c2", text="The Louvre opened as a public museum in 1793.",
                   urls=(web.url("/pages/louvre.html"), web.url("/missing")),
                   queries=("Louvre public museum 1793",)),
        ClaimInput(id="c3", text="China is the largest producer of tea.",
                   queries=("largest tea producer",)),
    ]


def jina_bundle(web: FakeWeb, out: Path) -> Path:
    """Searches (Serper fake) and pages read through the Jina fake, one failure."""
    capture_claims(out, claims_for(web), options(web.env(), reader="jina"))
    return out


def direct_bundle(web: FakeWeb, out: Path) -> Path:
    """Pages fetched directly: a redirect chain, a gzip body, a 404, a plain-text file,
    two addresses with the same body (the second stored as a revisit), and a refused
    connection (no response at all)."""
    urls = [web.url(p) for p in ("/pages/louvre.html", "/redirect", "/missing",
                                 "/gzip/pages/tea.html", "/pages/notes.txt",
                                 "/pages/dup-a.html", "/pages/dup-b.html")]
    urls.append(f"http://127.0.0.1:{free_port()}/refused")
    capture_urls(out, urls, options(web.env(), reader="direct"))
    return out


def evidence(root: Path) -> dict[str, Any]:
    """What a capture found, independent of when and through which base URL: searches
    with their parameters and results, pages with state, status, error and text,
    failures, and the claim links."""
    with Bundle.open(root) as bundle:
        idx = bundle.index
        searches = {}
        for row in idx.rows("SELECT * FROM captures WHERE kind = 'search'"):
            params = json.loads(bundle.read_record(row["request_record"]).body)
            results = idx.rows("SELECT rank, title, link, snippet, date, position FROM "
                               "search_results WHERE capture_id = ? ORDER BY rank", [row["id"]])
            searches[json.dumps(params, sort_keys=True)] = {
                "state": row["state"], "status": row["status"], "error": row["error"],
                "results": results}
        pages = {}
        for row in idx.rows("SELECT c.*, t.sha256 AS text_sha, t.title, t.status AS "
                            "text_status, t.chars FROM captures c LEFT JOIN texts t "
                            "ON t.capture_id = c.id WHERE c.kind = 'page'"):
            pages[row["url"]] = {k: row[k] for k in (
                "state", "status", "error", "permanent", "final_url", "text_sha", "title",
                "text_status", "chars", "payload_sha256")}
        failures = sorted((r["url"], r["status"], r["error"], r["permanent"])
                          for r in idx.rows("SELECT * FROM failures"))
        links = sorted((r["claim_id"], r["source"], r["query_id"] or "", r["rank"] or 0,
                        r["url"]) for r in idx.rows("SELECT * FROM links"))
    return {"searches": searches, "pages": pages, "failures": failures, "links": links}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def netns_available() -> bool:
    """Whether this machine lets a test make a network namespace (``unshare -n``)."""
    try:
        return subprocess.run(["unshare", "-n", "true"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
