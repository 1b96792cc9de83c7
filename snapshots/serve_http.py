"""Base-URL mode of ``amber serve``: a Serper-compatible ``POST /search`` and a
Jina-Reader-compatible ``GET /<url>`` on one loopback port, answered from the bundles.

Point ``SERPER_BASE_URL`` and ``JINA_BASE_URL`` at it (Amber's own capture, or any
client whose base URLs are configurable). One thread per connection, HTTP/1.1
keep-alive, bodies streamed from the WARC offsets.
"""

from __future__ import annotations

import errno
import json
import signal
import socket
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ambereval.errors import BundleError, ConfigError
from ambereval.snapshots.serve_answer import Answer, miss
from ambereval.snapshots.serve_index import FrozenWeb
from ambereval.snapshots.serve_log import ServeLog
from ambereval.snapshots.serve_match import NotASearch, search_body, search_query

MAX_REQUEST_BODY = 10 * 1024 * 1024


def failure(service: str, message: str) -> Answer:
    """500 when a record cannot be read (a damaged bundle): one line, counted apart."""
    line = f"amber serve: {message}\n".encode()
    return Answer(500, "Internal Server Error", [("Content-Type", "text/plain; charset=utf-8"),
                                                 ("X-Amber-Match", "error")],
                  "error", service, body=line, length=len(line))


def answer_service(web: FrozenWeb, service: str, method: str, target: str,
                   headers: list[tuple[str, str]], body: bytes) -> Answer:
    """Answer one request to the Serper or Jina interface. ``target`` is the path and
    query after the host (``/search?q=...``, ``/https://example.com/a``)."""
    parts = urlsplit(target)
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
        return miss("serper", f"not a search request ({exc})")
    except (BundleError, OSError, EOFError, ValueError, zlib.error) as exc:
        return failure(service, f"could not read the captured record ({exc})")


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


def _handler(web: FrozenWeb, log: ServeLog) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "amber-serve"
        disable_nagle_algorithm = True  # headers and body go out at once (no 40 ms stall)

        def log_message(self, *args: Any) -> None:  # never log requests (keys)
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
            size = int(self.headers.get("Content-Length") or 0)
            if size > MAX_REQUEST_BODY:
                self.send_error(413, "request body too large")
                return
            body = self.rfile.read(size) if size else b""
            headers = list(self.headers.items())
            path = urlsplit(self.path).path
            service = "serper" if path.rstrip("/") == "/search" else "jina"
            answer = answer_service(web, service, self.command, self.path, headers, body)
            host = self.headers.get("Host") or "{}:{}".format(*self.server.server_address[:2])
            log.note(self.command, f"http://{host}{self.path}", answer)
            self._send(answer)

        def _send(self, answer: Answer) -> None:
            try:
                self.send_response_only(answer.status, answer.reason or None)
                for name, value in answer.headers:
                    self.send_header(name, value)
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

    return Handler


class BaseUrlServer:
    """The base-URL server, running on a background thread until :meth:`stop`."""

    def __init__(self, web: FrozenWeb, host: str = "127.0.0.1", port: int = 0,
                 log: ServeLog | None = None) -> None:
        self.web = web
        self.log = log or ServeLog()
        try:
            self._server = _Server((host, port), _handler(web, self.log))
        except OSError as exc:
            raise port_error(host, port, exc) from None
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
