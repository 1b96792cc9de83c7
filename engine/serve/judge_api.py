"""The judge APIs' own shapes: OpenAI Chat Completions and Gemini ``generateContent``
requests read into one :class:`JudgeQuery`, and answers, streams and errors written back
the way each provider writes them, so its SDK parses them (and raises what it would
raise upstream). No judging happens here: :mod:`.judges` asks Amber's judge.

What the judge cannot honour is named in :attr:`JudgeQuery.ignored` (tools, thinking
budgets, safety settings, ...) and the client's own sampling parameters are kept in
:attr:`JudgeQuery.sampling`: Amber answers at temperature 0 with a fixed seed unless the
server was started to pass them through.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

#: OpenAI request fields that change nothing Amber's judge does (delivery, accounting)
_OPENAI_NEUTRAL = {"model", "messages", "stream", "stream_options", "user", "metadata",
                   "store", "service_tier", "n", "response_format", "max_tokens",
                   "max_completion_tokens", "prompt_cache_key", "safety_identifier"}
_OPENAI_SAMPLING = ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty",
                    "stop", "logit_bias")
_GEMINI_SAMPLING = {"temperature": "temperature", "topP": "top_p", "topK": "top_k",
                    "seed": "seed", "presencePenalty": "presence_penalty",
                    "frequencyPenalty": "frequency_penalty", "stopSequences": "stop"}
_GEMINI_OUTPUT = {"responseMimeType", "responseSchema", "responseJsonSchema",
                  "maxOutputTokens", "candidateCount"}
MAX_DEPTH = 64  # nesting a judge request never needs; deeper is refused, not parsed
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


class ApiError(Exception):
    """A request the API refuses: HTTP status, one-line message, the provider's codes."""

    def __init__(self, status: int, message: str, code: str = "invalid_request_error",
                 google_status: str = "INVALID_ARGUMENT") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.google_status = google_status


@dataclass
class JudgeQuery:
    """One judge request, whichever API it came through."""

    provider: str  # openai | gemini
    model_asked: str
    messages: list[dict[str, str]]
    schema: dict[str, Any] | None  # JSON schema to enforce; None: free text
    max_tokens: int | None
    stream: bool = False
    include_usage: bool = False  # OpenAI stream_options.include_usage
    sampling: dict[str, Any] = field(default_factory=dict)  # as the client asked
    ignored: list[str] = field(default_factory=list)


