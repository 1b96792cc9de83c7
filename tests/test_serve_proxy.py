"""``amber serve --proxy``: real mitmproxy, real TLS, loopback only. curl, urllib and
requests reach https://r.jina.ai/... and https://google.serper.dev/search with nothing
but the printed environment and get the frozen answers; pages captured directly are
replayed; a miss is refused and logged; no upstream connection is ever attempted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from serve_helpers import direct_bundle, free_port, jina_bundle, netns_available

from ambereval.engine.serve.proxy import find_mitmdump
from ambereval.snapshots import Bundle

from fakeweb import FakeWeb

if find_mitmdump() is None:
    pytest.skip("mitmproxy (amber-eval[serve], .venv-serve/) not installed",
                allow_module_level=True)

QUERY = "Eiffel Tower completed 1889"


@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two bundles (Jina + Serper, direct pages) served by one proxy; the fakes they were
    captured from are stopped first, so only the bundles can answer."""
    root = tmp_path_factory.mktemp("proxy")
    with FakeWeb() as web:
        jina_bundle(web, root / "jina")
        direct_bundle(web, root / "direct")
        urls = {name: web.url(path) for name, path in (
            ("eiffel", "/pages/eiffel.html"), ("louvre", "/pages/louvre.html"),
            ("redirect", "/redirect"), ("tea_gz", "/gzip/pages/tea.html"),
            ("notes", "/pages/notes.txt"), ("dup_a", "/pages/dup-a.html"),
            ("dup_b", "/pages/dup-b.html"))}
        urls["serper_base"] = web.serper_url
        with Bundle.open(root / "direct") as b:
            urls["refused"] = b.index.one("SELECT url FROM captures WHERE status IS NULL")["url"]
    port = free_port()
    ca = root / "ca"
    misses = root / "misses.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ambereval.cli", "serve", str(root / "jina"),
         str(root / "direct"), "--proxy", "--port", str(port), "--ca-dir", str(ca),
         "--misses", str(misses)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [proc.stdout.readline() for _ in range(12)]
    if not all(line.startswith("export ") for line in lines):
        proc.kill()
        raise AssertionError(f"no export lines: {lines} {proc.stderr.read()}")
    env = dict(line[len("export "):].strip().split("=", 1) for line in lines)
    state: dict[str, Any] = {"root": root, "urls": urls, "env": env, "proc": proc,
                             "misses": misses, "port": port, "ca": ca}
    yield state
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def client_env(frozen: dict[str, Any]) -> dict[str, str]:
    """Only the printed variables (and PATH to find the programs)."""
    return {"PATH": os.environ["PATH"], **frozen["env"]}


def curl(frozen: dict[str, Any], *args: str) -> tuple[int, dict[str, str], bytes]:
    done = subprocess.run(["curl", "-sS", "-D", "/dev/stderr", "--max-time", "60", *args],
                          capture_output=True, env=client_env(frozen), timeout=90)
    assert done.returncode == 0, done.stderr.decode()
    blocks = done.stderr.decode("latin-1").strip().split("\r\n\r\n")
    head = blocks[-1].split("\r\n")
    status = int(head[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
    return status, headers, done.stdout


def stored(frozen: dict[str, Any], bundle: str, url: str) -> bytes:
    with Bundle.open(frozen["root"] / bundle) as b:
        return b.read_capture(url).body


def test_env_is_what_print_env_prints(frozen: dict[str, Any]) -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "ambereval.cli", "serve", "--print-env", "--port",
         str(frozen["port"]), "--ca-dir", str(frozen["ca"])],
        capture_output=True, text=True, timeout=120)
    env = dict(line[len("export "):].split("=", 1) for line in printed.stdout.splitlines())
    assert env == frozen["env"]
    assert env["HTTPS_PROXY"] == f"http://127.0.0.1:{frozen['port']}"


def test_curl_reaches_jina_and_serper_hosts(frozen: dict[str, Any]) -> None:
    eiffel = frozen["urls"]["eiffel"]
    status, headers, body = curl(frozen, "-H", "Accept: application/json",
                                 f"https://r.jina.ai/{eiffel}")
    assert status == 200 and headers["x-amber-match"] == "exact"
    assert body == stored(frozen, "jina", eiffel)
    assert headers["x-amber-record"].startswith("<urn:uuid:")
    status, headers, body = curl(frozen, "-X", "POST", "https://google.serper.dev/search",
                                 "-H", "X-API-KEY: not-needed", "-H",
                                 "Content-Type: application/json", "-d",
                                 json.dumps({"q": QUERY, "num": 3}))
    assert status == 200 and headers["x-amber-match"] == "rendered"
    status, headers, full = curl(frozen, "-X", "POST", "https://google.serper.dev/search",
                                 "-d", json.dumps({"q": QUERY}))
    assert status == 200 and headers["x-amber-match"] == "exact"
    assert json.loads(body)["organic"] == json.loads(full)["organic"][:3]
    # the base URL the capture used is recognised as Serper too
    status, headers, same = curl(frozen, "-X", "POST", frozen["urls"]["serper_base"] +
                                 "/search", "-d", json.dumps({"q": QUERY}))
    assert status == 200 and headers["x-amber-match"] == "exact" and same == full


