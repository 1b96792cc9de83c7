"""``amber serve --record`` in base-URL mode: a pipeline (tests/record_pipeline.py, the
official openai and google-genai SDKs, requests, httpx) runs against the recorder, which
forwards to loopback fakes of Serper, Jina Reader, an OpenAI-compatible judge and Gemini.
Then: the answers were upstream's, repeats came from the recording, no key or cookie is
in the bundle's bytes, the bundle verifies, and ``amber serve BUNDLE`` replays the
pipeline byte for byte (also inside a network namespace with only loopback)."""

from __future__ import annotations

import base64
import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakellm import GEMINI_KEY, OPENAI_KEY, FakeGemini, FakeOpenAI
from serve_helpers import free_port, netns_available

from ambereval.engine.serve.recorder import Recorder
from ambereval.engine.serve.recording import recording_env
from ambereval.engine.serve.upstreams import Upstreams
from ambereval.snapshots import Bundle

from fakeweb import FakeWeb

TESTS = Path(__file__).parent
JINA_KEY = "jina-fake-key-0123456789"
SECRETS = [OPENAI_KEY, GEMINI_KEY, JINA_KEY, "fake-serper-key-0123456789",
           "fake-llm-session-secret", "fake-session-secret"]


def amber(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ambereval.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def started(proc: subprocess.Popen[str]) -> dict[str, Any]:
    line = proc.stdout.readline() if proc.stdout else ""
    if not line:
        proc.kill()
        raise AssertionError(f"no start line: {proc.communicate()[1]}")
    return json.loads(line)


def stop(proc: subprocess.Popen[str]) -> tuple[dict[str, Any], str]:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


def upstream_env(web: FakeWeb, oa: FakeOpenAI, gm: FakeGemini) -> dict[str, str]:
    return {**os.environ, "SERPER_BASE_URL": web.serper_url, "JINA_BASE_URL": web.jina_url,
            "OPENAI_BASE_URL": oa.url + "/v1", "GEMINI_BASE_URL": gm.url}


def client_env(base: dict[str, str], page: str, keys: str = "real",
               **more: str) -> dict[str, str]:
    """Only what a pipeline needs: PATH, its keys, the printed variables, the page."""
    real = keys == "real"
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"),
            "SERPER_API_KEY": "fake-serper-key-0123456789" if real else "other",
            "JINA_API_KEY": JINA_KEY if real else "other",
            "OPENAI_API_KEY": OPENAI_KEY if real else "sk-someone-else",
            "GEMINI_API_KEY": GEMINI_KEY if real else "AIza-someone-else",
            "PAGE_URL": page, **base, **more}


