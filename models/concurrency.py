"""How many judge requests may be in flight at once, adapting to a server that pushes back.

:class:`AdaptiveLimit` is a semaphore whose size moves: it starts at the configured
maximum, halves when the server answers 429/503 (and holds every caller back until the
server's ``Retry-After`` has passed), and grows back by one after ``limit`` successes in a
row (additive increase, multiplicative decrease, as TCP does). With ``maximum=1`` it is a
plain lock: the in-process llama.cpp judge runs one call at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class AdaptiveLimit:
    """A bounded, self-adjusting number of concurrent slots."""

    def __init__(self, maximum: int = 1) -> None:
        if maximum < 1:
            raise ValueError("the concurrency limit must be at least 1")
        self.maximum = maximum
        self.limit = maximum
        self.in_flight = 0
        self.peak = 0
        self.throttles = 0
        self._successes = 0
        self._resume_at = 0.0
        self._cond = threading.Condition()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one slot while the body runs (blocks while the pool is full or paused)."""
        with self._cond:
            while True:
                pause = self._resume_at - time.monotonic()
                if pause <= 0 and self.in_flight < self.limit:
                    break
                self._cond.wait(timeout=pause if pause > 0 else None)
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            yield
        finally:
            with self._cond:
                self.in_flight -= 1
                self._cond.notify_all()

    def success(self) -> None:
        """One request went through: after ``limit`` in a row, allow one more."""
        with self._cond:
            self._successes += 1
            if self.limit < self.maximum and self._successes >= self.limit:
                self.limit += 1
                self._successes = 0
                self._cond.notify_all()

    def throttle(self, retry_after: float) -> None:
        """The server is overloaded: halve the limit and pause everyone ``retry_after`` s."""
        with self._cond:
            self.throttles += 1
            self.limit = max(1, self.limit // 2)
            self._successes = 0
            self._resume_at = max(self._resume_at, time.monotonic() + max(0.0, retry_after))
            self._cond.notify_all()
