"""Task files (schema, meaning, examples) and the LRB / DR3 importers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ambereval.engine.importers import import_dr3, import_lrb
from ambereval.engine.tasks import load_tasks, task_for_report
from ambereval.errors import InputError
from ambereval.snapshots import Bundle, verify_bundle

from conftest import run_amber, shared

ROOT = Path(__file__).resolve().parents[1]
DR3 = Path(__file__).parent / "fixtures" / "dr3"


@pytest.mark.parametrize("name", ["dailyreport", "deepeval", "dr3"])
def test_examples_load(name: str) -> None:
    [task] = load_tasks(ROOT / "examples" / "tasks" / f"{name}.json")
    assert task.id and task.query


def test_schema_and_meaning_errors_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    cases = [
        ({"id": "t", "query": "q", "subtasks": [{"id": "s", "importance": "P0"}]},
         "subtasks/0: 'instruction' is a required property"),
        ({"id": "t", "query": "q", "subtasks": [{"id": "s", "instruction": "i",
                                                 "importance": "P7"}]},
         "subtasks/0/importance"),
        ({"id": "t", "query": "q", "subtasks": [{"id": "s", "instruction": "i",
                                                 "importance": "P2(a)"}]},
         "is P2(a) but has no group"),
        ({"id": "t"}, "'query' is a required property"),
        ({"query": "q"}, "'id' is a required property"),
        ({"id": "t", "query": "q", "evaluation_date": "March 2025"}, "evaluation_date"),
        ({"id": "t", "query": "q", "evaluation_date": "2025-13-45"},
         "evaluation_date: '2025-13-45' is not a calendar date (YYYY-MM-DD)"),
    ]
    for doc, message in cases:
        path.write_text(json.dumps(doc))
        with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            load_tasks(path)


def test_report_to_task_matching(tmp_path: Path) -> None:
    tasks = load_tasks(ROOT / "examples" / "tasks" / "deepeval.json")
    assert task_for_report(tasks, "qid_topicLakeview_report.md", None).id == "topicLakeview"
    with pytest.raises(InputError, match="qid not found"):
        task_for_report(tasks + tasks[:0], "qid_other_report.md", None)


def test_import_real_lrb_checklist() -> None:
    csv_path = shared("lrb", "coverage_checklist.csv")
    tasks = import_lrb(csv_path, baselines=shared("lrb", "reference_reports"))
    assert len(tasks) == 100 and sum(len(t.checklist) for t in tasks) == 673
    ev = next(t for t in tasks if t.id == "market6VWmPyxptfK47civ")
    assert ev.query.startswith("What is the size, growth rate, and segmentation of the U.S.")
    assert [c.id for c in ev.checklist][:3] == ["q1", "q2", "q3"]
    assert ev.checklist[0].text == ("Does the report provide data for the U.S. electric "
                                    "vehicle market specifically for the year 2024?")
    assert sum(1 for t in tasks if t.baseline_report) == 60


def test_lrb_rows_with_missing_fields_are_named(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("qid,question,category,checklist_id,checklist\n"
                    "a,What?,x,q1,Is it there?\n"
                    "a,What?,x,q2,\n")
    with pytest.raises(InputError, match=r"c.csv:3: row is missing checklist"):
        import_lrb(path)
    path.write_text("qid,question\na,b\n")
    done = run_amber("import", "lrb", str(path), "--out", str(tmp_path / "o.json"))
    assert done.returncode == 2 and "missing columns checklist_id, checklist" in done.stderr


def test_import_dr3_builds_a_bundle_per_task(tmp_path: Path) -> None:
    tasks = import_dr3(DR3, tmp_path / "dr3",
                       reports=DR3 / "reports" / "32k" / "model-a")
    [task] = tasks
    assert task.id == "001" and task.report == "001/final_report.md"
    assert [d.title for d in task.required_documents] == [
        "Lakeview adds 40 km of protected bike lanes", "Lakeview transport report 2023",
        "planning_notes"]  # map.png is not text-like
    assert len(task.insights_sandbox or []) == 2 and len(task.insights_user_files or []) == 1
    assert [c.id for c in task.checklist] == ["c1", "c2"]
    bundle = tmp_path / "dr3" / "bundles" / "001"
    assert verify_bundle(bundle).ok
    with Bundle.open(bundle) as b:
        pages = b.index.rows("SELECT c.id, t.title FROM captures c JOIN texts t "
                             "ON t.capture_id = c.id ORDER BY c.url")
        assert len(pages) == 4
        stored = b.read_capture(pages[0]["id"])
        assert b.read_record(stored.text_record).type == "resource"
        _, report = b.report_text()
        assert "[long_context:" in report
    done = run_amber("import", "dr3", str(tmp_path / "nothing"), "--out", str(tmp_path / "x"))
    assert done.returncode == 2 and "no query.jsonl" in done.stderr


@pytest.mark.parametrize(("where", "content", "message"), [
    ("evaluation/insights/001/gold_insights_from_long_context.json", '{"insights": []}',
     'expected {"gold_insights": [{\'insight\': ...}, ...]}'),
    ("evaluation/checklists/001/checklist.json", '{"checklist": [{"id": 1, "text": "x"}]}',
     "checklist[0]: expected"),
    ("001/long_context_sampled_32k.json", "[1, 2]", "page 0: expected an object"),
    ("001/long_context_sampled_32k.json", '[{"title": "t", "page_body": {"a": 1}}]',
     "page 0: 'page_body' must be text"),
])
def test_import_dr3_names_a_file_of_the_wrong_shape(tmp_path: Path, where: str, content: str,
                                                    message: str) -> None:
    import shutil

    data = tmp_path / "data"
    shutil.copytree(DR3, data)
    (data / where).write_text(content)
    done = run_amber("import", "dr3", str(data), "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and where.split("/")[-1] in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "bundles").exists()  # nothing half-written


def test_import_dr3_names_a_reports_folder_with_no_reports(tmp_path: Path) -> None:
    for wrong in (DR3 / "reports" / "32k", tmp_path / "nowhere"):
        with pytest.raises(InputError, match="reports"):
            import_dr3(DR3, tmp_path / "out", reports=wrong)
    assert not (tmp_path / "out").exists()  # refused before any bundle is written


def test_dr3_imports_of_several_systems_stay_separate_systems(tmp_path: Path) -> None:
    """Each import writes DIR/bundles/NNN: the system is the reports' model folder (or
    --system), not the "bundles" folder every import shares."""
    from fakejudge import FakeJudgeServer
    from rundirs import dr3_bundles

    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    named = run_amber("import", "dr3", str(DR3), "--out", str(tmp_path / "named"),
                      "--reports", str(tmp_path / "reports" / "model-0"), "--system", "Ours")
    assert named.returncode == 0, named.stderr
    lonely = run_amber("import", "dr3", str(DR3), "--out", str(tmp_path / "x"),
                       "--system", "Ours")
    assert lonely.returncode != 0 and "give both" in lonely.stderr
    blank = run_amber("import", "dr3", str(DR3), "--out", str(tmp_path / "y"),
                      "--reports", str(tmp_path / "reports" / "model-0"), "--system", " ")
    assert blank.returncode != 0 and "a non-empty name" in blank.stderr
    with FakeJudgeServer() as server:
        ours = tmp_path / "named" / "bundles" / "001"
        done = run_amber("evaluate", *map(str, bundles), str(ours),
                         "--task", str(tasks), "--protocol", "dr3", "--judge-url", server.url,
                         "--judge-name", "fake", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    table = json.loads((tmp_path / "run" / "run.json").read_text())
    assert [s["system"] for s in table["systems"]] == ["Ours", "model-0", "model-1"]
