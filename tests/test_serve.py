"""``amber serve`` base-URL mode: Serper and Jina Reader answered from bundles, over real
HTTP on loopback; the capture round trip; misses; conflicts; the CLI's life cycle."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from serve_helpers import claims_for, evidence, free_port, jina_bundle, options

from ambereval.engine.serve.index import FrozenWeb
from ambereval.engine.serve.log import ServeLog
from ambereval.engine.serve.server import BaseUrlServer
from ambereval.errors import BundleError, ConfigError
from ambereval.snapshots import Bundle, capture_claims, capture_urls

from fakeweb import FakeWeb, Page, default_pages


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A bundle captured from the fakes, which are stopped before anything is served."""
    root = tmp_path_factory.mktemp("serve")
    with FakeWeb() as web:
        jina_bundle(web, root / "a")
        urls = {"eiffel": web.url("/pages/eiffel.html"), "missing": web.url("/missing"),
                "louvre": web.url("/pages/louvre.html")}
    return {"bundle": root / "a", "urls": urls}


def call(url: str, body: object = None, headers: dict[str, str] | None = None,
         method: str | None = None) -> tuple[int, dict[str, str], bytes]:
    data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) \
        else body
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def test_round_trip_reproduces_the_bundle(captured: dict, tmp_path: Path) -> None:
    """A snapshot taken through the server equals the original: same searches, results,
    pages, texts, failures and links; nothing was missed and no fake was running."""
    original = captured["bundle"]
    web = FrozenWeb([original])
    log = ServeLog(tmp_path / "misses.jsonl")
    with BaseUrlServer(web, log=log) as server:
        env = {"SERPER_BASE_URL": server.url, "JINA_BASE_URL": server.url,
               "SERPER_API_KEY": "anything-the-server-ignores"}
        urls = captured["urls"]
        claims = claims_for(_Origin(urls["eiffel"]))
        capture_claims(tmp_path / "b", claims, options(env, reader="jina"))
    assert log.counts["miss"] == 0, (tmp_path / "misses.jsonl").read_text()
    assert evidence(tmp_path / "b") == evidence(original)
    assert evidence(original)["failures"], "the original holds a failure to reproduce"
    # a bundle captured through amber serve: one host served both services
    again = FrozenWeb([tmp_path / "b"])
    netloc = server.url.split("//", 1)[1]
    assert again.service_for_host(netloc, "/search") == "serper"
    assert again.service_for_host(netloc, "/http://x.org/a") == "jina"


class _Origin:
    """Builds the claim URLs of the original capture (the fakes are gone)."""

    def __init__(self, eiffel: str) -> None:
        self.base = eiffel.split("/pages/")[0]

    def url(self, path: str) -> str:
        return self.base + path


def test_serper_normalised_defaults_and_fewer_results(captured: dict) -> None:
    with BaseUrlServer(FrozenWeb([captured["bundle"]])) as server:
        url = server.url + "/search"
        status, headers, body = call(url, {"q": "Eiffel Tower completed 1889"},
                                     {"X-API-KEY": "any"})
        assert status == 200 and headers["X-Amber-Match"] == "exact"
        assert headers["X-Amber-Record"].startswith("<urn:uuid:")
        full = json.loads(body)
        # defaults spelled out, keys reordered, spaces collapsed, no key at all: same answer
        status, headers, body2 = call(url, {"num": "10", "hl": "EN", "gl": "us", "page": 1,
                                            "q": "  Eiffel  Tower completed 1889 "})
        assert status == 200 and headers["X-Amber-Match"] == "exact" and body2 == body
        status, headers, body = call(url, {"q": "Eiffel Tower completed 1889", "num": 2})
        assert status == 200 and headers["X-Amber-Match"] == "rendered"
        top = json.loads(body)
        assert top["organic"] == full["organic"][:2]
        assert top["searchParameters"]["num"] == 2
        status, headers, body = call(url, {"q": "Eiffel Tower completed 1889", "num": 20})
        assert status == 404 and headers["X-Amber-Match"] == "miss"
        assert "num=10" in body.decode()
        status, headers, _ = call(url, {"q": "Eiffel Tower completed 1889", "gl": "fr"})
        assert status == 404
        # GET form with the key in the query string, and a batch
        status, headers, body3 = call(
            url + "?q=Eiffel+Tower+completed+1889&apiKey=secret-in-url")
        assert status == 200 and body3 == body2
        status, headers, body = call(url, [{"q": "Eiffel Tower completed 1889"},
                                           {"q": "largest tea producer"}])
        batch = json.loads(body)
        assert status == 200 and len(batch) == 2 and all(x["organic"] for x in batch)


