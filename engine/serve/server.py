"""Base-URL mode of ``amber serve``: a Serper-compatible ``POST /search``, a
Jina-Reader-compatible ``GET /<url>`` and, with a judge, the OpenAI Chat Completions and
Gemini APIs (``/v1/chat/completions``, ``/v1beta/models/M:generateContent``) on one
loopback port, answered from the bundles and Amber's judge.

Point ``SERPER_BASE_URL``, ``JINA_BASE_URL``, ``OPENAI_BASE_URL`` and
``GOOGLE_GEMINI_BASE_URL`` at it. One thread per connection, HTTP/1.1 keep-alive, bodies
streamed from the WARC offsets. A malformed request gets a 4xx with a one-line reason in
the shape its client expects, and the log one line: never a traceback or a dropped
connection.
"""

from __future__ import annotations

import errno
import json
import signal
import socket
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

from ambereval.engine.serve.answer import Answer, miss
from ambereval.engine.serve.index import FrozenWeb
from ambereval.engine.serve.judge_api import ApiError
from ambereval.engine.serve.judges import JudgeService, no_judge, refusal
from ambereval.engine.serve.log import ServeLog
from ambereval.engine.serve.match import NotASearch, search_body, search_query
from ambereval.engine.serve.upstreams import JUDGE_SERVICES, service_for_path
from ambereval.errors import BundleError, ConfigError

MAX_REQUEST_BODY = 10 * 1024 * 1024


def failure(service: str, message: str) -> Answer:
    """500 when a record cannot be read (a damaged bundle): one line, counted apart."""
    line = f"amber serve: {message}\n".encode()
    return Answer(500, "Internal Server Error", [("Content-Type", "text/plain; charset=utf-8"),
                                                 ("X-Amber-Match", "error")],
                  "error", service, body=line, length=len(line))


def bad_request(service: str, reason: str, status: int = 400) -> Answer:
    """A request that cannot be understood: 4xx with a one-line reason, in the JSON error
    shape of the judge APIs or as plain text for the Serper and Jina interfaces."""
    if service in ("openai", "gemini"):
        return refusal(service, ApiError(status, reason))
    line = f"amber serve: {reason}\n".encode()
    return Answer(status, {400: "Bad Request", 411: "Length Required",
                           413: "Payload Too Large"}.get(status, "Bad Request"),
                  [("Content-Type", "text/plain; charset=utf-8"), ("X-Amber-Match", "refused")],
                  "refused", service, body=line, length=len(line))


def answer_judge(web: FrozenWeb, service: str, method: str, target: str,
                 headers: list[tuple[str, str]], body: bytes,
                 judges: JudgeService | None) -> Answer:
    """A judge API request: the recorded judge's own answer when the bundles hold the
    exchange (``amber serve --record``), else Amber's judge when one is configured, else
    a miss in the provider's shape."""
    if len(web.judges):
        recorded = web.judge(service, method, target, body)
        if recorded.match != "miss" or judges is None:
            return recorded
        recorded.close()
    if judges is None:
        return no_judge(service)
    return judges.answer(service, method, target, headers, body)


def answer_service(web: FrozenWeb, service: str, method: str, target: str,
                   headers: list[tuple[str, str]], body: bytes,
                   judges: JudgeService | None = None) -> Answer:
    """Answer one request to the Serper, Jina, OpenAI or Gemini interface. ``target`` is
    the path and query after the host (``/search?q=...``, ``/https://example.com/a``)."""
    parts = urlsplit(target)
    if service in JUDGE_SERVICES:
        return answer_judge(web, service, method, target, headers, body, judges)
    try:
        if service == "serper":
            if parts.path.rstrip("/") != "/search":
                return miss("serper", f"{parts.path}: only /search was captured")
            if method == "POST":
                data = search_body(body)
                return web.search(data, batch=body.lstrip()[:1] == b"[")
            if method in ("GET", "HEAD"):
                return web.search([search_query(parts.query)])
            return miss("serper", f"{method} /search is not a Serper request")
        if method == "POST":
            url = _posted_url(body, headers)
            if url is None:
                return miss("jina", "POST without a 'url' in its body")
            return web.read(url, headers)
        if method not in ("GET", "HEAD"):
            return miss("jina", f"{method} is not a reader request")
        return web.read(target[1:] if target.startswith("/") else target, headers,
                        head_only=method == "HEAD")
    except NotASearch as exc:
        return bad_request("serper", f"not a Serper search request: {exc}")
    except (BundleError, OSError, EOFError, ValueError, zlib.error) as exc:
        return failure(service, f"could not read the captured record ({exc})")


_DEFAULT_PORTS = {"http": 80, "https": 443}


