"""Proxy mode of ``amber serve``: an HTTP/HTTPS intercepting proxy (mitmproxy) that
answers every request from the bundles, so code with hard-coded
``https://google.serper.dev/search`` and ``https://r.jina.ai/<url>`` runs unchanged with
``HTTPS_PROXY`` and the CA variables alone; pages captured directly are replayed too.

Nothing leaves the machine, by construction: server connections are lazy (opened only
when a request is forwarded, and none is: the ``request`` hook always sets the
response), TLS certificates are minted from the client's SNI without asking the real
server (``upstream_cert`` off), and a ``server_connect`` hook refuses any connection that
would still be attempted. The serving process also runs under Amber's offline guard.

This is the only module that imports mitmproxy (the optional extra ``amber-eval[serve]``).
"""

from __future__ import annotations

import asyncio
import signal
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ambereval.errors import BundleError, ConfigError
from ambereval.snapshots.serve_answer import Answer
from ambereval.snapshots.serve_http import answer_service, failure
from ambereval.snapshots.serve_index import FrozenWeb
from ambereval.snapshots.serve_log import ServeLog

_DEFAULT_PORTS = {"http": 80, "https": 443}


def require_mitmproxy() -> None:
    """A one-line error naming the extra when mitmproxy is not installed."""
    try:
        import mitmproxy  # noqa: F401
    except ImportError:
        raise ConfigError("amber serve --proxy needs mitmproxy, which is not installed",
                          hint="pip install 'amber-eval[serve]'") from None


class FrozenAddon:
    """The mitmproxy addon: classify each request by host, answer it from the bundles."""

    def __init__(self, web: FrozenWeb, log: ServeLog,
                 on_running: Callable[[int], None] | None = None) -> None:
        self.web = web
        self.log = log
        self.on_running = on_running
        self.refused_connections = 0

    def service(self, host: str, port: int, scheme: str, path: str) -> str | None:
        host = host.lower()
        found = self.web.service_for_host(f"{host}:{port}", path)
        if found is None and port == _DEFAULT_PORTS.get(scheme):
            found = self.web.service_for_host(host, path)
        return found

    def answer(self, method: str, scheme: str, host: str, port: int, path: str, url: str,
               headers: list[tuple[str, str]], body: bytes) -> Answer:
        service = self.service(host, port, scheme, path)
        if service is None:
            try:
                return self.web.page(method, url)
            except (BundleError, OSError, EOFError, ValueError, zlib.error) as exc:
                return failure("direct", f"could not read the captured record ({exc})")
        return answer_service(self.web, service, method, path, headers, body)

    async def request(self, flow: Any) -> None:
        from mitmproxy import http

        req = flow.request
        headers = [(k, v) for k, v in req.headers.items(multi=True)]
        args = (req.method, req.scheme, req.host, req.port, req.path, req.url, headers,
                req.raw_content or b"")
        answer = await asyncio.to_thread(self.answer, *args)
        try:
            body = await asyncio.to_thread(answer.read)
        except (BundleError, OSError, EOFError, ValueError, zlib.error) as exc:
            answer = failure(answer.service, f"could not read the captured record ({exc})")
            body = answer.read()
        response = http.Response.make(
            answer.status, b"",
            [(k.encode("latin-1", "replace"), v.encode("latin-1", "replace"))
             for k, v in answer.headers])
        response.reason = answer.reason or ""
        # the bytes as captured: raw_content, since setting .content would encode them
        # again under the captured Content-Encoding
        response.raw_content = body
        response.headers["Content-Length"] = str(answer.length if method_is_head(req.method)
                                                 else len(body))
        flow.response = response
        self.log.note(req.method, req.url, answer)

    def server_connect(self, data: Any) -> None:
        """Never reach a real server (the request hook answers everything first)."""
        self.refused_connections += 1
        data.server.error = "amber serve: offline; nothing is fetched from outside"

    def running(self) -> None:
        if self.on_running is None:
            return
        from mitmproxy import ctx

        proxyserver: Any = ctx.master.addons.get("proxyserver")
        addrs = proxyserver.listen_addrs() if proxyserver is not None else []
        port = addrs[0][1] if addrs else ctx.options.listen_port
        self.on_running(port)


def method_is_head(method: str) -> bool:
    return method.upper() == "HEAD"


def run_proxy(web: FrozenWeb, host: str, port: int, ca_dir: Path, log: ServeLog,
              on_running: Callable[[int], None] | None = None) -> int:
    """Serve until SIGINT/SIGTERM. ``on_running(port)`` is called once listening.
    Returns how many upstream connections were attempted and refused (0 expected)."""
    require_mitmproxy()
    addon = FrozenAddon(web, log, on_running)
    try:
        asyncio.run(_main(addon, host, port, ca_dir))
    except SystemExit as exc:  # mitmproxy's start-up error check exits
        raise ConfigError(f"the proxy could not start on {host}:{port} (exit {exc.code})",
                          hint="check --host, --port and --ca-dir") from None
    finally:
        log.close()
    return addon.refused_connections


async def _main(addon: FrozenAddon, host: str, port: int, ca_dir: Path) -> None:
    from mitmproxy import options
    from mitmproxy.tools.dump import DumpMaster

    opts = options.Options(listen_host=host, listen_port=port, confdir=str(ca_dir))
    master = DumpMaster(opts, with_termlog=False, with_dumper=False)
    opts.update(connection_strategy="lazy", upstream_cert=False, http3=False,
                ssl_insecure=False)
    master.addons.add(addon)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, master.shutdown)
    await master.run()
