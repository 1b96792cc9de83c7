"""The OpenAI-compatible backend against a real llama.cpp server on loopback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from ambereval.errors import JudgeUnavailable, ModelError
from ambereval.models import Judge, default_judge_path
from ambereval.models.openai_backend import OpenAIBackend

pytestmark = pytest.mark.slow

SCHEMA = {"type": "object",
          "properties": {"verdict": {"type": "string", "enum": ["supported", "unknown"]}},
          "required": ["verdict"], "additionalProperties": False}
MESSAGES = [{"role": "system", "content": "Judge the claim. Reply in JSON."},
            {"role": "user", "content": "Evidence: Tea comes from China.\n\nClaim: Tea is from "
                                        "China."}]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = open(tmp_path_factory.mktemp("server") / "server.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(default_judge_path()),
         "--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port),
         "--n_ctx", "1024", "--n_threads", "2", "--seed", "0"],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.3)
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited, see {log.name}")
    else:
        proc.kill()
        raise RuntimeError("llama_cpp.server did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def test_schema_valid_and_deterministic(server: str) -> None:
    judge = Judge(OpenAIBackend(server, "smollm2"))
    first = judge.ask(MESSAGES, SCHEMA, max_tokens=24)
    second = judge.ask(MESSAGES, SCHEMA, max_tokens=24)
    assert first.obj["verdict"] in ("supported", "unknown")
    assert (first.raw, first.obj) == (second.raw, second.obj)
    assert first.usage["prompt_tokens"] > 10
    assert first.key == second.key and first.source == "model"


class _Broken(BaseHTTPRequestHandler):
    mode = "garbage"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.mode == "slow":
            time.sleep(2)
            return
        body = json.dumps({"choices": [{"message": {"content": "not json {"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize(("mode", "problem", "error"),
                         [("garbage", "invalid JSON in the reply", ModelError),
                          ("slow", "timed out", JudgeUnavailable)])
def test_bad_server_retries_then_one_clear_error(mode: str, problem: str,
                                                 error: type[Exception]) -> None:
    handler = type("H", (_Broken,), {"mode": mode})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        backend = OpenAIBackend(f"http://127.0.0.1:{httpd.server_address[1]}", "m",
                                timeout=0.5, attempts=2, backoff=0.01)
        with pytest.raises(error, match=f"failed after 2 attempts: {problem}"):
            Judge(backend).ask(MESSAGES, SCHEMA)
    finally:
        httpd.shutdown()
