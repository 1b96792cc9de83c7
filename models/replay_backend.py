"""A judge that only replays: the identity of the judge a ledger recorded, read from the
ledger itself, and no model. ``amber serve --ledger-mode replay`` uses it when no model
file is given, so a recorded evaluation replays on a machine that has none."""

from __future__ import annotations

from typing import Any

from ambereval.errors import ConfigError, LedgerMiss
from ambereval.models.judge import Completion, Message
from ambereval.models.ledger import Ledger


class ReplayBackend:
    """Keys requests as the recorded judge did; never answers by itself."""

    def __init__(self, ledger: Ledger, recorded: dict[str, Any]) -> None:
        self.ledger = ledger
        self.name = recorded["backend"]
        self._identity = {"model": recorded["model"],
                          "chat_template_sha256": recorded.get("chat_template_sha256"),
                          "n_ctx": recorded.get("n_ctx")}

    @classmethod
    def from_ledger(cls, ledger: Ledger) -> ReplayBackend:
        found = ledger.identities()
        if not found:
            raise ConfigError(f"{ledger.path}: the ledger holds no judge answers to replay",
                              hint="record one first with --ledger-mode record")
        if len(found) > 1:
            names = ", ".join(str(i["model"].get("name") or i["model"].get("sha256", "?")[:12])
                              for i in found)
            raise ConfigError(f"{ledger.path}: answers of {len(found)} judges ({names}); "
                              "say which one to replay",
                              hint="give its --judge-model/--judge (no weights are loaded)")
        return cls(ledger, found[0])

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def describe(self) -> str:
        model = self._identity["model"]
        return str(model.get("name") or f"sha256:{model.get('sha256', '')[:12]}")

    def complete(self, messages: list[Message], schema: Any, max_tokens: int, seed: int,
                 **extra: Any) -> Completion:
        raise LedgerMiss(f"not in the ledger {self.ledger.path}, and no model is loaded "
                         "to answer it", hint="replay answers only what was recorded")
