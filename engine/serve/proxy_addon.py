"""The mitmproxy side of ``amber serve --proxy``, loaded by ``mitmdump -s`` (this is the
only Amber module that imports mitmproxy, and it imports nothing else from Amber).

mitmproxy 11.0 cannot share Amber's environment (its h11 pin), so ``mitmdump`` runs in an
environment of its own (``.venv-serve/``, or ``AMBER_MITMDUMP``) and this addon hands
every intercepted request to the Amber process that holds the bundles, over loopback
(``amber_backend``). Nothing else is ever connected to:

- server connections are lazy (none is opened while the request hook answers), the
  TLS certificate is minted from the client's SNI without asking the real server
  (``upstream_cert`` off), and the ``server_connect`` hook refuses any connection
  that would still be attempted, reporting it to the backend;
- Amber's offline guard (``amber_netguard``, loaded by path) blocks any non-loopback
  connect or DNS query in this process too.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client as httpclient
import importlib.util
import json
import os
import threading
from typing import Any
from urllib.parse import urlsplit

from mitmproxy import ctx
from mitmproxy import http as mhttp


class AmberFrozenWeb:
    def __init__(self) -> None:
        self._local = threading.local()

    def load(self, loader: Any) -> None:
        loader.add_option("amber_backend", str, "", "Amber's loopback backend URL.")
        loader.add_option("amber_netguard", str, "", "Path of ambereval/netguard.py.")

    def configure(self, updated: set[str]) -> None:
        if "amber_netguard" in updated and ctx.options.amber_netguard:
            spec = importlib.util.spec_from_file_location("amber_netguard",
                                                          ctx.options.amber_netguard)
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                module.install_offline_guard()

    def _connection(self) -> httpclient.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            parts = urlsplit(ctx.options.amber_backend)
            conn = httpclient.HTTPConnection(parts.hostname, parts.port, timeout=300)
            self._local.conn = conn
        return conn

    def _post(self, path: str, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        for attempt in (1, 2):  # a kept-alive connection may have been closed meanwhile
            conn = self._connection()
            try:
                conn.request("POST", path, body=body,
                             headers={"Content-Type": "application/octet-stream"})
                resp = conn.getresponse()
                data = resp.read()
                return resp.status, resp.reason, resp.getheaders(), data
            except (OSError, httpclient.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        raise RuntimeError("unreachable")

    def _ask(self, method: str, url: str, headers: list[tuple[str, str]],
             body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        head = json.dumps({"method": method, "url": url, "headers": headers}).encode()
        return self._post("/_amber/proxy", head + b"\n" + body)

    async def request(self, flow: Any) -> None:
        req = flow.request
        headers = [(k, v) for k, v in req.headers.items(multi=True)]
        try:
            status, reason, got, body = await asyncio.to_thread(
                self._ask, req.method, req.url, headers, req.raw_content or b"")
        except (OSError, httpclient.HTTPException) as exc:
            flow.response = mhttp.Response.make(
                502, f"amber serve: the bundle server is gone ({exc})\n".encode(),
                {"Content-Type": "text/plain; charset=utf-8", "X-Amber-Match": "error"})
            return
        head_length = None
        fields = []
        for name, value in got:
            low = name.lower()
            if low == "x-amber-head-length":
                head_length = value
            elif low not in ("content-length", "connection", "keep-alive"):
                fields.append((name.encode("latin-1"), value.encode("latin-1")))
        response = mhttp.Response.make(status, b"", fields)
        response.reason = reason or ""
        # the bytes as captured: raw_content, since .content would encode them again under
        # the captured Content-Encoding
        response.raw_content = body
        response.headers["Content-Length"] = head_length or str(len(body))
        flow.response = response

    def server_connect(self, data: Any) -> None:
        data.server.error = "amber serve: offline; nothing is fetched from outside"
        with contextlib.suppress(OSError, httpclient.HTTPException):
            self._post("/_amber/refused", b"")

    async def _watch_parent(self, parent: int) -> None:
        """Stop when the amber serve process is gone (even killed with SIGKILL), so no
        orphaned proxy keeps the port."""
        while os.getppid() == parent:
            await asyncio.sleep(1.0)
        ctx.master.shutdown()

    def running(self) -> None:
        self._watcher = asyncio.get_running_loop().create_task(
            self._watch_parent(os.getppid()))
        proxyserver: Any = ctx.master.addons.get("proxyserver")
        addrs = proxyserver.listen_addrs() if proxyserver is not None else []
        port = addrs[0][1] if addrs else ctx.options.listen_port
        self._post(f"/_amber/running?port={port}", b"")


addons = [AmberFrozenWeb()]
