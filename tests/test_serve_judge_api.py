"""The judge APIs of ``amber serve`` through the providers' own SDKs (openai, sync and
async; google-genai) and plain requests, configured by environment variables alone, as a
benchmark's unmodified code would be. The judge here is a loopback OpenAI-compatible
server (fast and deterministic); tests/test_serve_judge_local.py runs the real local
judge, the proxy and a replay in a network namespace."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from fakejudge import FakeJudgeServer

from ambereval.engine.serve.index import FrozenWeb
from ambereval.engine.serve.judges import open_service
from ambereval.engine.serve.log import ServeLog
from ambereval.engine.serve.server import BaseUrlServer

openai = pytest.importorskip("openai")
genai = pytest.importorskip("google.genai")


class Served:
    def __init__(self, url: str, log: ServeLog, fake: FakeJudgeServer | None) -> None:
        self.url, self.log, self.fake = url, log, fake


def start(tmp_path: Path, mode: str = "reuse", fake: FakeJudgeServer | None = None,
          misses: Path | None = None, **kw: object) -> tuple[BaseUrlServer, Served]:
    service = open_service(None, None, fake.url if fake else None, "fake-judge" if fake
                           else None, 4096, 16, None, 0, tmp_path / "ledger.sqlite", mode,
                           False, 64, lambda line: None)
    log = ServeLog(misses, notify=lambda line: None)
    server = BaseUrlServer(FrozenWeb([]), log=log, judges=service)
    return server, Served(server.url, log, fake)


@pytest.fixture()
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    with FakeJudgeServer() as fake:
        server, info = start(tmp_path, fake=fake)
        server.start()
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-real-key")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("GEMINI_API_KEY", "not-a-real-key")
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        try:
            yield info
        finally:
            server.stop()


def test_openai_sdk_sync_with_environment_variables_only(served: Served) -> None:
    client = openai.OpenAI()
    done = client.chat.completions.create(
        model="gpt-4o-mini", temperature=0.9, messages=[
            {"role": "system", "content": "You grade reports."},
            {"role": "user", "content": "Grade this."}])
    assert done.choices[0].message.content.startswith("answer ")
    assert done.model == "fake-judge" and done.choices[0].finish_reason == "stop"
    again = client.chat.completions.create(
        model="another-name", messages=[{"role": "system", "content": "You grade reports."},
                                        {"role": "user", "content": "Grade this."}])
    assert again.choices[0].message.content == done.choices[0].message.content
    assert served.fake is not None and sum(served.fake.seen.values()) == 1  # ledger
    models = client.models.list()
    assert [m.id for m in models] == ["fake-judge"]
    raw = client.chat.completions.with_raw_response.create(
        model="x", messages=[{"role": "user", "content": "Grade this."}])
    assert raw.headers["X-Amber-Judge"] == "fake-judge"


def test_json_modes_and_schemas_parse_into_the_clients_types(served: Served) -> None:
    from pydantic import BaseModel

    class Verdict(BaseModel):
        supported: bool
        quote: str

    client = openai.OpenAI()
    parsed = client.chat.completions.parse(
        model="gpt-5", messages=[{"role": "user", "content": "Is it supported?"}],
        response_format=Verdict)
    assert isinstance(parsed.choices[0].message.parsed, Verdict)
    loose = client.chat.completions.create(
        model="gpt-5", messages=[{"role": "user", "content": "Answer in JSON."}],
        response_format={"type": "json_object"})
    assert isinstance(json.loads(loose.choices[0].message.content), dict)
    # LiveResearchBench's form: json_schema without strict
    schema = {"type": "object", "properties": {"score": {"type": "integer"}},
              "required": ["score"]}
    graded = client.chat.completions.create(
        model="gpt-5", messages=[{"role": "user", "content": "Score it."}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "grading_response", "schema": schema}})
    assert isinstance(json.loads(graded.choices[0].message.content)["score"], int)


def test_openai_streams_and_the_async_client_at_once(served: Served, tmp_path: Path) -> None:
    client = openai.OpenAI()
    chunks = list(client.chat.completions.create(
        model="x", stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "Stream a verdict."}]))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    plain = client.chat.completions.create(
        model="x", messages=[{"role": "user", "content": "Stream a verdict."}])
    assert text == plain.choices[0].message.content
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0

    async def many(base: str) -> list[str]:
        aclient = openai.AsyncOpenAI(base_url=base)
        sem = asyncio.Semaphore(16)

        async def one(i: int) -> str:
            async with sem:
                done = await aclient.chat.completions.create(
                    model="gpt-5", messages=[{"role": "user", "content": f"report {i}"}])
                return done.choices[0].message.content or ""

        return await asyncio.gather(*(one(i) for i in range(24)))

    # each request is held until 4 are in flight together: served concurrently, or never
    with FakeJudgeServer(gate=4) as gated:
        server, _ = start(tmp_path, fake=gated)
        with server:
            answers = asyncio.run(many(f"{server.url}/v1"))
    assert len(set(answers)) == 24 and all(a.startswith("answer ") for a in answers)
    assert gated.peak >= 4


def test_gemini_sdk_with_environment_variables_only(served: Served) -> None:
    from google.genai import types
    from pydantic import BaseModel

    client = genai.Client(http_options={"timeout": 600000})  # DeepResearch Bench's client
    done = client.models.generate_content(
        model="gemini-2.5-flash", contents="Extract the claims.",
        config=types.GenerateContentConfig(
            thinking_config=types.ThinkingConfig(thinking_budget=16000)))
    assert done.text and done.text.startswith("answer ")
    assert done.model_version == "fake-judge"
    assert done.usage_metadata and done.usage_metadata.total_token_count

    class Claims(BaseModel):
        claims: list[str]

    structured = client.models.generate_content(
        model="gemini-2.5-pro", contents="List the claims.",
        config=types.GenerateContentConfig(response_mime_type="application/json",
                                           response_schema=Claims))
    assert isinstance(structured.parsed, Claims)
    streamed = "".join(c.text or "" for c in client.models.generate_content_stream(
        model="gemini-2.5-flash", contents="Extract the claims."))
    assert streamed == done.text
    assert client.models.count_tokens(model="gemini-2.5-flash",
                                      contents="Extract the claims.").total_tokens > 0
    with pytest.raises(genai.errors.ClientError) as refused:  # the real API's rule
        client.models.generate_content(
            model="gemini-2.5-flash",
            contents=[{"role": "tool", "parts": [{"text": "x"}]}])
    assert refused.value.code == 400


def test_replay_from_the_ledger_is_byte_identical_and_misses_are_refused(
        tmp_path: Path) -> None:
    body = {"model": "gpt-5", "messages": [{"role": "user", "content": "Grade report 7."}],
            "response_format": {"type": "json_object"}}
    gbody = {"contents": [{"role": "user", "parts": [{"text": "Grade report 7."}]}]}
    gpath = "/v1beta/models/gemini-2.5-pro:generateContent"
    with FakeJudgeServer() as fake:
        server, _ = start(tmp_path, fake=fake)
        with server:
            live = requests.post(f"{server.url}/v1/chat/completions", json=body, timeout=30)
            glive = requests.post(server.url + gpath, json=gbody, timeout=30)
    misses = tmp_path / "misses.jsonl"
    server, info = start(tmp_path, mode="replay", misses=misses)  # no judge server at all
    with server:
        again = requests.post(f"{server.url}/v1/chat/completions", json=body, timeout=30)
        gagain = requests.post(server.url + gpath, json=gbody, timeout=30)
        other = requests.post(f"{server.url}/v1/chat/completions", timeout=30, json={
            **body, "messages": [{"role": "user", "content": "Grade report 8."}]})
        gother = requests.post(server.url + gpath, timeout=30, json={
            "contents": [{"parts": [{"text": "Grade report 8."}]}]})
    assert live.status_code == again.status_code == 200
    assert again.content == live.content and gagain.content == glive.content
    assert other.status_code == 404 and other.json()["error"]["code"] == "not_in_ledger"
    assert gother.status_code == 404 and gother.json()["error"]["status"] == "NOT_FOUND"
    assert [json.loads(line)["service"] for line in misses.read_text().splitlines()] == \
        ["openai", "gemini"]
    assert info.log.summary()["miss"] == 2 and info.log.summary()["judge"] == 2


def test_every_malformed_judge_request_gets_the_providers_error_shape(served: Served
                                                                      ) -> None:
    url = served.url
    cases = [
        ("/v1/chat/completions", b"{not json", "openai"),
        ("/v1/chat/completions", b'{"model": "x"}', "openai"),
        ("/v1/chat/completions", b'{"model": "x", "messages": [{"role": "tool"}]}', "openai"),
        ("/v1/chat/completions", b"[" * 20000 + b"]" * 20000, "openai"),
        ("/v1beta/models/g:generateContent", b'{"contents": 5}', "gemini"),
        ("/v1beta/models/g:generateContent", b"\xff\xfe", "gemini"),
        ("/v1beta/models/g:generateContent", b'{"contents": [{"parts": [{"inlineData": '
                                             b'{"data": "AA=="}}]}]}', "gemini"),
    ]
    for path, body, shape in cases:
        resp = requests.post(url + path, data=body, timeout=30,
                             headers={"Content-Type": "application/json"})
        assert resp.status_code == 400, (path, body[:40], resp.text)
        error = resp.json()["error"]
        if shape == "openai":
            assert error["type"] == "invalid_request_error" and error["message"]
        else:
            assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400
        assert "\n" not in error["message"]
    client = openai.OpenAI()
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="x", messages=[])
    assert served.log.summary()["refused"] == len(cases) + 1


def test_no_judge_configured_is_a_miss_in_the_providers_shape(tmp_path: Path) -> None:
    log = ServeLog(notify=lambda line: None)
    with BaseUrlServer(FrozenWeb([]), log=log) as server:
        resp = requests.post(f"{server.url}/v1/chat/completions", timeout=30,
                             json={"model": "x", "messages": [{"role": "user", "content": "q"}]})
    assert resp.status_code == 404 and "--judge" in resp.json()["error"]["message"]
    assert log.summary()["miss"] == 1


def test_the_cli_needs_a_bundle_or_a_judge_and_prints_the_sdk_variables(tmp_path: Path
                                                                         ) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GOOGLE_"))}
    none = subprocess.run([sys.executable, "-m", "ambereval.cli", "serve"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert none.returncode == 2 and "no bundle and no judge given" in none.stderr
    bad = subprocess.run([sys.executable, "-m", "ambereval.cli", "serve", "--ledger",
                          str(tmp_path / "none.sqlite"), "--ledger-mode", "replay"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "no such ledger" in bad.stderr
    assert "Traceback" not in bad.stderr
