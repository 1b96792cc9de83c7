"""The verification question: how one (page, claim, question) is put to the judge and how
its answer is read. Shared by ``amber verify`` (:mod:`.verification`) and ``amber
judge-bench`` (:mod:`.judge_bench`), which must ask exactly the same prompt for a judge
card to describe the verdicts it travels with."""

from __future__ import annotations

from typing import Any

from ambereval.engine.calibration import calibration_for
from ambereval.errors import ConfigError
from ambereval.models import Judge
from ambereval.models.decision import decide, label_logprob_schema

VERIFY_PROMPT = (
    "You check claims against passages from one web page. Use only these passages, never "
    "your own knowledge. For the question asked, answer 'true' if the passages clearly "
    "support a yes, 'false' if they clearly contradict it, and 'none' if they do not "
    "settle it. Numbers must match: the same number of significant digits exactly; a "
    "rounder number is fine (100 vs 100.1), a different one is not (100 vs 110). Judge "
    "dates by what the page says, not by today's date."
)
VERIFY_LABELS = ("true", "false", "none")
#: generated decision (servers, judges that cannot score labels): the answer first, then
#: the number of the passage it rests on; nothing else is generated
VERIFY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "enum": list(VERIFY_LABELS)},
        "passage": {"type": "integer"},  # out of range: the question's top passages
    },
    "required": ["answer", "passage"],
    "additionalProperties": False,
}
#: decision from the label log-probabilities (in-process llama.cpp): no generation
VERIFY_LOGPROB_SCHEMA = label_logprob_schema("answer", VERIFY_LABELS)
DECISIONS = ("auto", "logprobs", "generate")


def page_prefix(passages: list[str], title: str | None = None, url: str | None = None) -> str:
    """The shared part of every question about one page: its title and URL (when it has
    them) and its numbered passages. ``amber judge-bench`` builds the same prefix."""
    head = f"Page: {title or url}\nURL: {url}\n\n" if url else ""
    listing = "\n\n".join(f"[{i}] {p}" for i, p in enumerate(passages, start=1))
    return f"{head}Passages:\n\n{listing}"


def question_for(claim: str) -> str:
    """The yes/no question of a claim that comes without one."""
    return f"Is it true that {claim.strip().rstrip('.。')}?"


def question_messages(prefix: str, question: str, claim: str,
                      sentence: str | None = None) -> list[dict[str, str]]:
    """The prompt for one (page, claim, question): the page's shared prefix, then the
    report sentence (the claim itself when there is none), the claim and its question."""
    return [
        {"role": "system", "content": VERIFY_PROMPT},
        {"role": "user", "content": f"{prefix}\n\nReport sentence: {sentence or claim}\n"
                                    f"Claim: {claim}\nQuestion: {question}"},
    ]


def decision_for(judge: Judge, decision: str = "auto"
                 ) -> tuple[str, dict[str, Any], dict[str, float] | None]:
    """``(method, schema, bias)`` for a judge: log-probabilities when asked for, with that
    judge's calibration offsets (``None``: uncalibrated, plain argmax); otherwise a
    generated answer. ``auto`` scores labels only for a judge that can (in-process
    llama.cpp) AND has measured calibration offsets (engine/calibration.py): uncalibrated,
    a small judge's argmax is skewed (SmolLM2 nearly always prefers ``true``)."""
    if decision not in DECISIONS:
        raise ConfigError(f"unknown decision {decision!r}", hint=f"one of {DECISIONS}")
    scores = getattr(judge.backend, "scores_labels", False)
    if decision == "logprobs" and not scores:
        raise ConfigError(f"the {judge.backend.name} judge cannot score labels by "
                          "log-probability", hint="use decision generate")
    bias = calibration_for(judge.backend.identity()["model"].get("sha256")) if scores \
        else None
    if decision == "generate" or (decision == "auto" and bias is None):
        return "generate", VERIFY_SCHEMA, None
    return "logprobs", VERIFY_LOGPROB_SCHEMA, bias


def recorded_decision(decided: dict[str, Any]
                      ) -> tuple[str, dict[str, Any], dict[str, float] | None]:
    """``(method, schema, bias)`` from a summary's recorded ``decision``."""
    if decided.get("method") == "logprobs":
        return "logprobs", VERIFY_LOGPROB_SCHEMA, decided.get("bias")
    return "generate", VERIFY_SCHEMA, None


def read_answer(obj: dict[str, Any], bias: dict[str, float] | None) -> tuple[str, int | None]:
    """The label (calibrated when the answer carries log-probabilities) and the passage
    number the judge named (``None`` when it names none)."""
    if "logprobs" in obj:
        return decide(obj["logprobs"], bias), None
    return obj["answer"], obj.get("passage")
