"""`amber audit` on real run directories (verify output and evaluate run): every verdict
with the judge's answer from the ledger and the captured bytes behind it, read back from
the bundle by offset; the HTML page is one escaped, self-contained file."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from auditruns import INJECTION, Runs, make_runs

from ambereval.engine.runs.audit import load_audit, select_items
from ambereval.engine.runs.audit_data import LedgerReader, passages_in_prompt
from ambereval.engine.runs.audit_html import embed_json, render_audit_html
from ambereval.errors import InputError
from ambereval.models import Embedder
from ambereval.snapshots import Bundle

from conftest import run_amber


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return make_runs(tmp_path_factory.mktemp("audit"), Embedder())


def test_verify_output_audit_reads_evidence_by_offset(runs: Runs) -> None:
    audit = load_audit(runs.verify)
    assert audit.kind == "verify" and not audit.warnings
    [report] = audit.reports
    assert report.name == "landmarks.md" and "Eiffel Tower" in (report.text or "")
    verdicts = [json.loads(line) for line in
                (runs.verify / "verdicts.jsonl").read_text().splitlines()]
    assert [i.id for i in report.items] == [v["id"] for v in verdicts]
    with Bundle.open(runs.bundle) as bundle:
        judged = [i for i in report.items if i.evidence]
        assert judged, "the fake judge decided no claim"
        for item in judged:
            assert item.span and report.text[item.span[0]:item.span[1]].strip()
            for ev in item.evidence:
                page = audit.pages[ev.warc_record_id]
                stored = bundle.read_record(ev.warc_record_id).body.decode()
                assert page["text"] == stored
                assert ev.captured_at and ev.warc_file and ev.response_record_id
                cap = bundle.index.capture(ev.capture_id)
                assert cap["captured_at"] == ev.captured_at
                assert ev.passages and all(p.source == "run" for p in ev.passages)
                answer = audit.ledger[ev.ledger_key]
                assert answer["answer"]["answer"] == ev.answer  # the ledger agrees


def test_run_directory_audit_covers_every_protocol(runs: Runs) -> None:
    audit = load_audit(runs.run)
    assert audit.kind == "evaluate" and not audit.warnings
    [report] = audit.reports
    dims = {f"{i.protocol}.{i.dimension}" for i in report.items}
    assert {"dailyreport.ins", "dailyreport.rat", "dailyreport.fac", "dr3.fa", "dr3.if",
            "dr3.dq", "deepeval.presentation", "deepeval.coverage",
            "deepeval.citation_accuracy"} <= dims
    fa = [i for i in report.items if i.dimension == "fa" and i.evidence]
    assert fa and all(i.span for i in fa)
    assert all("None" not in (i.reason or "") for i in fa)  # a judged source says how
    for item in fa:  # FA does not record offsets: they are found from the prompt
        for ev in item.evidence:
            page = audit.pages[ev.warc_record_id]
            assert ev.passages and all(p.source == "prompt" for p in ev.passages)
            request = LedgerReader(runs.run / "ledger.sqlite").get(ev.ledger_key)["request"]
            prompt = "\n".join(m["content"] for m in json.loads(request)["messages"])
            for p in ev.passages:
                assert page["text"][p.start:p.end] in prompt
    fac = [i for i in report.items if i.dimension == "fac"]
    assert fac and all(i.text for i in fac)
    # the instruction and rubric the judge was given, not only their ids
    texts = {i.id: i.text for i in report.items if i.dimension in ("ins", "rat")}
    assert texts["s1.ins"] == "subtask s1: Gives the Eiffel Tower's completion year."
    assert texts["s2.rat"] == "subtask s2 rationality: Explains why the Rhine matters."
    keys = {k for i in report.items for k in i.ledger_keys}
    assert keys and all(not audit.ledger[k].get("missing") for k in keys)
    assert all(i.outcome in ("pass", "partial", "fail", "unknown", "info")
               for i in report.items)


def test_a_support_answer_says_which_of_a_prompts_answers_it_read() -> None:
    from ambereval.engine.runs.audit_items import _support_answer

    assert _support_answer({"supported": True, "item": 2, "of": 3}) == \
        "supported (answer 2 of 3 in one prompt)"
    assert _support_answer({"supported": False}) == "not supported"


def test_passages_in_prompt_are_exact_slices() -> None:
    page = "First paragraph about the river Rhine and Basel.\n\nSecond one, on Cologne."
    messages = [{"role": "system", "content": "Use only the passages."},
                {"role": "user", "content": "Passages:\n\n[1] First paragraph about the river "
                 "Rhine and Basel.\n\nStatement: the Rhine passes Basel."}]
    [p] = passages_in_prompt(messages, page)
    assert page[p.start:p.end] == "First paragraph about the river Rhine and Basel."


def test_selection_by_claim_dimension_and_report(runs: Runs) -> None:
    audit = load_audit(runs.run)
    assert [i.id for _, i in select_items(audit, claim="coverage.k1")] == ["coverage.k1"]
    assert {i.dimension for _, i in select_items(audit, dimension="deepeval.coverage")} == \
        {"coverage"}
    assert select_items(audit, report="landmarks", dimension="fa")
    with pytest.raises(InputError, match="no claim or item 'coverage.k9'") as err:
        select_items(audit, claim="coverage.k9")
    assert "did you mean" in (err.value.hint or "")
    with pytest.raises(InputError, match="no report"):
        select_items(audit, report="nope")


def test_cli_terminal_audit_of_one_claim(runs: Runs) -> None:
    audit = load_audit(runs.verify)
    item = next(i for i in audit.reports[0].items if i.evidence)
    ev = item.evidence[0]
    done = run_amber("audit", str(runs.verify), "--claim", item.id)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for needle in (item.label, ev.url, ev.warc_record_id, ev.ledger_key, ev.captured_at,
                   f"chars {ev.passages[0].start}-{ev.passages[0].end}"):
        assert needle in out
    page = audit.pages[ev.warc_record_id]["text"]
    first_words = page[ev.passages[0].start:ev.passages[0].end].split()[:4]
    assert " ".join(first_words) in " ".join(out.split())


def test_terminal_output_carries_no_control_characters(runs: Runs) -> None:
    audit = load_audit(runs.verify)
    [item] = [i for i in audit.reports[0].items if "\x1b" in i.text]  # the report has one
    done = run_amber("audit", str(runs.verify), "--claim", item.id)
    assert done.returncode == 0, done.stderr
    assert "window.__pwned" in done.stdout and "\x1b" not in done.stdout
    assert "\x07" not in done.stdout


def test_cli_summary_json_and_errors(runs: Runs, tmp_path: Path) -> None:
    done = run_amber("audit", str(runs.run))
    assert done.returncode == 0, done.stderr
    assert "deepeval.coverage" in done.stdout and "landmarks.md" in done.stdout
    done = run_amber("audit", str(runs.run), "--dimension", "coverage", "--json")
    assert done.returncode == 0 and done.stderr == ""
    doc = json.loads(done.stdout)
    assert [i["id"] for i in doc["items"]] == ["coverage.k1", "coverage.k2"]
    assert all(i["answers"][i["ledger_keys"][0]]["answer"] is not None for i in doc["items"])
    for args, words in ((["audit", str(tmp_path / "nope")], "no such run directory"),
                        (["audit", str(tmp_path)], "neither a run directory"),
                        (["audit", str(runs.run), "--claim", "c99"], "no claim or item"),
                        (["audit", str(runs.run), "--claim", "c1", "--dimension", "fa"],
                         "not both")):
        bad = run_amber(*args)
        assert bad.returncode == 2, bad.stderr
        assert words in bad.stderr and "Traceback" not in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1


def test_moved_bundle_is_a_warning_then_found_with_bundles(runs: Runs, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(runs.run, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    moved = tmp_path / "elsewhere"
    shutil.copytree(runs.bundle, moved / runs.bundle.name)
    for path in [copy / "manifest.json", *(copy / "reports").iterdir()]:
        text = path.read_text().replace(str(runs.bundle), "/gone/bundle")
        path.write_text(text)
    audit = load_audit(copy)
    assert any("not found" in w for w in audit.warnings)
    assert audit.reports[0].text is None and not audit.pages
    audit = load_audit(copy, [moved])
    assert not audit.warnings and audit.reports[0].text and audit.pages
    # the bundle found elsewhere must be the one the run read: its manifest digest is checked
    assert manifest["bundles"]
    package = moved / runs.bundle.name / "datapackage.json"
    package.write_text(package.read_text() + "\n")
    audit = load_audit(copy, [moved])
    assert any("changed since the run" in w for w in audit.warnings)


def test_html_is_one_escaped_self_contained_file(runs: Runs) -> None:
    done = run_amber("audit", str(runs.run), "--html")
    assert done.returncode == 0, done.stderr
    page = (runs.run / "audit.html").read_text(encoding="utf-8")
    assert str(runs.run / "audit.html") in done.stdout
    audit = load_audit(runs.run)
    assert any(INJECTION in p["text"] for p in audit.pages.values())  # really captured
    assert "window.__pwned" in page  # the data is there ...
    assert "<script>window.__pwned" not in page and "<img src=x" not in page  # ... inert
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page, re.I)
    assert "default-src 'none'" in page
    data = re.search(r'<script type="application/json" id="amber-data">(.*?)</script>',
                     page, re.S)
    assert data and json.loads(data.group(1))["format"] == "amber-audit/1"


def test_embed_json_round_trips_hostile_text() -> None:
    hostile = {"t": "</script><!-- \u2028 & <b>"}
    text = embed_json(hostile)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == hostile


def test_html_of_verify_output(runs: Runs, tmp_path: Path) -> None:
    html = render_audit_html(load_audit(runs.verify))
    assert "verify.correct" in html and "<script>window.__pwned" not in html


def test_a_bundle_changed_since_the_run_is_flagged(runs: Runs, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(runs.run, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["bundles"] = {k: "0" * 64 for k in manifest["bundles"]}
    (copy / "manifest.json").write_text(json.dumps(manifest))
    audit = load_audit(copy)
    assert any("changed since the run" in w for w in audit.warnings)
    done = run_amber("audit", str(copy))
    assert done.returncode == 0 and "changed since the run" in done.stderr


def test_an_ensemble_run_keeps_each_judges_items(runs: Runs, tmp_path: Path) -> None:
    from fakejudge import FakeJudgeServer

    from ambereval.engine.runs.evaluate import evaluate_bundles
    from ambereval.models import open_judge

    with FakeJudgeServer() as server:
        judges = [(name, open_judge(None, server.url, name, tmp_path / "run" / "ledger.sqlite",
                                    "reuse")) for name in ("alpha", "beta")]
        evaluate_bundles([runs.bundle], runs.tasks, ["deepeval"], judges, tmp_path / "run")
    audit = load_audit(tmp_path / "run")
    pairs = select_items(audit, claim="coverage.k1")
    assert sorted(i.judge for _, i in pairs) == ["alpha", "beta"]
    assert all(audit.ledger[k].get("answer") is not None for _, i in pairs
               for k in i.ledger_keys)
    assert '"judge":"beta"' in render_audit_html(audit)


def test_without_the_runs_tasks_file_the_audit_shows_the_task_frozen_in_the_bundle(
        runs: Runs, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(runs.run, run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["tasks_file"] = str(tmp_path / "moved-away.json")
    (run / "manifest.json").write_text(json.dumps(manifest))
    audit = load_audit(run, bundles=[runs.bundle.parent])
    [report] = audit.reports
    ins = next(i for i in report.items if i.id == "s1.ins")
    assert ins.text == "subtask s1: Gives the Eiffel Tower's completion year."
    assert any("moved-away.json not found: subtask texts are from the tasks frozen"
               in w for w in audit.warnings)


def test_the_audit_finds_a_relative_tasks_file_where_the_run_was_made(
        runs: Runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "runs" / "run"  # not beside the tasks file: only cwd finds it
    shutil.copytree(runs.run, run)
    (tmp_path / "lab").mkdir()
    shutil.copy(runs.tasks, tmp_path / "lab" / "tasks.json")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["tasks_file"] = "tasks.json"
    (run / "manifest.json").write_text(json.dumps(manifest))
    from ambereval.engine.runs.invocation import Invocation

    Invocation([str(runs.bundle)], "tasks.json", ["dailyreport"], [],
               cwd=str(tmp_path / "lab")).write(run)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "tasks.json").write_text('{"format": "amber-task/1", "tasks": []}')
    monkeypatch.chdir(elsewhere)  # an unrelated tasks.json here is not the run's
    audit = load_audit(run, bundles=[runs.bundle.parent])
    assert not [w for w in audit.warnings if "tasks file" in w], audit.warnings
    ins = next(i for i in audit.reports[0].items if i.id == "s1.ins")
    assert ins.text == "subtask s1: Gives the Eiffel Tower's completion year."


def test_an_irrelevant_page_e2_is_shown_with_the_opening_the_judge_read(runs: Runs) -> None:
    from ambereval.engine.runs.audit_data import RunLoader
    from ambereval.engine.runs.audit_items import deepeval_items

    [fname] = json.loads((runs.run / "manifest.json").read_text())["reports"]
    doc = json.loads((runs.run / "reports" / fname).read_text())
    [result] = [r["deepeval"] for r in doc["judges"].values()]
    # a page the run asked about, as if the judge had found it irrelevant
    judged = next(e for e in result["citation_accuracy"]["urls"] if e.get("relevance_key"))
    entry = {**judged, "error": "E2", "reason": "irrelevant"}
    entry.pop("pairs", None)
    dead = {"url": "http://gone.example/", "claims": 1, "capture_id": None, "error": "E1",
            "reason": "not_captured"}
    loader = RunLoader(runs.run, None)
    try:
        bundle = loader.bundle(doc["bundle"])
        e2, e1 = deepeval_items(loader, bundle, {"citation_accuracy": {"urls": [entry, dead]}},
                                 "j", None)
        [ev] = e2.evidence
        assert (e2.label, ev.capture_id, ev.answer) == ("E2", entry["capture_id"], "irrelevant")
        page = loader.pages[ev.warc_record_id]
        assert page["text"] == bundle.read_record(ev.warc_record_id).body.decode()
        request = LedgerReader(runs.run / "ledger.sqlite").get(entry["relevance_key"])
        prompt = json.loads(request["request"])["messages"][-1]["content"]
        assert ev.passages and all(p.source == "prompt" for p in ev.passages)
        for p in ev.passages:  # the opening shown to the judge, found in the page
            assert page["text"][p.start:p.end] in prompt
        assert e1.label == "E1" and not e1.evidence  # no page to show
    finally:
        loader.close()


def test_reports_of_several_systems_are_told_apart(tmp_path: Path) -> None:
    from fakejudge import FakeJudgeServer
    from rundirs import dr3_bundles

    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    with FakeJudgeServer() as server:
        done = run_amber("evaluate", *map(str, bundles), "--task", str(tasks), "--protocol",
                         "dr3", "--judge-url", server.url, "--judge-name", "fake",
                         "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    shown = run_amber("audit", str(tmp_path / "run"), "--report", "model-1",
                      "--dimension", "dr3.if")
    assert shown.returncode == 0, shown.stderr
    assert "report 001/final_report.md of model-1" in shown.stdout
    assert "of model-0" not in shown.stdout
    wrong = run_amber("audit", str(tmp_path / "run"), "--report", "model-9")
    assert wrong.returncode != 0
    assert "model-0" in wrong.stderr and wrong.stderr.count("001/final_report.md") <= 1
