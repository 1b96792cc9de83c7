"""Loopback fakes of Serper, Jina Reader and an origin web server (real HTTP, 127.0.0.1).

They reproduce the request and response shapes of the real services closely enough for
Amber's clients, and can inject faults: 429, 500, timeouts, slow bodies, malformed
JSON, dropped connections. Used by the tests and by ``scripts/example.py``.
"""

from __future__ import annotations

import gzip
import html
import json
import re
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SHARED_HTML = Path(__file__).resolve().parents[2] / "shared" / "data" / "html"
_WORD = re.compile(r"[a-z0-9]+")
_TAG = re.compile(r"<(script|style)[^>]*>.*?</\1>|<[^>]+>", re.S | re.I)


@dataclass
class Page:
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    date: str | None = None


def html_page(title: str, *paragraphs: str) -> Page:
    body = "".join(f"<p>{html.escape(p)}</p>\n" for p in paragraphs)
    doc = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"</head><body><nav>Home | About | Contact</nav><article><h1>{html.escape(title)}</h1>\n"
        f"{body}</article><footer>Copyright fake site</footer></body></html>"
    )
    return Page(doc.encode("utf-8"))


def default_pages() -> dict[str, Page]:
    """A small, self-written corpus: enough for search ranking and extraction."""
    pages = {
        "/pages/eiffel.html": html_page(
            "Eiffel Tower facts",
            "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
            "The tower is 330 metres tall including its antennas and was designed by the "
            "engineering company of Gustave Eiffel.",
            "Millions of visitors climb the wrought-iron lattice tower every year.",
        ),
        "/pages/louvre.html": html_page(
            "The Louvre museum",
            "The Louvre in Paris is the world's most-visited art museum.",
            "It opened as a public museum in 1793, during the French Revolution, and holds "
            "the Mona Lisa painted by Leonardo da Vinci.",
        ),
        "/pages/rhine.html": html_page(
            "The river Rhine",
            "The Rhine rises in the Swiss Alps and flows about 1,230 kilometres to the "
            "North Sea in the Netherlands.",
            "Basel, Strasbourg, Cologne and Rotterdam are among the cities on its banks.",
        ),
        "/pages/python.html": html_page(
            "Python programming language",
            "Python is a programming language created by Guido van Rossum and first "
            "released in 1991.",
            "Python 3.0 was released in December 2008 and was not backward compatible.",
        ),
        "/pages/tea.html": html_page(
            "Tea production",
            "China is the largest producer of tea in the world, followed by India and Kenya.",
            "Green tea and black tea come from the same plant, Camellia sinensis.",
        ),
        "/pages/dup-a.html": html_page("Mirror", "This page is served at two addresses."),
        "/pages/empty.html": Page(b"<!DOCTYPE html><html><head><title>x</title></head>"
                                  b"<body></body></html>"),
        "/pages/notes.txt": Page(b"Plain text notes about the Rhine and Basel.\n",
                                 "text/plain; charset=utf-8"),
        "/pages/report.pdf": Page(b"%PDF-1.4\n% not really a pdf\n", "application/pdf"),
        "/missing": Page(b"<html><body><h1>404 Not Found</h1></body></html>", status=404),
        "/gone": Page(b"gone", "text/plain", status=410),
    }
    pages["/pages/dup-b.html"] = pages["/pages/dup-a.html"]
    pages["/pages/eiffel.html"].date = "Mar 3, 2024"
    for target, location in (("/redirect", "/pages/louvre.html"), ("/loop", "/loop")):
        pages[target] = Page(b"", "text/html", status=302, headers={"Location": location})
    return pages


def shared_html_pages(limit: int = 12) -> dict[str, Page]:
    """Real web pages from ../shared/data/html, when that folder exists."""
    pages: dict[str, Page] = {}
    base = SHARED_HTML / "article_extraction_benchmark"
    if not base.is_dir():
        return pages
    for path in sorted(base.rglob("*.html"))[:limit]:
        pages[f"/shared/{path.name}"] = Page(path.read_bytes())
    return pages


def page_text(page: Page) -> str:
    raw = page.body.decode("utf-8", errors="replace")
    if "html" in page.content_type:
        raw = html.unescape(_TAG.sub(" ", raw))
    return re.sub(r"\s+", " ", raw).strip()


def page_title(page: Page) -> str:
    found = re.search(rb"<title[^>]*>(.*?)</title>", page.body, re.S | re.I)
    return html.unescape(found.group(1).decode("utf-8", "replace")).strip() if found else ""


@dataclass
class Fault:
    service: str
    kind: str
    times: int = 1
    match: str = ""
    delay: float = 2.0


