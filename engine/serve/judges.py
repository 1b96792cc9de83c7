"""The judge APIs of ``amber serve``, answered by Amber's judge through its ledger.

Whatever model the client names, Amber's judge answers (``model`` / ``modelVersion`` and
``X-Amber-Judge`` say which). Every call goes through the judge's ledger: with
``--ledger-mode replay`` the answer comes only from the ledger (no model is loaded) and
the response bytes are those of the recorded answer, because every field of a body is
made from the ledger row (the key, the judge's words, token counts, the time it was
first answered). A prompt beyond the local judge's context gets the provider's own
"input too long" error, never a cut prompt.

Requests wait their turn for an in-process judge (one call at a time) on the server's
threads; a served judge takes as many at once as Amber's adaptive limit allows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ambereval.engine.serve.answer import Answer
from ambereval.engine.serve.judge_api import (
    ApiError,
    JudgeQuery,
    JudgeReply,
    dumps,
    gemini_body,
    gemini_count_body,
    gemini_error,
    gemini_model,
    gemini_models,
    gemini_stream,
    openai_body,
    openai_error,
    openai_model,
    openai_models,
    openai_stream,
    parse_gemini,
    parse_openai,
)
from ambereval.engine.serve.match import GEMINI_PATH
from ambereval.errors import (
    TOO_LONG,
    JudgeUnavailable,
    LedgerMiss,
    ModelError,
    PromptError,
)
from ambereval.models.judge import Judge

#: client sampling parameters the judge can take when they are passed through
PASSABLE = ("temperature", "top_p", "top_k", "seed")
DEFAULT_MAX_TOKENS = 1024
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            413: "Payload Too Large", 500: "Internal Server Error", 503: "Service Unavailable"}
_GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 405: "INVALID_ARGUMENT",
                  413: "INVALID_ARGUMENT", 500: "INTERNAL", 503: "UNAVAILABLE"}


def refusal(service: str, err: ApiError, match: str = "refused") -> Answer:
    """An API error in the provider's shape; ``x-should-retry: false`` keeps the OpenAI
    SDK from asking a deterministic judge the same question again."""
    body = gemini_error(err) if service == "gemini" else openai_error(err)
    headers = [("Content-Type", "application/json; charset=utf-8"),
               ("X-Amber-Match", match), ("x-should-retry", "false")]
    return Answer(err.status, _REASONS.get(err.status, "Error"), headers, match, service,
                  body=body, miss_reason=err.message if match == "miss" else None,
                  length=len(body))


def no_judge(service: str) -> Answer:
    """A judge API request to a server started without a judge."""
    return refusal(service, ApiError(
        404, "no judge answers here: start amber serve with --judge NAME (or --judge-model, "
        "--judge-url, or --ledger FILE --ledger-mode replay)", "model_not_found",
        "NOT_FOUND"), match="miss")


class JudgeService:
    """Answers OpenAI and Gemini requests with ``judge``."""

    def __init__(self, judge: Judge, name: str, pass_sampling: bool = False,
                 notify: Callable[[str], None] | None = None,
                 default_max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        self.judge = judge
        self.name = name
        self.pass_sampling = pass_sampling
        self.default_max_tokens = default_max_tokens
        self.notify = notify or (lambda line: None)
        self._lock = threading.Lock()
        self._said: set[str] = set()
        self.counts = {"answered": 0, "from_ledger": 0, "too_long": 0, "not_in_ledger": 0,
                       "unusable": 0, "refused": 0}

    # -- routing -------------------------------------------------------------------------
    def answer(self, service: str, method: str, target: str, headers: list[tuple[str, str]],
               body: bytes) -> Answer:
        try:
            if service == "openai":
                return self._openai(method, urlsplit(target).path, body)
            return self._gemini(method, target, body)
        except ApiError as err:
            kind = "miss" if err.code == "not_in_ledger" else "refused"
            self._count("not_in_ledger" if kind == "miss" else
                        "too_long" if err.code == "context_length_exceeded" else "refused")
            return refusal(service, err, kind)

    def _openai(self, method: str, path: str, body: bytes) -> Answer:
        path = path.rstrip("/")
        if path.endswith("/models") or "/models/" in path:
            if method not in ("GET", "HEAD"):
                raise ApiError(405, f"{method} {path}: models are listed with GET")
            if path.endswith("/models"):
                return self._json("openai", openai_models(self.name))
            return self._json("openai", dumps(openai_model(path.rsplit("/", 1)[1])))
        if path.removeprefix("/v1") != "/chat/completions":
            raise ApiError(404, f"{path}: Amber's judge answers chat completions and models "
                           "only", "not_found", "NOT_FOUND")
        if method != "POST":
            raise ApiError(405, f"{method} {path}: chat completions are created with POST")
        query = parse_openai(body)
        reply = self._ask(query)
        if query.stream:
            return self._stream("openai", openai_stream(reply, query.include_usage))
        return self._json("openai", openai_body(reply))

    def _gemini(self, method: str, target: str, body: bytes) -> Answer:
        parts = urlsplit(target)
        found = GEMINI_PATH.match(parts.path)
        if found is None:
            raise ApiError(404, f"{parts.path} is not a Gemini method", "not_found",
                           "NOT_FOUND")
        _, model, action = found.groups()
        if action is None:
            if method not in ("GET", "HEAD"):
                raise ApiError(405, f"{method} {parts.path}: models are listed with GET")
            if model is None:
                return self._json("gemini", gemini_models(self.name))
            return self._json("gemini", dumps(gemini_model(model)))
        if method != "POST":
            raise ApiError(405, f"{method} {parts.path}: {action} takes a POST")
        if action == "countTokens":
            messages = gemini_count_body(body)
            return self._json("gemini", dumps({"totalTokens": self._count_tokens(messages)}))
        stream = action == "streamGenerateContent"
        query = parse_gemini(model or "", body, stream)
        reply = self._ask(query)
        if not stream:
            return self._json("gemini", gemini_body(reply))
        sse = dict(parse_qsl(parts.query)).get("alt") == "sse"
        if sse:
            return self._stream("gemini", gemini_stream(reply))
        # without alt=sse Gemini streams one JSON array of responses
        docs = [event[len(b"data: "):].strip() for event in gemini_stream(reply)]
        return self._json("gemini", b"[" + b",".join(docs) + b"]")

    # -- asking --------------------------------------------------------------------------
    def _ask(self, query: JudgeQuery) -> JudgeReply:
        self._say_once(query)
        sampling = {k: query.sampling[k] for k in PASSABLE if k in query.sampling} \
            if self.pass_sampling else None
        max_tokens = query.max_tokens or self.default_max_tokens
        try:
            resp = self.judge.ask(query.messages, query.schema, max_tokens,
                                  sampling=sampling or None, fit="refuse")
        except LedgerMiss as err:
            raise ApiError(404, f"not in the ledger: {err}", "not_in_ledger",
                           "NOT_FOUND") from None
        except JudgeUnavailable as err:
            raise ApiError(503, f"the judge is unavailable: {err}", "judge_unavailable",
                           "UNAVAILABLE") from None
        except ModelError as err:
            text = str(err)
            if text.startswith(TOO_LONG) or ("HTTP 400" in text and "context" in text):
                raise ApiError(400, text, "context_length_exceeded",
                               "INVALID_ARGUMENT") from None
            if isinstance(err, PromptError):
                raise ApiError(400, text, "invalid_request_error", "INVALID_ARGUMENT") \
                    from None
            self._count("unusable")
            raise ApiError(500, f"the judge's answer was unusable: {text}", "server_error",
                           "INTERNAL") from None
        ledger = self.judge.ledger
        row = ledger.get(resp.key) if ledger is not None else None
        name = self.name
        if ledger is not None:
            named = [n["name"] for n in ledger.notes(resp.key) if n["kind"] == "judge"]
            if named:  # the name it first answered as: a replay's bytes are the same
                name = named[0]
            elif ledger.mode != "replay":
                ledger.note(resp.key, "judge", {"name": name})
            if ledger.mode != "replay":
                ledger.note(resp.key, "client", {"provider": query.provider,
                                                 "model": query.model_asked,
                                                 "sampling": query.sampling,
                                                 "ignored": query.ignored})
        created = _epoch(row["created"]) if row else int(time.time())
        prompt, completion = resp.usage.get("prompt_tokens", 0), \
            resp.usage.get("completion_tokens", 0)
        n_ctx = self.judge.backend.identity().get("n_ctx") or 0
        full = completion >= max_tokens or (n_ctx and prompt + completion >= n_ctx)
        self._count("answered")
        if resp.source == "ledger":
            self._count("from_ledger")
        return JudgeReply(resp.raw, resp.key, name, created, prompt, completion,
                          "length" if full else "stop")

    def _count_tokens(self, messages: list[dict[str, str]]) -> int:
        counter = getattr(self.judge.backend, "count_messages", None)
        if counter is None:  # a served or replaying judge: an estimate, 4 characters each
            return sum(len(m["content"]) for m in messages) // 4 + 1
        return int(counter(messages))

    def _say_once(self, query: JudgeQuery) -> None:
        lines = []
        for name in query.ignored:
            if f"ignored {name}" not in self._said:
                self._said.add(f"ignored {name}")
                lines.append(f"the judge ignores {query.provider} parameter {name!r} (not "
                             "something a local judge honours); said once")
        if query.sampling and not self.pass_sampling:
            asked = ", ".join(f"{k}={v}" for k, v in sorted(query.sampling.items()))
            if f"sampling {asked}" not in self._said:
                self._said.add(f"sampling {asked}")
                lines.append(f"a client asked {asked}: answered at temperature 0, seed "
                             f"{self.judge.seed} (kept in the ledger; --pass-sampling passes "
                             "it through)")
        for line in lines:
            self.notify(line)

    # -- plumbing ------------------------------------------------------------------------
    def _json(self, service: str, body: bytes) -> Answer:
        headers = [("Content-Type", "application/json; charset=utf-8"),
                   ("X-Amber-Match", "judge"), ("X-Amber-Judge", self.name)]
        return Answer(200, "OK", headers, "judge", service, body=body, length=len(body))

    def _stream(self, service: str, events: list[bytes]) -> Answer:
        headers = [("Content-Type", "text/event-stream; charset=utf-8"),
                   ("Cache-Control", "no-cache"), ("X-Amber-Match", "judge"),
                   ("X-Amber-Judge", self.name)]
        body = b"".join(events)
        return Answer(200, "OK", headers, "judge", service, body=body, length=len(body),
                      chunk_sizes=[len(e) for e in events])

    def _count(self, name: str) -> None:
        with self._lock:
            self.counts[name] += 1

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return {"judge": self.name, **self.counts, **{
                k: v for k, v in self.judge.stats().items()
                if k in ("calls", "ledger_hits", "prompt_tokens", "completion_tokens")}}


def _epoch(stamp: str) -> int:
    return int(datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=UTC).timestamp())


def judge_name(judge_ref: str | None, model: Path | None, url: str | None,
               served_name: str | None) -> str:
    """The name a judge answers as: its registry name, its GGUF file's stem, or the served
    model's name; the default judge by its registry name."""
    if judge_ref:
        return judge_ref
    if url:
        return served_name or "served"
    if model:
        return model.name.removesuffix(".gguf")
    return "smollm2-135m"


