"""Calibration offsets of the judges whose verification answers are decided from label
log-probabilities (models/decision.py).

A small judge's raw preferences between ``true``, ``false`` and ``none`` are skewed (the
default judge almost never says ``none``); adding a per-label offset to the
log-probabilities before taking the most likely label corrects the skew. The offsets
are fitted on the DEV halves of the labeled sets only (``scripts/bench_judge_prompts.py``:
the pair that maximises the mean of balanced accuracy and kappa over the four sets;
``none`` stays 0) and keyed by the judge file's sha256, so they never apply to another
model. A judge without an entry decides by plain argmax. The offsets in use are
recorded in every verification summary (``decision``), and the ledger keeps the raw
log-probabilities, so a replay re-decides identically.
"""

from __future__ import annotations

#: judge file sha256 -> {label: offset added to its log-probability}
CALIBRATION: dict[str, dict[str, float]] = {
    # SmolLM2-135M-Instruct Q4_1 (the default judge): fitted on the first 12 pairs of each
    # dev half (scripts/calibrate_judge.py --limit 12); dev mean balanced accuracy / kappa
    # 0.325 / -0.134 generated -> 0.609 / 0.285; test halves 0.431 / 0.040 -> 0.576 / 0.193
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53":
        {"true": -4.5, "false": -4.75},
    # Qwen2.5-Coder-1.5B-Instruct Q4_K_M (`amber models install qwen2.5-coder-1.5b`): same
    # procedure; dev 0.567 / 0.205 generated -> 0.645 / 0.314; test halves 0.608 / 0.234
    # -> 0.688 / 0.279
    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046":
        {"true": -1.25, "false": -0.5},
}


def calibration_for(sha256: str | None) -> dict[str, float] | None:
    """The offsets fitted for this judge file, or ``None`` (plain argmax)."""
    entry = CALIBRATION.get(sha256 or "")
    return dict(entry) if entry else None
