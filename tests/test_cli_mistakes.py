"""Mistakes a new user makes, each answered with one line, the right exit code, and
nothing left behind: wrong option values, paths of the wrong kind, files that are not
what a command reads."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ambereval.engine.verification import deciding_evidence
from ambereval.models.catalog import unknown_judge

from conftest import no_traceback, one_page_bundle, run_amber
from fakeweb import FakeWeb


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_page_bundle(tmp_path_factory.mktemp("mistakes") / "bundle", "/pages/tea.html")


def one_line(done: subprocess.CompletedProcess[str], code: int, message: str) -> None:
    assert done.returncode == code, done.stderr
    assert message in done.stderr and no_traceback(done.stderr), done.stderr


@pytest.mark.parametrize("command", [
    ["verify", "BUNDLE", "--out", "OUT"],
    ["evaluate", "BUNDLE", "--task", "tasks.json", "--out", "OUT"],
    ["snapshot", "report", "report.md", "--out", "OUT"],
    ["judge-bench", "pairs.jsonl", "--ledger", "OUT/l.sqlite"],
])
def test_an_unknown_ledger_mode_is_refused_before_anything_opens(
        command: list[str], bundle: Path, tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text("# R\n\nA fact [1].\n\n[1] https://example.org/\n")
    (tmp_path / "pairs.jsonl").write_text("")
    (tmp_path / "tasks.json").write_text("[]")
    args = [str(bundle) if a == "BUNDLE" else a for a in command]
    done = run_amber(*args, "--ledger-mode", "bogus", cwd=tmp_path)
    one_line(done, 2, "unknown --ledger-mode 'bogus' (hint: record, reuse, replay)")
    assert not (tmp_path / "OUT").exists()


def test_evaluate_checks_its_inputs_before_creating_the_run(bundle: Path,
                                                            tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.json"
    tasks.write_text('{"id": "t1", "query": "q", "report": "other.md"}')
    missing = run_amber("evaluate", str(tmp_path / "nope"), "--task", str(tasks),
                        "--out", str(tmp_path / "r1"))
    one_line(missing, 1, "no such bundle directory")
    no_report = run_amber("evaluate", str(bundle), "--task", str(tasks),
                          "--out", str(tmp_path / "r2"))
    one_line(no_report, 2, "bundle holds no report")
    assert not (tmp_path / "r1").exists() and not (tmp_path / "r2").exists()


@pytest.mark.parametrize("value", ["0", "17", "four", ""])
def test_a_support_batch_out_of_range_is_refused_before_the_run(value: str, bundle: Path,
                                                               tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.json"
    tasks.write_text("[]")
    done = run_amber("evaluate", str(bundle), "--task", str(tasks), "--out",
                     str(tmp_path / "run"), "--rule", f"support_batch={value}")
    one_line(done, 2, f"rule support_batch must be a whole number from 1 to 16 (got "
                      f"{value!r})")
    assert not (tmp_path / "run").exists()


def test_pack_refuses_an_out_it_cannot_write_and_leaves_nothing(bundle: Path,
                                                               tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    one_line(run_amber("bundle", "pack", str(bundle), "--out", str(tmp_path / "adir")),
             2, "adir: is a directory (hint: give the .wacz file to write)")
    one_line(run_amber("bundle", "pack", str(bundle), "--out", str(tmp_path / "no/b.wacz")),
             2, "no such directory")
    one_line(run_amber("bundle", "pack", str(bundle), "--out", str(bundle / "b.wacz")),
             2, "inside the bundle it packs")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]
    assert not list(bundle.glob("*.wacz")) and not list(bundle.glob(".*.tmp"))


def test_a_directory_or_file_that_is_no_bundle_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "warcs").mkdir()
    (tmp_path / "warcs" / "x.warc.gz").write_bytes(b"not a bundle")
    for command in ("verify", "stats", "finish"):
        one_line(run_amber("bundle", command, str(tmp_path / "warcs")), 1,
                 "not an Amber bundle")
        one_line(run_amber("bundle", command, str(tmp_path / "warcs" / "x.warc.gz")), 1,
                 "x.warc.gz: is a file; a bundle is a directory")
    (tmp_path / "b.wacz").write_bytes(b"PK")
    one_line(run_amber("bundle", "verify", str(tmp_path / "b.wacz")), 1,
             "(hint: unpack it first: amber bundle unpack)")


def test_import_lrb_names_a_checklist_that_is_not_csv_text(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.csv"
    garbage.write_bytes(bytes(range(128, 256)) * 8)
    one_line(run_amber("import", "lrb", str(garbage), "--out", str(tmp_path / "t.json")), 2,
             "garbage.csv: not UTF-8 text")
    one_line(run_amber("import", "lrb", str(tmp_path), "--out", str(tmp_path / "t.json")), 2,
             "is a directory, not a checklist CSV file")
    good = tmp_path / "c.csv"
    good.write_text("qid,question,checklist_id,checklist\nq1,Q?,1,Item\n")
    (tmp_path / "out.json").mkdir()
    one_line(run_amber("import", "lrb", str(good), "--out", str(tmp_path / "out.json")), 2,
             "out.json: is a directory")
    assert not (tmp_path / "t.json").exists()


def test_an_unknown_judge_lists_each_known_name_once() -> None:
    hint = unknown_judge("zzzz", ["b-judge", "a-judge", "b-judge"]).hint or ""
    assert "known judges: a-judge, b-judge (" in hint


def test_the_evidence_shown_for_a_verdict_is_the_one_that_decided_it() -> None:
    found = {"url": "u-found", "cited": False, "answer": "true"}
    cited_true = {"url": "u-cited", "cited": True, "answer": "true"}
    cited_none = {"url": "u-cited-none", "cited": True, "answer": "none"}
    correct = {"verdict": "Correct", "evidence": [found, cited_none, cited_true]}
    assert deciding_evidence(correct) == cited_true
    incorrect = {"verdict": "Incorrect",
                 "evidence": [cited_true, {**found, "answer": "false"}]}
    assert deciding_evidence(incorrect)["url"] == "u-found"  # type: ignore[index]
    unknown = {"verdict": "Unknown", "evidence": [found, cited_none]}
    assert deciding_evidence(unknown) == cited_none
    assert deciding_evidence({"verdict": "Unknown", "evidence": []}) is None


def test_what_a_run_could_not_score_is_named_with_its_reason() -> None:
    from ambereval.engine.runs.evaluate import unscored

    no_subtasks = {"scores": None, "reason": "task has no subtasks (DailyReport needs them)"}
    docs = [{"bundle": "b1", "report_id": "r1", "judges": {"j": {
                "dailyreport": no_subtasks,
                "dr3": {"if": {"score": None, "reason": "task has no checklist"},
                        "dq": {"score": 40, "reason": ""}}}}},
            {"bundle": "b2", "report_id": "r1", "judges": {"j": {"dailyreport": no_subtasks}}}]
    assert unscored(docs) == [
        ("dailyreport", "task has no subtasks (DailyReport needs them)", 2),
        ("dr3.if", "task has no checklist", 1)]
    no_urls = {"score": None, "pairs": 0, "urls": [], "e1_invalid_urls": 0}
    docs[0]["judges"]["j"]["deepeval"] = {"citation_accuracy": no_urls}
    assert ("deepeval.citation_accuracy", "no sentence cites a URL", 1) in unscored(docs)


def test_a_snapshot_that_captured_nothing_says_so(web: FakeWeb, tmp_path: Path) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_text("http://127.0.0.1:9/gone\n")
    done = run_amber("snapshot", "urls", str(urls), "--out", str(tmp_path / "b"),
                     env=web.env())
    assert done.returncode == 0, done.stderr  # the failure is recorded; a rerun retries it
    assert "failed: http://127.0.0.1:9/gone (HTTP 422: Failed to goto" in done.stdout
    assert "amber: warning: no page was captured (1 failed)" in done.stderr
    assert "try --reader direct" in done.stderr  # the Jina reader (the default) failed
    direct = run_amber("snapshot", "urls", str(urls), "--out", str(tmp_path / "d"),
                       "--reader", "direct", env=web.env())
    assert "amber: warning: no page was captured (1 failed)" in direct.stderr
    assert "try --reader direct" not in direct.stderr


def test_snapshot_report_never_overwrites_claims_of_another_input(web: FakeWeb,
                                                                  tmp_path: Path) -> None:
    def report(name: str, fact: str) -> Path:
        path = tmp_path / name
        path.write_text(f"# R\n\n{fact} [1].\n\n## References\n"
                        f"[1] {web.url('/pages/tea.html')}\n")
        return path

    out = tmp_path / "b"
    args = ["--out", str(out), "--extractor", "sentences", "--top-k", "0",
            "--reader", "direct", "--allow-private-addresses"]
    first = report("one.md", "China grows the most tea")
    assert run_amber("snapshot", "report", str(first), *args, env=web.env()).returncode == 0
    again = run_amber("snapshot", "report", str(first), *args, env=web.env())
    assert again.returncode == 0, again.stderr  # the same report into its own bundle
    before = (out / "evidence" / "amber.sqlite").read_bytes()
    other = run_amber("snapshot", "report", str(report("two.md", "India grows tea too")),
                      *args, env=web.env())
    one_line(other, 2, "holds 1 claim from another report (first: 'c1') that two.md's "
                       "claims would overwrite")
    assert (out / "evidence" / "amber.sqlite").read_bytes() == before


def test_import_dr3_names_the_file_and_line_it_cannot_read(tmp_path: Path) -> None:
    data = tmp_path / "dr3"
    data.mkdir()
    (data / "query.jsonl").write_bytes(b"\xf6\x00garbage")
    one_line(run_amber("import", "dr3", str(data), "--out", str(tmp_path / "o")), 2,
             "query.jsonl: not UTF-8 text (byte 0)")
    (data / "query.jsonl").write_text('{"id": 1, "query": "q"}\n\n{"id": 2}\n')
    one_line(run_amber("import", "dr3", str(data), "--out", str(tmp_path / "o")), 2,
             "query.jsonl:3: the row lacks id (or number) or query")
    (data / "query.jsonl").write_text('[1, 2]\n')
    one_line(run_amber("import", "dr3", str(data), "--out", str(tmp_path / "o")), 2,
             "query.jsonl:1: expected a JSON object")


def test_judge_bench_refuses_options_that_would_be_ignored(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"id": "p1", "claim": "a", "evidence": "a", "label": "supported"}\n')
    for bad in (["--limit", "0"], ["--limit", "-1"]):
        done = run_amber("judge-bench", str(pairs), *bad)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    one_line(run_amber("judge-bench", str(pairs), "--split", "test"), 2,
             "--split and --out go with --suite DIR")


def test_snapshot_claims_never_overwrites_a_reports_claims(web: FakeWeb,
                                                           tmp_path: Path) -> None:
    report = tmp_path / "r.md"
    report.write_text(f"# R\n\nChina grows the most tea [1].\n\n## References\n"
                      f"[1] {web.url('/pages/tea.html')}\n")
    out = tmp_path / "b"
    made = run_amber("snapshot", "report", str(report), "--out", str(out), "--extractor",
                     "sentences", "--top-k", "0", "--reader", "direct", env=web.env())
    assert made.returncode == 0, made.stderr
    before = (out / "evidence" / "amber.sqlite").read_bytes()
    rhine = web.url("/pages/rhine.html")
    claims = tmp_path / "c.jsonl"
    claims.write_text(f'{{"id": "c1", "text": "Other.", "urls": ["{rhine}"]}}\n')
    done = run_amber("snapshot", "claims", str(claims), "--out", str(out), "--reader", "direct",
                     env=web.env())
    one_line(done, 2, "claim 'c1' is already there from another input (1 such id)")
    assert (out / "evidence" / "amber.sqlite").read_bytes() == before
    other = tmp_path / "c2.jsonl"
    other.write_text(f'{{"id": "k1", "text": "Other.", "urls": ["{rhine}"]}}\n')
    added = run_amber("snapshot", "claims", str(other), "--out", str(out), "--reader", "direct",
                      env=web.env())
    assert added.returncode == 0, added.stderr  # new ids join the bundle
    again = run_amber("snapshot", "report", str(report), "--out", str(out), "--extractor",
                      "sentences", "--top-k", "0", "--reader", "direct", env=web.env())
    assert again.returncode == 0, again.stderr  # k1 is not in the report's way
    report.write_text(report.read_text().replace("China", "India"))
    edited = run_amber("snapshot", "report", str(report), "--out", str(out), "--extractor",
                       "sentences", "--top-k", "0", "--reader", "direct", env=web.env())
    one_line(edited, 2, "from an earlier version of r.md (first: 'c1')")


def test_one_model_given_twice_is_not_an_ensemble(tmp_path: Path) -> None:
    from ambereval.models.registry import default_judge_path

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF")

    def evaluate(*judges: str) -> subprocess.CompletedProcess[str]:
        return run_amber("evaluate", "b", "--task", str(tmp_path / "t.json"), "--out",
                         str(tmp_path / "r"), *judges)

    one_line(evaluate("--judge-model", str(model), "--judge-model", str(model)), 2,
             "judges 'm.gguf' and 'm.gguf#2' are the same model")
    one_line(evaluate("--judge", "smollm2-135m", "--judge-model", str(default_judge_path())),
             2, "are the same model")
    one_line(evaluate("--judge-model", str(tmp_path / "gone.gguf")), 2,
             "gone.gguf: model file not found")
    # different files are a real ensemble: the judges pass, the missing task file is next
    one_line(evaluate("--judge-model", str(model), "--judge-model", str(other)), 2,
             "t.json: no such task file")
    assert not (tmp_path / "r").exists()


def test_verify_checks_the_embedder_before_writing(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "v"
    one_line(run_amber("verify", str(bundle), "--out", str(out), "--embedder",
                       str(tmp_path / "none")), 1, "none: embedder directory not found")
    afile = tmp_path / "model.bin"
    afile.write_bytes(b"x")
    one_line(run_amber("verify", str(bundle), "--out", str(out), "--embedder", str(afile)), 1,
             "model.bin: is a file; the embedder is a directory")
    assert not out.exists()


def test_unpack_names_what_is_wrong_with_its_paths(bundle: Path, tmp_path: Path) -> None:
    wacz = tmp_path / "b.wacz"
    assert run_amber("bundle", "pack", str(bundle), "--out", str(wacz)).returncode == 0
    afile = tmp_path / "afile"
    afile.write_text("x")
    one_line(run_amber("bundle", "unpack", str(wacz), "--out", str(afile)), 2,
             "afile: is a file (hint: give an empty or new directory as --out)")
    one_line(run_amber("bundle", "unpack", str(tmp_path), "--out", str(tmp_path / "u")), 2,
             "is a directory, not a .wacz file")
    one_line(run_amber("bundle", "unpack", str(wacz), "--out", "/proc/amber-x"), 1,
             "/proc/amber-x: cannot create it")
    assert afile.read_text() == "x" and not (tmp_path / "u").exists()


def test_judge_bench_refuses_a_gold_span_outside_its_page(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"id": "p1", "claim": "a", "page": "short page", "gold": [[2, 99]], '
                     '"label": "supported"}\n')
    one_line(run_amber("judge-bench", str(pairs), "--retrieve", "3"), 2,
             "gold span [2, 99] is not inside the page (10 characters)")


def test_integrity_warning_names_what_a_judge_would_be_given(bundle: Path,
                                                             tmp_path: Path) -> None:
    import shutil

    from ambereval.snapshots.bundle.store import UNFINISHED
    from ambereval.snapshots.bundle.verify import integrity_warning

    assert integrity_warning(bundle) is None
    copy = tmp_path / "b"
    shutil.copytree(bundle, copy)
    (copy / UNFINISHED).write_text("{}")
    assert "interrupted before finishing" in (integrity_warning(copy) or "")
    (copy / UNFINISHED).unlink()
    (copy / "datapackage.json").unlink()
    assert "no datapackage.json" in (integrity_warning(copy) or "")


@pytest.mark.slow
def test_judging_a_bundle_that_no_longer_matches_its_manifest_warns(
        bundle: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "b"
    shutil.copytree(bundle, copy)
    with open(copy / "pages" / "pages.jsonl", "a") as fh:
        fh.write("\n")
    done = run_amber("verify", str(copy), "--out", str(tmp_path / "v"))
    assert done.returncode == 0, done.stderr
    assert "amber: warning: " in done.stderr
    assert "does not match its manifest (pages/pages.jsonl" in done.stderr
    clean = run_amber("verify", str(bundle), "--out", str(tmp_path / "v2"))
    assert "match its manifest" not in clean.stderr


def test_cited_urls_without_a_usable_page_are_counted_once_per_bundle() -> None:
    from ambereval.engine.runs.evaluate import unusable_citations

    def doc(bundle: str, *entries: dict[str, str]) -> dict[str, object]:
        return {"bundle": bundle, "judges": {"j": {"deepeval": {"citation_accuracy": {
            "urls": list(entries)}}}}}

    dead = {"url": "u1", "error": "E1", "reason": "failed_capture HTTP 422: gone"}
    assert unusable_citations([
        doc("b1", dead, {"url": "u2", "error": "E1", "reason": "not_captured"},
            {"url": "u3", "error": "E2", "reason": "irrelevant"}),
        doc("b1", dead),  # the same URL of the same bundle, another report
        doc("b2", dead)]) == {"failed_capture": 2, "not_captured": 1}


def test_run_files_are_as_readable_as_the_umask_says(tmp_path: Path) -> None:
    import os
    import stat

    from ambereval.engine.runs.run_dir import write_atomic

    old = os.umask(0o022)
    os.umask(old)
    write_atomic(tmp_path / "run.json", "{}\n")
    mode = stat.S_IMODE((tmp_path / "run.json").stat().st_mode)
    assert mode == 0o666 & ~old  # 0644 under the usual umask, not mkstemp's 0600


def test_evaluate_refuses_a_bundle_given_twice(bundle: Path, tmp_path: Path) -> None:
    tasks = tmp_path / "t.json"
    tasks.write_text('{"id": "t1", "query": "q"}')
    one_line(run_amber("evaluate", str(bundle), str(bundle / "."), "--task", str(tasks),
                       "--out", str(tmp_path / "r")), 2, "given twice")
    assert not (tmp_path / "r").exists()


def test_evaluate_says_what_it_could_not_score_with_and_without_json(tmp_path: Path) -> None:
    import json

    from fakejudge import FakeJudgeServer
    from rundirs import dr3_bundles

    from ambereval.cli.evaluate_cmd import _what_was_not_scored

    bundles, tasks = dr3_bundles(tmp_path, systems=1)
    args = ["evaluate", str(bundles[0]), "--task", str(tasks), "--judge-name", "fake"]
    line = "not scored: dailyreport on 1 of 1 report: task has no subtasks"
    with FakeJudgeServer() as server:
        table = run_amber(*args, "--judge-url", server.url, "--out", str(tmp_path / "a"))
        as_json = run_amber(*args, "--judge-url", server.url, "--out", str(tmp_path / "b"),
                            "--json")
    assert table.returncode == 0 and as_json.returncode == 0, table.stderr + as_json.stderr
    assert line in table.stdout
    # --json: stdout is exactly the run table; what could not be scored goes to stderr
    assert json.loads(as_json.stdout) == json.loads((tmp_path / "b" / "run.json").read_text())
    assert f"amber: {line}" in as_json.stderr

    def doc(*reasons: str) -> dict[str, object]:
        return {"bundle": "b", "judges": {"j": {"deepeval": {"citation_accuracy": {
            "urls": [{"url": f"u{i}", "error": "E1", "reason": r}
                     for i, r in enumerate(reasons)]}}}}}

    assert _what_was_not_scored([doc("not_captured")])[0].startswith(
        "note: 1 cited URL has no usable page in the bundles (not_captured 1)")
    assert "2 cited URLs have no usable page" in _what_was_not_scored(
        [doc("not_captured", "not_captured")])[0]


def test_evaluate_warns_when_the_task_file_differs_from_the_frozen_task(
        tmp_path: Path) -> None:
    import json

    from fakejudge import FakeJudgeServer
    from rundirs import dr3_bundles

    bundles, tasks = dr3_bundles(tmp_path, systems=2)
    args = ["evaluate", *map(str, bundles), "--task", str(tasks), "--protocol", "dr3",
            "--judge-name", "fake"]
    with FakeJudgeServer() as server:
        same = run_amber(*args, "--judge-url", server.url, "--out", str(tmp_path / "a"))
        data = json.loads(tasks.read_text())
        [task] = data if isinstance(data, list) else data["tasks"]
        task["query"] += " (edited)"
        tasks.write_text(json.dumps(data))
        edited = run_amber(*args, "--judge-url", server.url, "--out", str(tmp_path / "b"))
    assert same.returncode == 0 and "differs from the task frozen" not in same.stderr
    assert edited.returncode == 0, edited.stderr
    assert (f"task 001 in --task differs from the task frozen with {bundles[0]}:"
            "001/final_report.md in query (and 1 more report); the run scores with "
            "--task's") in edited.stderr
