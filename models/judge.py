"""The one judge interface every protocol calls: messages + JSON schema -> parsed object.

A :class:`Judge` wraps a backend (llama.cpp in-process, or an OpenAI-compatible server)
and, optionally, a :class:`~ambereval.models.ledger.Ledger`. Every call builds a
canonical request of exactly what can change the answer (backend, model identity, chat
template hash, messages, schema, sampling, context size) and keys it by sha256.

A judge is safe to share between threads. ``concurrency`` bounds how many requests are
in flight to its backend at once (an :class:`~ambereval.models.concurrency.AdaptiveLimit`;
1 for the in-process llama.cpp judge, which must run one call at a time), and
:meth:`Judge.map` submits independent requests together, returning answers in input
order. A backend that raises :class:`Throttled` (HTTP 429/503) slows the whole pool down
instead of failing: the request waits ``Retry-After`` and is tried again.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import jsonschema

from ambereval.errors import JudgeUnavailable, LedgerMiss, ModelError, PromptError
from ambereval.models.canonical import canonical_json, content_key
from ambereval.models.concurrency import AdaptiveLimit
from ambereval.models.ledger import Ledger, ShardLedger

Message = dict[str, str]
Call = tuple[list[Message], dict[str, Any], int]  # messages, schema, max_tokens
DEFAULT_SEED = 0
THROTTLE_BUDGET_S = 900.0  # how long one request may wait on a busy server in total


class Throttled(ModelError):
    """The server is overloaded (HTTP 429/503); try again after ``retry_after`` seconds
    (``None``: the server did not say)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.retry_after))


@dataclass(frozen=True)
class Completion:
    """What a backend returns for one call."""

    raw: str
    usage: dict[str, int]
    truncation: dict[str, Any] | None = None
    finish_reason: str | None = None


@dataclass(frozen=True)
class JudgeResponse:
    """A judge's answer: the parsed object, the raw text, usage, and where it came from."""

    obj: Any
    raw: str
    usage: dict[str, int]
    key: str
    source: str  # "model" or "ledger"
    truncation: dict[str, Any] | None = None
    seconds: float = 0.0


class Backend(Protocol):
    name: str

    def identity(self) -> dict[str, Any]:
        """What identifies the model for the ledger key (no weights loaded)."""
        ...

    def complete(self, messages: list[Message], schema: dict[str, Any],
                 max_tokens: int, seed: int) -> Completion: ...


_VALIDATORS: dict[str, Any] = {}  # canonical schema -> checked validator
_VALIDATORS_LOCK = threading.Lock()


def _validator(schema: dict[str, Any]) -> Any:
    """A validator for ``schema``, checked once: checking a schema costs far more than a
    judge call's own client work, and the protocols ask the same few schemas again and
    again."""
    key = canonical_json(schema)
    with _VALIDATORS_LOCK:
        found = _VALIDATORS.get(key)
    if found is not None:
        return found
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as err:
        raise ModelError(f"invalid JSON schema: {err.message}") from None
    validator = jsonschema.Draft202012Validator(schema)
    with _VALIDATORS_LOCK:
        if len(_VALIDATORS) >= 512:
            _VALIDATORS.clear()
        _VALIDATORS[key] = validator
    return validator


#: the ``schema`` of a free-text call (``Judge.ask(messages, TEXT)``): no grammar, the raw
#: text is the answer (the judge APIs of ``amber serve`` for clients that ask no JSON)
TEXT: None = None


def check_schema(schema: dict[str, Any] | None) -> None:
    """Reject schemas that are not valid JSON Schema or not an object at the top."""
    if schema is None:
        return
    _validator(schema)
    if schema.get("type") != "object":
        raise ModelError("the judge schema must describe a JSON object (type: object)")


def parse_against(raw: str, schema: dict[str, Any] | None) -> Any:
    """Parse the model's text and validate it; a ModelError says what was wrong. A
    free-text call (``schema`` None) answers with the text itself."""
    if schema is None:
        return raw
    try:
        obj = json.loads(raw, strict=False)  # raw control characters inside strings are fine
    except ValueError as err:
        raise ModelError(f"judge returned invalid JSON ({err.msg}): {raw[:120]!r}") from None
    error = jsonschema.exceptions.best_match(_validator(schema).iter_errors(obj))
    if error is not None:
        raise ModelError(f"judge output does not match the schema: {error.message}")
    return obj