def answer_proxied(web: FrozenWeb, method: str, url: str, headers: list[tuple[str, str]],
                   body: bytes, judges: JudgeService | None = None) -> Answer:
    """Answer a request the proxy intercepted, by its absolute URL: the service hosts
    (Serper, Jina and every base URL the captures used) as services, any other URL from
    the pages captured directly."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port or _DEFAULT_PORTS.get(parts.scheme, 0)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    service = web.service_for_host(f"{host}:{port}", target)
    if service is None and port == _DEFAULT_PORTS.get(parts.scheme):
        service = web.service_for_host(host, target)
    if service is not None:
        return answer_service(web, service, method, target, headers, body, judges)
    try:
        return web.page(method, url)
    except (BundleError, OSError, EOFError, ValueError, zlib.error) as exc:
        return failure("direct", f"could not read the captured record ({exc})")


def _posted_url(body: bytes, headers: list[tuple[str, str]]) -> str | None:
    ctype = next((v for k, v in headers if k.lower() == "content-type"), "")
    try:
        if "json" in ctype or body.lstrip()[:1] == b"{":
            data: Any = json.loads(body)
        else:
            data = dict(parse_qsl(body.decode("utf-8")))
    except (ValueError, UnicodeDecodeError):
        return None
    url = data.get("url") if isinstance(data, dict) else None
    return url if isinstance(url, str) and url else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True
    note: Any = None  # one line per broken connection (set by BaseUrlServer)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that broke mid-request: one line, never a traceback."""
        import sys

        kind, err = sys.exc_info()[:2]
        if kind in (ConnectionResetError, BrokenPipeError, ConnectionAbortedError,
                    TimeoutError):
            return  # the client went away: nothing to report
        if self.note is not None:
            self.note(f"a connection from {client_address[0]} failed: "
                      f"{kind.__name__ if kind else 'error'}: {err}")


def read_body(rfile: Any, headers: Any) -> bytes:
    """The request body by Content-Length or chunked transfer coding, within the limit;
    ValueError (with the reason and the status to answer) for anything else."""
    chunked = "chunked" in (headers.get("Transfer-Encoding") or "").lower()
    raw = headers.get("Content-Length")
    if chunked:
        return _read_chunked(rfile)
    if raw is None:
        return b""
    text = raw.strip()
    if not text.isdigit():
        raise BodyError(400, f"Content-Length {raw[:40]!r} is not a number of bytes")
    size = int(text)
    if size > MAX_REQUEST_BODY:
        raise BodyError(413, f"request body of {size} bytes is over the limit of "
                        f"{MAX_REQUEST_BODY}")
    data = rfile.read(size) if size else b""
    if len(data) < size:
        raise BodyError(400, f"request body ended after {len(data)} of {size} bytes")
    return data


class BodyError(ValueError):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def _read_chunked(rfile: Any) -> bytes:
    out = bytearray()
    while True:
        line = rfile.readline(1024)
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BodyError(400, "malformed chunked request body") from None
        if size < 0 or len(out) + size > MAX_REQUEST_BODY:
            raise BodyError(413, f"request body over the limit of {MAX_REQUEST_BODY} bytes")
        if size == 0:
            while rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return bytes(out)
        out += rfile.read(size)
        rfile.readline(1024)


class Forwarder(Protocol):
    """``amber serve --record``: answers by forwarding upstream and recording (the
    recorder in :mod:`.recorder`), instead of from the bundles."""

    def answer_base(self, method: str, target: str, headers: list[tuple[str, str]],
                    body: bytes) -> Answer: ...

    def answer_proxied(self, method: str, url: str, headers: list[tuple[str, str]],
                       body: bytes) -> Answer: ...


class ProxyBackend:
    """What the proxy reports to the bundle server: its port once listening, and every
    upstream connection it refused (0 expected)."""

    def __init__(self) -> None:
        self.running = threading.Event()
        self.port = 0
        self.refused = 0


