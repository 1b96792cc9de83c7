"""HTTP with retries, backoff with jitter, per-service rate limits, and redaction.

Every exchange is returned as an :class:`Exchange` holding exactly what the archive needs:
the request as sent (secrets already redacted), the status line, the headers, and the
body bytes as they came off the wire (content-encoding kept, chunking removed).
"""

from __future__ import annotations

import contextlib
import random
import re
import socket
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx

from ambereval.snapshots.capture.address_policy import (
    AddressPolicy,
    BlockedAddress,
    GuardedBackend,
    fetch_deadline,
    remaining,
    scheme_problem,
)

REDACTED = "[redacted]"
SECRET_HEADERS = frozenset(
    {"x-api-key", "authorization", "proxy-authorization", "cookie", "set-cookie"}
)
# any header (or --jina-option) whose name mentions one of these is redacted too
SECRET_PARTS = ("auth", "cookie", "token", "key", "secret", "password", "proxy", "session")
_SECRET_QUERY = re.compile(r"(?i)^(api[_-]?key|key|token|access[_-]?token|secret|sig|"
                           r"signature|password|auth)$")


def is_secret(name: str) -> bool:
    low = name.lower()
    return low in SECRET_HEADERS or any(part in low for part in SECRET_PARTS)


def archived_url(url: str) -> str:
    """The URL as archived: no user:password@, no key/token query values."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = "&".join(
        f"{k}={REDACTED}" if _SECRET_QUERY.match(k) else (f"{k}={v}" if v or "=" in pair else k)
        for pair in parts.query.split("&") if pair
        for k, _, v in [pair.partition("=")])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
DEFAULT_USER_AGENT = "amber-eval (+https://github.com/amber-eval; evidence snapshot)"


def redact_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Replace the value of every secret-bearing header with a fixed marker."""
    return [(k, REDACTED if is_secret(k) else v) for k, v in headers]


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try one request. Timeouts are seconds."""

    attempts: int = 4
    backoff: float = 0.5
    max_backoff: float = 20.0
    timeout: float = 30.0
    max_body_bytes: int = 50 * 1024 * 1024

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None) -> float:
        """Full-jitter exponential backoff; a server's Retry-After wins when larger."""
        cap = min(self.max_backoff, self.backoff * (2**attempt))
        wait = rng.uniform(0, cap)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_backoff))
        return wait


class RateLimiter:
    """A thread-safe token bucket: at most ``rate`` requests per second per service."""

    def __init__(self, rate: float | None, burst: int = 1) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        if not self.rate:
            return
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
                self._last = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                wait = (1 - self._tokens) / self.rate
            time.sleep(wait)


@dataclass
class Exchange:
    """One request and what came back (or why nothing did)."""

    method: str
    url: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    started: datetime
    status: int | None = None
    reason: str = ""
    http_version: str = "HTTP/1.1"
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    error: str | None = None
    permanent: bool = False
    attempts: int = 0
    truncated: bool = False  # body cut at max_body_bytes: archived with WARC-Truncated
    blocked: bool = False  # refused before sending (scheme or address policy): not archived

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300

    def header(self, name: str) -> str | None:
        for k, v in self.response_headers:
            if k.lower() == name.lower():
                return v
        return None

    def decoded_body(self) -> bytes:
        """The body with any gzip/deflate content-encoding undone (ValueError if the body
        does not decode)."""
        encoding = (self.header("content-encoding") or "").lower().strip()
        try:
            if encoding in ("gzip", "x-gzip"):
                return zlib.decompress(self.body, 16 + zlib.MAX_WBITS)
            if encoding == "deflate":
                try:
                    return zlib.decompress(self.body)
                except zlib.error:
                    return zlib.decompress(self.body, -zlib.MAX_WBITS)
        except zlib.error as exc:
            raise ValueError(f"body does not decode as {encoding}: {exc}") from None
        return self.body


ResponseCheck = Callable[[Exchange], str | None]


