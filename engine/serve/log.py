"""What ``amber serve`` answered: counts per match kind and service, and every miss
appended to a JSONL file (``time``, ``method``, ``url``, ``service``, ``reason``) so a
researcher sees what the original code asked that the bundle lacks; a reader answer from
the nearest capture (other output options) is written there too, with
``match: nearest`` and ``options_differ``.

URLs are logged with key-like query values redacted; headers are never logged.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from ambereval.engine.serve.answer import Answer
from ambereval.snapshots.capture.transport import archived_url


class ServeLog:
    """Thread-safe tally of answers; misses go to ``misses_path`` as they happen."""

    def __init__(self, misses_path: Path | None = None,
                 notify: Callable[[str], None] | None = None) -> None:
        self.misses_path = misses_path
        #: one line to the operator (a refused request, a broken connection): stderr
        self.notify = notify or _to_stderr
        self._fh: TextIO | None = None
        if misses_path is not None:
            misses_path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(misses_path, "a", encoding="utf-8")  # noqa: SIM115
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {"exact": 0, "rendered": 0, "nearest": 0, "judge": 0,
                                       "miss": 0, "refused": 0}
        self.problems = 0
        self.by_service: dict[str, dict[str, int]] = {}

    def note(self, method: str, url: str, answer: Answer) -> None:
        if answer.match == "refused":
            reason = answer.body.decode("utf-8", "replace").strip() if answer.body else ""
            self.notify(f"refused {method} {archived_url(url)[:200]}: HTTP {answer.status} "
                        f"{_one_line(reason)[:300]}")
        with self._lock:
            self.counts[answer.match] = self.counts.get(answer.match, 0) + 1
            per = self.by_service.setdefault(answer.service, {})
            per[answer.match] = per.get(answer.match, 0) + 1
            if answer.match not in ("miss", "nearest") or self._fh is None:
                return
            line = {"time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                    "method": method, "url": archived_url(url), "service": answer.service,
                    "reason": answer.miss_reason}
            if answer.match == "nearest":  # answered, but not with the options asked for
                line.update(match="nearest", reason="reader options differ",
                            options_differ=answer.nearest or [])
            self._fh.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
            self._fh.flush()

    def problem(self, line: str) -> None:
        """A connection that failed mid-request (counted, one line, no traceback)."""
        with self._lock:
            self.problems += 1
        self.notify(line)

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return {"answered": sum(self.counts[k] for k in ANSWERED),
                    **self.counts, "broken_connections": self.problems,
                    "by_service": {k: dict(v) for k, v in sorted(self.by_service.items())},
                    "misses_file": str(self.misses_path) if self.misses_path else None}

    def line(self) -> str:
        s = self.summary()
        text = (f"{s['answered']} answered ({s['exact']} exact, {s['rendered']} rendered, "
                f"{s['nearest']} nearest), {s['miss']} misses")
        if s["miss"] and s["misses_file"]:
            text += f" (logged to {s['misses_file']})"
        if s["judge"]:
            text = text.replace(" nearest)", f" nearest, {s['judge']} by the judge)", 1)
        if s["refused"]:
            text += f", {s['refused']} refused"
        if s.get("error"):
            text += f", {s['error']} unreadable records"
        return text


#: the answer kinds that answered the request
ANSWERED = ("exact", "rendered", "nearest", "judge")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _to_stderr(line: str) -> None:
    sys.stderr.write(f"amber serve: {line}\n")
    sys.stderr.flush()
