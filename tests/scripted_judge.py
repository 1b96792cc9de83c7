"""A scripted judge for protocol unit tests: a test double at the model edge that answers
every schema with fixed, schema-valid JSON (tests override answers by prompt substring)."""

from __future__ import annotations

import json
from typing import Any

from ambereval.models import Judge
from ambereval.models.judge import Completion


class ScriptedBackend:
    name = "scripted"

    def __init__(self, overrides: dict[str, dict[str, Any]] | None = None,
                 name: str = "scripted-v1") -> None:
        self.overrides = overrides or {}
        self.model_name = name
        self.calls: list[str] = []

    def identity(self) -> dict[str, Any]:
        return {"model": {"name": self.model_name}}

    def answer(self, schema: dict[str, Any]) -> dict[str, Any]:
        props = schema["properties"]
        out: dict[str, Any] = {}
        for key, spec in props.items():
            if "enum" in spec:
                out[key] = spec["enum"][-1]
            elif spec.get("type") == "boolean":
                out[key] = True
            elif spec.get("type") == "array":
                out[key] = []
            elif spec.get("type") == "string":
                out[key] = "scripted"
            elif spec.get("type") == "integer":
                out[key] = 1
            elif spec.get("type") == "object":
                out[key] = self.answer(spec)
        return out

    def complete(self, messages, schema, max_tokens, seed):  # type: ignore[no-untyped-def]
        # what the judge is shown besides its instructions (a page and its statements
        # may come in two user messages)
        prompt = "\n\n".join(m["content"] for m in messages if m["role"] != "system")
        self.calls.append(prompt)
        obj = self.answer(schema)
        for needle, forced in self.overrides.items():
            if needle in prompt:
                obj.update({k: v for k, v in forced.items() if k in schema["properties"]})
        return Completion(json.dumps(obj), {"prompt_tokens": len(prompt) // 4,
                                            "completion_tokens": 8})


def scripted_judge(overrides: dict[str, dict[str, Any]] | None = None,
                   name: str = "scripted-v1") -> Judge:
    return Judge(ScriptedBackend(overrides, name))