def load_json(body: bytes) -> Any:
    """The request body as JSON, refusing what is not (400, one line)."""
    if not body.strip():
        raise ApiError(400, "the request body is empty; a JSON object was expected")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "the request body is not UTF-8") from None
    depth = 0
    for bracket in _BRACKETS.finditer(_STRINGS.sub('""', text)):  # bound the nesting
        depth += 1 if bracket.group() in "[{" else -1
        if depth > MAX_DEPTH:
            raise ApiError(400, f"the request body nests deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ApiError(400, f"the request body is not valid JSON ({err})") from None


def _text_of(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type") in ("text", "input_text"):
                parts.append(str(part.get("text") or ""))
            elif isinstance(part, dict):
                raise ApiError(400, f"{where}: content of type {part.get('type')!r} cannot be "
                               "given to a text judge")
            else:
                raise ApiError(400, f"{where}: a content part must be an object")
        return "".join(parts)
    raise ApiError(400, f"{where}: content must be a string or a list of parts")


def _positive(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ApiError(400, f"{name} must be a positive integer")
    return value


def parse_openai(body: bytes) -> JudgeQuery:
    """A ``POST /v1/chat/completions`` body."""
    data = load_json(body)
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    raw = data.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "'messages' must be a non-empty list")
    messages = []
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApiError(400, f"messages[{i}] must be an object with a 'role'")
        role = {"developer": "system"}.get(message["role"], message["role"])
        if role not in ("system", "user", "assistant"):
            raise ApiError(400, f"messages[{i}]: role {message['role']!r} is not supported "
                           "by a text judge (system, developer, user, assistant)")
        messages.append({"role": role,
                         "content": _text_of(message.get("content"), f"messages[{i}]")})
    fmt = data.get("response_format")
    schema: dict[str, Any] | None = None
    if fmt is not None:
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind == "json_object":
            schema = {"type": "object"}
        elif kind == "json_schema":
            spec = fmt.get("json_schema")
            if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
                raise ApiError(400, "response_format.json_schema.schema must be an object")
            schema = spec["schema"]
        elif kind != "text":
            raise ApiError(400, f"response_format type {kind!r} is not supported "
                           "(text, json_object, json_schema)")
    stream = data.get("stream") is True
    options = data.get("stream_options") if isinstance(data.get("stream_options"), dict) \
        else {}
    max_tokens = _positive(data.get("max_completion_tokens", data.get("max_tokens")),
                           "max_tokens")
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "'model' must be a non-empty string")
    sampling = {k: data[k] for k in _OPENAI_SAMPLING if data.get(k) is not None}
    ignored = sorted(k for k in data if k not in _OPENAI_NEUTRAL and k not in _OPENAI_SAMPLING
                     and data[k] is not None)
    if isinstance(data.get("n"), int) and data["n"] > 1:
        raise ApiError(400, "n > 1 is not supported: a deterministic judge gives one answer")
    return JudgeQuery("openai", model, messages, schema, max_tokens, stream,
                      bool(options.get("include_usage")), sampling, ignored)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _camel_keys(obj: Any) -> Any:
    """google-genai writes nested settings in snake_case (``thinking_budget``), the REST API
    documents camelCase; both are accepted, as the API itself does."""
    if isinstance(obj, dict):
        return {_camel(k) if isinstance(k, str) else k: v for k, v in obj.items()}
    return obj


_OPENAPI_TYPES = {"STRING": "string", "NUMBER": "number", "INTEGER": "integer",
                  "BOOLEAN": "boolean", "ARRAY": "array", "OBJECT": "object", "NULL": "null"}


def openapi_to_json_schema(schema: Any) -> Any:
    """Gemini's ``responseSchema`` (an OpenAPI 3.0 subset: upper-case types, ``nullable``,
    ``propertyOrdering``) as the JSON Schema the judge's grammar is built from."""
    if isinstance(schema, list):
        return [openapi_to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in _camel_keys(schema).items():
        if key in ("propertyOrdering", "nullable", "example", "title"):
            continue
        if key == "type" and isinstance(value, str):
            out["type"] = _OPENAPI_TYPES.get(value.upper(), value.lower())
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {k: openapi_to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "anyOf", "allOf", "oneOf"):
            out[key] = openapi_to_json_schema(value)
        elif key in ("minItems", "maxItems", "minLength", "maxLength") and \
                isinstance(value, str) and value.isdigit():
            out[key] = int(value)
        else:
            out[key] = value
    if schema.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def parse_gemini(model: str, body: bytes, stream: bool = False) -> JudgeQuery:
    """A ``POST /v1beta/models/M:generateContent`` (or ``streamGenerateContent``) body."""
    data = load_json(body)
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    data = _camel_keys(data)
    contents = data.get("contents")
    if isinstance(contents, dict):
        contents = [contents]
    if not isinstance(contents, list) or not contents:
        raise ApiError(400, "'contents' must be a non-empty list")
    messages: list[dict[str, str]] = []
    system = data.get("systemInstruction")
    if system is not None:
        messages.append({"role": "system", "content": _gemini_text(system, "systemInstruction")})
    for i, turn in enumerate(contents):
        if not isinstance(turn, dict):
            raise ApiError(400, f"contents[{i}] must be an object")
        role = turn.get("role") or "user"
        mapped = {"user": "user", "model": "assistant", "system": "system"}.get(role)
        if mapped is None:
            raise ApiError(400, f"contents[{i}]: please use a valid role: user, model")
        messages.append({"role": mapped, "content": _gemini_text(turn, f"contents[{i}]")})
    config = _camel_keys(data.get("generationConfig") or {})
    if not isinstance(config, dict):
        raise ApiError(400, "generationConfig must be an object")
    schema: dict[str, Any] | None = None
    mime = config.get("responseMimeType")
    if config.get("responseJsonSchema") is not None:
        schema = config["responseJsonSchema"]
    elif config.get("responseSchema") is not None:
        schema = openapi_to_json_schema(config["responseSchema"])
    elif mime == "application/json":
        schema = {"type": "object"}
    elif mime not in (None, "text/plain"):
        raise ApiError(400, f"responseMimeType {mime!r} is not supported "
                       "(text/plain, application/json)")
    if schema is not None and not isinstance(schema, dict):
        raise ApiError(400, "the response schema must be an object")
    if isinstance(config.get("candidateCount"), int) and config["candidateCount"] > 1:
        raise ApiError(400, "candidateCount > 1 is not supported: a deterministic judge "
                       "gives one answer")
    sampling = {ours: config[theirs] for theirs, ours in _GEMINI_SAMPLING.items()
                if config.get(theirs) is not None}
    ignored = sorted({k for k in config if k not in _GEMINI_SAMPLING and k not in _GEMINI_OUTPUT}
                     | {k for k in data if k not in ("contents", "systemInstruction",
                                                     "generationConfig", "model")})
    return JudgeQuery("gemini", model, messages, schema,
                      _positive(config.get("maxOutputTokens"), "maxOutputTokens"), stream,
                      True, sampling, ignored)


def _gemini_text(turn: Any, where: str) -> str:
    if isinstance(turn, str):
        return turn
    parts = turn.get("parts") if isinstance(turn, dict) else None
    if isinstance(parts, dict):
        parts = [parts]
    if not isinstance(parts, list):
        raise ApiError(400, f"{where}: 'parts' must be a list")
    texts = []
    for part in parts:
        if not isinstance(part, dict):
            raise ApiError(400, f"{where}: a part must be an object")
        if part.get("thought"):
            continue
        if "text" not in part:
            kinds = ", ".join(sorted(part)) or "empty"
            raise ApiError(400, f"{where}: a part of kind {kinds} cannot be given to a text "
                           "judge")
        texts.append(str(part["text"]))
    return "".join(texts)


def gemini_count_body(body: bytes) -> list[dict[str, str]]:
    """The messages of a ``countTokens`` body (``contents``, or a whole request)."""
    data = _camel_keys(load_json(body))
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    inner = data.get("generateContentRequest")
    if isinstance(inner, dict):
        return parse_gemini("count", json.dumps(inner).encode()).messages
    return parse_gemini("count", json.dumps({"contents": data.get("contents")}).encode()
                        ).messages


# -- answers ------------------------------------------------------------------------------
@dataclass(frozen=True)
class JudgeReply:
    """What the judge answered, with everything a response body is made of (all of it
    from the ledger row on a replay, so the bytes are the same)."""

    text: str
    key: str
    model: str  # the judge's name, reported as the model that answered
    created: int
    prompt_tokens: int
    completion_tokens: int
    finish: str  # stop | length


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON, as the providers send it."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def openai_body(reply: JudgeReply) -> bytes:
    return dumps({
        "id": f"chatcmpl-{reply.key[:29]}", "object": "chat.completion",
        "created": reply.created, "model": reply.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text,
                                             "refusal": None, "annotations": []},
                     "logprobs": None, "finish_reason": reply.finish}],
        "usage": {"prompt_tokens": reply.prompt_tokens,
                  "completion_tokens": reply.completion_tokens,
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
        "system_fingerprint": f"amber-{reply.key[:12]}"})


