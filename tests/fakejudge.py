"""A loopback OpenAI-compatible judge server for concurrency tests and the serving benchmark.

Real HTTP on 127.0.0.1 (``/v1/chat/completions``, ``/v1/models``): every answer is a
schema-valid JSON object derived from a hash of the request's messages, so the same
request always gets the same answer and different requests get different ones. Each
request takes ``latency`` seconds; at most ``capacity`` are served at once, the rest get
``429`` with ``Retry-After`` (the way a saturated vLLM or hosted endpoint pushes back).
``refuse_first`` answers the first requests with 429 whatever the load; ``gate=k`` holds
each request until ``k`` are in flight together (proves a client's concurrency without
timing). ``pushback_after=k`` answers 503 (``Retry-After``) to every request after the
first ``k`` served, until the attribute is set back to ``None`` (a run held mid-way).
``fail_after=k`` answers exactly ``k`` requests, then HTTP 500 to every one (a judge that
goes down); both count requests already admitted, so concurrent arrivals cannot overshoot.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def answer_for(schema: dict[str, Any], seed: bytes) -> Any:
    """A deterministic value that validates against the (small) schemas Amber uses."""
    digest = hashlib.sha256(seed).digest()
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][digest[0] % len(schema["enum"])]
    if kind == "object" and "properties" not in schema:  # JSON mode: any object
        return {"answer": "evidence " + digest.hex()[:12]}
    if kind == "object":
        return {k: answer_for(v, seed + k.encode()) for k, v in schema["properties"].items()}
    if kind == "boolean":
        return digest[0] % 2 == 0
    if kind == "integer":
        return 1 + digest[0] % 3
    if kind == "number":
        return round(digest[0] / 255, 2)
    if kind == "array":
        n = digest[0] % 3
        return [answer_for(schema["items"], seed + bytes([i])) for i in range(n)][
            : schema.get("maxItems", 3)]
    text = "evidence " + digest.hex()[:12]
    return text[: schema.get("maxLength", len(text))]


class FakeJudgeServer:
    """``with FakeJudgeServer(latency=0.2, capacity=64) as server: server.url``"""

    def __init__(self, latency: float = 0.0, capacity: int = 64,
                 retry_after: float = 0.05, refuse_first: int = 0, gate: int = 0,
                 pushback_after: int | None = None, fail_after: int | None = None) -> None:
        self.pushback_after = pushback_after
        self.fail_after = fail_after  # answered this many, it fails every request (HTTP 500)
        self.salt = b""  # change it to make the "model" answer differently from now on
        self.latency = latency
        self.refuse_first = refuse_first
        self.gate = threading.Barrier(gate, timeout=10) if gate else None
        self.capacity = capacity
        self.retry_after = retry_after
        self.in_flight = 0
        self.peak = 0
        self.served = 0
        self.refused = 0
        self.seen: Counter[str] = Counter()  # sha256 of each answered request's messages
        # a prefix cache holding the last request: the tokens (4 characters each) of the
        # start a request shares with it are reported as cached, as OpenAI and vLLM do
        self.last_seed = b""
        self.cached_reported = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms stall

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, obj: Any, headers: dict[str, str] | None = None,
                      ) -> None:
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._send(200, {"data": [{"id": "fake", "object": "model"}]})

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer._lock:
                    # admitted requests count against the limits at once, so two requests
                    # arriving together cannot both slip under them
                    admitted = outer.served + outer.in_flight
                    down = outer.fail_after is not None and admitted >= outer.fail_after
                    held = outer.pushback_after is not None and admitted >= outer.pushback_after
                    if down:
                        busy = False
                    elif held or outer.in_flight >= outer.capacity \
                            or outer.refused < outer.refuse_first:
                        outer.refused += 1
                        busy = True
                    else:
                        busy = False
                        outer.in_flight += 1
                        outer.peak = max(outer.peak, outer.in_flight)
                if down:
                    self._send(500, {"error": "server down"})
                    return
                if busy:
                    self._send(503 if held else 429, {"error": "busy"},
                               {"Retry-After": f"{outer.retry_after:g}"})
                    return
                try:
                    if outer.gate is not None:
                        outer.gate.wait()
                    time.sleep(outer.latency)
                    seed = json.dumps(request["messages"], sort_keys=True).encode()
                    salted = outer.salt + seed
                    fmt = request.get("response_format")
                    if fmt is None:  # free text
                        content = "answer " + hashlib.sha256(salted).hexdigest()[:16]
                    else:
                        schema = fmt["json_schema"]["schema"] if "json_schema" in fmt \
                            else fmt["schema"]
                        content = json.dumps(answer_for(schema, salted))
                    tokens = len(seed) // 4
                finally:
                    with outer._lock:
                        outer.in_flight -= 1
                        outer.served += 1
                        outer.seen[hashlib.sha256(seed).hexdigest()] += 1
                        shared = len(os.path.commonprefix([outer.last_seed, seed])) // 4
                        cached = max(0, min(shared, len(seed) // 4 - 1))
                        outer.last_seed = seed
                        outer.cached_reported += cached
                self._send(200, {
                    "choices": [{"message": {"role": "assistant", "content": content},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": tokens, "completion_tokens": len(content) // 4,
                              "prompt_tokens_details": {"cached_tokens": cached}}})

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.request_queue_size = 256
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeJudgeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
