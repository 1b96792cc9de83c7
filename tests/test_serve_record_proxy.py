"""``amber serve --record --proxy``: real mitmproxy, real TLS. A pipeline with hard-coded
https://google.serper.dev, https://r.jina.ai, https://api.openai.com and
https://generativelanguage.googleapis.com (the SDKs' defaults) runs with nothing but
the printed proxy variables and its keys; the recorder forwards to loopback fakes
(moved there with SERPER_BASE_URL, ... in the recorder's own environment) and fetches a
plain page directly. ``amber serve BUNDLE --proxy`` then replays it byte for byte."""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import pytest
from fakellm import FakeGemini, FakeOpenAI
from test_serve_record import SECRETS, amber, client_env, run_pipeline, started, stop

from ambereval.engine.serve.proxy import find_mitmdump
from ambereval.snapshots import Bundle

from fakeweb import FakeWeb

if find_mitmdump() is None:
    pytest.skip("mitmproxy (amber-eval[serve], .venv-serve/) not installed",
                allow_module_level=True)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("record-proxy")
    bundle, ca = root / "run.bundle", root / "ca"
    with FakeWeb(jina_key="jina-fake-key-0123456789") as web, FakeOpenAI() as oa, \
            FakeGemini() as gm:
        env = {**os.environ, "SERPER_BASE_URL": web.serper_url, "JINA_BASE_URL": web.jina_url,
               "OPENAI_BASE_URL": oa.url + "/v1", "GEMINI_BASE_URL": gm.url}
        proc = amber("serve", "--record", str(bundle), "--proxy", "--port", "0", "--json",
                     "--ca-dir", str(ca), "--allow-private-addresses", env=env)
        start = started(proc)
        page = web.url("/pages/louvre.html")
        answers = run_pipeline("proxy", client_env(start["env"], page))
        summary, _ = stop(proc)
        hits = {"serper": web.hits("serper"), "origin": web.hits("origin", "/pages/louvre"),
                "openai": oa.hits("/chat/completions")}
    return {"root": root, "bundle": bundle, "ca": ca, "answers": answers, "page": page,
            "summary": summary, "hits": hits}


def test_hard_coded_hosts_are_recorded_through_the_proxy(recorded: dict[str, Any]) -> None:
    got = {a["name"]: a for a in recorded["answers"]}
    assert all(a["status"] == 200 for a in recorded["answers"]), recorded["answers"]
    assert got["openai#2"]["sha256"] == got["openai#1"]["sha256"]
    assert got["gemini#2"]["sha256"] == got["gemini#1"]["sha256"]
    assert recorded["hits"] == {"serper": 1, "origin": 2, "openai": 3}  # jina read it too
    summary = recorded["summary"]
    assert summary["upstream_connections_refused"] == 0
    assert summary["by_service"]["direct"] == {"recorded": 1}
    with Bundle.open(recorded["bundle"]) as b:
        page = b.read_capture(recorded["page"])
        assert page.status == 200 and b"public museum in 1793" in page.body
        hosts = {r["provider"]: r["url"] for r in b.index.rows(
            "SELECT provider, url FROM judge_exchanges")}
    assert set(hosts) == {"openai", "gemini"}


def test_no_key_or_cookie_in_the_proxied_recording(recorded: dict[str, Any]) -> None:
    for path in sorted(p for p in recorded["bundle"].rglob("*") if p.is_file()):
        data = path.read_bytes()
        for blob in [data, gzip.decompress(data)] if data[:2] == b"\x1f\x8b" else [data]:
            for secret in SECRETS:
                assert secret.encode() not in blob, f"{secret} in {path}"


def test_proxy_replay_is_byte_identical(recorded: dict[str, Any], tmp_path: Path) -> None:
    proc = amber("serve", str(recorded["bundle"]), "--proxy", "--port", "0", "--json",
                 "--ca-dir", str(recorded["ca"]))
    start = started(proc)
    try:
        again = run_pipeline("proxy", client_env(start["env"], recorded["page"],
                                                 keys="other"))
    finally:
        summary, _ = stop(proc)
    assert [(a["name"], a["status"], a["sha256"]) for a in again] == \
        [(a["name"], a["status"], a["sha256"]) for a in recorded["answers"]]
    assert summary["miss"] == 0 and summary["upstream_connections_refused"] == 0