def test_jina_formats_options_and_failures(captured: dict) -> None:
    eiffel, missing = captured["urls"]["eiffel"], captured["urls"]["missing"]
    with BaseUrlServer(FrozenWeb([captured["bundle"]])) as server:
        status, headers, body = call(f"{server.url}/{eiffel}", headers={
            "Accept": "application/json", "Authorization": "Bearer whatever",
            "X-No-Cache": "true", "X-Return-Format": "markdown"})
        assert status == 200 and headers["X-Amber-Match"] == "exact"
        data = json.loads(body)["data"]
        assert "completed in 1889" in data["content"]
        status, headers, text = call(f"{server.url}/{eiffel}")
        assert status == 200 and headers["X-Amber-Match"] == "rendered"
        assert headers["Content-Type"].startswith("text/plain")
        assert text.decode() == (f"Title: {data['title']}\n\nURL Source: {data['url']}\n\n"
                                 f"Markdown Content:\n{data['content']}\n")
        # folded slashes and an upper-case host reach the same capture
        folded = eiffel.replace("http://127.0.0.1", "http:/127.0.0.1")
        status, headers, _ = call(f"{server.url}/{folded}",
                                  headers={"Accept": "application/json"})
        assert status == 200 and headers["X-Amber-Match"] == "exact"
        # output options no capture has: the nearest capture, saying which options differ
        status, headers, body = call(f"{server.url}/{eiffel}",
                                     headers={"X-Return-Format": "html"})
        assert status == 200 and headers["X-Amber-Match"] == "nearest"
        assert headers["X-Amber-Options-Differ"] == "x-return-format"
        assert body == text
        # the failed read is replayed as Jina answered it (target 404 in the envelope)
        status, headers, body = call(f"{server.url}/{missing}",
                                     headers={"Accept": "application/json"})
        assert status == 200 and "returned error 404" in json.loads(body)["data"]["warning"]
        status, headers, body = call(f"{server.url}/https://example.org/never")
        assert status == 404 and "never read through Jina Reader" in body.decode()
        # Jina's POST form, and HEAD (headers and length, no body)
        status, headers, posted = call(server.url + "/", {"url": eiffel},
                                       {"Accept": "application/json",
                                        "Content-Type": "application/json"})
        assert status == 200 and json.loads(posted)["data"] == data
        status, headers, empty = call(f"{server.url}/{eiffel}", method="HEAD",
                                      headers={"Accept": "application/json"})
        assert status == 200 and empty == b"" and int(headers["Content-Length"]) == len(posted)


def test_misses_are_logged_without_keys_and_counted(captured: dict, tmp_path: Path) -> None:
    misses = tmp_path / "misses.jsonl"
    log = ServeLog(misses)
    with BaseUrlServer(FrozenWeb([captured["bundle"]]), log=log) as server:
        call(server.url + "/search", {"q": "not captured", "apiKey": "k-123"},
             {"X-API-KEY": "k-456"})
        call(server.url + "/https://example.org/x?token=t-789",
             headers={"Authorization": "Bearer k-000"})
        call(server.url + "/search", {"q": "largest tea producer"})
    rows = [json.loads(line) for line in misses.read_text().splitlines()]
    assert [(r["method"], r["service"]) for r in rows] == [("POST", "serper"), ("GET", "jina")]
    assert all(set(r) == {"time", "method", "url", "service", "reason"} for r in rows)
    text = misses.read_text()
    for secret in ("k-123", "k-456", "t-789", "k-000"):
        assert secret not in text
    assert log.summary()["miss"] == 2 and log.summary()["exact"] == 1


def test_concurrent_clients_get_the_captured_bytes(tmp_path: Path) -> None:
    """32 clients at once, a 2.8 MB answer among them, every body identical to the archive."""
    pages = default_pages()
    big = "<html><body>" + "".join(f"<p>paragraph {i} " + "x" * 300 + "</p>"
                                   for i in range(9000)) + "</body></html>"
    pages["/pages/big.html"] = Page(big.encode())
    with FakeWeb(pages) as web:
        jina_bundle(web, tmp_path / "a")
        capture_urls_jina = [web.url("/pages/big.html"), web.url("/pages/tea.html")]
        capture_urls(tmp_path / "a", capture_urls_jina, options(web.env(), reader="jina"))
    with Bundle.open(tmp_path / "a") as bundle:
        expected = {u: bundle.read_capture(u).body for u in capture_urls_jina}
    assert len(expected[capture_urls_jina[0]]) > 2_500_000
    with BaseUrlServer(FrozenWeb([tmp_path / "a"])) as server:
        def fetch(i: int) -> bool:
            url = capture_urls_jina[i % 2]
            status, _, body = call(f"{server.url}/{url}", headers={"Accept": "application/json"})
            return status == 200 and body == expected[url]

        with ThreadPoolExecutor(32) as pool:
            assert all(pool.map(fetch, range(64)))


