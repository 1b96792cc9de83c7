"""Hostile requests at every endpoint of ``amber serve`` (Serper, Jina, pages, OpenAI,
Gemini), sent raw over a socket: each gets a 4xx (or a miss) with a one-line reason and
no traceback, and the server answers a valid request after each. The judge here replays
from an empty ledger, so no model is needed and nothing can be asked of one."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serve_helpers import jina_bundle

from ambereval.engine.serve.index import FrozenWeb
from ambereval.engine.serve.judges import JudgeService
from ambereval.engine.serve.log import ServeLog
from ambereval.engine.serve.server import BaseUrlServer
from ambereval.models.judge import Judge
from ambereval.models.ledger import Ledger
from ambereval.models.replay_backend import ReplayBackend

from fakeweb import FakeWeb

PATHS = ["/search", "/v1/chat/completions", "/v1/models", "/chat/completions",
         "/v1beta/models/gemini-2.5-pro:generateContent",
         "/v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
         "/v1beta/models/g:countTokens", "/v1beta/models", "/https://example.org/a", "/",
         "/_amber/proxy"]


class Running:
    def __init__(self, server: BaseUrlServer, log: ServeLog, lines: list[str],
                 eiffel: str) -> None:
        self.server, self.log, self.lines, self.eiffel = server, log, lines, eiffel

    def raw(self, data: bytes, timeout: float = 10.0) -> bytes:
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=timeout) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            out = b""
            while chunk := s.recv(65536):
                out += chunk
            return out

    def valid(self) -> None:
        request = (f"GET /{self.eiffel} HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n"
                   "Connection: close\r\n\r\n").encode()
        answer = self.raw(request)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("hostile")
    with FakeWeb() as web:
        bundle = jina_bundle(web, root / "b")
        eiffel = web.url("/pages/eiffel.html")
    ledger_path = root / "ledger.sqlite"
    Ledger(ledger_path, "record")
    with sqlite3.connect(ledger_path) as db:  # one recorded judge, so replay knows its key
        db.execute("INSERT INTO calls VALUES ('k', 'llamacpp', 'abc', ?, '', '\"\"', 1, 1, "
                   "NULL, 0.1, '2026-01-01T00:00:00.000000Z', NULL)",
                   ['{"backend":"llamacpp","model":{"sha256":"abc"},'
                    '"chat_template_sha256":"t","n_ctx":4096}'])
    book = Ledger(ledger_path, "replay")
    judges = JudgeService(Judge(ReplayBackend.from_ledger(book), book), "recorded")
    lines: list[str] = []
    log = ServeLog(notify=lines.append)
    server = BaseUrlServer(FrozenWeb([bundle]), log=log, judges=judges).start()
    try:
        yield Running(server, log, lines, eiffel)
    finally:
        server.stop()


def test_the_measured_failures_get_answers(running: Running) -> None:
    for path in ("/search", "/v1/chat/completions", "/https://example.org/a"):
        negative = running.raw(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n"
                               "\r\n{}".encode())
        assert negative.startswith(b"HTTP/1.1 400"), negative[:120]
        running.valid()
    deep = b"[" * 20000 + b"]" * 20000
    answer = running.raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
                         + str(len(deep)).encode() + b"\r\n\r\n" + deep)
    assert answer.startswith(b"HTTP/1.1 400") and b"nests deeper" in answer
    bad_search = running.raw(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                             b"\r\n{nope")
    assert bad_search.startswith(b"HTTP/1.1 400") and b"not a Serper search" in bad_search
    query = b'{"q": "largest tea producer"}'
    chunked = running.raw(b"POST /search HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                          b"Connection: close\r\n\r\n" + b"%x\r\n" % len(query) + query
                          + b"\r\n0\r\n\r\n")
    assert chunked.startswith(b"HTTP/1.1 200"), chunked[:200]
    # a client that resets mid-request: nothing printed but what the log says
    with socket.create_connection(("127.0.0.1", running.server.port)) as s:
        s.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    running.valid()
    assert all("\n" not in line and "Traceback" not in line for line in running.lines)


request_lines = st.builds(
    lambda method, path, suffix: f"{method} {path}{suffix}",
    st.sampled_from(["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "BREW", ""]),
    st.sampled_from(PATHS),
    st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=12))
headers = st.lists(st.tuples(
    st.sampled_from(["Content-Type", "Accept", "Content-Length", "Transfer-Encoding",
                     "X-Return-Format", "X-API-KEY", "Authorization", "X-Weird", "Host"]),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=20)),
    max_size=5)
bodies = st.one_of(
    st.binary(max_size=300),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                 lambda inner: st.lists(inner, max_size=4)
                 | st.dictionaries(st.sampled_from(["q", "model", "messages", "contents",
                                                    "role", "parts", "text", "content",
                                                    "response_format", "generationConfig",
                                                    "num", "url", "stream"]), inner,
                                   max_size=4), max_leaves=20).map(
        lambda v: __import__("json").dumps(v).encode()))


@settings(max_examples=1500, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(line=request_lines, head=headers, body=bodies, framing=st.sampled_from(
    ["length", "none", "wrong", "chunked"]))
def test_random_requests_never_break_the_server(running: Running, line: str,
                                                head: list[tuple[str, str]], body: bytes,
                                                framing: str) -> None:
    lines = [f"{line} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{k}: {v}" for k, v in head if k not in ("Content-Length", "Transfer-Encoding")]
    if framing == "length":
        lines.append(f"Content-Length: {len(body)}")
        payload = body
    elif framing == "wrong":
        lines.append(f"Content-Length: {len(body) + 7}")
        payload = body
    elif framing == "chunked":
        lines.append("Transfer-Encoding: chunked")
        payload = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    else:
        payload = b""
    lines.append("Connection: close")
    answer = running.raw(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload,
                         timeout=20)
    status = answer.split(b" ", 2)[1] if answer.startswith(b"HTTP/1.") else b""
    assert status.isdigit() and int(status) < 500 or int(status or 0) == 501, answer[:300]
    running.valid()
    assert running.log.problems == 0
    assert not any("Traceback" in line for line in running.lines)