def run_pipeline(mode: str, env: dict[str, str]) -> list[dict[str, Any]]:
    done = subprocess.run([sys.executable, str(TESTS / "record_pipeline.py"), mode],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("record")
    bundle = root / "run.bundle"
    with FakeWeb(jina_key=JINA_KEY) as web, FakeOpenAI() as oa, FakeGemini() as gm:
        proc = amber("serve", "--record", str(bundle), "--port", "0", "--json",
                     env=upstream_env(web, oa, gm))
        start = started(proc)
        page = web.url("/pages/eiffel.html")
        answers = run_pipeline("base", client_env(start["env"], page))
        summary, err = stop(proc)
        direct = {
            "serper": web.search({"q": "Eiffel Tower completed 1889", "num": 5}),
            "jina_hits": web.hits("jina"), "serper_hits": web.hits("serper"),
            "openai_hits": oa.hits("/chat/completions"), "gemini_hits": gm.hits("Content"),
            "openai_calls": oa.calls, "gemini_calls": gm.calls}
    yield {"root": root, "bundle": bundle, "start": start, "answers": answers,
           "summary": summary, "stderr": err, "direct": direct, "page": page}


def by_name(answers: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {a["name"]: a for a in answers}


def body(answer: dict[str, Any]) -> bytes:
    return base64.b64decode(answer["body"])


def test_the_pipeline_got_upstreams_answers(recorded: dict[str, Any]) -> None:
    got = by_name(recorded["answers"])
    assert all(a["status"] == 200 for a in recorded["answers"]), recorded["answers"]
    # Serper and Jina are deterministic: what came through equals asking them directly
    assert json.loads(body(got["serper#1"])) == recorded["direct"]["serper"]
    assert json.loads(body(got["jina"]))["data"]["title"] == "Eiffel Tower facts"
    # the judges number their answers: #1 came from upstream, the stream is a later one
    assert got["openai#1"]["text"].endswith("#1")
    assert "".join(got["gemini#1"]["text"]).endswith("#1")
    assert got["openai-stream"]["deltas"][-1].startswith("usage ")
    assert len(got["gemini-stream"]["parts"]) == 6
    assert recorded["start"]["env"]["OPENAI_BASE_URL"].endswith("/v1")


def test_a_repeated_request_is_answered_from_the_recording(recorded: dict[str, Any]) -> None:
    got = by_name(recorded["answers"])
    for name in ("serper", "openai", "gemini"):
        assert got[f"{name}#2"]["sha256"] == got[f"{name}#1"]["sha256"], name
    direct = recorded["direct"]
    assert direct["serper_hits"] == 1
    # chat: plain, stream, raw stream; gemini: plain, stream, REST (each once upstream)
    assert direct["openai_hits"] == 3 and direct["gemini_hits"] == 3
    summary = recorded["summary"]
    assert summary["repeated"] == 3 and summary["failed"] == 0
    assert summary["by_service"]["openai"] == {"recorded": 4, "repeated": 1}


def test_the_clients_own_keys_went_upstream(recorded: dict[str, Any]) -> None:
    def header(call: Any, name: str) -> str | None:
        return next((v for k, v in call.headers.items() if k.lower() == name), None)

    calls = recorded["direct"]["openai_calls"]
    assert calls and all(header(c, "authorization") == f"Bearer {OPENAI_KEY}" for c in calls)
    sdk = [c for c in recorded["direct"]["gemini_calls"] if "key=" not in c.path]
    assert sdk and all(header(c, "x-goog-api-key") == GEMINI_KEY for c in sdk)


def test_no_key_or_cookie_anywhere_in_the_bundle(recorded: dict[str, Any]) -> None:
    scanned = 0
    for path in sorted(p for p in recorded["bundle"].rglob("*") if p.is_file()):
        data = path.read_bytes()
        blobs = [data, gzip.decompress(data)] if data[:2] == b"\x1f\x8b" else [data]
        for blob in blobs:
            scanned += len(blob)
            for secret in SECRETS:
                assert secret.encode() not in blob, f"{secret} in {path}"
    assert scanned > 10_000
    assert "[redacted]" in gzip.decompress(
        next((recorded["bundle"] / "archive").glob("*.warc.gz")).read_bytes()).decode(
        "utf-8", "replace")


def test_bundle_verifies_and_lists_judges(recorded: dict[str, Any]) -> None:
    bundle = str(recorded["bundle"])
    done = subprocess.run([sys.executable, "-m", "ambereval.cli", "bundle", "verify", bundle,
                           "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and json.loads(done.stdout)["ok"], done.stdout + done.stderr
    done = subprocess.run([sys.executable, "-m", "ambereval.cli", "bundle", "stats", bundle,
                           "--json"], capture_output=True, text=True, timeout=120)
    stats = json.loads(done.stdout)
    judges = {(j["provider"], j["model"]): j for j in stats["judge_exchanges"]}
    assert judges[("openai", "gpt-fake")]["exchanges"] == 3
    assert judges[("openai", "gpt-fake")]["streamed"] == 2
    assert judges[("openai", None)]["operations"] == ["models"]
    assert judges[("gemini", "gemini-fake")]["operations"] == [
        "countTokens", "generateContent", "streamGenerateContent"]
    organic = recorded["direct"]["serper"]["organic"]
    assert stats["searches"] == 1 and stats["pages"] == 1
    assert stats["search_results"] == len(organic) > 0
    with Bundle.open(bundle) as b:
        jx = b.index.one("SELECT id FROM judge_exchanges WHERE operation = "
                         "'streamGenerateContent'")["id"]
    done = subprocess.run([sys.executable, "-m", "ambereval.cli", "bundle", "show", bundle,
                           jx, "--json"], capture_output=True, text=True, timeout=120)
    shown = json.loads(done.stdout)
    assert shown["provider"] == "gemini" and len(shown["chunk_lengths"]) == 6
    assert "Stream a grade" in shown["request_body"]
    assert shown["response_body"].count("data: ") == 6
    assert ("x-goog-api-key", "[redacted]") in [tuple(h) for h in shown["request_headers"]]


def replay(bundle: Path, page: str, keys: str = "real") -> list[dict[str, Any]]:
    proc = amber("serve", str(bundle), "--port", "0", "--json")
    start = started(proc)
    try:
        env = client_env(dict(recording_env(start["url"])), page, keys=keys)
        return run_pipeline("base", env)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def test_replay_is_byte_identical_and_ignores_keys(recorded: dict[str, Any]) -> None:
    again = replay(recorded["bundle"], recorded["page"], keys="other")
    for old, new in zip(recorded["answers"], again, strict=True):
        assert (new["name"], new["status"], new["sha256"]) == \
            (old["name"], old["status"], old["sha256"]), new["name"]
    raw = by_name(again)["openai-raw-stream"]
    assert raw["chunks"] == by_name(recorded["answers"])["openai-raw-stream"]["chunks"]
    assert len(raw["chunks"]) > 3  # the stream came back in its pieces, not in one




def test_replay_inside_a_network_namespace_is_byte_identical(
        recorded: dict[str, Any]) -> None:
    """Only loopback exists: the recorded pipeline, judges included, still gets every
    answer, the same bytes, from the bundle alone."""
    if not netns_available():
        pytest.skip("unshare -n is not permitted here")
    root, port = recorded["root"], free_port()
    url = f"http://127.0.0.1:{port}"
    env = client_env(dict(recording_env(url)), recorded["page"])
    exports = " ".join(f"{k}={v!r}" for k, v in env.items())
    script = textwrap.dedent(f"""
        ip link set lo up
        {sys.executable} -m ambereval.cli serve {recorded['bundle']} --port {port} \
            > {root}/ns.out 2> {root}/ns.err &
        server=$!
        for i in $(seq 120); do grep -q SERPER {root}/ns.out && break; sleep 1; done
        env -i {exports} {sys.executable} {TESTS / 'record_pipeline.py'} base > {root}/ns.json
        kill -TERM $server; wait $server
    """)
    done = subprocess.run(["unshare", "-n", "bash", "-c", script], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr + (root / "ns.err").read_text()
    again = json.loads((root / "ns.json").read_text())
    assert [(a["name"], a["sha256"]) for a in again] == \
        [(a["name"], a["sha256"]) for a in recorded["answers"]]


def test_an_unrecorded_judge_request_is_a_logged_miss(recorded: dict[str, Any],
                                                      tmp_path: Path) -> None:
    import openai

    misses = tmp_path / "misses.jsonl"
    proc = amber("serve", str(recorded["bundle"]), "--port", "0", "--json", "--misses",
                 str(misses))
    start = started(proc)
    try:
        client = openai.OpenAI(base_url=start["url"] + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="gpt-fake", messages=[
                {"role": "user", "content": "never asked"}])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    row = json.loads(misses.read_text().splitlines()[0])
    assert row["service"] == "openai" and "never recorded" in row["reason"]


def test_a_rate_limited_answer_is_kept_but_not_replayed(tmp_path: Path) -> None:
    """A 429 is archived (and listed in failures) but the retry goes upstream; the
    replay answers with the 200 that followed."""
    import openai

    from ambereval.engine.serve.server import BaseUrlServer

    with FakeWeb() as web, FakeOpenAI() as oa, FakeGemini() as gm:
        up = Upstreams.from_env({"SERPER_BASE_URL": web.serper_url,
                                 "JINA_BASE_URL": web.jina_url,
                                 "OPENAI_BASE_URL": oa.url + "/v1", "GEMINI_BASE_URL": gm.url})
        recorder = Recorder(tmp_path / "b", up)
        with BaseUrlServer(None, recorder=recorder) as server:
            client = openai.OpenAI(base_url=server.url + "/v1", api_key=OPENAI_KEY,
                                   max_retries=0)
            oa.refuse_next = 1
            with pytest.raises(openai.RateLimitError):
                client.chat.completions.create(model="m", messages=[{"role": "user",
                                                                     "content": "q"}])
            text = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "q"}]).choices[0].message.content
        recorder.finish()
    with Bundle.open(tmp_path / "b") as b:
        assert b.index.one("SELECT COUNT(*) AS n FROM failures")["n"] == 1
        row = b.index.one("SELECT status, final FROM judge_exchanges")
    assert row == {"status": 200, "final": 1}
    proc = amber("serve", str(tmp_path / "b"), "--port", "0", "--json")
    start = started(proc)
    try:
        client = openai.OpenAI(base_url=start["url"] + "/v1", api_key="x", max_retries=0)
        again = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "q"}]).choices[0].message.content
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert again == text and text.endswith("#1")