def test_several_bundles_earliest_capture_wins_and_conflicts_listed(tmp_path: Path) -> None:
    # the same search captured twice, from two sites whose results differ in bytes
    for name in ("first", "second"):
        with FakeWeb() as web:
            capture_claims(tmp_path / name, claims_for(web)[2:], options(web.env(),
                                                                        reader="jina"))
    web = FrozenWeb([tmp_path / "second", tmp_path / "first"])
    assert [c.service for c in web.conflicts] == ["serper"]
    assert "first" in web.conflicts[0].used and "second" in web.conflicts[0].other
    answer = web.search([{"q": "largest tea producer"}])
    assert answer.match == "exact" and answer.header("X-Amber-Bundle").endswith("first")
    answer.close()


def test_the_hops_of_one_redirect_loop_are_no_conflict(tmp_path: Path) -> None:
    with FakeWeb() as web:
        capture_urls(tmp_path / "b", [web.url("/loop"), web.url("/redirect")],
                     options(web.env(), reader="direct"))
        loop = web.url("/loop")
    frozen = FrozenWeb([tmp_path / "b"])
    assert frozen.conflicts == []
    answer = frozen.page("GET", loop)
    assert answer.match == "exact" and answer.status == 302  # replayed as it looped
    answer.close()


def test_bad_bundle_and_port_in_use_are_one_line_errors(captured: dict, tmp_path: Path) -> None:
    with pytest.raises(BundleError):
        FrozenWeb([tmp_path / "nope"])
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError, match="already in use"):
            BaseUrlServer(FrozenWeb([captured["bundle"]]), port=port)
        done = run_cli("serve", str(captured["bundle"]), "--port", str(port))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "already in use" in done.stderr
    done = run_cli("serve", str(tmp_path / "nope"), "--port", str(free_port()))
    assert done.returncode == 1 and done.stderr.startswith("amber: error: ")
    assert "Traceback" not in done.stderr


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ambereval.cli", *args],
                          capture_output=True, text=True, timeout=120)


def test_cli_prints_exports_answers_and_stops_on_sigterm(captured: dict, tmp_path: Path) -> None:
    port = free_port()
    misses = tmp_path / "m.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ambereval.cli", "serve", str(captured["bundle"]), "--port",
         str(port), "--misses", str(misses)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(2)]
        assert lines == [f"export SERPER_BASE_URL=http://127.0.0.1:{port}\n",
                         f"export JINA_BASE_URL=http://127.0.0.1:{port}\n"]
        env = dict(line[len("export "):].strip().split("=", 1) for line in lines)
        status, headers, _ = call(env["JINA_BASE_URL"] + "/" + captured["urls"]["louvre"],
                                  headers={"Accept": "application/json"})
        assert status == 200 and headers["X-Amber-Match"] == "exact"
        assert call(env["SERPER_BASE_URL"] + "/search", {"q": "nothing here"})[0] == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "stopped: 1 answered (1 exact, 0 rendered, 0 nearest), 1 misses" in err
    assert len(misses.read_text().splitlines()) == 1


def test_print_env_creates_the_ca_once(tmp_path: Path) -> None:
    ca = tmp_path / "ca"
    first = run_cli("serve", "--print-env", "--port", "8080", "--ca-dir", str(ca))
    assert first.returncode == 0, first.stderr
    cert = ca / "mitmproxy-ca-cert.pem"
    names = [line.split("=", 1)[0] for line in first.stdout.splitlines()]
    assert names == [f"export {n}" for n in (
        "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "OPENAI_API_KEY",
        "GEMINI_API_KEY", "JINA_API_KEY", "SERPER_API_KEY")]
    assert "export HTTPS_PROXY=http://127.0.0.1:8080" in first.stdout
    assert f"export SSL_CERT_FILE={cert.resolve()}" in first.stdout
    assert os.stat(ca / "mitmproxy-ca.pem").st_mode & 0o077 == 0
    before = cert.read_bytes()
    again = run_cli("serve", "--print-env", "--port", "8080", "--ca-dir", str(ca))
    assert again.stdout == first.stdout and cert.read_bytes() == before
    # what the shell does with it
    shell = subprocess.run(["bash", "-c", f'eval "$({sys.executable} -m ambereval.cli serve '
                            f'--print-env --port 9090 --ca-dir {ca})"; echo "$https_proxy"; '
                            'echo "$OPENAI_API_KEY $GEMINI_API_KEY"'],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "OPENAI_API_KEY": "sk-mine"})
    assert shell.stdout == "http://127.0.0.1:9090\nsk-mine amber-offline\n"
    zero = run_cli("serve", "--print-env", "--port", "0", "--ca-dir", str(ca))
    assert zero.returncode == 2 and zero.stderr.startswith("amber: error: --print-env needs")


