"""Safe capture: http(s) only, no private/loopback/link-local targets, one deadline per fetch.

Every connection in these tests stays on 127.0.0.0/8. Non-loopback addresses are tested
through the decision function, or through a patched resolver whose answers are refused
before any socket is opened.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from ambereval.snapshots import (
    Bundle,
    CaptureOptions,
    ClaimInput,
    RetryPolicy,
    capture_claims,
    capture_urls,
    verify_bundle,
)
from ambereval.snapshots.capture import address_policy as ap
from ambereval.snapshots.capture.address_policy import (
    AddressPolicy,
    address_problem,
    scheme_problem,
)
from ambereval.snapshots.capture.direct import DirectReader
from ambereval.snapshots.capture.transport import Transport

from conftest import fast_options, run_amber
from fakeweb import FakeWeb, Page

POLICY = RetryPolicy(attempts=1, backoff=0.01, timeout=2.0)


def warc_uris(root: Path) -> list[tuple[str, str]]:
    """(WARC-Type, WARC-Target-URI) of every record in the bundle's WARCs."""
    out = []
    for path in sorted((root / "archive").glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                out.append((rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI") or ""))
    return out


# -- schemes ---------------------------------------------------------------------------
@pytest.mark.parametrize("location", [
    "file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1:70/", "data:text/html,hi",
    "javascript:alert(1)", "jar:file:///x!/y",
])
def test_redirect_to_other_scheme_is_a_named_failed_capture(
        web: FakeWeb, tmp_path: Path, location: str) -> None:
    """The issue's reproduction: a 302 to file:///etc/passwd was a traceback, left the
    bundle without datapackage.json, and archived a request for /etc/passwd."""
    web.pages["/go"] = Page(b"", status=302, headers={"Location": location})
    urls = tmp_path / "urls.txt"
    urls.write_text(web.url("/go") + "\n" + web.url("/pages/eiffel.html") + "\n")
    out = tmp_path / "b"
    done = run_amber("snapshot", "urls", str(urls), "--out", str(out), "--reader", "direct",
                     "--json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    import json
    summary = json.loads(done.stdout)
    assert summary["captured"] == 1 and summary["failed"] == 1
    failure = summary["failures"][0]
    scheme = location.split(":", 1)[0]
    assert failure["url"] == web.url("/go")
    assert f"scheme '{scheme}' is not allowed" in failure["error"]
    assert "redirect to" in failure["error"]
    assert verify_bundle(out).ok
    uris = warc_uris(out)
    # the 302 itself is evidence and archived; nothing was ever requested from the target
    assert ("response", web.url("/go")) in uris
    assert not [u for t, u in uris if t != "warcinfo" and not u.startswith("http://")], uris
    assert web.hits("origin", "/etc/passwd") == 0


def test_cited_url_with_other_scheme_fails_before_any_record(web: FakeWeb,
                                                             tmp_path: Path) -> None:
    claims = [ClaimInput("c1", "x", urls=("file:///etc/passwd", web.url("/pages/tea.html")))]
    out = tmp_path / "b"
    summary = capture_claims(out, claims, fast_options(web, reader="direct"))
    assert summary.captured == 1 and summary.failed == 1
    assert "scheme 'file'" in summary.failures[0]["error"]
    with Bundle.open(out) as b:
        row = b.index.one("SELECT * FROM captures WHERE url = 'file:///etc/passwd'")
        assert row["request_record"] is None and row["response_record"] is None
    assert not [u for t, u in warc_uris(out) if t in ("request", "response")
                and "passwd" in u]
    assert verify_bundle(out).ok


def test_scheme_problem() -> None:
    assert scheme_problem("https://example.com/") is None
    assert scheme_problem("HTTP://example.com/") is None
    assert "not allowed" in scheme_problem("file:///etc/passwd")
    assert "no host" in scheme_problem("http:///path")
    assert scheme_problem("http://[::1") is not None  # malformed, no exception


# -- the decision function -------------------------------------------------------------
@pytest.mark.parametrize("address, kind", [
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.1.1", "private"),
    ("fd00::1", "unique local"), ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"), ("100.64.0.1", "shared"),
    ("224.0.0.1", "multicast"), ("240.0.0.1", "reserved"),
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:169.254.169.254", "link-local"),
    ("2002:7f00:1::", "loopback"), ("64:ff9b::a9fe:a9fe", "link-local"),
])
def test_blocked_addresses_are_named(address: str, kind: str) -> None:
    problem = address_problem(address)
    assert problem is not None and kind in problem


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "1.1.1.1",
                                     "2606:4700:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert address_problem(address) is None


def fake_resolver(table: dict[str, list[str]], calls: list[str] | None = None) -> Any:
    def resolve(host: str, port: int, *args: Any, **kw: Any) -> list[tuple[Any, ...]]:
        if calls is not None:
            calls.append(host)
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (a, port)) for a in table[host]]
    return resolve


def test_policy_resolution_refuses_private_answers_and_keeps_public_ones() -> None:
    policy = AddressPolicy(resolver=fake_resolver({
        "metadata.test": ["169.254.169.254"], "mixed.test": ["10.0.0.5", "93.184.216.34"],
        "public.test": ["93.184.216.34"]}))
    with pytest.raises(ap.BlockedAddress, match="metadata.test resolves to link-local"):
        policy.resolve("metadata.test", 80, 1.0)
    assert policy.resolve("mixed.test", 80, 1.0) == ["93.184.216.34"]
    assert policy.resolve("public.test", 80, 1.0) == ["93.184.216.34"]
    assert AddressPolicy(allow_private=True, resolver=policy.resolver).resolve(
        "metadata.test", 80, 1.0) == ["169.254.169.254"]
    assert AddressPolicy().url_problem("http://169.254.169.254/latest/meta-data/")
    assert AddressPolicy().url_problem("http://example.com/") is None  # DNS later


# -- captures refused by the policy ----------------------------------------------------
def test_loopback_and_localhost_are_refused_without_the_flag(web: FakeWeb,
                                                             tmp_path: Path) -> None:
    port = web.origin_url.rsplit(":", 1)[1]
    urls = [web.url("/pages/eiffel.html"), f"http://localhost:{port}/pages/tea.html",
            f"http://[::ffff:127.0.0.1]:{port}/pages/rhine.html"]
    out = tmp_path / "b"
    summary = capture_urls(out, urls, fast_options(web, reader="direct",
                                                   allow_private_addresses=False))
    assert summary.captured == 0 and summary.failed == 3
    errors = {f["url"]: f["error"] for f in summary.failures}
    assert "loopback address 127.0.0.1" in errors[urls[0]]
    assert "localhost resolves to loopback address" in errors[urls[1]]
    assert "loopback" in errors[urls[2]]
    assert all("--allow-private-addresses" in e for e in errors.values())
    assert web.hits("origin") == 0  # not one request reached the server
    # refused requests were never sent, so no request record claims they were
    assert not [u for t, u in warc_uris(out) if t == "request"]
    assert verify_bundle(out).ok


def test_flag_and_environment_allow_local_sites(web: FakeWeb, tmp_path: Path) -> None:
    env = {**web.env(), "AMBER_ALLOW_PRIVATE_ADDRESSES": "1"}
    assert CaptureOptions.from_env(env).allow_private_addresses
    assert not CaptureOptions.from_env(web.env()).allow_private_addresses
    urls = tmp_path / "urls.txt"
    urls.write_text(web.url("/pages/eiffel.html") + "\n")
    refused = run_amber("snapshot", "urls", str(urls), "--out", str(tmp_path / "a"),
                        "--reader", "direct", "--json",
                        env={"AMBER_ALLOW_PRIVATE_ADDRESSES": "0"})
    assert refused.returncode == 0 and '"captured": 0' in refused.stdout
    assert "loopback address" in refused.stdout
    allowed = run_amber("snapshot", "urls", str(urls), "--out", str(tmp_path / "b"),
                        "--reader", "direct", "--json", "--allow-private-addresses",
                        env={"AMBER_ALLOW_PRIVATE_ADDRESSES": "0"})
    assert allowed.returncode == 0 and '"captured": 1' in allowed.stdout, allowed.stderr


def test_service_base_urls_are_exempt(web: FakeWeb, tmp_path: Path) -> None:
    """Serper and Jina on loopback are the user's own choice: no flag needed."""
    claims = [ClaimInput("c1", "Eiffel Tower", urls=(web.url("/pages/eiffel.html"),),
                         queries=("Eiffel Tower completed",))]
    summary = capture_claims(tmp_path / "b", claims, fast_options(
        web, reader="jina", top_k=1, allow_private_addresses=False))
    assert summary.failed == 0 and summary.captured >= 2


def _reader(policy: AddressPolicy) -> DirectReader:
    return DirectReader(Transport("direct", POLICY, address_policy=policy))


@pytest.fixture
def loopback_is_public(monkeypatch: pytest.MonkeyPatch) -> None:
    """Treat 127.0.0.1 (the only address a test may reach) as a public address, so a
    first hop can succeed and the redirect after it is what the policy judges."""
    real = ap.address_problem
    monkeypatch.setattr(ap, "address_problem",
                        lambda a: None if a == "127.0.0.1" else real(a))


@pytest.mark.parametrize("target", [
    "http://169.254.169.254/latest/meta-data/", "http://metadata.test/latest/",
    "http://10.0.0.5:8080/admin", "http://127.0.0.2:{port}/pages/tea.html",
    "http://[::1]:{port}/pages/tea.html", "http://0.0.0.0:{port}/",
])
def test_redirect_into_a_private_network_is_refused(
        web: FakeWeb, loopback_is_public: None, target: str) -> None:
    port = web.origin_url.rsplit(":", 1)[1]
    target = target.format(port=port)
    web.pages["/hop"] = Page(b"", status=302, headers={"Location": target})
    calls: list[str] = []
    policy = AddressPolicy(resolver=fake_resolver(
        {"public.test": ["127.0.0.1"], "metadata.test": ["169.254.169.254"]}, calls))
    fetch = _reader(policy).read(f"http://public.test:{port}/hop")
    assert not fetch.ok
    assert "refused to connect" in (fetch.error or "")
    assert len(fetch.exchanges) == 1  # the 302 only; the refused hop was never sent
    assert fetch.exchanges[0].status == 302
    assert web.hits("origin", "/pages/tea.html") == 0


def test_connects_to_the_checked_address_and_resolves_once(
        web: FakeWeb, loopback_is_public: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """No DNS-rebinding window: the name is resolved once, the address checked, and the
    socket connects to that address; the Host header still carries the name."""
    port = web.origin_url.rsplit(":", 1)[1]
    calls: list[str] = []
    policy = AddressPolicy(resolver=fake_resolver({"rebind.test": ["127.0.0.1"]}, calls))
    real = socket.getaddrinfo

    def numeric_only(host: Any, *args: Any, **kw: Any) -> Any:
        if host not in ("127.0.0.1", b"127.0.0.1"):
            raise AssertionError(f"a second name lookup for {host!r}")
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", numeric_only)
    fetch = _reader(policy).read(f"http://rebind.test:{port}/pages/eiffel.html")
    assert fetch.ok, fetch.error
    assert calls == ["rebind.test"]
    seen = [s for s in web.seen if s.path == "/pages/eiffel.html"]
    assert seen and seen[-1].headers.get("Host") == f"rebind.test:{port}"


# -- one deadline per fetch ------------------------------------------------------------
def test_timeout_bounds_the_whole_fetch_not_each_read(web: FakeWeb) -> None:
    """A body dripped in 8 pieces 0.4 s apart takes 3.2 s: each read is well within the
    1 s timeout, so only a deadline over the whole fetch stops it."""
    web.inject("origin", "slow", delay=3.2)
    transport = Transport("direct", RetryPolicy(attempts=1, timeout=1.0))
    exchange = transport.send("GET", web.url("/pages/eiffel.html"))
    assert exchange.error is not None and "timeout" in exchange.error
    assert "within --timeout" in exchange.error
    # and a normal page still arrives within the same budget
    ok = transport.send("GET", web.url("/pages/tea.html"))
    assert ok.ok, ok.error
