"""DailyReport with claims replays model-free: claim verification's index and every search
on it are recorded in the run and answered from that record; a tampered record is named.
And ``amber replay --recompute-retrieval`` re-runs every recorded retrieval with the real
embedder and lists the searches that rank differently from the record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_replay import _run
from test_replay import test_replay_imports_no_model as assert_replays_without_models
from typer.testing import CliRunner

from ambereval.cli.main import app

pytestmark = pytest.mark.slow  # a real embedder builds the run


@pytest.fixture(scope="module")
def dr_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ambereval.models import Embedder

    return _run(tmp_path_factory.mktemp("dr"), ["dailyreport", "deepeval"], Embedder())


def _record(run: Path) -> tuple[Path, list[dict[str, Any]]]:
    [fname] = json.loads((run / "manifest.json").read_text())["reports"]
    path = run / "retrieval" / (Path(fname).stem + ".jsonl")
    return path, [json.loads(x) for x in path.read_text().splitlines()]


def _write(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in lines))


def _copy(run: Path, tmp: Path, name: str = "copy") -> Path:
    dest = tmp / name
    shutil.copytree(run, dest)
    return dest


def _searches(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Verification searches on one page with at least two hits."""
    return [r for r in lines if r.get("step") == "verification" and r["captures"]
            and len(r["hits"]) >= 2]


