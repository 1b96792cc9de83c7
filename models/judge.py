"""The one judge interface every protocol calls: messages + JSON schema -> parsed object.

A :class:`Judge` wraps a backend (llama.cpp in-process, or an OpenAI-compatible server)
and, optionally, a :class:`~ambereval.models.ledger.Ledger`. Every call builds a
canonical request of exactly what can change the answer (backend, model identity, chat
template hash, messages, schema, sampling, context size) and keys it by sha256.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import jsonschema

from ambereval.errors import LedgerMiss, ModelError, PromptError
from ambereval.models.canonical import canonical_json, content_key
from ambereval.models.ledger import Ledger

Message = dict[str, str]
DEFAULT_SEED = 0


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


def check_schema(schema: dict[str, Any]) -> None:
    """Reject schemas that are not valid JSON Schema or not an object at the top."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as err:
        raise ModelError(f"invalid JSON schema: {err.message}") from None
    if schema.get("type") != "object":
        raise ModelError("the judge schema must describe a JSON object (type: object)")


def parse_against(raw: str, schema: dict[str, Any]) -> Any:
    """Parse the model's text and validate it; a ModelError says what was wrong."""
    try:
        obj = json.loads(raw, strict=False)  # raw control characters inside strings are fine
    except ValueError as err:
        raise ModelError(f"judge returned invalid JSON ({err.msg}): {raw[:120]!r}") from None
    try:
        jsonschema.validate(obj, schema)
    except jsonschema.ValidationError as err:
        raise ModelError(f"judge output does not match the schema: {err.message}") from None
    return obj


@dataclass
class Judge:
    """Ask a model for schema-valid JSON, deterministically, through the ledger."""

    backend: Backend
    ledger: Ledger | None = None
    seed: int = DEFAULT_SEED
    n_ctx: int = 4096
    calls: int = field(default=0, init=False)
    prompt_tokens: int = field(default=0, init=False)

    @property
    def mode(self) -> str:
        return self.ledger.mode if self.ledger else "record"

    def request(self, messages: list[Message], schema: dict[str, Any],
                max_tokens: int) -> dict[str, Any]:
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
            "sampling": {"temperature": 0.0, "seed": self.seed, "max_tokens": max_tokens},
            "n_ctx": identity.get("n_ctx", self.n_ctx),
        }

    def key(self, messages: list[Message], schema: dict[str, Any], max_tokens: int = 256) -> str:
        return content_key(self.request(messages, schema, max_tokens))

    def ask(self, messages: list[Message], schema: dict[str, Any],
            max_tokens: int = 256) -> JudgeResponse:
        check_schema(schema)
        request = self.request(messages, schema, max_tokens)
        key = content_key(request)
        if self.ledger is not None and self.ledger.mode in ("reuse", "replay"):
            hit = self.ledger.get(key)
            if hit is not None and hit.get("error"):
                raise ModelError(hit["error"])  # the same unusable answer, replayed
            if hit is not None:
                usage = {"prompt_tokens": hit["prompt_tokens"] or 0,
                         "completion_tokens": hit["completion_tokens"] or 0}
                trunc = json.loads(hit["truncation"]) if hit["truncation"] else None
                return JudgeResponse(json.loads(hit["parsed"]), hit["response"], usage, key,
                                     "ledger", trunc, hit["seconds"] or 0.0)
            if self.ledger.mode == "replay":
                first = canonical_json(request["messages"][-1]["content"])[:80]
                raise LedgerMiss(f"judge request {key[:16]} is not in the ledger "
                                 f"{self.ledger.path} (last message starts {first})",
                                 hint="rerun with --ledger-mode reuse to fill it")
        start = time.perf_counter()
        try:
            completion = self.backend.complete(messages, schema, max_tokens, self.seed)
        except PromptError as err:  # deterministic: record it so a replay says the same
            if self.ledger is not None:
                self.ledger.put(key, request, "", None, {}, None, 0.0, error=str(err))
            raise
        seconds = time.perf_counter() - start
        try:
            obj = parse_against(completion.raw, schema)
        except ModelError as bad:
            problem = bad
            if completion.finish_reason == "length":
                problem = ModelError(f"judge output was cut at max_tokens={max_tokens} "
                                     "before the JSON closed",
                                     hint="raise max_tokens or bound the schema's lengths")
            if self.ledger is not None:
                self.ledger.put(key, request, completion.raw, None, completion.usage,
                                completion.truncation, seconds, error=str(problem))
            raise problem from None
        self.calls += 1
        self.prompt_tokens += completion.usage.get("prompt_tokens", 0)
        if self.ledger is not None:
            self.ledger.put(key, request, completion.raw, obj, completion.usage,
                            completion.truncation, seconds)
        return JudgeResponse(obj, completion.raw, completion.usage, key, "model",
                             completion.truncation, seconds)
