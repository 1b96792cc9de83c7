"""Aggregation as the published tables compute it (docs/aggregation.md). Every
expected number below is worked out by hand from the reference formulas:

- LiveResearchBench depth (batch evaluator, then the two-judge average): per judge,
  Σ wins / Σ (wins + losses) × 100 over all the system's games; then the judges' mean;
- DeepEval Avg (the paper's Table 1): the mean of the system's presentation, consistency,
  coverage and association columns;
- DR3-Eval Avg (the paper's Tables 2-3): the mean of the system's six column means.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from scripted_judge import scripted_judge
from typer.testing import CliRunner

from ambereval.cli.main import app
from ambereval.engine.aggregation import system_rows
from ambereval.engine.tasks import ChecklistItem, Task, dump_tasks
from ambereval.snapshots import Bundle


def _games(wins: int, losses: int, ties: int) -> dict[str, Any]:
    return {"deepeval": {"depth": {"wins": wins, "losses": losses, "ties": ties}}}


NOT_PLAYED = {"deepeval": {"depth": {"score": None, "reason": "no baseline"}}}


def _doc(system: str, report: str, scores: dict[str, Any],
         judges: dict[str, Any]) -> dict[str, Any]:
    return {"system": system, "report": report, "task": report, "scores": scores,
            "judges": judges}


def _deepeval(p: float, c: float, cov: float | None, a: float, depth: float | None,
              acc: float | None) -> dict[str, Any]:
    return {"deepeval": {"presentation": p, "consistency": c, "coverage": cov,
                         "citation_association": a, "depth": depth,
                         "citation_accuracy": acc, "average": -1.0}}  # recomputed


DEEPEVAL_DOCS = [
    # A: report 1 won 2-0 by judge 1, lost 0-1 (one tie) by judge 2
    _doc("A", "r1", _deepeval(80, 90, 50, 70, 50, 40),
         {"j1": _games(2, 0, 0), "j2": _games(0, 1, 1)}),
    # A: report 2 tied twice by judge 1, split 1-1 by judge 2
    _doc("A", "r2", _deepeval(60, 100, None, 90, 50, None),
         {"j1": _games(0, 0, 2), "j2": _games(1, 1, 0)}),
    # A: report 3 played no game (no baseline)
    _doc("A", "r3", _deepeval(100, 80, 100, 80, None, 60),
         {"j1": NOT_PLAYED, "j2": NOT_PLAYED}),
    # B: every game a tie
    _doc("B", "r1", _deepeval(50, 50, 50, 50, None, None),
         {"j1": _games(0, 0, 2), "j2": _games(0, 0, 2)}),
]


def test_deepeval_system_figures_by_hand() -> None:
    a, b = system_rows(DEEPEVAL_DOCS, ["deepeval"])
    # depth: j1 pools 2 wins, 0 losses (2 ties) -> 100; j2 1 win, 2 losses -> 33.3333;
    # their mean 66.6667. The mean of per-report rates would say 50.
    assert a["deepeval.depth"] == 66.6667
    assert a["pooled"]["deepeval.depth"] == {
        "j1": {"wins": 2, "losses": 0, "ties": 2, "decisive": 2, "reports": 2,
               "win_rate": 100.0},
        "j2": {"wins": 1, "losses": 2, "ties": 1, "decisive": 3, "reports": 2,
               "win_rate": 33.3333}}
    # the other columns: means of non-null report values
    assert (a["deepeval.presentation"], a["deepeval.consistency"], a["deepeval.coverage"],
            a["deepeval.citation_association"], a["deepeval.citation_accuracy"]) == \
        (80.0, 90.0, 75.0, 80.0, 50.0)
    assert a["valid"]["deepeval.coverage"] == 2 and a["valid"]["deepeval.depth"] == 2
    # Table 1 Avg: (80 + 90 + 75 + 80) / 4
    assert a["deepeval.average"] == 81.25
    # B: no decisive game for either judge -> null, never 0
    assert b["deepeval.depth"] is None
    assert b["deepeval.average"] == 50.0


def test_deepeval_switches_reproduce_the_reference_code() -> None:
    rules = {"depth_no_decisive": "zero", "deepeval_average": "all6"}
    a, b = system_rows(DEEPEVAL_DOCS, ["deepeval"], rules)
    assert a["deepeval.depth"] == 66.6667  # every judge had a decisive game
    assert b["deepeval.depth"] == 0.0  # the batch evaluator's 0
    # all six: (80 + 90 + 75 + 80 + 66.6667 + 50) / 6
    assert a["deepeval.average"] == round((80 + 90 + 75 + 80 + 66.6667 + 50) / 6, 4)
    # B: (50 * 4 + 0) / 5 (citation accuracy null)
    assert b["deepeval.average"] == 40.0


def test_one_judge_with_no_decisive_game_leaves_the_mean() -> None:
    docs = [_doc("A", "r1", _deepeval(0, 0, 0, 0, None, None),
                 {"j1": _games(3, 1, 0), "j2": _games(0, 0, 2)})]
    [row] = system_rows(docs, ["deepeval"])
    assert row["deepeval.depth"] == 75.0  # j1 3/4; j2 null, left out
    [row] = system_rows(docs, ["deepeval"], {"depth_no_decisive": "zero"})
    assert row["deepeval.depth"] == 37.5  # (75 + 0) / 2, as average_results.py does


def test_dr3_avg_is_the_mean_of_the_system_column_means() -> None:
    docs = [_doc("S", "r1", {"dr3": {"ir_uf": 100, "ir_sc": 50, "cc": 100, "fa": 50,
                                     "if": 100, "dq": 70, "avg": 78.3333}}, {}),
            _doc("S", "r2", {"dr3": {"ir_uf": None, "ir_sc": 0, "cc": 0, "fa": 100,
                                     "if": 50, "dq": None, "avg": 37.5}}, {})]
    [row] = system_rows(docs, ["dr3"])
    # columns: 100, 25, 50, 75, 75, 70 -> 395 / 6; the mean of the report avgs is 57.9167
    assert row["dr3.avg"] == 65.8333
    assert row["null_columns"] == {"dr3": []}
    docs[0]["scores"]["dr3"]["ir_uf"] = None
    [row] = system_rows(docs, ["dr3"])
    assert row["dr3.ir_uf"] is None and row["null_columns"] == {"dr3": ["ir_uf"]}
    assert row["dr3.avg"] == 59.0  # (25 + 50 + 75 + 75 + 70) / 5


# --- a real run: two scripted judges (test doubles at the model edge), two systems ------

BASE = "BASE report.\n\nIt says little about the question.\n"
REPORTS = {("alpha", "t1"): "ALPHA-ONE report.\n\nIt covers the cost in depth.\n",
           ("alpha", "t2"): "ALPHA-TWO report.\n\nIt covers the schedule.\n",
           ("beta", "t1"): "BETA-ONE report.\n\nIt covers the cost.\n"}
LOW = dict.fromkeys(("granularity", "layers", "critical", "evidence", "density"), 0)
HIGH = dict.fromkeys(LOW, 5)
# judge 1: ALPHA-ONE wins both orders; everything else ties (25 vs 25)
J1 = {"Report:\nALPHA-ONE": {"report_1": HIGH, "report_2": LOW},
      "Second report:\nALPHA-ONE": {"report_1": LOW, "report_2": HIGH}}
# judge 2: ALPHA-ONE loses target-first and ties the other order; ALPHA-TWO wins
# target-first and loses baseline-first
J2 = {"Report:\nALPHA-ONE": {"report_1": LOW, "report_2": HIGH},
      "Report:\nALPHA-TWO": {"report_1": HIGH, "report_2": LOW},
      "Second report:\nALPHA-TWO": {"report_1": HIGH, "report_2": LOW}}
# the second item fails, asked alone or with the first (checklists=together)
COVERAGE = {"Requirement: Gives the time": {"pass": False},
            "2. Gives the time": {"2": False}}


def _inputs(tmp: Path) -> tuple[list[Path], Path]:
    base = tmp / "base"
    base.mkdir()
    for t in ("t1", "t2"):
        (base / f"qid_{t}_report.md").write_text(BASE.replace("BASE", f"BASE-{t}"))
    tasks = [Task("t1", "Cost and time of the bridge", baseline_report=str(
                  base / "qid_t1_report.md"), checklist=[
                  ChecklistItem("c1", "Gives the cost"), ChecklistItem("c2", "Gives the time")]),
             Task("t2", "Schedule of the bridge", baseline_report=str(
                  base / "qid_t2_report.md"))]
    bundles = []
    for system in ("alpha", "beta"):
        path = tmp / system / "bundle"
        with Bundle.create(path) as b:
            for (s, t), text in REPORTS.items():
                if s == system:
                    b.store_report(f"qid_{t}_report.md", text)
            b.finalize()
        bundles.append(path)
    return bundles, dump_tasks(tasks, tmp / "tasks.json")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ambereval.engine.runs.evaluate import evaluate_bundles
    from ambereval.models.ledger import Ledger

    tmp = tmp_path_factory.mktemp("agg")
    bundles, tasks = _inputs(tmp)
    out = tmp / "run"
    ledger = Ledger(out / "ledger.sqlite", "reuse")
    judges = []
    for name, script in (("j1", J1), ("j2", J2)):
        judge = scripted_judge({**script, **COVERAGE}, name=f"scripted-{name}")
        judge.ledger = ledger
        judges.append((name, judge))
    evaluate_bundles(bundles, tasks, ["deepeval"], judges, out)
    ledger.close()
    return out


def test_a_run_pools_depth_per_system(run: Path) -> None:
    table = json.loads((run / "run.json").read_text())
    assert table["aggregation"] == "amber-agg/2"
    by_report = {(r["system"], r["report"]): r for r in table["rows"]}
    # per report (mean over judges of each judge's rate; null without a decisive game):
    # ALPHA-ONE j1 2-0 -> 100, j2 0-1 -> 0: 50; ALPHA-TWO j1 ties -> null, j2 1-1 -> 50
    assert by_report[("alpha", "qid_t1_report.md")]["deepeval.depth"] == 50.0
    assert by_report[("alpha", "qid_t2_report.md")]["deepeval.depth"] == 50.0
    assert by_report[("beta", "qid_t1_report.md")]["deepeval.depth"] is None
    alpha, beta = table["systems"]
    # pooled: j1 2 wins 0 losses -> 100; j2 1 win 2 losses -> 33.3333; mean 66.6667
    assert alpha["deepeval.depth"] == 66.6667
    assert {j: (g["wins"], g["losses"], g["ties"])
            for j, g in alpha["pooled"]["deepeval.depth"].items()} == \
        {"j1": (2, 0, 2), "j2": (1, 2, 1)}
    assert beta["deepeval.depth"] is None
    # coverage: alpha's t1 1 of 2 requirements (t2 has no checklist): 50 from 1 report
    assert alpha["deepeval.coverage"] == 50.0 and alpha["valid"]["deepeval.coverage"] == 1
    # the average is Table 1's: the four system columns, depth not among them
    four = [alpha[f"deepeval.{d}"] for d in ("presentation", "consistency", "coverage",
                                             "citation_association")]
    assert alpha["deepeval.average"] == round(sum(four) / 4, 4)
    assert alpha["deepeval.consistency"] == 100.0  # no contradiction listed: count 0
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["format"] == "amber-run/3"
    assert manifest["rules"]["deepeval"]["depth_no_decisive"] == "null"
    assert manifest["rules"]["deepeval"]["depth_system"] == "pooled-per-judge"
    rows = list(csv.reader((run / "run.csv").read_text().splitlines()))
    header = rows[0]
    system_rows_ = [dict(zip(header, r, strict=True)) for r in rows if r[1] == "(system)"]
    assert [r["system"] for r in system_rows_] == ["alpha", "beta"]
    assert system_rows_[0]["deepeval.depth"] == "66.6667"
    assert system_rows_[1]["deepeval.depth"] == ""


def test_aggregate_run_switches_and_audit_of_an_unfinished_run(run: Path,
                                                               tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["aggregate", "run", str(run), "--json",
                                      "--rule", "depth_no_decisive=zero"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [s["deepeval.depth"] for s in doc["systems"]] == [66.6667, 0.0]
    shown = CliRunner().invoke(app, ["aggregate", "run", str(run)])
    assert "alpha deepeval.depth, games pooled (wins-losses-ties): j1 2-0-2 -> 100; " \
        "j2 1-2-1 -> 33.33" in shown.stdout
    bad = CliRunner().invoke(app, ["aggregate", "run", str(run), "--rule",
                                   "fa_claims=cited-only"])
    assert bad.exit_code == 2
    assert bad.output.startswith("amber: error: rule fa_claims acts inside `amber evaluate`")
    # an unfinished run: the audit aggregates the reports written, depth pooled
    from ambereval.engine.runs.audit import load_audit

    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    (copy / "run.json").unlink()
    audit = load_audit(copy, pages=False)
    assert [s["deepeval.depth"] for s in audit.systems] == [66.6667, None]


def test_diff_with_a_run_aggregated_the_old_way(run: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    shutil.copytree(run, old)
    manifest = json.loads((old / "manifest.json").read_text())
    manifest["format"] = "amber-run/2"
    (old / "manifest.json").write_text(json.dumps(manifest))
    table = json.loads((old / "run.json").read_text())
    for row in table["systems"]:  # what amber-eval 0.1.0 wrote: per-report rates averaged
        row["deepeval.depth"] = 50.0 if row["system"] == "alpha" else 0.0
    (old / "run.json").write_text(json.dumps(table))
    result = CliRunner().invoke(app, ["diff", str(old), str(run), "--json"])
    diff = json.loads(result.stdout)
    assert diff["aggregation"]["a"] == "amber-run/2" and diff["aggregation"]["b"] == \
        "amber-run/3"
    assert diff["systems"] == [] and diff["scores"] == [] and not diff["identical"]
    assert diff["verdicts"] == []  # the judges said the same
    text = CliRunner().invoke(app, ["diff", str(old), str(run)])
    assert "aggregation: the aggregation changed between amber-run/2 (amber-eval 0.1.0) " \
        "and amber-run/3: scores are not compared" in text.stdout
    # re-aggregated, the old run's depth is the new one's
    again = CliRunner().invoke(app, ["aggregate", "run", str(old), "--json"])
    assert [s["deepeval.depth"] for s in json.loads(again.stdout)["systems"]] == \
        [66.6667, None]


def test_checklist_items_whose_call_failed() -> None:
    from ambereval.engine.judging import checklist_score

    rows = [{"pass": True}, {"pass": True}, {"pass": False}, {"pass": False, "error": "x"}]
    assert checklist_score(rows, "exclude") == round(100 * 2 / 3, 4)  # DR3 IF's reference
    assert checklist_score(rows, "fail") == 50.0  # 2 of 4
    assert checklist_score(rows, "null-dimension") is None  # LRB drops the report
    # presentation: a fixed denominator of 10 items (rows the parser decided are not here)
    assert checklist_score(rows, "fail", total=10) == 20.0
    assert checklist_score(rows, "exclude", total=10) == round(100 * 2 / 9, 4)
    every = [{"pass": False, "error": "x"}, {"pass": False, "error": "y"}]
    assert all(checklist_score(every, r) is None for r in ("exclude", "fail", "null-dimension"))


def test_rules_parse_record_and_read_back() -> None:
    from ambereval.engine.protocols.switches import (
        from_manifest,
        parse_run_rules,
        protocol_rules,
    )
    from ambereval.errors import InputError

    rules = parse_run_rules(["depth_no_decisive=zero", "c1_empty=zero"])
    assert rules["depth_no_decisive"] == "zero" and rules["c1_empty"] == "zero"
    assert rules["deepeval_average"] == "table1" and rules["fa_claims"] == "cited-sentences"
    recorded = {"deepeval": protocol_rules("deepeval", rules),
                "dr3": protocol_rules("dr3", rules)}
    assert recorded["deepeval"]["depth_no_decisive"] == "zero"
    assert "depth_no_decisive" not in recorded["dr3"]
    assert from_manifest(recorded)["depth_no_decisive"] == "zero"
    with pytest.raises(InputError, match="rule depth_no_decisive must be one of null, zero"):
        parse_run_rules(["depth_no_decisive=never"])
    with pytest.raises(InputError, match="unknown rule 'nope=1'"):
        parse_run_rules(["nope=1"])
