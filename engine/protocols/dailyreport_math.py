"""DailyReport's aggregates (PROTOCOLS.md §1), from per-subtask scores.

Cascade: no factuality or rationality credit without the instruction::

    Ins = (1/n) Σ ins_k
    Fac = Σ δ_k·ins_k·fac_k / Σ δ_k·ins_k        (None when the denominator is 0)
    Rat = Σ φ_k·ins_k·rat_k / Σ φ_k·ins_k        (None when the denominator is 0)
    o_k = ½·ins_k·(fac_k + rat_k)                 (Eq. 5, both rubrics present)

[our rule ``o_rule="mean-of-present"``] with one rubric absent (or fac_k undefined):
``o_k = ins_k · mean(present ones)``; with neither, ``o_k = ins_k``. SubTask Pass = share
of subtasks with every present rubric fully met. UserPref follows Algorithm 1 exactly,
with [our rule]s for empty S1 ∪ G (c1 = 1) and no P2(a) subtasks (v2 true).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ambereval.errors import InputError

IMPORTANCE = ("P0", "P1", "P2(a)", "P2")
INS_VALUES = (0, 0.5, 1)
# Every [our rule] of PROTOCOLS.md §1: name -> (default, allowed values). The defaults are
# the contract; a user who disagrees switches one with ``--rule name=value``.
RULE_CHOICES: dict[str, tuple[str, tuple[str, ...]]] = {
    "o_rule": ("mean-of-present", ("mean-of-present", "missing-as-zero")),
    "c1_empty": ("one", ("one", "zero")),
    "v2_no_p2a": ("true", ("true", "false")),
    "fac_no_claims": ("undefined", ("undefined", "zero")),
    "reference_accuracy": ("valid-and-correct", ("valid-and-correct", "correct")),
    "judge_error": ("lowest", ("lowest",)),
}
RULES = {name: default for name, (default, _) in RULE_CHOICES.items()}
#: rules applied while judging (to claims and verdicts), not to the per-subtask scores
EVALUATE_ONLY = frozenset({"fac_no_claims", "reference_accuracy", "judge_error"})


def parse_rules(pairs: list[str] | None) -> dict[str, str]:
    """``["c1_empty=zero", ...]`` -> the full rule set, defaults filled in."""
    rules = dict(RULES)
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or name not in RULE_CHOICES:
            known = ", ".join(sorted(RULE_CHOICES))
            raise InputError(f"unknown rule {pair!r} (rules: {known})")
        allowed = RULE_CHOICES[name][1]
        if value not in allowed:
            raise InputError(f"rule {name} must be one of {', '.join(allowed)} (got {value!r})")
        rules[name] = value
    return rules


@dataclass(frozen=True)
class SubtaskScore:
    id: str
    importance: str
    ins: float
    fac: float | None = None  # None: no factuality rubric, or undefined (no claims)
    rat: float | None = None  # None: no rationality rubric
    group: str | None = None  # P2(a) group label
    has_fac: bool | None = None  # δ_k; None: inferred from ``fac is not None``

    @property
    def delta(self) -> bool:
        return self.fac is not None if self.has_fac is None else self.has_fac


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def o_score(s: SubtaskScore, rules: dict[str, str] | None = None) -> float:
    if (rules or RULES)["o_rule"] == "missing-as-zero":  # Eq. 5 read literally
        return 0.5 * s.ins * ((s.fac or 0.0) + (s.rat or 0.0))
    present = [v for v in (s.fac, s.rat) if v is not None]
    if len(present) == 2:
        return 0.5 * s.ins * (present[0] + present[1])
    if present:
        return s.ins * present[0]
    return s.ins


def passed(s: SubtaskScore) -> bool:
    """Every present rubric fully met; an undefined fac_k (no claims) is not met."""
    return s.ins == 1 and (not s.delta or s.fac == 1) and (s.rat is None or s.rat == 1)


def user_pref(subtasks: list[SubtaskScore], o: dict[str, float],
              rules: dict[str, str] | None = None) -> int:
    """Algorithm 1: 4 (all perfect), 3, 2, or 1."""
    rules = rules or RULES
    if subtasks and all(o[s.id] == 1 for s in subtasks):
        return 4
    s0 = [o[s.id] for s in subtasks if s.importance == "P0"]
    s1 = [o[s.id] for s in subtasks if s.importance == "P1"]
    groups: dict[str, list[float]] = {}
    for s in subtasks:
        if s.importance == "P2(a)":
            groups.setdefault(s.group or "", []).append(o[s.id])
    g = [_mean(v) for _, v in sorted(groups.items())]
    c0 = _mean(s0) if s0 else 1.0
    c1 = _mean(s1 + g) if (s1 or g) else (1.0 if rules["c1_empty"] == "one" else 0.0)
    if c0 == 0 or c1 < 0.3 or (c0 < 0.5 and c1 < 0.5):
        return 1
    v1 = all(v > 0 for v in s1)
    p2a = [v for values in groups.values() for v in values]
    v2 = any(v > 0 for v in p2a) if p2a else rules["v2_no_p2a"] == "true"
    if c0 >= 0.5 and v1 and v2 and c1 >= 0.7:
        return 3
    return 2


def aggregate(subtasks: list[SubtaskScore],
              rules: dict[str, str] | None = None) -> dict[str, Any]:
    """Ins, Fac, Rat, SubTask Pass, UserPref and o_k from per-subtask scores."""
    rules = rules or dict(RULES)
    if not subtasks:
        raise InputError("no subtasks to aggregate")
    n = len(subtasks)
    fac_den = sum(s.ins for s in subtasks if s.fac is not None)
    rat_den = sum(s.ins for s in subtasks if s.rat is not None)
    o = {s.id: o_score(s, rules) for s in subtasks}
    return {
        "ins": sum(s.ins for s in subtasks) / n,
        "fac": (sum(s.ins * s.fac for s in subtasks if s.fac is not None) / fac_den
                if fac_den else None),
        "rat": (sum(s.ins * s.rat for s in subtasks if s.rat is not None) / rat_den
                if rat_den else None),
        "subtask_pass": sum(1 for s in subtasks if passed(s)) / n,
        "user_pref": user_pref(subtasks, o, rules),
        "o": o,
        # DailyReport's own rules only: a run-wide rule set also carries the other
        # protocols' switches, which change nothing here
        "rules": {k: v for k, v in rules.items() if k in RULES},
    }


def parse_scores(doc: Any, where: str = "scores") -> list[SubtaskScore]:
    """Validate ``{"subtasks": [{id, importance, group?, ins, fac?, rat?}]}``; errors name
    the subtask."""
    if not isinstance(doc, dict) or not isinstance(doc.get("subtasks"), list):
        raise InputError(f"{where}: expected {{\"subtasks\": [...]}}")
    out: list[SubtaskScore] = []
    seen: set[str] = set()
    for i, row in enumerate(doc["subtasks"]):
        label = f"{where}: subtask #{i + 1}"
        if not isinstance(row, dict):
            raise InputError(f"{label}: expected an object")
        sid = row.get("id")
        if not isinstance(sid, str) or not sid:
            raise InputError(f"{label}: missing 'id'")
        label = f"{where}: subtask {sid!r}"
        if sid in seen:
            raise InputError(f"{label}: duplicate id")
        seen.add(sid)
        importance = row.get("importance")
        if importance not in IMPORTANCE:
            raise InputError(f"{label}: unknown importance {importance!r} "
                             f"(use {', '.join(IMPORTANCE)})")
        group = row.get("group")
        if importance == "P2(a)" and not (isinstance(group, str) and group):
            raise InputError(f"{label}: P2(a) needs a 'group' label")
        ins = row.get("ins")
        if ins not in INS_VALUES or isinstance(ins, bool):
            raise InputError(f"{label}: 'ins' must be 0, 0.5 or 1 (got {ins!r})")
        fac = row.get("fac")
        if fac is not None and (isinstance(fac, bool) or not isinstance(fac, (int, float))
                                or not 0 <= fac <= 1):
            raise InputError(f"{label}: 'fac' must be between 0 and 1, or null")
        rat = row.get("rat")
        if rat is not None and (rat not in INS_VALUES or isinstance(rat, bool)):
            raise InputError(f"{label}: 'rat' must be 0, 0.5 or 1, or null")
        out.append(SubtaskScore(sid, importance, float(ins),
                                None if fac is None else float(fac),
                                None if rat is None else float(rat),
                                group if importance == "P2(a)" else None))
    return out