def _is_dns_failure(exc: BaseException) -> bool:
    """True only for 'this name does not exist' (permanent); a resolver that is down or
    slow (EAI_AGAIN, 'temporary failure') stays retryable."""
    seen: BaseException | None = exc
    while seen is not None:
        text = str(seen).lower()
        if "temporary failure" in text:
            return False
        if isinstance(seen, socket.gaierror):
            return seen.errno == socket.EAI_NONAME
        if "name or service not known" in text or "nodename nor servname" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def blocked_reason(exc: BaseException) -> str | None:
    """The address policy's reason, when it refused the connection behind ``exc``."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, BlockedAddress):
            return seen.reason
        seen = seen.__cause__ or seen.__context__
    return None


class _HopByHopClient(httpx.Client):
    """Redirects are never followed here (the reader archives and checks every hop), so
    a malformed ``Location`` must not fail the fetch that brought it: httpx parses it
    for ``next_request`` even when not following."""

    def _build_redirect_request(self, request: httpx.Request,
                                response: httpx.Response) -> httpx.Request:
        try:
            return super()._build_redirect_request(request, response)
        except httpx.InvalidURL:
            return None  # type: ignore[return-value]


def http_client(timeout: float, address_policy: AddressPolicy | None = None) -> httpx.Client:
    """An httpx client whose sockets honour the fetch deadline and ``address_policy``
    (None: any address, for the user's own service base URLs)."""
    transport = httpx.HTTPTransport()
    transport._pool = httpcore.ConnectionPool(  # the only way to give httpx a backend
        ssl_context=httpx.create_ssl_context(), max_connections=64,
        max_keepalive_connections=16, keepalive_expiry=5.0,
        network_backend=GuardedBackend(address_policy))
    return _HopByHopClient(timeout=httpx.Timeout(timeout), follow_redirects=False,
                           trust_env=False, transport=transport)


def _raw(headers: httpx.Headers) -> list[tuple[str, str]]:
    """Headers as they went over the wire: original case and order."""
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers.raw]


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class Transport:
    """Sends requests for one service under its rate limit and retry policy."""

    def __init__(
        self,
        name: str,
        policy: RetryPolicy | None = None,
        rate: float | None = None,
        seed: int = 0,
        client: httpx.Client | None = None,
        address_policy: AddressPolicy | None = None,
    ) -> None:
        self.name = name
        self.policy = policy or RetryPolicy()
        self.limiter = RateLimiter(rate)
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self.address_policy = address_policy
        self._client = client or http_client(self.policy.timeout, address_policy)

    def close(self) -> None:
        self._client.close()

    def send(
        self,
        method: str,
        url: str,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        check: ResponseCheck | None = None,
    ) -> Exchange:
        """Send with retries; never raises for network trouble: the Exchange says it."""
        sent = {"User-Agent": DEFAULT_USER_AGENT, "Accept-Encoding": "gzip, deflate"}
        sent.update(headers or {})
        exchange = Exchange(method, url, [], body, datetime.now(UTC))
        problem = scheme_problem(url)
        if problem is None and self.address_policy is not None:
            problem = self.address_policy.url_problem(url)
        if problem is not None:
            with contextlib.suppress(ValueError):
                exchange.url = archived_url(url)
            exchange.error, exchange.permanent, exchange.blocked = problem, True, True
            return exchange
        for attempt in range(self.policy.attempts):
            self.limiter.acquire()
            exchange = self._once(method, url, sent, body)
            exchange.attempts = attempt + 1
            if exchange.error is None and exchange.status is not None and check is not None:
                problem = check(exchange) if 200 <= exchange.status < 300 else None
                if problem:
                    exchange.error = problem
            if exchange.permanent or (exchange.error is None and not self._retryable(exchange)):
                return exchange
            if attempt + 1 < self.policy.attempts:
                with self._rng_lock:
                    wait = self.policy.delay(
                        attempt, self._rng, _retry_after(exchange.header("retry-after"))
                    )
                time.sleep(wait)
        return exchange

    @staticmethod
    def _retryable(exchange: Exchange) -> bool:
        return exchange.status in RETRYABLE_STATUS

    def _once(self, method: str, url: str, headers: dict[str, str], body: bytes) -> Exchange:
        with fetch_deadline(self.policy.timeout):
            return self._once_within_deadline(method, url, headers, body)

    def _once_within_deadline(self, method: str, url: str, headers: dict[str, str],
                              body: bytes) -> Exchange:
        """One attempt; connect, TLS, headers and body share one --timeout in total."""
        started = datetime.now(UTC)
        request = self._client.build_request(method, url, headers=headers, content=body or None,
                                             timeout=httpx.Timeout(remaining(None)))
        sent_headers = redact_headers(_raw(request.headers))
        exchange = Exchange(method, archived_url(str(request.url)), sent_headers, body, started)
        try:
            response = self._client.send(request, stream=True)
            try:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_raw():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > self.policy.max_body_bytes:
                        exchange.error = f"body larger than {self.policy.max_body_bytes} bytes"
                        exchange.permanent = True
                        exchange.truncated = True
                        break
                    left = remaining(None)
                    if left is not None and left <= 0:
                        raise httpx.ReadTimeout("the fetch did not finish within --timeout")
            finally:
                response.close()
        except httpx.TimeoutException as exc:
            exchange.error = (f"timeout: the fetch did not finish within --timeout "
                              f"{self.policy.timeout:g} s ({exc or type(exc).__name__})")
            return exchange
        except (httpx.TransportError, OSError) as exc:
            reason = blocked_reason(exc)
            if reason is not None:
                exchange.error, exchange.permanent, exchange.blocked = reason, True, True
                return exchange
            exchange.error = f"{type(exc).__name__}: {exc}"
            exchange.permanent = _is_dns_failure(exc)
            return exchange
        exchange.status = response.status_code
        exchange.reason = response.reason_phrase
        exchange.http_version = response.http_version
        exchange.response_headers = redact_headers(
            [(k, v) for k, v in _raw(response.headers) if k.lower() != "transfer-encoding"]
        )
        exchange.body = b"".join(chunks)
        if exchange.error is None and 400 <= exchange.status < 500:
            exchange.permanent = exchange.status not in RETRYABLE_STATUS
        return exchange