def test_dailyreport_with_claims_replays_identical(dr_run: Path) -> None:
    [fname] = json.loads((dr_run / "manifest.json").read_text())["reports"]
    doc = json.loads((dr_run / "reports" / fname).read_text())
    verdicts = doc["judges"]["s"]["dailyreport"]["verdicts"]
    assert verdicts and any(v["evidence"] for v in verdicts)  # claims really verified
    _, lines = _record(dr_run)
    assert _searches(lines), "verification searched the long page"
    result = CliRunner().invoke(app, ["replay", str(dr_run), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["identical"] and out["difference"] is None
    # and in a fresh process: neither torch, llama.cpp nor sentence-transformers loaded
    assert_replays_without_models(dr_run)


def test_tampered_verification_chunk_is_named(dr_run: Path, tmp_path: Path) -> None:
    from ambereval.engine.evidence import load_page
    from ambereval.models import ChunkParams
    from ambereval.snapshots import Bundle

    copy = _copy(dr_run, tmp_path)
    path, lines = _record(copy)
    search = _searches(lines)[0]
    capture = search["captures"][0]
    bundle = next(iter(json.loads((copy / "manifest.json").read_text())["bundles"]))
    with Bundle.open(bundle) as b:
        chunks = load_page(b, capture, "", ChunkParams()).chunks
    chosen = {h["chunk_id"] for h in search["hits"]}
    other = next(c.chunk_id for c in chunks if c.chunk_id not in chosen)
    hit = search["hits"][0]
    original = dict(hit)

    hit["chunk_id"] = other  # another real chunk of the page, the recorded span kept
    _write(path, lines)
    result = CliRunner().invoke(app, ["replay", str(copy)])
    assert result.exit_code == 3
    [line] = result.output.strip().splitlines()
    assert line.startswith("amber: error: report landmarks.md: recorded chunk " + other)
    assert f"spans {original['start']}-{original['end']}" in line

    hit["chunk_id"] = f"{capture}:99999"  # no such chunk
    _write(path, lines)
    result = CliRunner().invoke(app, ["replay", str(copy)])
    assert result.exit_code == 3 and "is not a chunk of the verification index" in \
        result.output

    hit.update(original)
    _write(path, [r for r in lines if r.get("step") != "verification-index"])
    result = CliRunner().invoke(app, ["replay", str(copy)])
    assert result.exit_code == 3
    assert "claim verification's index over" in result.output
    assert "was not recorded by the run" in result.output


def test_changed_verification_scores_are_named(dr_run: Path, tmp_path: Path) -> None:
    """Recorded scores reach the verdicts' provenance: a changed score is a difference in
    the per-report JSON, named by its path."""
    copy = _copy(dr_run, tmp_path)
    path, lines = _record(copy)
    for r in lines:
        if r.get("step") == "verification":
            for h in r["hits"]:
                h["score"] += 0.5  # the same shift for all: no choice changes
    _write(path, lines)
    result = CliRunner().invoke(app, ["replay", str(copy), "--json"])
    assert result.exit_code == 3
    diff = json.loads(result.stdout)["difference"]
    assert diff["file"].startswith("reports/")
    assert diff["path"].startswith("$.judges.s.dailyreport.verdicts[")
    assert diff["path"].endswith(".score")


def test_recompute_retrieval_agrees(dr_run: Path, tmp_path: Path) -> None:
    _, lines = _record(dr_run)
    searches = [r for r in lines if r.get("step") != "verification-index"]
    result = CliRunner().invoke(app, ["replay", str(dr_run), "--recompute-retrieval",
                                      "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["agree"] and out["differences"] == []
    assert out["checked"] == len(searches) and out["tolerance"] == 1e-4
    text = CliRunner().invoke(app, ["replay", str(dr_run), "--recompute-retrieval"])
    assert text.exit_code == 0
    assert text.output.startswith(f"OK: retrieval recomputed, all {len(searches)} recorded")

    copy = _copy(dr_run, tmp_path)  # another embedder than the run's: refused by name
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["embedder"]["sha256"] = "0" * 64
    (copy / "manifest.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(app, ["replay", str(copy), "--recompute-retrieval"])
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert "the run used embedder all-MiniLM-L6-v2 (sha256 000000000000)" in line


def test_recompute_retrieval_lists_what_differs(dr_run: Path, tmp_path: Path) -> None:
    copy = _copy(dr_run, tmp_path)
    path, lines = _record(copy)
    passages = next(r for r in lines if "step" not in r and len(r["hits"]) >= 2)
    passages["hits"].reverse()  # the same chunks, in another order
    reordered = _searches(lines)[0]
    rescored, tiny = [r for r in lines if r.get("step") == "verification"
                      and r is not reordered][:2]
    reordered["hits"][0], reordered["hits"][1] = reordered["hits"][1], reordered["hits"][0]
    rescored["hits"][0]["score"] += 0.01  # beyond the tolerance
    tiny["hits"][0]["score"] += 1e-6  # within it: agrees
    _write(path, lines)
    result = CliRunner().invoke(app, ["replay", str(copy), "--recompute-retrieval", "--json"])
    assert result.exit_code == 3
    out = json.loads(result.stdout)
    assert not out["agree"]
    found = {(d["step"], d.get("capture_id") or tuple(d["captures"]), d["query"], d["kind"])
             for d in out["differences"]}
    assert found == {
        ("passages", passages["capture_id"], passages["query"], "order"),
        ("verification", tuple(reordered["captures"]), reordered["query"], "order"),
        ("verification", tuple(rescored["captures"]), rescored["query"], "score"),
    }
    order = next(d for d in out["differences"] if d["step"] == "passages")
    assert order["recorded"] == [h["chunk_id"] for h in passages["hits"]]
    assert order["recomputed"] == list(reversed(order["recorded"]))
    text = CliRunner().invoke(app, ["replay", str(copy), "--recompute-retrieval"])
    assert text.exit_code == 3
    assert "amber: 3 of " in text.output and "retrieval differs (order)" in text.output


def test_real_judge_dailyreport_run_replays_identical(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The default llama.cpp judge (label scoring available, so verification's decision
    method is chosen as live) and the real embedder: `amber evaluate` then `amber replay`
    in fresh processes, identical. Then the calibration table changes (a later amber
    refits or drops the judge's offsets): the replay still decides as the run recorded."""
    from replay_fixtures import landmarks_bundle

    from conftest import run_amber

    bundle, tasks = landmarks_bundle(tmp_path)
    out = tmp_path / "run"
    done = run_amber("evaluate", str(bundle), "--task", str(tasks), "--protocol",
                     "dailyreport", "--out", str(out), "--judge-ctx", "2048", "--threads", "1")
    assert done.returncode == 0, done.stderr
    [fname] = json.loads((out / "manifest.json").read_text())["reports"]
    doc = json.loads((out / "reports" / fname).read_text())
    assert doc["judges"]["default"]["dailyreport"]["verdicts"]  # claims were verified
    _, lines = _record(out)
    assert any(r.get("step") == "verification" for r in lines)
    replay = run_amber("replay", str(out), "--json")
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["identical"]
    decision = doc["judges"]["default"]["dailyreport"]["verification"]["decision"]
    assert decision["method"] == "logprobs" and decision["bias"]

    from ambereval.engine import calibration

    for table in ({}, {sha: {"true": 0.0, "false": 0.0} for sha in calibration.CALIBRATION}):
        monkeypatch.setattr(calibration, "CALIBRATION", table)
        result = CliRunner().invoke(app, ["replay", str(out), "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["identical"]


def test_recompute_retrieval_refuses_an_index_it_cannot_rebuild(dr_run: Path,
                                                                 tmp_path: Path) -> None:
    """A record naming an index type this amber does not know (a newer amber's, or an
    edited record) is refused in one line, not rebuilt as something else."""
    copy = _copy(dr_run, tmp_path)
    path, lines = _record(copy)
    named = [r for r in lines if (r.get("retriever") or {}).get("dense")]
    assert named
    for r in named:
        r["retriever"]["dense"]["params"]["type"] = "IndexLSH"
    _write(path, lines)
    result = CliRunner().invoke(app, ["replay", str(copy), "--recompute-retrieval"])
    assert result.exit_code == 2, result.output  # bad input, as any unreadable record
    [line] = result.output.strip().splitlines()
    assert "cannot rebuild (unknown index type 'IndexLSH')" in line
    assert "Traceback" not in result.output
