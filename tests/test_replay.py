"""``amber replay``: a finished run re-evaluated from its ledger and retrieval record,
with no model and no embedder, is byte-identical; any difference is named."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from replay_fixtures import landmarks_bundle
from scripted_judge import scripted_judge
from typer.testing import CliRunner

from ambereval.cli.main import app
from ambereval.models.ledger import Ledger

FIXTURES = Path(__file__).parent / "fixtures"
PROTOCOLS = ["dr3", "deepeval"]




def _run(tmp: Path, protocols: list[str], embedder: object = None,
         names: tuple[str, ...] = ("s",)) -> Path:
    """A real run (scripted judges at the model edge, real ledger) of the captured pages."""
    from ambereval.engine.runs.evaluate import evaluate_bundles

    bundle, tasks = landmarks_bundle(tmp)
    out = tmp / "run"
    ledger = Ledger(out / "ledger.sqlite", "reuse")
    judges = []
    for name in names:
        judge = scripted_judge({"Claim: The Eiffel": {"question": 1, "answer": "true"}},
                               name=f"scripted-{name}")
        judge.ledger = ledger
        judges.append((name, judge))
    evaluate_bundles([str(bundle)], str(tasks), protocols, judges, out,
                     embedder)  # type: ignore[arg-type]
    ledger.close()
    return out


def test_ensemble_of_two_judges_replays(tmp_path: Path) -> None:
    run = _run(tmp_path, PROTOCOLS, names=("beta", "alpha"))
    result = CliRunner().invoke(app, ["replay", str(run), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["identical"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("replay"), PROTOCOLS)


def _copy(run: Path, tmp: Path) -> Path:
    import shutil
    dest = tmp / "copy"
    shutil.copytree(run, dest)
    return dest


def test_replay_is_identical(run: Path) -> None:
    result = CliRunner().invoke(app, ["replay", str(run)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("OK: replay identical (1 report, 4 files,")
    as_json = CliRunner().invoke(app, ["replay", str(run), "--json"])
    doc = json.loads(as_json.stdout)
    assert doc["identical"] and doc["difference"] is None and doc["ledger_hits"] > 0


def test_edited_report_is_named(run: Path, tmp_path: Path) -> None:
    copy = _copy(run, tmp_path)
    [fname] = json.loads((copy / "manifest.json").read_text())["reports"]
    path = copy / "reports" / fname
    doc = json.loads(path.read_text())
    protocol = sorted(doc["scores"])[0]
    dim = sorted(k for k, v in doc["scores"][protocol].items() if isinstance(v, float))[0]
    text = path.read_text()
    old = f'"{dim}": {doc["scores"][protocol][dim]}'
    assert old in text
    # one byte: the last digit of a score
    new = old[:-1] + ("1" if old[-1] != "1" else "2")
    path.write_text(text.replace(old, new, 1))
    result = CliRunner().invoke(app, ["replay", str(copy)])
    assert result.exit_code == 3
    assert f"reports/{fname}" in result.output
    # the first "dim": value in the file (sorted keys: under judges, then scores)
    assert result.output.rstrip().endswith(f"at $.judges.s.{protocol}.scores.{dim}")


def test_missing_ledger_row_is_one_line(run: Path, tmp_path: Path) -> None:
    copy = _copy(run, tmp_path)
    conn = sqlite3.connect(str(copy / "ledger.sqlite"))
    conn.execute("DELETE FROM calls WHERE key = (SELECT MAX(key) FROM calls)")
    conn.commit()
    conn.close()
    result = CliRunner().invoke(app, ["replay", str(copy)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "is not in the ledger" in lines[0]
    assert lines[0].startswith("amber: error: report landmarks.md: judge request ")
    assert lines[0].startswith("amber: error:")


def test_changed_bundle_and_format(run: Path, tmp_path: Path) -> None:
    copy = _copy(run, tmp_path)
    manifest = json.loads((copy / "manifest.json").read_text())
    [bundle] = manifest["bundles"]
    manifest["bundles"][bundle] = "0" * 64
    (copy / "manifest.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(app, ["replay", str(copy)])
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"amber: error: bundle {bundle}: datapackage.json sha256 ")
    assert line.endswith(f"differs from the manifest's {'0' * 64}")
    manifest["format"] = "amber-run/9"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(app, ["replay", str(copy)])
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert f"{copy}: run directory format 'amber-run/9', this amber replays amber-run/3" \
        in line


def test_a_run_aggregated_the_old_way_is_refused_naming_the_version(run: Path,
                                                                    tmp_path: Path) -> None:
    """amber-run/2 runs scored depth per report (0 without a decisive game) and averaged
    every dimension: this amber cannot reproduce them; it says which one can."""
    copy = _copy(run, tmp_path)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["format"] = "amber-run/2"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(app, ["replay", str(copy)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"amber: error: {copy}: run directory format 'amber-run/2' (aggregated before "
        "amber-run/3): replay it with amber-eval 0.1.0, which wrote it"]


def test_replay_imports_no_model(run: Path) -> None:
    code = ("import sys\nfrom ambereval.engine.runs.replay import replay_run\n"
            f"r = replay_run({str(run)!r})\nassert r['identical'], r\n"
            "bad = [m for m in ('torch', 'llama_cpp', 'sentence_transformers') "
            "if m in sys.modules]\nprint('loaded', bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert "loaded []" in out.stdout


@pytest.mark.slow
def test_replay_with_recorded_retrieval_needs_no_embedder(tmp_path: Path) -> None:
    """A run with the real embedder (hybrid retrieval over long pages) replays from its
    retrieval record alone, in a process that never imports torch or llama.cpp
    (DailyReport's claim verification: test_replay_dailyreport.py)."""
    from ambereval.models import Embedder

    run = _run(tmp_path, PROTOCOLS, Embedder())
    [fname] = json.loads((run / "manifest.json").read_text())["reports"]
    assert (run / "retrieval" / (Path(fname).stem + ".jsonl")).read_text().strip()
    test_replay_imports_no_model(run)
    # a recorded hit changed: the replayed passages (and the ledger key) change
    path = run / "retrieval" / (Path(fname).stem + ".jsonl")
    records = [json.loads(x) for x in path.read_text().splitlines()]
    first = records[0]["hits"][0]
    first["chunk_id"] = first["chunk_id"][:-5] + "99999"
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    result = CliRunner().invoke(app, ["replay", str(run)])
    assert result.exit_code == 3 and "is not a chunk of capture" in result.output


def test_a_run_of_bundles_given_out_of_order_replays(tmp_path: Path) -> None:
    """The manifest keeps its bundles sorted; the run planned them in the order given."""
    from fakejudge import FakeJudgeServer
    from rundirs import dr3_bundles

    from conftest import run_amber

    bundles, tasks = dr3_bundles(tmp_path, systems=3)
    with FakeJudgeServer() as server:
        done = run_amber("evaluate", *map(str, reversed(bundles)), "--task", str(tasks),
                         "--protocol", "dr3", "--judge-url", server.url, "--judge-name",
                         "fake", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert list(manifest["bundles"]) == sorted(map(str, bundles))  # sorted, unlike the run
    replay = run_amber("replay", str(tmp_path / "run"))
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout.startswith("OK: replay identical (3 reports")
    (tmp_path / "run" / "invocation.json").unlink()  # as an older run: the reports' order
    again = run_amber("replay", str(tmp_path / "run"))
    assert again.returncode == 0, again.stderr
