"""One recording session of ``amber serve --record``: open the bundle, serve in base-URL
or proxy mode until SIGINT/SIGTERM, then seal the bundle."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ambereval.engine.serve.log import ServeLog
from ambereval.engine.serve.recorder import Recorder
from ambereval.engine.serve.server import BaseUrlServer, check_port_free, wait_for_signal
from ambereval.engine.serve.upstreams import Upstreams
from ambereval.errors import ConfigError

# what a client exports to send each service to the base-URL recorder
_CLIENT_ENV = (("SERPER_BASE_URL", ""), ("JINA_BASE_URL", ""), ("OPENAI_BASE_URL", "/v1"),
               ("GOOGLE_GEMINI_BASE_URL", ""))


def recording_env(url: str) -> list[tuple[str, str]]:
    """The variables that point a pipeline's clients at the base-URL recorder (the
    OpenAI SDK wants ``/v1``; google-genai reads ``GOOGLE_GEMINI_BASE_URL``)."""
    return [(name, url + suffix) for name, suffix in _CLIENT_ENV]


def record_session(root: Path, host: str, port: int, proxy: bool, ca_dir: Path,
                   allow_private_addresses: bool,
                   on_start: Callable[[list[tuple[str, str]], str], None],
                   env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Record until SIGINT/SIGTERM; ``on_start(env, url)`` announces the address. Returns
    the recorder's summary (and, in proxy mode, the proxy's refused connections)."""
    upstreams = Upstreams.from_env(env)
    if proxy:
        from ambereval.engine.serve.proxy import require_mitmproxy

        require_mitmproxy()
    if port:
        check_port_free(host, port)
        if not proxy and (name := upstreams.loops_back_to(host, port)):
            raise ConfigError(f"{name} points at this recorder ({host}:{port}); it would "
                              "forward to itself", hint=f"unset {name} in the recorder's shell")
    recorder = Recorder(root, upstreams, allow_private_addresses,
                        mode="proxy" if proxy else "base-url")
    log = ServeLog()
    extra: dict[str, Any] = {}
    try:
        if proxy:
            from ambereval.engine.serve.ca import ensure_ca, proxy_env
            from ambereval.engine.serve.proxy import run_proxy

            cert = ensure_ca(ca_dir)
            extra["upstream_connections_refused"] = run_proxy(
                None, host, port, ca_dir, log,
                lambda bound: on_start(proxy_env(host, bound, cert), f"http://{host}:{bound}"),
                recorder=recorder)
        else:
            server = BaseUrlServer(None, host, port, log, recorder=recorder).start()
            try:
                name = upstreams.loops_back_to(server.host, server.port)
                if name:
                    raise ConfigError(f"{name} points at this recorder; it would forward to "
                                      "itself", hint=f"unset {name} in the recorder's shell")
                on_start(recording_env(server.url), server.url)
                wait_for_signal()
            finally:
                server.stop()
    finally:
        summary = recorder.finish()
    return {**summary, **extra}