def test_plain_pages_obey_the_address_policy(tmp_path: Path) -> None:
    """In proxy mode a page on a private address is refused unless allowed."""
    with FakeWeb() as web:
        page = web.url("/pages/louvre.html")
        strict = Recorder(tmp_path / "strict", Upstreams())
        refused = strict.answer_proxied("GET", page, [], b"")
        strict.finish()
        lenient = Recorder(tmp_path / "lenient", Upstreams(), allow_private_addresses=True)
        fetched = lenient.answer_proxied("GET", page, [], b"")
        lenient.finish()
    assert refused.status == 403 and b"--allow-private-addresses" in refused.read()
    assert fetched.status == 200 and b"public museum in 1793" in fetched.read()
    with Bundle.open(tmp_path / "strict") as b:
        assert b.index.one("SELECT COUNT(*) AS n FROM records WHERE type = 'response'")["n"] == 0


def test_a_second_recorder_and_a_loop_are_refused(recorded: dict[str, Any],
                                                  tmp_path: Path) -> None:
    bundle = tmp_path / "busy"
    first = amber("serve", "--record", str(bundle), "--port", "0", "--json")
    started(first)
    try:
        second = subprocess.run([sys.executable, "-m", "ambereval.cli", "serve", "--record",
                                 str(bundle), "--port", "0"], capture_output=True, text=True,
                                timeout=120)
        assert second.returncode == 1
        assert "another amber process is writing this bundle" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        stop(first)
    port = free_port()
    loop = subprocess.run([sys.executable, "-m", "ambereval.cli", "serve", "--record",
                           str(tmp_path / "loop"), "--port", str(port)], capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"})
    assert loop.returncode == 2 and "OPENAI_BASE_URL points at this recorder" in loop.stderr


def test_kill_9_mid_recording_then_finish_makes_it_verifiable(tmp_path: Path) -> None:
    import httpx

    bundle = tmp_path / "killed"
    with FakeWeb() as web, FakeOpenAI() as oa, FakeGemini() as gm:
        proc = amber("serve", "--record", str(bundle), "--port", "0", "--json",
                     env=upstream_env(web, oa, gm))
        url = started(proc)["url"]
        for q in ("a", "b", "c"):
            r = httpx.post(f"{url}/v1/chat/completions", timeout=60,
                           headers={"Authorization": f"Bearer {OPENAI_KEY}"},
                           json={"model": "m", "messages": [{"role": "user", "content": q}]})
            assert r.status_code == 200
        proc.kill()
        proc.communicate(timeout=60)
    warc = next((bundle / "archive").glob("*.warc.gz"))
    with open(warc, "ab") as fh:  # what a record cut off by the kill leaves behind
        fh.write(gzip.compress(b"WARC/1.1\r\nWARC-Type: response\r\n")[:40])

    def amber_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ambereval.cli", *args],
                              capture_output=True, text=True, timeout=120)

    assert amber_run("bundle", "verify", str(bundle)).returncode == 3
    finished = amber_run("bundle", "finish", str(bundle))
    assert finished.returncode == 0, finished.stderr
    checked = amber_run("bundle", "verify", str(bundle), "--json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"], checked.stdout
    with Bundle.open(bundle) as b:
        assert b.index.one("SELECT COUNT(*) AS n FROM judge_exchanges")["n"] == 3
