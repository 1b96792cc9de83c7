"""Judges by name: the catalog, registrations (amber models add), --judge resolution, the
model directory, judge cards in amber models list, and the errors a user meets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from modelfakes import sha256, tiny_gguf

from ambereval.errors import ConfigError, ModelError
from ambereval.models import default_judge_path, open_judge
from ambereval.models.catalog import JUDGES, judge_entry
from ambereval.models.registry import (
    add_model,
    amber_home,
    judge_statuses,
    load_registrations,
    model_dir,
    resolve_judge,
)

from conftest import run_amber


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AMBER_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_model_directory_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert model_dir() == tmp_path / "home" / "models"
    monkeypatch.delenv("AMBER_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert amber_home() == tmp_path / "xdg" / "amber"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert amber_home() == Path.home() / ".local" / "share" / "amber"


def test_catalog_is_complete_and_honest() -> None:
    names = [j.name for j in JUDGES]
    assert len(names) == len(set(names))
    for required in ("smollm2-135m", "qwen2.5-coder-1.5b", "qwen2.5-7b", "qwen2.5-14b",
                     "qwen2.5-32b", "llama-3.1-8b", "gemma-2-9b", "gemma-3-12b"):
        entry = judge_entry(required)
        assert entry is not None and entry.licence and entry.chat_template
        assert entry.recommended_ctx <= entry.max_ctx
        assert entry.file.endswith(".gguf")
    # only what could be checked here is pinned
    assert [j.name for j in JUDGES if j.sha256] == ["qwen2.5-coder-1.5b"]
    assert all(j.repo for j in JUDGES if j.source == "hf")


def test_unknown_and_absent_judges(home: Path) -> None:
    with pytest.raises(ConfigError, match="unknown judge 'qwen2.5-7'") as err:
        resolve_judge("qwen2.5-7")
    assert "did you mean 'qwen2.5-7b'" in (err.value.hint or "")
    with pytest.raises(ModelError, match="'llama-3.1-8b' is not installed") as absent:
        resolve_judge("llama-3.1-8b")
    assert "amber models fetch llama-3.1-8b" in (absent.value.hint or "")
    assert resolve_judge("smollm2-135m") == default_judge_path()


def test_add_registers_and_every_use_checks_the_digest(tmp_path: Path, home: Path) -> None:
    model = tmp_path / "Mine.gguf"
    model.write_bytes(tiny_gguf("mine"))
    reg = add_model(model)
    assert (reg.name, reg.trust, reg.sha256) == ("mine", "tofu", sha256(model.read_bytes()))
    assert resolve_judge("mine") == model.resolve()
    model.write_bytes(tiny_gguf("replaced"))
    with pytest.raises(ModelError, match="not the registered .*corrupt or replaced") as err:
        resolve_judge("mine")
    assert "amber models add PATH --name mine" in (err.value.hint or "")
    model.unlink()
    with pytest.raises(ModelError, match="registered file .* is missing"):
        resolve_judge("mine")


def test_add_refuses_bad_files_and_pinned_mismatch(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ModelError, match="not a GGUF model"):
        add_model(junk)
    with pytest.raises(ModelError, match="model file not found"):
        add_model(tmp_path / "absent.gguf")
    fake = tmp_path / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    fake.write_bytes(tiny_gguf("impostor"))
    with pytest.raises(ModelError, match="is not the pinned cc324af0"):
        add_model(fake)  # the catalog's file name: its pin applies
    with pytest.raises(ModelError, match="built-in default"):
        add_model(fake, name="smollm2-135m")
    assert load_registrations() == {}


def test_catalog_file_placed_by_hand_is_found(home: Path) -> None:
    entry = judge_entry("gemma-2-9b")
    assert entry is not None
    (home / "models").mkdir(parents=True)
    (home / "models" / entry.file).write_bytes(tiny_gguf("gemma"))
    assert resolve_judge("gemma-2-9b") == home / "models" / entry.file
    assert load_registrations()["gemma-2-9b"].trust == "tofu"


def test_list_reads_judge_cards(tmp_path: Path, home: Path) -> None:
    model = tmp_path / "carded.gguf"
    model.write_bytes(tiny_gguf("carded"))
    reg = add_model(model, name="carded")
    (home / "cards").mkdir(parents=True)
    (home / "cards" / f"{reg.sha256}.json").write_text(json.dumps(
        {"judge": {"sha256": reg.sha256}, "sets": {"wice": {"n": 40, "kappa": 0.3}},
         "mean_kappa": 0.3}))
    rows = {r["name"]: r for r in judge_statuses()}
    assert rows["carded"]["mean_kappa"] == 0.3 and rows["carded"]["present"]
    assert rows["carded"]["quality"] == {"wice": {"n": 40, "kappa": 0.3}}
    assert rows["qwen2.5-14b"]["present"] is False and rows["qwen2.5-14b"]["mean_kappa"] is None
    assert rows["smollm2-135m"]["present"] and rows["smollm2-135m"]["trust"] == "wheel"
    assert [r["name"] for r in judge_statuses()][:len(JUDGES)] == [j.name for j in JUDGES]


def test_open_judge_by_name() -> None:
    judge = open_judge(judge="smollm2-135m", n_ctx=512)
    assert judge.recipe["model_path"] == str(default_judge_path())
    with pytest.raises(ConfigError, match="one of --judge, --judge-model and --judge-url"):
        open_judge(model_path=default_judge_path(), judge="smollm2-135m")


def test_cli_add_list_and_judge_errors(tmp_path: Path, home: Path) -> None:
    env = {"AMBER_HOME": str(home)}
    model = tmp_path / "hand.gguf"
    model.write_bytes(tiny_gguf("hand"))
    added = run_amber("models", "add", str(model), "--name", "hand", "--json", env=env)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["trust"] == "tofu"
    listed = json.loads(run_amber("models", "list", "--json", env=env).stdout)
    assert {"hand", "qwen2.5-coder-1.5b"} <= {j["name"] for j in listed["judges"]}
    assert listed["embedders"][0]["name"] == "all-MiniLM-L6-v2"
    data = tmp_path / "pairs.jsonl"
    data.write_text(json.dumps({"id": "p1", "claim": "a", "evidence": "a",
                                "label": "supported"}) + "\n")
    unknown = run_amber("judge-bench", str(data), "--judge", "qwen-7b", env=env)
    assert unknown.returncode == 2
    assert "unknown judge 'qwen-7b'" in unknown.stderr and "did you mean" in unknown.stderr
    absent = run_amber("judge-bench", str(data), "--judge", "qwen2.5-14b", env=env)
    assert absent.returncode == 1 and "amber models fetch qwen2.5-14b" in absent.stderr
    both = run_amber("judge-bench", str(data), "--judge", "hand", "--judge-model",
                     str(model), env=env)
    assert both.returncode == 2 and "one of --judge" in both.stderr
    assert "Traceback" not in unknown.stderr + absent.stderr + both.stderr
    ensemble = run_amber("evaluate", str(tmp_path / "bundle"), "--task", str(data), "--out",
                         str(tmp_path / "run"), "--judge", "hand", "--judge", "gemma-3-27b",
                         env=env)
    assert ensemble.returncode == 2 and "did you mean 'gemma-3-12b'" in ensemble.stderr
    report = tmp_path / "report.md"
    report.write_text("# R\n\nParis is in France [1].\n\n## References\n[1] https://a.example/\n")
    snap = run_amber("snapshot", "report", str(report), "--out", str(tmp_path / "b"),
                     "--judge", "gemma-2-9b", env=env)
    assert snap.returncode == 1 and "amber models fetch gemma-2-9b" in snap.stderr
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())


@pytest.mark.slow
def test_judge_bench_runs_a_registered_judge_by_name(tmp_path: Path, home: Path) -> None:
    """A real model through --judge: the default GGUF registered under another name."""
    env = {"AMBER_HOME": str(home)}
    assert run_amber("models", "add", str(default_judge_path()), "--name", "smol",
                     env=env).returncode == 0
    data = tmp_path / "pairs.jsonl"
    data.write_text(json.dumps({"id": "p1", "claim": "Paris is in France.",
                                "evidence": "Paris is the capital of France.",
                                "label": "supported"}) + "\n")
    proc = run_amber("judge-bench", str(data), "--judge", "smol", "--judge-ctx", "1024",
                     "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["n"] == 1
    assert sha256(default_judge_path().read_bytes()) in json.dumps(result)


def test_cli_verify_rehashes_registered_judges(tmp_path: Path, home: Path) -> None:
    env = {"AMBER_HOME": str(home)}
    model = tmp_path / "v.gguf"
    model.write_bytes(tiny_gguf("v"))
    assert run_amber("models", "add", str(model), "--name", "v", env=env).returncode == 0
    ok = run_amber("models", "verify", "--json", env=env)
    assert ok.returncode == 0 and json.loads(ok.stdout)[0]["ok"] is True
    model.write_bytes(tiny_gguf("tampered"))
    bad = run_amber("models", "verify", "v", env=env)
    assert bad.returncode == 3 and "FAILED: judge 'v'" in bad.stdout
    absent = run_amber("models", "verify", "qwen2.5-7b", env=env)
    assert absent.returncode == 1 and "amber models fetch qwen2.5-7b" in absent.stderr
