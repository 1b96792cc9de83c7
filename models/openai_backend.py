"""A judge served by any OpenAI-compatible server (llama.cpp server, vLLM, Ollama).

Asks for JSON with the schema as ``response_format`` (``json_schema``, falling back to
``json_object`` + ``schema`` for servers such as llama-cpp-python's that only know that
form), temperature 0 and a fixed seed. Timeouts, 5xx and invalid JSON are retried with
backoff, then reported as one clear error. 429 and 503 mean "busy", not "broken": they
raise :class:`~ambereval.models.judge.Throttled` carrying the server's ``Retry-After``, so
the judge's pool slows down and the request waits instead of failing. One backend (one
HTTP connection pool) is shared by every thread of a judge.
"""

from __future__ import annotations

import json
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from ambereval.errors import JudgeUnavailable, ModelError
from ambereval.models.judge import Completion, Message, Throttled


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delay-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


def usage_of(data: dict[str, Any]) -> dict[str, int]:
    """A chat completion's token counts; ``cached_tokens`` only when the server reports
    the prompt tokens its prefix cache served (``usage.prompt_tokens_details``, as
    OpenAI, vLLM and llama.cpp's server do)."""
    usage = data.get("usage") or {}
    out = {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
           "completion_tokens": int(usage.get("completion_tokens") or 0)}
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        out["cached_tokens"] = details["cached_tokens"]
    return out


class OpenAIBackend:
    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 timeout: float = 120.0, attempts: int = 3, backoff: float = 1.0) -> None:
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.model = model
        self.attempts = attempts
        self.backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=512, max_keepalive_connections=128)
        self._client = httpx.Client(timeout=timeout, headers=headers, trust_env=False,
                                    limits=limits)
        self._format = "json_schema"
        self._lock = threading.Lock()
        self.retries = 0  # transient failures retried (timeouts, 5xx, invalid JSON)

    def identity(self) -> dict[str, Any]:
        # n_ctx is the server's business: None keeps the judge's own setting out of the key
        return {"model": {"name": self.model, "base_url": self.base_url}, "n_ctx": None}

    def _body(self, messages: list[Message], schema: dict[str, Any] | None, max_tokens: int,
              seed: int, sampling: dict[str, Any] | None = None) -> dict[str, Any]:
        body = self._format_body(messages, schema, max_tokens, seed)
        body.update(sampling or {})  # the client's own sampling, passed through on purpose
        return body

    def _format_body(self, messages: list[Message], schema: dict[str, Any] | None,
                     max_tokens: int, seed: int) -> dict[str, Any]:
        if schema is None:  # free text: no response_format at all
            return {"model": self.model, "messages": messages, "temperature": 0.0,
                    "seed": seed, "max_tokens": max_tokens}
        if self._format == "json_schema":
            fmt: dict[str, Any] = {"type": "json_schema",
                                   "json_schema": {"name": "amber", "schema": schema,
                                                   "strict": True}}
        else:
            fmt = {"type": "json_object", "schema": schema}
        return {"model": self.model, "messages": messages, "temperature": 0.0, "seed": seed,
                "max_tokens": max_tokens, "response_format": fmt}

    def complete(self, messages: list[Message], schema: dict[str, Any] | None,
                 max_tokens: int, seed: int, sampling: dict[str, Any] | None = None,
                 fit: str = "cut") -> Completion:
        """``fit`` is the server's business (it refuses a prompt beyond its context)."""
        problem = "no attempt made"
        for attempt in range(self.attempts):
            if attempt:
                with self._lock:
                    self.retries += 1
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                resp = self._client.post(f"{self.base_url}/chat/completions",
                                         json=self._body(messages, schema, max_tokens, seed,
                                                         sampling))
            except httpx.TimeoutException:
                problem = "timed out"
                continue
            except httpx.TransportError as err:
                problem = f"unreachable ({err})"
                continue
            if (self._format == "json_schema" and resp.status_code in (400, 422, 500)
                    and ("json_object" in resp.text or "response_format" in resp.text)):
                self._format = "json_object"  # the server's dialect; try again at once
                return self.complete(messages, schema, max_tokens, seed, sampling)
            if resp.status_code in (429, 503):
                raise Throttled(f"judge server {self.base_url} is busy (HTTP "
                                f"{resp.status_code})",
                                retry_after(resp.headers.get("retry-after")))
            if resp.status_code >= 500:
                problem = f"HTTP {resp.status_code}"
                continue
            if resp.status_code in (401, 403, 404):  # every request would be refused alike
                raise JudgeUnavailable(
                    f"judge server {self.base_url} refused us (HTTP {resp.status_code}): "
                    f"{resp.text[:160]}", hint="check --judge-url, --judge-name and the key")
            if resp.status_code != 200:
                raise ModelError(f"judge server {self.base_url} refused the request "
                                 f"(HTTP {resp.status_code}): {resp.text[:160]}")
            try:
                data = resp.json()
                raw = data["choices"][0]["message"]["content"] or ""
                if schema is not None:
                    json.loads(raw)
            except (ValueError, KeyError, IndexError, TypeError):
                problem = "invalid JSON in the reply"
                continue
            return Completion(raw, usage_of(data), None,
                              data["choices"][0].get("finish_reason"))
        failed = f"judge server {self.base_url} failed after {self.attempts} attempts: {problem}"
        if problem == "invalid JSON in the reply":  # it answered: an unusable answer
            raise ModelError(failed, hint="check that the server enforces the JSON schema")
        raise JudgeUnavailable(failed, hint="check --judge-url and that the server is up; "
                               "answers so far are kept in the ledger")
