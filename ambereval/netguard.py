"""The offline guard: once installed, any socket connect to a non-loopback address fails.

``amber verify`` (and every later offline command) installs it before touching a
bundle, so an evaluation cannot reach the network by accident: the error is raised
before any packet leaves. Loopback stays allowed (a local OpenAI-compatible judge).
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

_installed = False
_allowed: set[str] = set()  # hosts the user named on purpose (a --judge-url server)
_original_connect = socket.socket.connect
_original_connect_ex = socket.socket.connect_ex
_original_create_connection = socket.create_connection
_original_getaddrinfo = socket.getaddrinfo


class OfflineViolation(ConnectionRefusedError):
    """Raised instead of opening a connection while the guard is on."""


def _is_loopback(address: Any) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX paths
        return True
    host = address[0] if isinstance(address, tuple) and address else address
    if isinstance(host, bytes):
        host = host.decode()
    if host in ("localhost", "localhost.localdomain", "") or str(host) in _allowed:
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False  # a name we would have to resolve: not allowed


def _check(address: Any) -> None:
    if not _is_loopback(address):
        raise OfflineViolation(f"offline mode: refused a network connection to {address!r} "
                               "(evaluation reads only the bundle)")


def _connect(self: socket.socket, address: Any) -> None:
    _check(address)
    return _original_connect(self, address)


def _connect_ex(self: socket.socket, address: Any) -> int:
    _check(address)
    return _original_connect_ex(self, address)


def _create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
    _check(address)
    return _original_create_connection(address, *args, **kwargs)


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    """No DNS query for a non-loopback name leaves either."""
    if host is not None and not _is_loopback((host,)):
        raise OfflineViolation(f"offline mode: refused to resolve {host!r}")
    return _original_getaddrinfo(host, *args, **kwargs)


def install_offline_guard(allow: tuple[str, ...] = ()) -> None:
    """Block every non-loopback connect in this process (idempotent); ``allow`` names hosts
    the user asked for explicitly (the judge server of ``--judge-url``), by name and by
    the addresses that name resolves to."""
    global _installed
    for host in allow:
        if host and host not in _allowed:
            _allowed.add(host)
            try:
                infos = _original_getaddrinfo(host, None)
            except OSError:
                infos = []
            _allowed.update(str(info[4][0]) for info in infos)
    if _installed:
        return
    socket.socket.connect = _connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]
    socket.create_connection = _create_connection  # type: ignore[assignment]
    socket.getaddrinfo = _getaddrinfo  # type: ignore[assignment]
    _installed = True


def remove_offline_guard() -> None:
    global _installed
    socket.socket.connect = _original_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _original_connect_ex  # type: ignore[method-assign]
    socket.create_connection = _original_create_connection  # type: ignore[assignment]
    socket.getaddrinfo = _original_getaddrinfo  # type: ignore[assignment]
    _allowed.clear()
    _installed = False


def guard_active() -> bool:
    return _installed
