"""Proxy mode of ``amber serve``: an HTTP/HTTPS intercepting proxy, so code with
hard-coded ``https://google.serper.dev/search`` and ``https://r.jina.ai/<url>`` runs
unchanged with ``HTTPS_PROXY`` and the CA variables alone; pages captured directly are
replayed too.

mitmproxy 11.0 (the last release for Python 3.11) pins h11 <= 0.14, which Amber's own
environment cannot hold, so the proxy is ``mitmdump`` from an environment of its own
(``AMBER_MITMDUMP``, this environment, the project's ``.venv-serve/`` made by
scripts/setup.sh, or ``mitmdump`` on PATH), running :mod:`proxy_addon`. Every
request it intercepts is answered by this process, which holds the bundles, through a
loopback-only side door; nothing is fetched from outside (see the addon for how).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from ambereval import netguard
from ambereval.engine.serve.index import FrozenWeb
from ambereval.engine.serve.judges import JudgeService
from ambereval.engine.serve.log import ServeLog
from ambereval.engine.serve.server import BaseUrlServer, Forwarder, ProxyBackend
from ambereval.errors import ConfigError

ADDON = Path(__file__).with_name("proxy_addon.py")
PROJECT_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 180.0


def find_mitmdump() -> str | None:
    """The ``mitmdump`` to run, or None when there is none."""
    if chosen := os.environ.get("AMBER_MITMDUMP"):
        return chosen
    for candidate in (Path(sys.prefix) / "bin" / "mitmdump",
                      PROJECT_ROOT / ".venv-serve" / "bin" / "mitmdump"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("mitmdump")


def require_mitmproxy() -> str:
    """The mitmdump path, or a one-line error naming the extra."""
    found = find_mitmdump()
    if found is None or not (os.path.isfile(found) and os.access(found, os.X_OK)):
        raise ConfigError(
            "amber serve --proxy needs mitmproxy 11.0 (the amber-eval[serve] extra), which "
            "was not found",
            hint="scripts/setup.sh installs it in .venv-serve/; or pip install "
                 "'amber-eval[serve]' into an environment of its own and set "
                 "AMBER_MITMDUMP=/path/to/mitmdump")
    return found


def _tail(output: IO[bytes]) -> str:
    output.seek(0)
    lines = [ln.strip() for ln in output.read().decode("utf-8", "replace").splitlines()]
    lines = [ln for ln in lines if ln]
    return lines[-1] if lines else "no output"


def run_proxy(web: FrozenWeb | None, host: str, port: int, ca_dir: Path, log: ServeLog,
              on_running: Callable[[int], None] | None = None,
              judges: JudgeService | None = None, recorder: Forwarder | None = None) -> int:
    """Serve until SIGINT/SIGTERM. ``on_running(port)`` is called once listening.
    Returns how many upstream connections the proxy refused (0 expected). With a
    ``recorder`` (``--record``) the requests are forwarded and recorded by this process;
    the proxy itself still connects nowhere."""
    mitmdump = require_mitmproxy()
    backend = ProxyBackend()
    server = BaseUrlServer(web, "127.0.0.1", 0, log, backend=backend, judges=judges,
                           recorder=recorder).start()
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    output = tempfile.TemporaryFile()  # noqa: SIM115 (closed below)
    cmd = [mitmdump, "-q", "--listen-host", host, "--listen-port", str(port),
           "--set", f"confdir={ca_dir}", "--set", "connection_strategy=lazy",
           "--set", "upstream_cert=false", "--set", "http3=false",
           "-s", str(ADDON), "--set", f"amber_backend={server.url}",
           "--set", f"amber_netguard={netguard.__file__}"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                            start_new_session=True)
    announced = False
    waited = 0.0
    try:
        while not stop.is_set():
            if not announced and backend.running.is_set():
                announced = True
                if on_running is not None:
                    on_running(backend.port)
            if proc.poll() is not None:
                if stop.is_set():
                    break
                raise ConfigError(f"the proxy ({mitmdump}) stopped: {_tail(output)}",
                                  hint="check --host, --port and --ca-dir")
            if not announced and waited > START_TIMEOUT:
                raise ConfigError(f"the proxy did not start within {START_TIMEOUT:.0f} s: "
                                  f"{_tail(output)}")
            stop.wait(0.2)
            waited += 0.2
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        server.stop()
        output.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return backend.refused
