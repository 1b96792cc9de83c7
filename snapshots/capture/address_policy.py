"""Where a capture may connect: http(s) only, public addresses only, one deadline per fetch.

A page anyone controls can redirect the snapshotter anywhere, or give a name whose DNS
answer points inside the capturing machine's network (the cloud metadata address
169.254.169.254, a database on 10.0.0.5, a service on 127.0.0.1). So every connection
the direct reader opens goes through :class:`GuardedBackend`: the host is resolved
once, every address is checked by :func:`address_problem`, and the socket connects to
an address that passed the check (never to the name again, so a second, different DNS
answer cannot slip in between check and connect); TLS still uses the name for SNI and
certificate checks, and the Host header is the name. ``--allow-private-addresses``
(``AMBER_ALLOW_PRIVATE_ADDRESSES=1``) lifts the address rule, for captures of a local
test site. Service base URLs the user configured (Serper, Jina, a judge server) are
the user's own choice and are not checked.

The same backend bounds the whole of one fetch (connect, TLS, headers, body) by a
deadline set with :func:`fetch_deadline`: every socket operation gets at most the time
that is left, not a fresh timeout per read.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpcore

ALLOWED_SCHEMES = ("http", "https")
ENV_ALLOW_PRIVATE = "AMBER_ALLOW_PRIVATE_ADDRESSES"

Resolver = Callable[..., list[tuple[Any, ...]]]

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT (RFC 6598)


class BlockedAddress(httpcore.ConnectError):
    """A connection the address policy refused; no packet was sent to it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def allow_private_from_env(env: Mapping[str, str] | None = None) -> bool:
    """True when ``AMBER_ALLOW_PRIVATE_ADDRESSES`` is set to 1/true/yes."""
    value = (os.environ if env is None else env).get(ENV_ALLOW_PRIVATE, "")
    return value.strip().lower() in ("1", "true", "yes", "on")


def scheme_problem(url: str) -> str | None:
    """Why ``url`` may not be fetched at all (not http/https, no host), else None."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:
        return f"malformed URL ({exc})"
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        return f"scheme {scheme or '(none)'!r} is not allowed (only http and https are fetched)"
    if not host:
        return "URL has no host"
    return None


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, Teredo, NAT64), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_problem(address: str) -> str | None:
    """Why a capture may not connect to ``address`` (an IP literal), else None.

    >>> address_problem("169.254.169.254")
    'link-local address 169.254.169.254 (cloud metadata range)'
    >>> address_problem("93.184.216.34") is None
    True
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address!r} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_v4(ip)
        if inner is not None:
            problem = address_problem(str(inner))
            return f"{problem} (inside IPv6 {ip})" if problem else None
    if ip.is_unspecified:
        return f"unspecified address {ip}"
    if ip.is_loopback:
        return f"loopback address {ip}"
    if ip.is_link_local:
        return f"link-local address {ip} (cloud metadata range)"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED:
        return f"shared (carrier-grade NAT) address {ip}"
    if ip.is_multicast:
        return f"multicast address {ip}"
    if ip.is_reserved:
        return f"reserved address {ip}"
    if ip.is_private:
        kind = "unique local" if ip.version == 6 else "private"
        return f"{kind} address {ip}"
    if not ip.is_global:
        return f"reserved address {ip} (not globally routable)"
    return None


@dataclass(frozen=True)
class AddressPolicy:
    """Which addresses a capture may reach; ``resolver`` is injectable for tests."""

    allow_private: bool = False
    resolver: Resolver = field(default=socket.getaddrinfo, compare=False)

    def url_problem(self, url: str) -> str | None:
        """The checks that need no DNS: scheme, host, and a literal IP host."""
        problem = scheme_problem(url)
        if problem is not None:
            return problem
        host = urlsplit(url).hostname or ""
        if self.allow_private or not _is_literal(host):
            return None
        problem = address_problem(host)
        return None if problem is None else _refusal(problem)

    def resolve(self, host: str, port: int, timeout: float | None) -> list[str]:
        """The addresses of ``host`` this policy allows, in resolver order.

        Raises :class:`BlockedAddress` naming the first refused address when none is
        allowed, and ``httpcore.ConnectError``/``ConnectTimeout`` when resolution fails.
        """
        infos = _resolve(self.resolver, host, port, timeout)
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not addresses:
            raise httpcore.ConnectError(f"{host}: name has no address")
        if self.allow_private:
            return addresses
        allowed = [a for a in addresses if address_problem(a) is None]
        if not allowed:
            problem = address_problem(addresses[0]) or "refused"
            name = "" if _is_literal(host) else f"{host} resolves to "
            raise BlockedAddress(_refusal(f"{name}{problem}"))
        return allowed


REFUSAL = "refused to connect:"  # how every refusal begins (drift tells them apart by it)


def _refusal(problem: str) -> str:
    return (f"{REFUSAL} {problem} "
            "(use --allow-private-addresses to capture local sites)")


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


_resolver_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="amber-dns")


def _resolve(resolver: Resolver, host: str, port: int,
             timeout: float | None) -> list[tuple[Any, ...]]:
    """getaddrinfo with a time limit (the system resolver has none of its own)."""
    future = _resolver_pool.submit(resolver, host, port, 0, socket.SOCK_STREAM)
    try:
        return list(future.result(timeout=timeout))
    except FutureTimeout:
        raise httpcore.ConnectTimeout(f"{host}: DNS resolution timed out") from None
    except OSError as exc:
        raise httpcore.ConnectError(str(exc)) from exc


# -- the per-fetch deadline ------------------------------------------------------------
_local = threading.local()


@contextmanager
def fetch_deadline(seconds: float) -> Iterator[float]:
    """Bound every socket operation in this thread to ``seconds`` from now, in total."""
    previous = getattr(_local, "deadline", None)
    _local.deadline = deadline = time.monotonic() + seconds
    try:
        yield deadline
    finally:
        _local.deadline = previous


def remaining(timeout: float | None) -> float | None:
    """``timeout`` clamped to what is left of this thread's fetch deadline."""
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    return left if timeout is None else min(timeout, left)


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    left = remaining(timeout)
    if left is not None and left <= 0:
        raise error("the fetch did not finish within --timeout")
    return left


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every read and write fits in the fetch deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(ssl_context, server_hostname,
                                      _left(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class GuardedBackend(httpcore.SyncBackend):
    """httpcore's socket backend with the fetch deadline and, when given, the policy."""

    def __init__(self, policy: AddressPolicy | None) -> None:
        self.policy = policy

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        timeout = _left(timeout, httpcore.ConnectTimeout)
        if self.policy is None:
            return _DeadlineStream(super().connect_tcp(host, port, timeout, local_address,
                                                       socket_options))
        last: Exception | None = None
        for address in self.policy.resolve(host, port, timeout):
            try:
                stream = super().connect_tcp(address, port,
                                             _left(timeout, httpcore.ConnectTimeout),
                                             local_address, socket_options)
            except httpcore.ConnectError as exc:  # try the next allowed address
                last = exc
                continue
            return _DeadlineStream(stream)
        raise last or httpcore.ConnectError(f"{host}: no address to connect to")
