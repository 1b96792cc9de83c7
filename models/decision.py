"""Deciding a label from the judge's log-probabilities instead of generated JSON.

A schema built by :func:`label_logprob_schema` carries the annotation ``x-amber-decide``
(JSON Schema ignores unknown keywords, and the schema is part of the ledger key, so the
decision method is too). A backend that can score labels (llama.cpp in-process) reads
the log-probability of each label as the value of ``field``, right after the prompt and
the opening ``{"field": "``, in one forward pass, and answers
``{"<field>": <most likely label>, "logprobs": {label: logprob, ...}}``: the argmax and
the numbers a calibrated rule needs. Nothing is generated, so a decision costs a prompt
evaluation only. It is not greedy decoding's choice: a model may open the JSON its own
way (SmolLM2 writes ``{ "field" : ``) and split the value into other tokens, so a rule
on these numbers is fitted against labels (engine/calibration.py), never assumed.

A yes/no field (:func:`boolean_logprob_schema`) is scored the same way with the JSON
literals `` true`` and `` false`` after ``{"field":``, answering
``{"<field>": true|false, "logprobs": {"true": .., "false": ..}}``. Measured on the
protocols' support checks, its plain argmax agrees with greedy decoding on too few pairs
to replace it, and with a calibration offset fitted on dev it lowered DR3 FA's agreement
on the held-out halves (scripts/bench_judge_prompts.py; docs/benchmarks.md), so no protocol uses it.

The recorded answer carries the log-probabilities (rounded to 6 decimals), so a replay
from the ledger re-applies any decision rule bit-identically without the model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

DECIDE = "x-amber-decide"
METHOD = "label-logprobs-v1"
BOOLEAN_LABELS = ("true", "false")


def label_logprob_schema(field: str, labels: Sequence[str]) -> dict[str, Any]:
    """The schema of a label decided by log-probabilities (see the module doc)."""
    return {
        "type": "object",
        "properties": {
            field: {"type": "string", "enum": list(labels)},
            "logprobs": {"type": "object",
                         "properties": {lab: {"type": "number"} for lab in labels},
                         "required": list(labels), "additionalProperties": False},
        },
        "required": [field, "logprobs"],
        "additionalProperties": False,
        DECIDE: {"field": field, "method": METHOD},
    }


def boolean_logprob_schema(field: str) -> dict[str, Any]:
    """The schema of a yes/no field decided by log-probabilities (see the module doc)."""
    schema = label_logprob_schema(field, BOOLEAN_LABELS)
    schema["properties"][field] = {"type": "boolean"}
    return schema


class DecisionSpec(NamedTuple):
    field: str
    labels: list[str]
    literal: bool  # JSON literals (true/false), not quoted strings


def decision_spec(schema: Mapping[str, Any]) -> DecisionSpec | None:
    """What to score when the schema asks for a log-probability decision."""
    spec = schema.get(DECIDE)
    if not spec:
        return None
    field = spec["field"]
    prop = schema["properties"][field]
    if prop.get("type") == "boolean":
        return DecisionSpec(field, list(BOOLEAN_LABELS), True)
    return DecisionSpec(field, list(prop["enum"]), False)


def normalized(logprobs: Mapping[str, float]) -> dict[str, float]:
    """Probabilities renormalized over the labels only (they sum to 1)."""
    top = max(logprobs.values())
    weights = {k: math.exp(v - top) for k, v in logprobs.items()}
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items()}


def decide(logprobs: Mapping[str, float], bias: Mapping[str, float] | None = None) -> str:
    """The label with the highest log-probability plus its ``bias`` (a calibration
    offset, 0 when absent); ties go to the label that sorts first."""
    bias = bias or {}
    return min(logprobs, key=lambda k: (-(logprobs[k] + bias.get(k, 0.0)), k))