def pieces(text: str, size: int = 48) -> list[str]:
    """The text cut into stream deltas at fixed places (the same cuts on every replay)."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def openai_stream(reply: JudgeReply, include_usage: bool) -> list[bytes]:
    """The server-sent events of a streamed answer, ``[DONE]`` last."""
    head = {"id": f"chatcmpl-{reply.key[:29]}", "object": "chat.completion.chunk",
            "created": reply.created, "model": reply.model,
            "system_fingerprint": f"amber-{reply.key[:12]}"}

    def event(delta: dict[str, Any], finish: str | None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return b"data: " + dumps({**head, "choices": [choice]}) + b"\n\n"

    events = [event({"role": "assistant", "content": ""}, None)]
    events += [event({"content": piece}, None) for piece in pieces(reply.text) if piece]
    events.append(event({}, reply.finish))
    if include_usage:
        usage = {"prompt_tokens": reply.prompt_tokens,
                 "completion_tokens": reply.completion_tokens,
                 "total_tokens": reply.prompt_tokens + reply.completion_tokens}
        events.append(b"data: " + dumps({**head, "choices": [], "usage": usage}) + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


def _gemini_doc(reply: JudgeReply, text: str, last: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"},
                                 "index": 0}
    doc: dict[str, Any] = {"candidates": [candidate]}
    if last:
        candidate["finishReason"] = "MAX_TOKENS" if reply.finish == "length" else "STOP"
        doc["usageMetadata"] = {"promptTokenCount": reply.prompt_tokens,
                                "candidatesTokenCount": reply.completion_tokens,
                                "totalTokenCount": reply.prompt_tokens
                                + reply.completion_tokens}
    doc["modelVersion"] = reply.model
    doc["responseId"] = reply.key[:24]
    return doc


def gemini_body(reply: JudgeReply) -> bytes:
    return dumps(_gemini_doc(reply, reply.text, True))


def gemini_stream(reply: JudgeReply) -> list[bytes]:
    """``streamGenerateContent?alt=sse``: one full response per event, the last with the
    finish reason and usage; no end marker (the stream closes)."""
    parts = pieces(reply.text)
    return [b"data: " + dumps(_gemini_doc(reply, p, i == len(parts) - 1)) + b"\r\n\r\n"
            for i, p in enumerate(parts)]


def openai_error(err: ApiError) -> bytes:
    return dumps({"error": {"message": err.message, "type": _OPENAI_TYPES.get(
        err.status, "invalid_request_error"), "param": None, "code": err.code}})


_OPENAI_TYPES = {400: "invalid_request_error", 404: "invalid_request_error",
                 413: "invalid_request_error", 500: "server_error", 503: "server_error"}


def gemini_error(err: ApiError) -> bytes:
    return dumps({"error": {"code": err.status, "message": err.message,
                             "status": err.google_status}})


def openai_models(name: str, created: int = 0) -> bytes:
    return dumps({"object": "list", "data": [openai_model(name, created)]})


def openai_model(name: str, created: int = 0) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "amber"}


def gemini_models(name: str) -> bytes:
    return dumps({"models": [gemini_model(name)]})


def gemini_model(name: str) -> dict[str, Any]:
    return {"name": f"models/{name}", "displayName": f"{name} (Amber's judge)",
            "supportedGenerationMethods": ["generateContent", "streamGenerateContent",
                                           "countTokens"]}