def _handler(web: FrozenWeb | None, log: ServeLog, backend: ProxyBackend | None = None,
             judges: JudgeService | None = None,
             recorder: Forwarder | None = None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "amber-serve"
        disable_nagle_algorithm = True  # headers and body go out at once (no 40 ms stall)

        def log_message(self, *args: Any) -> None:  # never log requests (keys)
            pass

        # a request line the server cannot read at all (HTTP/0.9 forms, bad versions,
        # over-long lines): a status line and one plain-text line, never an HTML page
        default_request_version = "HTTP/1.1"

        def send_error(self, code: int, message: str | None = None,
                       explain: str | None = None) -> None:
            reason = " ".join((message or self.responses.get(code, ("error",))[0]).split())
            line = f"amber serve: {reason}\n".encode("utf-8", "replace")
            log.notify(f"refused a malformed request: HTTP {code} {reason[:200]}")
            self.close_connection = True
            try:
                self.send_response_only(code)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(line)))
                self.send_header("Connection", "close")
                self.end_headers()
                if self.command != "HEAD" and code >= 200 and code not in (204, 304):
                    self.wfile.write(line)
            except OSError:
                pass

        def do_GET(self) -> None:
            self._dispatch()

        def do_HEAD(self) -> None:
            self._dispatch()

        def do_POST(self) -> None:
            self._dispatch()

        def do_PUT(self) -> None:
            self._dispatch()

        def do_DELETE(self) -> None:
            self._dispatch()

        def _dispatch(self) -> None:
            path = urlsplit(self.path).path
            service = service_for_path(self.path)
            host = self.headers.get("Host") or "{}:{}".format(*self.server.server_address[:2])
            try:
                body = read_body(self.rfile, self.headers)
            except BodyError as err:
                self.close_connection = True  # what follows on this connection is unknown
                answer = bad_request(service, str(err), err.status)
                log.note(self.command, f"http://{host}{path}", answer)
                self._send(answer)
                return
            if backend is not None and self.path.startswith("/_amber/"):
                self._backend(body)
                return
            headers = list(self.headers.items())
            if recorder is not None:  # --record: forwarded upstream and written down
                answer = recorder.answer_base(self.command, self.path, headers, body)
            else:
                assert web is not None
                answer = answer_service(web, service, self.command, self.path, headers,
                                        body, judges)
            log.note(self.command, f"http://{host}{self.path}", answer)
            self._send(answer)

        def _backend(self, body: bytes) -> None:
            """The proxy's side door (its own loopback port, never the public one)."""
            assert backend is not None
            path = urlsplit(self.path)
            if path.path == "/_amber/proxy" and self.command == "POST":
                head, _, payload = body.partition(b"\n")
                meta = json.loads(head)
                method, url = meta["method"], meta["url"]
                headers = [(str(k), str(v)) for k, v in meta["headers"]]
                if recorder is not None:
                    answer = recorder.answer_proxied(method, url, headers, payload)
                else:
                    assert web is not None
                    answer = answer_proxied(web, method, url, headers, payload, judges)
                log.note(method, url, answer)
                try:
                    data = answer.read()
                except (BundleError, OSError, EOFError, ValueError, zlib.error) as exc:
                    answer = failure(answer.service, f"could not read the record ({exc})")
                    data = answer.read()
                self.send_response_only(answer.status, answer.reason or None)
                for name, value in answer.headers:
                    self.send_header(name, value)
                if method.upper() == "HEAD":
                    self.send_header("X-Amber-Head-Length", str(answer.length))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if path.path == "/_amber/refused":
                backend.refused += 1
            elif path.path == "/_amber/running":
                backend.port = int(dict(parse_qsl(path.query)).get("port", "0"))
                backend.running.set()
            self.send_response_only(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _send(self, answer: Answer) -> None:
            try:
                self.send_response_only(answer.status, answer.reason or None)
                for name, value in answer.headers:
                    self.send_header(name, value)
                if answer.chunked and self.command != "HEAD":
                    self._send_chunked(answer)
                    return
                self.send_header("Content-Length", str(answer.length))
                self.end_headers()
                if self.command == "HEAD":
                    return
                for chunk in answer.chunks():
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            except (BundleError, OSError, EOFError, ValueError, zlib.error):
                # the body broke after the headers went out: cut the connection so the
                # client sees a short body, never a silently wrong one
                self.close_connection = True
            finally:
                answer.close()

        def _send_chunked(self, answer: Answer) -> None:
            """A stream: one HTTP chunk per piece, each sent as soon as it is there."""
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in answer.chunks():
                if chunk:
                    self.wfile.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")

    return Handler


class BaseUrlServer:
    """The base-URL server, running on a background thread until :meth:`stop`."""

    def __init__(self, web: FrozenWeb | None, host: str = "127.0.0.1", port: int = 0,
                 log: ServeLog | None = None, backend: ProxyBackend | None = None,
                 judges: JudgeService | None = None,
                 recorder: Forwarder | None = None) -> None:
        self.web = web
        self.log = log or ServeLog()
        self.backend = backend
        self.judges = judges
        try:
            self._server = _Server((host, port), _handler(web, self.log, backend, judges,
                                                          recorder))
        except OSError as exc:
            raise port_error(host, port, exc) from None
        self._server.note = self.log.problem
        self.host, self.port = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                         name="amber-serve", daemon=True)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> BaseUrlServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.log.close()

    def __enter__(self) -> BaseUrlServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def port_error(host: str, port: int, exc: OSError) -> ConfigError:
    if exc.errno == errno.EADDRINUSE:
        return ConfigError(f"port {port} on {host} is already in use",
                           hint="choose another --port, or stop what is listening there")
    return ConfigError(f"cannot listen on {host}:{port} ({exc.strerror or exc})",
                       hint="check --host and --port")


def check_port_free(host: str, port: int) -> None:
    """Raise the one-line error now rather than after start-up work."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise port_error(host, port, exc) from None


def wait_for_signal() -> None:
    """Block the main thread until SIGINT or SIGTERM."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
