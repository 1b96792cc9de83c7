"""DailyReport aggregates by hand: every branch of Algorithm 1 and the edge cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ambereval.engine.protocols.dailyreport_math import SubtaskScore as S
from ambereval.engine.protocols.dailyreport_math import aggregate, parse_scores, user_pref
from ambereval.errors import InputError

from conftest import run_amber


def pref(*subtasks: S) -> int:
    return aggregate(list(subtasks))["user_pref"]


def test_cascade_formulas_by_hand() -> None:
    subtasks = [
        S("a", "P0", 1, fac=0.5, rat=1),      # o = 0.5·1·(0.5+1) = 0.75
        S("b", "P1", 0.5, fac=1),             # o = 0.5·1 = 0.5 (rat absent)
        S("c", "P1", 0, rat=1),               # o = 0
        S("d", "P2", 1),                      # o = 1 (neither rubric)
    ]
    r = aggregate(subtasks)
    assert r["ins"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert r["fac"] == pytest.approx((1 * 0.5 + 0.5 * 1) / (1 + 0.5))
    assert r["rat"] == pytest.approx((1 * 1 + 0 * 1) / (1 + 0))
    assert r["o"] == {"a": 0.75, "b": 0.5, "c": 0.0, "d": 1.0}
    assert r["subtask_pass"] == pytest.approx(1 / 4)  # only d meets every present rubric


def test_zero_denominators_are_null() -> None:
    r = aggregate([S("a", "P0", 0, fac=1, rat=1), S("b", "P1", 1)])
    assert r["fac"] is None and r["rat"] is None
    r = aggregate([S("a", "P0", 1)])
    assert r["fac"] is None and r["rat"] is None and r["user_pref"] == 4


def test_user_pref_every_branch() -> None:
    assert pref(S("a", "P0", 1), S("b", "P1", 1, fac=1), S("c", "P2", 1)) == 4
    assert pref(S("a", "P0", 0), S("b", "P1", 1)) == 1                      # c0 = 0
    assert pref(S("a", "P0", 1), S("b", "P1", 0.5, fac=0.5)) == 1           # c1 = 0.25 < 0.3
    assert pref(S("a", "P0", 0.5, fac=0.8), S("b", "P1", 0.5, fac=0.8)) == 1  # both 0.4 < 0.5
    assert pref(S("a", "P0", 1, fac=0.6), S("b", "P1", 1, fac=0.8),
                S("c", "P2(a)", 1, fac=0.9, group="x")) == 3               # the three conditions
    # fall-through 2: c1 = 0.6 < 0.7
    assert pref(S("a", "P0", 1, fac=0.6), S("b", "P1", 1, fac=0.6)) == 2
    # fall-through 2: v1 fails (a P1 subtask with o = 0) although c1 >= 0.7
    assert pref(S("a", "P0", 1, fac=0.9), S("b", "P1", 0), S("c", "P1", 1), S("d", "P1", 1),
                S("e", "P1", 1), S("f", "P1", 1), S("g", "P1", 1, fac=0.9)) == 2
    # fall-through 2: v2 fails (every P2(a) subtask scored 0) although c1 >= 0.7
    assert pref(S("a", "P0", 1, fac=0.9), S("b", "P1", 1), S("c", "P1", 1), S("d", "P1", 1),
                S("e", "P2(a)", 0, group="x")) == 2


def test_empty_sets_follow_our_rules() -> None:
    # no P0 (c0 = 1), no P1 and no P2(a) (c1 = 1, v1 and v2 true): only P2 decides
    assert pref(S("a", "P2", 0.5), S("b", "P2", 1)) == 3
    # no P1 but a P2(a) group: c1 = the group's mean
    assert pref(S("a", "P0", 1), S("b", "P2(a)", 0.5, group="g"),
                S("c", "P2(a)", 0, group="g")) == 1  # G = {0.25} < 0.3
    # only a P0 subtask: c0 = 0.5 (>= 0.5), c1 = 1 by our rule, v1 and v2 vacuous -> 3
    subtasks = [S("a", "P0", 1, fac=0.5)]
    assert user_pref(subtasks, {"a": 0.5}) == 3
    assert user_pref(subtasks, {"a": 0.4}) == 2  # c0 < 0.5 but c1 = 1: neither 1 nor 3


def test_scores_file_validation_names_the_subtask() -> None:
    with pytest.raises(InputError, match="subtask 'x': unknown importance 'P9'"):
        parse_scores({"subtasks": [{"id": "x", "importance": "P9", "ins": 1}]})
    with pytest.raises(InputError, match="subtask 'y': 'ins' must be 0, 0.5 or 1"):
        parse_scores({"subtasks": [{"id": "y", "importance": "P0", "ins": 0.7}]})
    with pytest.raises(InputError, match="subtask 'z': P2\\(a\\) needs a 'group'"):
        parse_scores({"subtasks": [{"id": "z", "importance": "P2(a)", "ins": 1}]})
    with pytest.raises(InputError, match="subtask #1: missing 'id'"):
        parse_scores({"subtasks": [{"importance": "P0", "ins": 1}]})


def test_aggregate_cli(tmp_path: Path) -> None:
    path = tmp_path / "scores.json"
    path.write_text(json.dumps({"subtasks": [
        {"id": "s1", "importance": "P0", "ins": 1, "fac": 0.5, "rat": 1},
        {"id": "s2", "importance": "P2(a)", "group": "a", "ins": 0.5, "fac": None},
        {"id": "s3", "importance": "P1", "ins": 1, "rat": 0.5},
    ]}))
    done = run_amber("aggregate", "dailyreport", str(path), "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["o"] == {"s1": 0.75, "s2": 0.5, "s3": 0.5}
    assert out["fac"] == 0.5 and out["rat"] == pytest.approx((1 + 0.5) / 2)
    assert out["user_pref"] == 2 and out["subtask_pass"] == 0
    assert {"ins", "fac", "rat", "subtask_pass", "user_pref", "o"} <= set(out)
    bad = tmp_path / "bad.json"
    bad.write_text('{"subtasks": [{"id": "q", "importance": "P7", "ins": 1}]}')
    done = run_amber("aggregate", "dailyreport", str(bad))
    assert done.returncode == 2 and "subtask 'q'" in done.stderr
    unused = run_amber("aggregate", "dailyreport", str(path), "--rule", "fac_no_claims=zero")
    assert unused.returncode == 2  # it acts on claims, which scores do not carry
    assert "rule fac_no_claims acts inside `amber evaluate`" in unused.stderr
    folder = run_amber("aggregate", "dailyreport", str(tmp_path))
    assert folder.returncode == 2 and "is a directory" in folder.stderr
    empty = tmp_path / "empty.json"
    empty.write_text('{"subtasks": []}')
    done = run_amber("aggregate", "dailyreport", str(empty))
    assert done.returncode == 2 and f"{empty}: no subtasks to aggregate" in done.stderr


def test_our_rules_can_be_switched() -> None:
    from ambereval.engine.protocols.dailyreport_math import parse_rules

    only_p2 = [S("a", "P2", 0.5), S("b", "P2", 1)]
    assert aggregate(only_p2)["user_pref"] == 3
    assert aggregate(only_p2, parse_rules(["c1_empty=zero"]))["user_pref"] == 1
    one_rubric = [S("a", "P0", 1, fac=0.8)]
    assert aggregate(one_rubric)["o"] == {"a": 0.8}
    assert aggregate(one_rubric, parse_rules(["o_rule=missing-as-zero"]))["o"] == {"a": 0.4}
    no_p2a = [S("a", "P0", 1, fac=0.9), S("b", "P1", 1, fac=0.9)]
    assert aggregate(no_p2a)["user_pref"] == 3
    assert aggregate(no_p2a, parse_rules(["v2_no_p2a=false"]))["user_pref"] == 2
    assert aggregate(no_p2a, parse_rules(["v2_no_p2a=false"]))["rules"]["v2_no_p2a"] == "false"
    with pytest.raises(InputError, match="unknown rule 'c9=x'"):
        parse_rules(["c9=x"])
    with pytest.raises(InputError, match="c1_empty must be one of one, zero"):
        parse_rules(["c1_empty=maybe"])
    done = run_amber("aggregate", "dailyreport", "/nonexistent.json", "--rule", "c1_empty=x")
    assert done.returncode == 2
