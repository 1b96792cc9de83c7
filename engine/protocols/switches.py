"""The [our rule] switches of DR3-Eval and DeepEval, and the rules they record.

Where the benchmarks' public reference code and their papers disagree, or the code cannot
be followed (docs/aggregation.md says which, and why), Amber picks one reading and
names it here. A *switch* has choices (``amber evaluate --rule name=value``, recorded in
the run manifest's ``rules``); a *fixed* rule has one value and is recorded so that a
reader of the manifest knows it was applied.

DailyReport's own rules live in ``dailyreport_math.RULE_CHOICES``; the run-wide parser
:func:`parse_run_rules` accepts both, each name once.
"""

from __future__ import annotations

from typing import Any

from ambereval.engine.protocols.dailyreport_math import RULE_CHOICES as DR_CHOICES
from ambereval.engine.protocols.dailyreport_math import parse_rules as parse_dr_rules
from ambereval.errors import InputError

#: protocol -> name -> (default, allowed values). Defaults put Amber's numbers next to the
#: published tables; the other values reproduce the reference code (or Amber before 0.2).
SWITCHES: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {
    "deepeval": {
        # a judge whose pooled games hold no decisive one: null (the contract) or 0 (the
        # reference batch evaluator's value)
        "depth_no_decisive": ("null", ("null", "zero")),
        # the report's and the system's average: Table 1's four columns (presentation,
        # consistency, coverage, association) or every dimension Amber scores
        "deepeval_average": ("table1", ("table1", "all6")),
        # checklist items (presentation, coverage) whose judge call failed: the dimension
        # is null (the reference drops the report from the criterion), the item leaves the
        # denominator, or it counts as a fail
        "checklist_item_error": ("null-dimension", ("null-dimension", "exclude", "fail")),
    },
    "dr3": {
        # FA's claims: every cited sentence plus uncited sentences stating a figure (the
        # contract, PROTOCOLS.md §2), or cited sentences only (the reference extractor)
        "fa_claims": ("cited-sentences", ("cited-sentences", "cited-only")),
    },
}

#: rules with one value, recorded with the switches (what each reads is in the note)
FIXED: dict[str, dict[str, Any]] = {
    "deepeval": {
        "depth_tie_margin": 1, "depth_clip_chars": 6000, "depth_outcome": "totals",
        "depth_game_error": "drop-game", "depth_system": "pooled-per-judge",
        "depth_self": "null", "pointwise_score": "count-table",
        "presentation_parser_items": "3,4,5,6,8(no tables),9(table syntax),10",
        "system_average": "column-means", "judges": "mean-per-report",
    },
    "dr3": {
        "cc_fuzzy": "token-overlap>=0.6|similarity>=0.75", "ir_strict": "only 1 counts",
        "ir_batch_error": "insight-scores-0", "if_item_error": "exclude",
        "dq_parse": "schema-int", "dq_judge_error": "null", "fa_unit": "claim",
        "system_avg": "column-means", "judges": "mean-per-report",
    },
}


def defaults() -> dict[str, str]:
    """Every switch at its default, one flat mapping (names are unique across protocols)."""
    return {name: default for table in SWITCHES.values()
            for name, (default, _) in table.items()}


def parse_run_rules(pairs: list[str] | None) -> dict[str, str]:
    """``["depth_no_decisive=zero", "c1_empty=zero"]`` -> every rule of every protocol,
    defaults filled in (DailyReport's and the switches above)."""
    mine = {name: choices for table in SWITCHES.values() for name, choices in table.items()}
    theirs: list[str] = []
    chosen = defaults()
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        name, value = name.strip(), value.strip()
        if name not in mine:
            if name not in DR_CHOICES:
                known = ", ".join(sorted({*DR_CHOICES, *mine}))
                raise InputError(f"unknown rule {pair!r} (rules: {known})")
            theirs.append(pair)
            continue
        if not sep or value not in mine[name][1]:
            raise InputError(f"rule {name} must be one of {', '.join(mine[name][1])} "
                             f"(got {value!r})")
        chosen[name] = value
    return {**parse_dr_rules(theirs), **chosen}


def protocol_rules(protocol: str, chosen: dict[str, str] | None) -> dict[str, Any]:
    """What the manifest records for ``protocol``: its fixed rules and its switches as
    chosen (defaults where ``chosen`` is silent)."""
    out: dict[str, Any] = dict(FIXED.get(protocol, {}))
    for name, (default, _) in SWITCHES.get(protocol, {}).items():
        out[name] = (chosen or {}).get(name, default)
    return dict(sorted(out.items()))


def switch(rules: dict[str, Any] | None, name: str) -> str:
    """The value of switch ``name`` in ``rules`` (a run's flat rules or one protocol's
    recorded rules), its default when absent."""
    for table in SWITCHES.values():
        if name in table:
            value = (rules or {}).get(name, table[name][0])
            return str(value)
    raise KeyError(name)


def from_manifest(rules: dict[str, Any] | None) -> dict[str, str]:
    """A run manifest's ``rules`` -> the flat rule set it was evaluated with (for replay,
    rerun and re-aggregation). Runs that predate a switch get its default."""
    rules = rules or {}
    flat = defaults()
    for protocol, table in SWITCHES.items():
        for name in table:
            if name in (rules.get(protocol) or {}):
                flat[name] = str(rules[protocol][name])
    dr = {k: v for k, v in (rules.get("dailyreport") or {}).items() if k in DR_CHOICES}
    return {**parse_dr_rules([f"{k}={v}" for k, v in dr.items()]), **flat}