@dataclass
class Seen:
    service: str
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class FakeWeb:
    """Start with ``with FakeWeb() as web:``; point SERPER_BASE_URL/JINA_BASE_URL at it."""

    def __init__(
        self,
        pages: dict[str, Page] | None = None,
        serper_key: str = "fake-serper-key-0123456789",
        jina_key: str | None = None,
        slow_delay: float = 0.0,
        jina_text_only: bool = False,
    ) -> None:
        self.pages = default_pages() if pages is None else pages
        self.serper_key = serper_key
        self.jina_key = jina_key
        self.slow_delay = slow_delay  # seconds between body chunks on /pages (kill tests)
        self.jina_text_only = jina_text_only  # a reader that answers text whatever is asked
        self.faults: list[Fault] = []
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._servers: dict[str, ThreadingHTTPServer] = {}

    # -- lifecycle -----------------------------------------------------------------
    def __enter__(self) -> FakeWeb:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        for service in ("origin", "serper", "jina"):
            server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, service))
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self._servers[service] = server

    def stop(self) -> None:
        for server in self._servers.values():
            server.shutdown()
            server.server_close()
        self._servers.clear()

    def base(self, service: str) -> str:
        host, port = self._servers[service].server_address[:2]
        return f"http://{host}:{port}"

    @property
    def origin_url(self) -> str:
        return self.base("origin")

    @property
    def serper_url(self) -> str:
        return self.base("serper")

    @property
    def jina_url(self) -> str:
        return self.base("jina")

    def url(self, path: str) -> str:
        return self.origin_url + path

    def env(self) -> dict[str, str]:
        return {"SERPER_BASE_URL": self.serper_url, "SERPER_API_KEY": self.serper_key,
                "JINA_BASE_URL": self.jina_url, **({"JINA_API_KEY": self.jina_key}
                                                   if self.jina_key else {})}

    # -- faults and observations ------------------------------------------------------
    def inject(self, service: str, kind: str, times: int = 1, match: str = "",
               delay: float = 2.0) -> None:
        with self._lock:
            self.faults.append(Fault(service, kind, times, match, delay))

    def take_fault(self, service: str, path: str, body: bytes) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.service != service or fault.times <= 0:
                    continue
                if fault.match and fault.match not in path and fault.match.encode() not in body:
                    continue
                fault.times -= 1
                return fault
        return None

    def record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def hits(self, service: str, contains: str = "") -> int:
        with self._lock:
            return sum(1 for s in self.seen if s.service == service
                       and (contains in s.path or contains.encode() in s.body))

    # -- the services ---------------------------------------------------------------------
    def search(self, params: dict[str, Any]) -> dict[str, Any]:
        q = str(params.get("q", ""))
        num = int(params.get("num", 10) or 10)
        words = set(_WORD.findall(q.lower()))
        scored = []
        for path, page in sorted(self.pages.items()):
            if page.status != 200 or not path.startswith("/pages/"):
                continue
            text = page_text(page).lower()
            score = sum(1 for w in words if w in set(_WORD.findall(text)))
            if score:
                scored.append((-score, path, page, text))
        scored.sort(key=lambda s: (s[0], s[1]))
        organic = []
        for position, (_, path, page, _text) in enumerate(scored[:num], start=1):
            item: dict[str, Any] = {"title": page_title(page) or path, "link": self.url(path),
                                    "snippet": page_text(page)[:160], "position": position}
            if page.date:
                item["date"] = page.date
            organic.append(item)
        result: dict[str, Any] = {
            "searchParameters": {**params, "type": "search", "engine": "google"},
            "organic": organic,
            "peopleAlsoAsk": [],
            "relatedSearches": [{"query": f"{q} facts"}],
            "credits": 1,
        }
        if organic:
            top = organic[0]
            result["answerBox"] = {"title": top["title"], "link": top["link"],
                                   "snippet": top["snippet"]}
            if "eiffel" in words:
                result["knowledgeGraph"] = {"title": "Eiffel Tower", "type": "Tower",
                                            "attributes": {"Height": "330 m", "Opened": "1889"}}
        return result

    def read(self, target: str, accept_json: bool) -> tuple[int, str, bytes]:
        """What Jina Reader answers for ``target``."""
        if not target.startswith(("http://127.0.0.1", "http://localhost")):
            status, body = 0, b""
        else:
            try:
                with urllib.request.urlopen(target, timeout=10) as resp:
                    status, body = resp.status, resp.read()
                    content_type = resp.headers.get("content-type", "text/html")
            except urllib.error.HTTPError as err:
                status, body, content_type = err.code, b"", "text/html"
            except (urllib.error.URLError, OSError):
                status, body = 0, b""
        if status == 0:
            error = {"code": 422, "name": "AssertionFailureError", "status": 42206,
                     "message": f"Failed to goto {target}: net::ERR_CONNECTION_REFUSED",
                     "readableMessage": "AssertionFailureError: Failed to goto"}
            return 422, "application/json", json.dumps(error).encode()
        page = Page(body, content_type)
        content = page_text(page) if status == 200 else ""
        data: dict[str, Any] = {"title": page_title(page), "description": "", "url": target,
                                "content": content, "usage": {"tokens": len(content) // 4}}
        if status != 200:
            data["warning"] = f"Target URL returned error {status}: Not OK"
        if accept_json:
            doc = {"code": 200, "status": 20000, "data": data}
            return 200, "application/json", json.dumps(doc).encode()
        text = f"Title: {data['title']}\n\nURL Source: {target}\n\nMarkdown Content:\n{content}\n"
        return 200, "text/plain; charset=utf-8", text.encode()


def _handler(web: FakeWeb, service: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _body(self) -> bytes:
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def _send(self, status: int, ctype: str, body: bytes,
                  headers: dict[str, str] | None = None, chunk_delay: float = 0.0) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Set-Cookie", "session=fake-session-secret; Path=/")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command == "HEAD":
                return
            if chunk_delay and body:
                step = max(1, len(body) // 8)
                for i in range(0, len(body), step):
                    self.wfile.write(body[i : i + step])
                    self.wfile.flush()
                    time.sleep(chunk_delay)
            else:
                self.wfile.write(body)

        def _fault(self, body: bytes) -> bool:
            fault = web.take_fault(service, self.path, body)
            if fault is None:
                return False
            if fault.kind == "429":
                self._send(429, "application/json", b'{"message":"Too many requests"}',
                           {"Retry-After": "0"})
            elif fault.kind == "500":
                self._send(500, "text/plain", b"internal error")
            elif fault.kind == "timeout":
                time.sleep(fault.delay)
                self.close_connection = True
            elif fault.kind == "reset":
                self.close_connection = True
            elif fault.kind == "malformed":
                self._send(200, "application/json", b'{"organic": [{"title": "cut')
            elif fault.kind == "slow":
                return self._serve(body, chunk_delay=fault.delay / 8) or True
            return True

        def do_GET(self) -> None:
            self._handle()

        def do_POST(self) -> None:
            self._handle()

        def _handle(self) -> None:
            body = self._body()
            web.record(Seen(service, self.command, self.path, dict(self.headers.items()), body))
            if self._fault(body):
                return
            self._serve(body)

        def _serve(self, body: bytes, chunk_delay: float = 0.0) -> bool:
            if service == "serper":
                if self.command != "POST" or self.path.split("?")[0] != "/search":
                    self._send(404, "application/json", b'{"message":"Not found"}')
                elif self.headers.get("X-API-KEY") != web.serper_key:
                    self._send(403, "application/json",
                               b'{"message":"Unauthorized.","statusCode":403}')
                else:
                    try:
                        params = json.loads(body or b"{}")
                    except ValueError:
                        self._send(400, "application/json", b'{"message":"Bad JSON"}')
                        return True
                    out = json.dumps(web.search(params)).encode()
                    self._send(200, "application/json; charset=utf-8", out,
                               chunk_delay=chunk_delay)
            elif service == "jina":
                if web.jina_key and self.headers.get("Authorization") != f"Bearer {web.jina_key}":
                    self._send(401, "application/json", b'{"code":401,"message":"Unauthorized"}')
                    return True
                target = self.path[1:]
                accept = "application/json" in (self.headers.get("Accept") or "") \
                    and not web.jina_text_only
                status, ctype, out = web.read(target, accept)
                self._send(status, ctype, out, chunk_delay=chunk_delay)
            else:
                self._origin(chunk_delay)
            return True

        def _origin(self, chunk_delay: float) -> None:
            path = self.path.split("?")[0]
            gz = path.startswith("/gzip/")
            if gz:
                path = path[len("/gzip") :]
            page = web.pages.get(path) or shared_html_pages().get(path)
            if page is None:
                self._send(404, "text/html", b"<html><body>Not Found</body></html>")
                return
            body, headers = page.body, dict(page.headers)
            if gz:
                body = gzip.compress(body, mtime=0)
                headers["Content-Encoding"] = "gzip"
            delay = chunk_delay or (web.slow_delay if path.startswith("/pages/") else 0.0)
            self._send(page.status, page.content_type, body, headers, chunk_delay=delay)

    return Handler