@dataclass
class Judge:
    """Ask a model for schema-valid JSON, deterministically, through the ledger."""

    backend: Backend
    ledger: Ledger | ShardLedger | None = None
    seed: int = DEFAULT_SEED
    n_ctx: int = 4096
    concurrency: int = 1
    #: the ``open_judge`` arguments that rebuild this judge elsewhere (a Ray worker)
    recipe: dict[str, Any] | None = None
    calls: int = field(default=0, init=False)
    prompt_tokens: int = field(default=0, init=False)
    completion_tokens: int = field(default=0, init=False)
    ledger_hits: int = field(default=0, init=False)
    errors: int = field(default=0, init=False)
    truncated: int = field(default=0, init=False)  # prompts cut to fit the context
    model_seconds: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.limit = AdaptiveLimit(max(1, self.concurrency))
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[str, threading.Event] = {}  # keys being asked right now
        self._recorded: set[str] = set()  # keys this judge asked its model (record mode)
        self._retries_before = getattr(self.backend, "retries", 0)  # a backend may be shared

    @property
    def mode(self) -> str:
        return self.ledger.mode if self.ledger else "record"

    def stats(self) -> dict[str, Any]:
        """Counters since this judge was opened: model calls, ledger hits, tokens,
        unusable answers, prompts cut to fit the context, retries and throttles (429/503),
        peak requests in flight."""
        retries = getattr(self.backend, "retries", 0) - self._retries_before
        with self._lock:
            return {"calls": self.calls, "ledger_hits": self.ledger_hits,
                    "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens, "errors": self.errors,
                    "truncated": self.truncated,
                    "retries": retries, "throttled": self.limit.throttles,
                    "peak_in_flight": self.limit.peak, "concurrency": self.limit.maximum,
                    "model_seconds": round(self.model_seconds, 3)}

    def _count(self, **deltas: float) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)

    def map(self, calls: list[Call], on_done: Callable[[], None] | None = None,
            ) -> list[JudgeResponse | ModelError]:
        """Ask every call, up to ``concurrency`` at once; answers (or the ModelError that
        made one unusable) come back in input order, whatever order they finish in.
        ``on_done`` runs after each call (from the worker thread: keep it thread-safe).
        A :class:`JudgeUnavailable` is not an answer: it is raised, and calls not yet
        started are cancelled."""
        def one(call: Call) -> JudgeResponse | ModelError:
            try:
                return self.ask(*call)
            except ModelError as err:
                return err
            finally:
                if on_done is not None:
                    on_done()

        if self.limit.maximum <= 1 or len(calls) <= 1:
            return [one(c) for c in calls]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.limit.maximum,
                                                thread_name_prefix="amber-judge")
            pool = self._pool
        return list(pool.map(one, calls))

    def close(self) -> None:
        """Stop the worker threads :meth:`map` started (the judge stays usable)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def request(self, messages: list[Message], schema: dict[str, Any] | None,
                max_tokens: int, sampling: dict[str, Any] | None = None,
                fit: str = "cut") -> dict[str, Any]:
        identity = self.backend.identity()
        model = identity["model"]
        # the key holds what changes the answer: the weights' sha256 (not the file name),
        # or the served model's name (not the server's address)
        model_key = {"sha256": model["sha256"]} if "sha256" in model else \
            {"name": model.get("name")}
        return {
            "backend": self.backend.name,
            "model": model_key,
            "chat_template_sha256": identity.get("chat_template_sha256"),
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "schema": schema,
            "sampling": {"temperature": 0.0, "seed": self.seed, "max_tokens": max_tokens,
                         **(sampling or {})},
            "n_ctx": identity.get("n_ctx", self.n_ctx),
            # only when asked, so every other key stays as it was: a prompt beyond the
            # context is refused (PromptTooLong) instead of cut, the answer capped to the room
            **({"fit": fit} if fit != "cut" else {}),
        }

    def key(self, messages: list[Message], schema: dict[str, Any] | None,
            max_tokens: int = 256, sampling: dict[str, Any] | None = None,
            fit: str = "cut") -> str:
        return content_key(self.request(messages, schema, max_tokens, sampling, fit))

    def ask(self, messages: list[Message], schema: dict[str, Any] | None,
            max_tokens: int = 256, sampling: dict[str, Any] | None = None,
            fit: str = "cut") -> JudgeResponse:
        """The judge's answer to ``messages``, parsed against ``schema`` (``TEXT``: the
        text itself). ``sampling`` replaces temperature 0 and the judge's seed (the served
        judge APIs' pass-through); ``fit="refuse"`` refuses a prompt beyond the context
        instead of cutting it. Both are in the key only when given."""
        check_schema(schema)
        request = self.request(messages, schema, max_tokens, sampling, fit)
        key = content_key(request)
        extra = {k: v for k, v in (("sampling", sampling), ("fit", fit))
                 if v and v != "cut"}
        if self.ledger is None:
            return self._ask_model(messages, schema, max_tokens, request, key, extra)
        while True:
            # ``record`` asks the model afresh, but once per run: a request this judge
            # already recorded (another protocol's identical question) is read back
            hit = self._lookup(key, request) if self.ledger.mode in ("reuse", "replay") \
                or key in self._recorded else None
            if hit is not None:
                return hit
            # The same request already on its way (another report, another thread): wait
            # for it and read its answer from the ledger, as a one-at-a-time run would.
            with self._lock:
                pending = self._pending.get(key)
                if pending is None:
                    self._pending[key] = threading.Event()
            if pending is None:
                break
            pending.wait()
        try:
            # the same request may have finished between the lookup and taking the key
            if self.ledger.mode in ("reuse", "replay") or key in self._recorded:
                hit = self._lookup(key, request)
                if hit is not None:
                    return hit
            return self._ask_model(messages, schema, max_tokens, request, key, extra)
        finally:
            with self._lock:
                self._pending.pop(key).set()

    def _lookup(self, key: str, request: dict[str, Any]) -> JudgeResponse | None:
        assert self.ledger is not None
        hit = self.ledger.get(key)
        if hit is not None and hit.get("error"):
            self._count(ledger_hits=1, errors=1)
            err = ModelError(hit["error"])  # the same unusable answer, replayed
            err.from_ledger = True  # type: ignore[attr-defined]  # not a model call
            raise err
        if hit is not None:
            usage = {"prompt_tokens": hit["prompt_tokens"] or 0,
                     "completion_tokens": hit["completion_tokens"] or 0}
            trunc = json.loads(hit["truncation"]) if hit["truncation"] else None
            self._count(ledger_hits=1, truncated=1 if trunc else 0)
            return JudgeResponse(json.loads(hit["parsed"]), hit["response"], usage, key,
                                 "ledger", trunc, hit["seconds"] or 0.0)
        if self.ledger.mode == "replay":
            first = canonical_json(request["messages"][-1]["content"])[:80]
            raise LedgerMiss(f"judge request {key[:16]} is not in the ledger "
                             f"{self.ledger.path} (last message starts {first})",
                             hint="rerun with --ledger-mode reuse to fill it")
        return None

    def _ask_model(self, messages: list[Message], schema: dict[str, Any] | None,
                   max_tokens: int, request: dict[str, Any], key: str,
                   extra: dict[str, Any] | None = None) -> JudgeResponse:
        try:
            completion, seconds = self._complete(messages, schema, max_tokens, extra or {})
        except PromptError as err:  # deterministic: record it so a replay says the same
            self._count(errors=1)
            if self.ledger is not None:
                self._put(key, request, "", None, {}, None, 0.0, error=str(err))
            raise
        except ModelError:
            self._count(errors=1)
            raise
        self._count(model_seconds=seconds,
                    completion_tokens=completion.usage.get("completion_tokens", 0))
        try:
            obj = parse_against(completion.raw, schema)
        except ModelError as bad:
            problem = bad
            if completion.finish_reason == "length":
                problem = ModelError(f"judge output was cut at max_tokens={max_tokens} "
                                     "before the JSON closed",
                                     hint="raise max_tokens or bound the schema's lengths")
            self._count(errors=1)
            if self.ledger is not None:
                self._put(key, request, completion.raw, None, completion.usage,
                                completion.truncation, seconds, error=str(problem))
            raise problem from None
        self._count(calls=1, prompt_tokens=completion.usage.get("prompt_tokens", 0),
                    truncated=1 if completion.truncation else 0)
        if self.ledger is not None:
            self._put(key, request, completion.raw, obj, completion.usage,
                            completion.truncation, seconds)
        return JudgeResponse(obj, completion.raw, completion.usage, key, "model",
                             completion.truncation, seconds)

    def _put(self, key: str, *args: Any, **kwargs: Any) -> None:
        assert self.ledger is not None
        self.ledger.put(key, *args, **kwargs)
        self._recorded.add(key)

    def _complete(self, messages: list[Message], schema: dict[str, Any] | None,
                  max_tokens: int, extra: dict[str, Any]) -> tuple[Completion, float]:
        """One backend call inside a concurrency slot; a throttled call gives its slot
        back, shrinks the pool, waits as the server asked, and tries again."""
        waited, tries = 0.0, 0
        while True:
            with self.limit.slot():
                start = time.perf_counter()
                try:
                    completion = self.backend.complete(messages, schema, max_tokens,
                                                       self.seed, **extra)
                except Throttled as busy:
                    pause = busy.retry_after if busy.retry_after is not None \
                        else min(30.0, 0.5 * 2 ** tries)
                else:
                    self.limit.success()
                    return completion, time.perf_counter() - start
            tries += 1
            waited += pause
            if waited > THROTTLE_BUDGET_S:
                raise JudgeUnavailable(f"judge server stayed overloaded for {waited:.0f} s "
                                       f"({tries} answers of 429/503)",
                                       hint="lower --judge-concurrency or add server capacity")
            self.limit.throttle(pause)