def test_proxy_without_mitmproxy_names_the_extra(captured: dict, tmp_path: Path) -> None:
    env = {**os.environ, "AMBER_MITMDUMP": str(tmp_path / "no-mitmdump")}
    done = subprocess.run([sys.executable, "-m", "ambereval.cli", "serve",
                           str(captured["bundle"]), "--proxy", "--port", str(free_port())],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "amber-eval[serve]" in done.stderr


def test_a_damaged_record_is_a_500_not_a_crash(captured: dict, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(captured["bundle"], copy)
    web = FrozenWeb([copy])
    for warc in (copy / "archive").glob("*.warc.gz"):
        warc.write_bytes(b"\0" * warc.stat().st_size)
    log = ServeLog()
    with BaseUrlServer(web, log=log) as server:
        status, headers, body = call(f"{server.url}/{captured['urls']['eiffel']}",
                                     headers={"Accept": "application/json"})
        assert status == 500 and headers["X-Amber-Match"] == "error"
        assert body.decode().count("\n") == 1
        status, _, _ = call(server.url + "/search", {"q": "largest tea producer"})
        assert status == 500
    assert "2 unreadable records" in log.line()
    with pytest.raises(BundleError, match="cannot be read"):
        FrozenWeb([copy])


def test_cli_snapshot_through_cli_serve_reproduces_the_bundle(captured: dict,
                                                              tmp_path: Path) -> None:
    """The round trip as a user runs it: `amber serve`, two exports, `amber snapshot`."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ambereval.cli", "serve", str(captured["bundle"]), "--port",
         str(port), "--misses", str(tmp_path / "m.jsonl")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        exports = dict(proc.stdout.readline()[len("export "):].strip().split("=", 1)
                       for _ in range(2))
        base = captured["urls"]["eiffel"].split("/pages/")[0]
        claims = [{"id": c.id, "text": c.text, "urls": list(c.urls), "queries": list(c.queries)}
                  for c in claims_for(_Origin(base + "/pages/"))]
        (tmp_path / "claims.jsonl").write_text("".join(json.dumps(c) + "\n" for c in claims))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SERPER_", "JINA_"))}
        env.update(exports, SERPER_API_KEY="unused", AMBER_ALLOW_PRIVATE_ADDRESSES="1")
        done = subprocess.run(
            [sys.executable, "-m", "ambereval.cli", "snapshot", "claims",
             str(tmp_path / "claims.jsonl"), "--out", str(tmp_path / "b"), "--rate", "0",
             "--retries", "2", "--backoff", "0.01", "--json"],
            capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert "0 misses" in err
    assert evidence(tmp_path / "b") == evidence(captured["bundle"])


def test_reader_options_recorded_at_capture_are_part_of_the_match(tmp_path: Path) -> None:
    with FakeWeb() as web:
        url = web.url("/pages/rhine.html")
        capture_urls(tmp_path / "a", [url], options(
            web.env(), reader="jina", jina_options={"X-Return-Format": "text",
                                                    "X-With-Links-Summary": "true"}))
    with BaseUrlServer(FrozenWeb([tmp_path / "a"])) as server:
        asked = {"Accept": "application/json", "x-return-format": "TEXT",
                 "X-With-Links-Summary": "true", "X-Timeout": "30"}
        status, headers, _ = call(f"{server.url}/{url}", headers=asked)
        assert status == 200 and headers["X-Amber-Match"] == "exact"
        status, headers, body = call(f"{server.url}/{url}",
                                     headers={"Accept": "application/json"})
        assert status == 200 and headers["X-Amber-Match"] == "nearest"
        assert headers["X-Amber-Options-Differ"] == "x-return-format, x-with-links-summary"
        assert json.loads(body)["data"]["url"] == url
    with BaseUrlServer(FrozenWeb([tmp_path / "a"], strict=True)) as server:
        status, headers, _ = call(f"{server.url}/{url}", headers={"Accept": "application/json"})
        assert status == 404 and "other reader options" in headers["X-Amber-Miss"]
        # JSON captured with X-Return-Format=text: its text form is not rendered
        status, headers, _ = call(f"{server.url}/{url}", headers={
            "X-Return-Format": "text", "X-With-Links-Summary": "true"})
        assert status == 404 and "is not rendered" in headers["X-Amber-Miss"]
