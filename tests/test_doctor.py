from __future__ import annotations

import json

import pytest

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


def test_doctor_advises_sleeping_threads_on_busy_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """A judge sharing its cores loses most of its time to OpenMP threads spinning; the
    doctor says how to stop it when the load says the cores are shared."""
    from ambereval.models import doctor

    monkeypatch.setattr(doctor.os, "cpu_count", lambda: 4)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(doctor.os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    busy = doctor.cpu_sharing()
    assert busy["cores"] == 4 and "OMP_WAIT_POLICY=PASSIVE" in busy["advice"]
    monkeypatch.setattr(doctor.os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    assert doctor.cpu_sharing()["advice"] is None  # a quiet machine: spinning is fastest
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.setattr(doctor.os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    chosen = doctor.cpu_sharing()
    assert chosen["advice"] is None and chosen["omp_wait_policy"] == "PASSIVE"
