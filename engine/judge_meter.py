"""What one protocol asks of one judge on one report: every request, where its answer
came from, and its prompt tokens.

:class:`Meter` stands in for a :class:`~ambereval.models.Judge` while one protocol
evaluates one report (``runs/report_job.py``): it passes every call on and books it.
Two accounts come out of it:

- :meth:`Meter.work`, content only (the same in a replay): requests asked, distinct
  requests, and the prompt tokens of the distinct requests as the ledger records them.
  It goes into the per-report document (``judge_work``) and ``run.json``.
- :meth:`Meter.spent`, what this run paid: requests the model answered (``calls``,
  unusable answers included), answers read from the ledger, prompt and generated tokens
  of the model's calls, and of the prompt tokens those a prefix cache served
  (``cached_tokens``: the start a call shares with what the in-process judge read last,
  or what a server reports; 0 when it reports nothing). It goes into ``stats.json``
  and the run summary.

``amber evaluate --plan`` books the same requests with a planning judge
(``runs/plan.py``), so the plan and the run count the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ambereval.errors import ModelError
from ambereval.models import Judge
from ambereval.models.judge import Call, JudgeResponse, Message

WORK_KEYS = ("requests", "distinct", "prompt_tokens")
SPENT_KEYS = ("calls", "ledger", "prompt_tokens", "cached_tokens", "completion_tokens",
              "errors")


class Meter:
    """A judge that books every call it passes on (thread-safe)."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self._lock = threading.Lock()
        self.asked: list[str] = []  # keys in the order asked
        self.tokens: dict[str, int] = {}  # key -> prompt tokens (0: unusable answer)
        self.book = dict.fromkeys(SPENT_KEYS, 0)

    def __getattr__(self, name: str) -> Any:  # backend, key, request, seed, ...
        return getattr(self.judge, name)

    def _note(self, key: str, answer: JudgeResponse | ModelError) -> None:
        with self._lock:
            self.asked.append(key)
            if isinstance(answer, ModelError):
                self.tokens.setdefault(key, 0)
                if getattr(answer, "from_ledger", False):
                    self.book["ledger"] += 1
                else:
                    self.book["calls"] += 1
                    self.book["errors"] += 1
                return
            prompt = int(answer.usage.get("prompt_tokens", 0) or 0)
            self.tokens[key] = max(self.tokens.get(key, 0), prompt)
            if answer.source == "model":
                self.book["calls"] += 1
                self.book["prompt_tokens"] += prompt
                self.book["cached_tokens"] += int(answer.usage.get("cached_tokens", 0) or 0)
                self.book["completion_tokens"] += int(
                    answer.usage.get("completion_tokens", 0) or 0)
            else:
                self.book["ledger"] += 1

    def ask(self, messages: list[Message], schema: dict[str, Any],
            max_tokens: int = 256) -> JudgeResponse:
        try:
            answer = self.judge.ask(messages, schema, max_tokens)
        except ModelError as err:
            self._note(self.judge.key(messages, schema, max_tokens), err)
            raise
        self._note(answer.key, answer)
        return answer

    def map(self, calls: list[Call], on_done: Callable[[], None] | None = None,
            ) -> list[JudgeResponse | ModelError]:
        answers = self.judge.map(calls, on_done)
        for call, answer in zip(calls, answers, strict=True):
            self._note(answer.key if isinstance(answer, JudgeResponse)
                       else self.judge.key(*call), answer)
        return answers

    def work(self) -> dict[str, int]:
        with self._lock:
            return {"requests": len(self.asked), "distinct": len(self.tokens),
                    "prompt_tokens": sum(self.tokens.values())}

    def spent(self) -> dict[str, int]:
        with self._lock:
            return dict(self.book)


def add_up(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, int]:
    return {k: sum(int(r.get(k, 0) or 0) for r in rows) for k in keys}
