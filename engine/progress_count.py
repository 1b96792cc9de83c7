"""A thread-safe progress count: on a served judge several calls finish at once, and each
must still move the count by exactly one, in order, under one lock."""

from __future__ import annotations

import threading
from collections.abc import Callable


class ProgressCount:
    """Callable ``tick(n=1)``: adds ``n`` done items and reports ``progress(phase, done,
    total)``. Pass it as ``on_done=`` to ``Judge.map`` or to an executor."""

    def __init__(self, progress: Callable[[str, int, int], None], phase: str,
                 total: int) -> None:
        self._progress, self._phase, self.total = progress, phase, total
        self.done = 0
        self._lock = threading.Lock()

    def __call__(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            self._progress(self._phase, self.done, self.total)
