"""`amber diff` on real run directories: identical runs say so; a run with another judge
and another rule lists those inputs and the verdicts and scores that moved, largest
first."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from auditruns import Runs, make_runs
from scripted_judge import ScriptedBackend

from ambereval.engine.protocols.dailyreport_math import RULES
from ambereval.engine.protocols.deepeval import CONSISTENCY_SYSTEM
from ambereval.engine.runs.diff import diff_runs, prompt_digests
from ambereval.engine.runs.evaluate import evaluate_bundles
from ambereval.errors import InputError
from ambereval.models import Embedder, Judge, Ledger

from conftest import run_amber


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Runs:
    return make_runs(tmp_path_factory.mktemp("diff"), embedder)


@pytest.fixture(scope="module")
def other(runs: Runs, embedder: Embedder) -> Path:
    """The same report and task, judged by another model under another DailyReport rule."""
    out = runs.run.parent / "run-other"
    judge = Judge(ScriptedBackend(), Ledger(out / "ledger.sqlite", "record"))
    evaluate_bundles([runs.bundle], runs.tasks, ["dailyreport", "dr3", "deepeval"],
                     [("fake", judge)], out, embedder, rules={**RULES, "fac_no_claims": "zero"})
    return out


def test_a_run_against_itself_is_identical(runs: Runs, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(runs.run, copy)
    diff = diff_runs(runs.run, copy)
    assert diff["identical"] and diff["inputs"] == [] and diff["verdicts"] == []
    done = run_amber("diff", str(runs.run), str(copy), "--exit-code")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("identical")


def test_other_judge_and_rule_are_listed_with_what_moved(runs: Runs, other: Path) -> None:
    diff = diff_runs(runs.run, other)
    assert not diff["identical"]
    fields = {row["field"]: row for row in diff["inputs"]}
    judge = fields.get("judges.fake.name") or fields["judges.fake"]  # identity dict or name
    assert "scripted-v1" in json.dumps(judge["b"]) and "scripted" not in json.dumps(judge["a"])
    assert fields["rules.dailyreport.fac_no_claims"]["b"] == "zero"
    assert not any(f.startswith("bundles.") for f in fields)  # same bundle, same digest
    assert diff["verdicts"], "the scripted judge agrees with the fake one everywhere?"
    severities = [v["severity"] for v in diff["verdicts"]]
    assert severities == sorted(severities, reverse=True)
    deltas = [abs(s["delta"]) for s in diff["scores"] if s["delta"] is not None]
    assert deltas == sorted(deltas, reverse=True) and deltas[0] > 0
    # every moved verdict really differs between the two runs' report files
    a = json.loads(next((runs.run / "reports").iterdir()).read_text())
    b = json.loads(next((other / "reports").iterdir()).read_text())
    assert a["judges"]["fake"] != b["judges"]["fake"]


def test_rules_of_a_protocol_one_run_skipped_are_not_inputs(runs: Runs, other: Path,
                                                            embedder: Embedder) -> None:
    out = runs.run.parent / "run-dr3-only"
    judge = Judge(ScriptedBackend(), Ledger(out / "ledger.sqlite", "record"))
    evaluate_bundles([runs.bundle], runs.tasks, ["dr3"], [("fake", judge)], out, embedder,
                     rules={**RULES, "fac_no_claims": "zero"})
    fields = {row["field"]: row for row in diff_runs(other, out)["inputs"]}
    assert fields["protocols"]["b"] == ["dr3"]  # the difference is said once, here
    assert not any(f.startswith(("rules.dailyreport.", "rules.deepeval.")) for f in fields)
    # where both ran a protocol, its rules still count
    both = {row["field"] for row in diff_runs(runs.run, other)["inputs"]}
    assert "rules.dailyreport.fac_no_claims" in both


def test_cli_diff_tables_json_and_exit_code(runs: Runs, other: Path) -> None:
    done = run_amber("diff", str(runs.run), str(other))
    assert done.returncode == 0, done.stderr
    assert "Inputs that differ" in done.stdout and "judges.fake" in done.stdout
    assert "Verdicts that moved" in done.stdout
    done = run_amber("diff", str(runs.run), str(other), "--json", "--exit-code")
    assert done.returncode == 3 and done.stderr == ""
    assert json.loads(done.stdout)["format"] == "amber-diff/1"


def test_prompts_come_from_the_ledger(runs: Runs) -> None:
    digests = prompt_digests(runs.run)
    assert hashlib.sha256(CONSISTENCY_SYSTEM.encode()).hexdigest() in digests


def test_kinds_must_match(runs: Runs) -> None:
    with pytest.raises(InputError, match="cannot compare"):
        diff_runs(runs.verify, runs.run)
    done = run_amber("diff", str(runs.verify), str(runs.run))
    assert done.returncode == 2 and "cannot compare" in done.stderr
    assert "Traceback" not in done.stderr


def test_verify_outputs_compare_too(runs: Runs, tmp_path: Path) -> None:
    copy = tmp_path / "verify"
    shutil.copytree(runs.verify, copy)
    assert diff_runs(runs.verify, copy)["identical"]
    lines = (copy / "verdicts.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["verdict"] = "Incorrect" if first["verdict"] == "Correct" else "Correct"
    (copy / "verdicts.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    diff = diff_runs(runs.verify, copy)
    assert [v["item"] for v in diff["verdicts"]] == [first["id"]]
    assert {s["column"] for s in diff["scores"]} >= {"verify.correct"}


def test_a_verify_output_whose_ledger_lives_elsewhere_is_not_a_prompt_difference(
        runs: Runs, tmp_path: Path) -> None:
    elsewhere = tmp_path / "verify"  # `amber verify --ledger L`: no ledger in the output
    shutil.copytree(runs.verify, elsewhere)
    (elsewhere / "ledger.sqlite").unlink()
    diff = diff_runs(runs.verify, elsewhere)
    assert diff["identical"], diff
    assert diff["prompts"] == {"only_a": [], "only_b": [],
                               "not_compared": f"b ({elsewhere}) has no ledger.sqlite"}
    done = run_amber("diff", str(runs.verify), str(elsewhere), "--exit-code")
    assert done.returncode == 0, done.stdout + done.stderr
    first = json.loads((elsewhere / "verdicts.jsonl").read_text().splitlines()[0])
    first["verdict"] = "Incorrect" if first["verdict"] == "Correct" else "Correct"
    rest = (elsewhere / "verdicts.jsonl").read_text().splitlines()[1:]
    (elsewhere / "verdicts.jsonl").write_text("\n".join([json.dumps(first), *rest]) + "\n")
    text = run_amber("diff", str(runs.verify), str(elsewhere))
    assert f"prompts: not compared, b ({elsewhere}) has no ledger.sqlite" in text.stdout


def with_bundles(runs: Runs, run: Path, bundles: dict[str, str]) -> Path:
    """A copy of the fixture's run whose manifest records ``bundles`` (path -> digest)."""
    shutil.copytree(runs.run, run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["bundles"] = bundles
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_two_bundles_of_one_name_are_compared_each(runs: Runs, tmp_path: Path) -> None:
    """Systems laid out as modelA/<task>, modelB/<task>: one of them changed."""
    from ambereval.engine.runs.diff import _short_names

    assert _short_names(["b/modelA/t1", "b/modelB/t1", "b/modelA/t2"], ["c/t1"]) == {
        "b/modelA/t1": "modelA/t1", "b/modelB/t1": "modelB/t1", "b/modelA/t2": "modelA/t2",
        "c/t1": "c/t1"}
    assert _short_names(["/abs/t1", "abs/t1"]) == {"/abs/t1": "/abs/t1", "abs/t1": "abs/t1"}
    assert _short_names(["x/t1"], ["y/t1"]) == {"x/t1": "t1", "y/t1": "t1"}
    diff = diff_runs(with_bundles(runs, tmp_path / "x", {"bundles/modelA/t1": "d-a",
                                                         "bundles/modelB/t1": "d-b"}),
                     with_bundles(runs, tmp_path / "y", {"drifted/modelA/t1": "d-a2",
                                                         "copy/modelB/t1": "d-b"}))
    assert not diff["identical"]
    assert [(i["field"], i["a"], i["b"]) for i in diff["inputs"]] == [
        ("bundles.modelA/t1", "d-a", "d-a2")]


def test_what_moved_says_whose_report_it_was(tmp_path: Path) -> None:
    """Two systems answering the same task: each moved row names its system."""
    from fakejudge import FakeJudgeServer
    from rundirs import dr3_bundles

    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    for name, salt in (("a", b""), ("b", b"another model")):
        with FakeJudgeServer() as server:
            server.salt = salt
            done = run_amber("evaluate", *map(str, bundles), "--task", str(tasks),
                             "--protocol", "dr3", "--judge-url", server.url, "--judge-name",
                             "fake", "--out", str(tmp_path / name))
        assert done.returncode == 0, done.stderr
    diff = diff_runs(tmp_path / "a", tmp_path / "b")
    assert diff["verdicts"] and {v["system"] for v in diff["verdicts"]} == {"model-0",
                                                                          "model-1"}
    shown = run_amber("diff", str(tmp_path / "a"), str(tmp_path / "b"), "--limit", "100")
    assert "model-0: 001/final_report.md / fake /" in shown.stdout
    assert "model-1: 001/final_report.md / fake /" in shown.stdout


def test_a_bundle_in_both_runs_has_one_name_even_if_only_one_run_has_its_twin(
        runs: Runs, tmp_path: Path) -> None:
    diff = diff_runs(with_bundles(runs, tmp_path / "x", {"b/modelA/t1": "d-a",
                                                         "b/modelB/t1": "d-b"}),
                     with_bundles(runs, tmp_path / "y", {"b/modelA/t1": "d-a"}))
    assert [(i["field"], i["a"], i["b"]) for i in diff["inputs"]] == [
        ("bundles.modelB/t1", "d-b", None)]  # modelA/t1 is the same bundle in both


def test_a_moved_row_names_its_system_when_the_runs_have_several(
        capsys: pytest.CaptureFixture[str]) -> None:
    from ambereval.cli.diff_cmd import _render

    row = {"report": "001/final_report.md", "system": "model-1", "column": "dr3.fa",
           "a": 50.0, "b": 100.0, "delta": 50.0}
    diff = {"identical": False, "inputs": [], "prompts": {"only_a": [], "only_b": []},
            "reports": {"only_a": [], "only_b": []}, "judges_paired": {}, "systems": [],
            "scores": [row], "verdicts": [], "systems_compared": ["model-0", "model-1"]}
    _render(diff, 10)  # only model-1 moved; model-0 is in the runs too
    assert "model-1: 001/final_report.md" in capsys.readouterr().out
