"""Domain exceptions shared by every Amber library package.

The CLI maps each class to a stable error code and exit status; the message is one line
that says what went wrong and, where possible, how to fix it.
"""

from __future__ import annotations

from typing import Any


class AmberError(Exception):
    """Base class for every error a user can cause or fix."""

    code = "error"
    exit_code = 1
    hint: str | None = None

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    def __reduce__(self) -> tuple[Any, ...]:
        # keep the hint when the error crosses a process boundary (worker -> driver)
        return (type(self), (str(self), self.__dict__.get("hint")))


class InputError(AmberError):
    """A user-supplied file is missing, unreadable or malformed."""

    code = "bad_input"
    exit_code = 2


class ConfigError(AmberError):
    """A required setting (API key, base URL) is missing or invalid."""

    code = "config"
    exit_code = 2


class ServiceError(AmberError):
    """A capture service (Serper, Jina) is unreachable or refused us."""

    code = "service"
    exit_code = 1


class BundleError(AmberError):
    """A bundle is missing, not a bundle, or cannot be opened for writing."""

    code = "bundle"
    exit_code = 1


class VerificationError(AmberError):
    """A bundle's bytes do not match its manifest or index."""

    code = "verify_mismatch"
    exit_code = 3


class UnsafeArchiveError(AmberError):
    """A packed bundle holds a path that would escape the target directory."""

    code = "unsafe_archive"
    exit_code = 1


class ModelError(AmberError):
    """A model file, server or embedder is missing, corrupt or misbehaving."""

    code = "model"
    exit_code = 1


class PromptError(ModelError):
    """A request the model can never answer as asked (prompt too long for the context, a
    schema it cannot enforce): deterministic, so the ledger records and replays it."""


#: how a refused too-long prompt's message starts (also when a ledger replays it as text)
TOO_LONG = "input too long"


class PromptTooLong(PromptError):
    """A prompt beyond the judge's context, refused rather than cut (served judge APIs)."""

    def __init__(self, tokens: int, n_ctx: int) -> None:
        super().__init__(f"{TOO_LONG}: the prompt has {tokens} tokens, the judge's context "
                         f"holds {n_ctx}", hint="shorten the input or raise --judge-ctx")
        self.tokens = tokens
        self.n_ctx = n_ctx

    def __reduce__(self) -> tuple:
        return (type(self), (self.tokens, self.n_ctx))


class JudgeUnavailable(AmberError):
    """A judge server could not be reached, failed every attempt, refused us (auth, no such
    model) or stayed overloaded. Not an answer, so never scored as one: the run stops, and
    what was already answered stays in the ledger for the next run."""

    code = "judge_unavailable"
    exit_code = 1


class LedgerMiss(AmberError):
    """``--ledger-mode replay`` met a request the ledger does not hold."""

    code = "ledger_miss"
    exit_code = 1


class ExtractionError(AmberError):
    """A report's sentences cite sources, yet no checkable claim could be made of them."""

    code = "no_claims"
    exit_code = 1


class ReplayDifference(AmberError):
    """``amber replay`` found the replayed run differs from the recorded one."""

    code = "replay_differs"
    exit_code = 3