def open_service(judge_ref: str | None, model: Path | None, url: str | None,
                 served_name: str | None, n_ctx: int, concurrency: int | None,
                 threads: int | None, seed: int, ledger: Path | None, ledger_mode: str,
                 pass_sampling: bool, max_tokens: int,
                 notify: Callable[[str], None]) -> JudgeService:
    """The judge APIs' service from ``amber serve``'s options. In ``replay`` mode without
    a model option no model is opened: the judge's identity is read from the ledger."""
    from ambereval.errors import ConfigError
    from ambereval.models import open_judge
    from ambereval.models.ledger import Ledger
    from ambereval.models.replay_backend import ReplayBackend

    if ledger_mode == "replay":
        if ledger is None:
            raise ConfigError("--ledger-mode replay needs --ledger FILE")
        if not (judge_ref or model or url):
            book = Ledger(ledger, "replay")
            backend = ReplayBackend.from_ledger(book)
            judge = Judge(backend, book, seed=seed, n_ctx=n_ctx)
            return JudgeService(judge, backend.describe(), pass_sampling, notify, max_tokens)
    judge = open_judge(model, url, served_name, ledger, ledger_mode, n_ctx=n_ctx,
                       threads=threads, seed=seed, concurrency=concurrency, judge=judge_ref)
    return JudgeService(judge, judge_name(judge_ref, model, url, served_name), pass_sampling,
                        notify, max_tokens)
