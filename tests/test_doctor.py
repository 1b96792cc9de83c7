from __future__ import annotations

import json

from ambereval.models.registry import file_sha256

from conftest import run_amber


def test_models_list_and_doctor() -> None:
    listed = json.loads(run_amber("models", "list", "--json").stdout)
    judge = next(j for j in listed["judges"] if j["name"] == "smollm2-135m")
    assert listed["embedders"][0]["present"]
    assert judge["present"] and judge["path"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert judge["sha256"] == file_sha256(judge["path"]) and judge["bytes"] > 50_000_000
    done = run_amber("doctor", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["offline_ready"] is True
    assert report["llama_cpp"]["portable"] is True
    assert "AVX2" in report["llama_cpp"]["features_in_use"]
    assert report["torch"]["cpu_build"] is True
    assert run_amber("doctor").stdout.count("offline ready: True") == 1
