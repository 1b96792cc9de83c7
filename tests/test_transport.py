"""Transport details that need no server: backoff bounds, DNS classification, redaction."""

from __future__ import annotations

import random
import socket

import httpx

from ambereval.snapshots.capture.transport import RetryPolicy, _is_dns_failure, redact_headers


def test_backoff_is_bounded_jittered_and_honours_retry_after() -> None:
    policy = RetryPolicy(backoff=0.5, max_backoff=4.0)
    rng = random.Random(0)
    waits = [policy.delay(attempt, rng, None) for attempt in range(8) for _ in range(20)]
    assert all(0 <= w <= 4.0 for w in waits)
    assert len(set(waits)) > 100  # jittered, not a fixed schedule
    assert max(policy.delay(0, rng, None) for _ in range(50)) <= 0.5
    assert policy.delay(0, rng, 3.0) == 3.0
    assert policy.delay(0, rng, 100.0) == 4.0  # a server cannot park us forever


def test_dns_failures_are_permanent_others_are_not() -> None:
    dns = httpx.ConnectError("failed")
    dns.__cause__ = socket.gaierror(-2, "Name or service not known")
    assert _is_dns_failure(dns)
    refused = httpx.ConnectError("[Errno 111] Connection refused")
    assert not _is_dns_failure(refused)


def test_redaction_is_case_insensitive_and_keeps_order() -> None:
    headers = [("Host", "h"), ("x-api-key", "k1"), ("AUTHORIZATION", "Bearer k2"),
               ("Cookie", "a=b"), ("Accept", "*/*")]
    assert redact_headers(headers) == [("Host", "h"), ("x-api-key", "[redacted]"),
                                       ("AUTHORIZATION", "[redacted]"), ("Cookie", "[redacted]"),
                                       ("Accept", "*/*")]


def test_temporary_dns_trouble_is_retryable() -> None:
    slow = httpx.ConnectError("failed")
    slow.__cause__ = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    assert not _is_dns_failure(slow)


def test_archived_urls_lose_credentials() -> None:
    from ambereval.snapshots.capture.transport import archived_url, is_secret

    assert archived_url("https://u:p@h.example/a?key=abc&q=1") == \
        "https://h.example/a?key=[redacted]&q=1"
    assert is_secret("X-Set-Cookie") and is_secret("X-Proxy-Url") and not is_secret("Accept")
