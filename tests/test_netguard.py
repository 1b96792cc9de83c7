"""The offline guard: a non-loopback connect fails before any packet; loopback works."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60)


def test_guard_blocks_outside_and_allows_loopback() -> None:
    done = run("""
        import socket, threading
        from ambereval.netguard import install_offline_guard, OfflineViolation
        install_offline_guard()
        for target in [("192.0.2.1", 80), ("example.org", 443), ("10.0.0.1", 53)]:
            try:
                socket.create_connection(target, timeout=1)
            except OfflineViolation as err:
                print("blocked", target[0], "offline mode" in str(err))
        s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
        c = socket.create_connection(s.getsockname(), timeout=1)
        print("loopback ok"); c.close(); s.close()
        import httpx
        try:
            httpx.get("http://192.0.2.1/", timeout=1)
        except httpx.ConnectError as err:
            print("httpx blocked", "offline mode" in str(err))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "blocked 192.0.2.1 True", "blocked example.org True", "blocked 10.0.0.1 True",
        "loopback ok", "httpx blocked True"]
