"""Loopback fakes of two API judges, for ``amber serve --record``: an OpenAI-compatible
server (``/v1/chat/completions``, streamed or not, ``/v1/models``) and a Gemini server
(``/{v1,v1beta}/models/M:generateContent``, ``:streamGenerateContent?alt=sse``,
``:countTokens``). Real HTTP on 127.0.0.1, in each API's own shapes.

Every answer carries a serial number (``#n``), so two calls with the same request get
different answers: a test can tell an answer replayed from a recording from a second
call upstream. Streams are sent with chunked transfer coding, one event per chunk,
flushed apart. Both want their key (``Authorization: Bearer`` / ``x-goog-api-key`` or
``?key=``) and set a session cookie, so a test can look for both in a bundle.
``refuse_next`` answers the next requests with 429.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

OPENAI_KEY = "sk-fake-openai-key-0123456789abcdef"
GEMINI_KEY = "AIzaFakeGeminiKey0123456789abcdef"
_GEMINI = re.compile(r"^/(v1|v1beta|v1alpha)/models/([^/:]+):([A-Za-z]+)$")


@dataclass
class Call:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class _FakeAPI:
    name = "fake"

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.served = 0
        self.refuse_next = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                outer._handle(self)

            def do_POST(self) -> None:
                outer._handle(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> _FakeAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def hits(self, contains: str = "") -> int:
        with self._lock:
            return sum(1 for c in self.calls if contains in c.path)

    def _serial(self) -> int:
        with self._lock:
            self.served += 1
            return self.served

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        size = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(size) if size else b""
        with self._lock:
            self.calls.append(Call(h.command, h.path, dict(h.headers.items()), body))
            refuse = self.refuse_next > 0
            if refuse:
                self.refuse_next -= 1
        if refuse:
            self._json(h, 429, self.error(429, "rate limited"))
            return
        self.serve(h, body)

    def serve(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        raise NotImplementedError

    def error(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def _head(h: BaseHTTPRequestHandler, status: int, ctype: str) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Set-Cookie", "session=fake-llm-session-secret; Path=/")

    def _json(self, h: BaseHTTPRequestHandler, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self._head(h, status, "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _events(self, h: BaseHTTPRequestHandler, events: Iterator[bytes]) -> None:
        self._head(h, 200, "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for event in events:
            h.wfile.write(b"%x\r\n%b\r\n" % (len(event), event))
            h.wfile.flush()
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()


def _words(seed: bytes, n: int) -> list[str]:
    digest = hashlib.sha256(seed).hexdigest()
    return [digest[i * 4:(i + 1) * 4] for i in range(n)]


class FakeOpenAI(_FakeAPI):
    """``with FakeOpenAI() as api: OpenAI(base_url=api.url + "/v1", api_key=OPENAI_KEY)``"""

    name = "openai"

    def error(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "invalid_request_error",
                          "param": None, "code": None}}

    def serve(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        if h.headers.get("Authorization") != f"Bearer {OPENAI_KEY}":
            self._json(h, 401, self.error(401, "Incorrect API key provided."))
            return
        path = urlsplit(h.path).path
        if h.command == "GET" and path == "/v1/models":
            self._json(h, 200, {"object": "list", "data": [
                {"id": "gpt-fake", "object": "model", "created": 1700000000,
                 "owned_by": "amber-tests"}]})
            return
        if h.command != "POST" or path != "/v1/chat/completions":
            self._json(h, 404, self.error(404, f"Unknown request URL: {path}"))
            return
        try:
            request = json.loads(body)
            messages = request["messages"]
        except (ValueError, KeyError, TypeError):
            self._json(h, 400, self.error(400, "We could not parse the JSON body."))
            return
        n = self._serial()
        words = [*_words(json.dumps(messages, sort_keys=True).encode(), 5), f"#{n}"]
        model = request.get("model", "gpt-fake")
        ident = {"id": f"chatcmpl-fake{n}", "created": 1700000000 + n, "model": model}
        usage = {"prompt_tokens": 11, "completion_tokens": len(words),
                 "total_tokens": 11 + len(words)}
        if request.get("stream"):
            def events() -> Iterator[bytes]:
                chunk = {**ident, "object": "chat.completion.chunk"}
                first = {"index": 0, "delta": {"role": "assistant", "content": ""},
                         "finish_reason": None}
                yield b"data: " + json.dumps({**chunk, "choices": [first]}).encode() + b"\n\n"
                for word in words:
                    delta = {"index": 0, "delta": {"content": word + " "}, "finish_reason": None}
                    yield b"data: " + json.dumps({**chunk, "choices": [delta]}).encode() + \
                        b"\n\n"
                end = {"index": 0, "delta": {}, "finish_reason": "stop"}
                yield b"data: " + json.dumps({**chunk, "choices": [end]}).encode() + b"\n\n"
                if (request.get("stream_options") or {}).get("include_usage"):
                    yield b"data: " + json.dumps({**chunk, "choices": [], "usage": usage}
                                                 ).encode() + b"\n\n"
                yield b"data: [DONE]\n\n"

            self._events(h, events())
            return
        self._json(h, 200, {**ident, "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": " ".join(words)},
             "logprobs": None, "finish_reason": "stop"}], "usage": usage})


class FakeGemini(_FakeAPI):
    """``GOOGLE_GEMINI_BASE_URL=api.url`` and ``GEMINI_API_KEY=GEMINI_KEY`` for google-genai."""

    name = "gemini"

    def error(self, status: int, message: str) -> dict[str, Any]:
        names = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                 429: "RESOURCE_EXHAUSTED"}
        return {"error": {"code": status, "message": message,
                          "status": names.get(status, "INTERNAL")}}

    def serve(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        parts = urlsplit(h.path)
        key = h.headers.get("x-goog-api-key") or (parse_qs(parts.query).get("key") or [""])[0]
        if key != GEMINI_KEY:
            self._json(h, 403, self.error(403, "API key not valid."))
            return
        found = _GEMINI.match(parts.path)
        if h.command != "POST" or found is None:
            self._json(h, 404, self.error(404, f"{parts.path} is not found"))
            return
        model, method = found.group(2), found.group(3)
        try:
            request = json.loads(body)
            contents = request["contents"]
        except (ValueError, KeyError, TypeError):
            self._json(h, 400, self.error(400, "Invalid JSON payload received."))
            return
        if method == "countTokens":
            self._json(h, 200, {"totalTokens": len(json.dumps(contents)) // 4})
            return
        n = self._serial()
        words = [*_words(json.dumps(contents, sort_keys=True).encode(), 5), f"#{n}"]
        usage = {"promptTokenCount": 9, "candidatesTokenCount": len(words),
                 "totalTokenCount": 9 + len(words)}

        def response(text: str, last: bool) -> dict[str, Any]:
            candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"},
                                         "index": 0}
            out: dict[str, Any] = {"candidates": [candidate], "modelVersion": model,
                                   "responseId": f"fake-{n}"}
            if last:
                candidate["finishReason"] = "STOP"
                out["usageMetadata"] = usage
            return out

        if method == "streamGenerateContent":
            def events() -> Iterator[bytes]:
                for i, word in enumerate(words):
                    last = i == len(words) - 1
                    text = word + ("" if last else " ")
                    yield b"data: " + json.dumps(response(text, last)).encode() + b"\r\n\r\n"

            self._events(h, events())
            return
        if method != "generateContent":
            self._json(h, 404, self.error(404, f"method {method} is not found"))
            return
        self._json(h, 200, response(" ".join(words), True))