def test_python_urllib_and_requests_with_only_the_env(frozen: dict[str, Any]) -> None:
    script = textwrap.dedent(f"""
        import json, urllib.request, requests
        url = "https://r.jina.ai/{frozen['urls']['louvre']}"
        req = urllib.request.Request(url, headers={{"Accept": "application/json"}})
        with urllib.request.urlopen(req) as r:
            a = (r.status, r.headers["X-Amber-Match"], json.loads(r.read())["data"]["title"])
        r = requests.post("https://google.serper.dev/search", json={{"q": {QUERY!r}}},
                          headers={{"X-API-KEY": "ignored"}})
        b = (r.status_code, r.headers["X-Amber-Match"], len(r.json()["organic"]))
        r = requests.get(url)
        c = (r.status_code, r.headers["X-Amber-Match"], r.text.splitlines()[0])
        print(json.dumps([a, b, c]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=client_env(frozen), timeout=120)
    assert done.returncode == 0, done.stderr
    a, b, c = json.loads(done.stdout)
    assert a == [200, "exact", "The Louvre museum"]
    assert b[:2] == [200, "exact"] and b[2] > 0
    assert c == [200, "rendered", "Title: The Louvre museum"]


def test_pages_captured_directly_are_replayed(frozen: dict[str, Any]) -> None:
    urls = frozen["urls"]
    status, headers, body = curl(frozen, urls["louvre"])
    assert status == 200 and headers["x-amber-match"] == "exact"
    assert body == stored(frozen, "direct", urls["louvre"])
    status, headers, _ = curl(frozen, urls["redirect"])
    assert status == 302 and headers["location"] == "/pages/louvre.html"
    status, headers, body = curl(frozen, "-L", urls["redirect"])
    assert status == 200 and b"public museum in 1793" in body
    status, headers, body = curl(frozen, "--compressed", urls["tea_gz"])
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert b"largest producer of tea" in body
    status, headers, body = curl(frozen, urls["notes"])
    assert body == b"Plain text notes about the Rhine and Basel.\n"
    # a deduplicated body (WARC revisit) comes from the record that holds it
    _, head_a, body_a = curl(frozen, urls["dup_a"])
    status, head_b, body_b = curl(frozen, urls["dup_b"])
    assert status == 200 and body_b == body_a and b"two addresses" in body_b
    pairs = {(head_a.get("x-amber-payload-record"), head_b["x-amber-record"]),
             (head_b.get("x-amber-payload-record"), head_a["x-amber-record"])}
    assert len([p for p in pairs if p[0] == p[1]]) == 1  # one is the other's revisit
    # the capture got no response: a 502 that says why, not a fetch
    status, headers, body = curl(frozen, urls["refused"])
    assert status == 502 and headers["x-amber-match"] == "exact"
    assert "Connect" in headers["x-amber-error"]




def test_works_inside_a_network_namespace_with_only_loopback(frozen: dict[str, Any]) -> None:
    """Server and clients in a fresh network namespace (only lo, no DNS, no route out):
    the frozen answers still come back, so nothing upstream was ever needed."""
    if not netns_available():
        pytest.skip("unshare -n is not permitted here")
    root = frozen["root"]
    eiffel = frozen["urls"]["eiffel"]
    script = textwrap.dedent(f"""
        ip link set lo up
        {sys.executable} -m ambereval.cli serve {root / 'jina'} {root / 'direct'} --proxy \
            --port {free_port()} --ca-dir {frozen['ca']} > {root}/ns.out 2> {root}/ns.err &
        server=$!
        for i in $(seq 120); do grep -q NODE_EXTRA {root}/ns.out && break; sleep 1; done
        eval "$(cat {root}/ns.out)"
        curl -sS -o /dev/null -w '%{{http_code}} ' -H 'Accept: application/json' \
            https://r.jina.ai/{eiffel}
        curl -sS -o /dev/null -w '%{{http_code}} ' -X POST https://google.serper.dev/search \
            -d '{{"q": "{QUERY}"}}'
        curl -sS -o /dev/null -w '%{{http_code}}' {frozen['urls']['louvre']}
        kill -TERM $server; wait $server
        echo " exit=$?"
    """)
    done = subprocess.run(["unshare", "-n", "bash", "-c", script], capture_output=True,
                          text=True, timeout=300)
    assert done.stdout.strip() == "200 200 200 exit=0", done.stdout + done.stderr
    err = (root / "ns.err").read_text()
    assert "3 answered" in err and "0 upstream connection attempts" in err


def test_a_miss_is_refused_and_logged_then_counted_at_stop(frozen: dict[str, Any]) -> None:
    status, headers, body = curl(frozen, "https://example.org/not/captured?key=s3cret")
    assert status == 404 and headers["x-amber-match"] == "miss"
    assert b"never fetched directly" in body
    status, headers, _ = curl(frozen, "-X", "POST", "https://google.serper.dev/search",
                              "-d", json.dumps({"q": "never searched"}))
    assert status == 404
    proc = frozen["proc"]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    rows = [json.loads(line) for line in frozen["misses"].read_text().splitlines()]
    assert [(r["method"], r["service"]) for r in rows] == [("GET", "direct"),
                                                          ("POST", "serper")]
    assert "s3cret" not in frozen["misses"].read_text()
    assert "2 misses" in err
    assert "0 upstream connection attempts" in err
