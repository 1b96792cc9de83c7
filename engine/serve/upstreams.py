"""Which service a request is for, and where ``amber serve --record`` forwards it.

Services: ``serper`` (``POST /search``), ``jina`` (``GET /<url>``), ``openai`` (Chat
Completions, ``/v1/models``), ``gemini`` (``/v1beta/models/M:generateContent`` and
friends, ``/v1`` too) and, in proxy mode, ``direct`` (any other URL: a plain page).

Each upstream defaults to the real host and moves with the variable its users already
know: ``SERPER_BASE_URL``, ``JINA_BASE_URL``, ``OPENAI_BASE_URL`` (with its ``/v1``, as
the OpenAI SDK reads it), ``GEMINI_BASE_URL`` (a gateway, or a loopback fake in tests).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ambereval.errors import ConfigError

DEFAULT_UPSTREAMS = {
    "serper": "https://google.serper.dev",
    "jina": "https://r.jina.ai",
    "openai": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com",
}
UPSTREAM_ENV = {"serper": "SERPER_BASE_URL", "jina": "JINA_BASE_URL",
                "openai": "OPENAI_BASE_URL", "gemini": "GEMINI_BASE_URL"}
# the real hosts, recognised in proxy mode
SERVICE_HOSTS = {"google.serper.dev": "serper", "r.jina.ai": "jina",
                 "api.openai.com": "openai", "generativelanguage.googleapis.com": "gemini"}
JUDGE_SERVICES = ("openai", "gemini")

_GEMINI_PATH = re.compile(r"^/v1(alpha|beta)?\d*/(models|tunedModels)(/|$)")
_OPENAI_PATHS = ("/v1/chat/completions", "/chat/completions", "/v1/models", "/models")


def service_for_path(path: str) -> str:
    """The service a base-URL request is for, by its path alone.

    ``/search`` is Serper; ``/v1beta/...`` and ``/v1/models/M:method`` are Gemini (a
    ``:`` in the model's segment tells it from OpenAI's ``/v1/models/M``); other
    ``/v1/...`` paths and ``/chat/completions`` are OpenAI; anything else is a Jina
    Reader target (``/https://example.com/``)."""
    path = urlsplit(path).path
    if path.rstrip("/") == "/search":
        return "serper"
    if _GEMINI_PATH.match(path) and (not path.startswith("/v1/") or ":" in path):
        return "gemini"
    if path.startswith("/v1/") or path.rstrip("/") in _OPENAI_PATHS:
        return "openai"
    return "jina"


def openai_path(path: str) -> str:
    """The path after the OpenAI base URL: ``/v1/chat/completions`` and
    ``/chat/completions`` are the same call (the SDK appends to a base ending in /v1)."""
    return path[3:] if path == "/v1" or path.startswith("/v1/") else path


@dataclass(frozen=True)
class Upstreams:
    """The base URL of each service's upstream."""

    bases: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_UPSTREAMS))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Upstreams:
        env = os.environ if env is None else env
        bases = {}
        for service, default in DEFAULT_UPSTREAMS.items():
            value = (env.get(UPSTREAM_ENV[service]) or default).strip().rstrip("/")
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(f"{UPSTREAM_ENV[service]}={value!r} is not an http(s) URL",
                                  hint=f"unset it to record from {default}")
            bases[service] = value
        return cls(bases)

    def url(self, service: str, target: str) -> str:
        """The upstream URL of a request for ``service`` whose path and query (after the
        host) are ``target``."""
        base = self.bases[service]
        if service == "openai":
            parts = urlsplit(target)
            target = openai_path(parts.path) + (f"?{parts.query}" if parts.query else "")
        if not target.startswith("/"):
            target = "/" + target
        return base + target

    def loops_back_to(self, host: str, port: int) -> str | None:
        """The variable naming an upstream that is this very server (a client's
        ``OPENAI_BASE_URL`` exported into the recorder's shell), else None."""
        mine = {"127.0.0.1", "localhost", "::1", host.lower()}
        if host in ("0.0.0.0", "::", ""):
            mine.add("0.0.0.0")
        for service, base in sorted(self.bases.items()):
            parts = urlsplit(base)
            default = 443 if parts.scheme == "https" else 80
            if (parts.hostname or "").lower() in mine and (parts.port or default) == port:
                return UPSTREAM_ENV[service]
        return None
