"""amber models fetch against a loopback fake of the Hugging Face Hub's file endpoints
(real HTTP on 127.0.0.1, reached by huggingface_hub through HF_ENDPOINT)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from modelfakes import FakeHub, serving, sha256, tiny_gguf

from ambereval.errors import ModelError
from ambereval.models.hub import fetch_model
from ambereval.models.registry import load_registrations, resolve_judge

from conftest import run_amber

REPO, FILE = "someone/Tiny-GGUF", "tiny-q4_k_m.gguf"
MODEL = tiny_gguf("hub", padding=200_000)


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with serving(FakeHub()) as fake:
        fake.add(REPO, FILE, MODEL)
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        monkeypatch.setenv("AMBER_HOME", str(tmp_path / "home"))
        for var in ("HF_TOKEN", "HF_HUB_OFFLINE"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no stored login
        yield fake


def root(tmp_path: Path) -> Path:
    return tmp_path / "home" / "models"


def test_fetch_registers_trust_on_first_use(hub: FakeHub, tmp_path: Path) -> None:
    result = fetch_model(REPO, FILE)
    assert (result.action, result.trust, result.resumed_from) == ("fetched", "tofu", 0)
    assert result.name == "tiny-q4_k_m" and result.sha256 == sha256(MODEL)
    assert (root(tmp_path) / FILE).read_bytes() == MODEL
    assert sorted(p.name for p in root(tmp_path).iterdir() if not p.name.startswith(".")) == \
        sorted([FILE, "registry.json"])
    reg = load_registrations(root(tmp_path))["tiny-q4_k_m"]
    assert (reg.source, reg.trust) == (f"hf:{REPO}/{FILE}", "tofu")
    assert resolve_judge("tiny-q4_k_m") == root(tmp_path) / FILE
    gets = len(hub.gets())
    assert fetch_model(REPO, FILE).action == "verified"
    assert len(hub.gets()) == gets  # verified locally, nothing downloaded


def test_interrupted_fetch_resumes_with_a_range_request(hub: FakeHub, tmp_path: Path) -> None:
    root(tmp_path).mkdir(parents=True)
    partial = root(tmp_path) / f"{FILE}.incomplete"
    partial.write_bytes(MODEL[:70_000])  # what an interrupted run left behind
    (root(tmp_path) / f"{FILE}.incomplete.json").write_text(json.dumps(
        {"etag": sha256(MODEL), "size": len(MODEL)}))
    result = fetch_model(REPO, FILE, name="tiny")
    assert result.resumed_from == 70_000 and result.sha256 == sha256(MODEL)
    assert [g["range"] for g in hub.gets()] == ["bytes=70000-"]
    assert not partial.exists()


def test_changed_upstream_file_restarts_from_zero(hub: FakeHub, tmp_path: Path) -> None:
    root(tmp_path).mkdir(parents=True)
    (root(tmp_path) / f"{FILE}.incomplete").write_bytes(b"x" * 5000)
    (root(tmp_path) / f"{FILE}.incomplete.json").write_text(json.dumps({"etag": "0" * 64}))
    result = fetch_model(REPO, FILE)
    assert result.resumed_from == 0 and [g["range"] for g in hub.gets()] == [None]
    assert (root(tmp_path) / FILE).read_bytes() == MODEL


def test_corrupt_partial_is_caught_deleted_and_refetched(hub: FakeHub, tmp_path: Path) -> None:
    root(tmp_path).mkdir(parents=True)
    (root(tmp_path) / f"{FILE}.incomplete").write_bytes(b"\0" * 70_000)  # garbage, same etag
    (root(tmp_path) / f"{FILE}.incomplete.json").write_text(json.dumps({"etag": sha256(MODEL)}))
    with pytest.raises(ModelError, match="is not the Hub-announced"):
        fetch_model(REPO, FILE)
    assert not (root(tmp_path) / FILE).exists() and load_registrations(root(tmp_path)) == {}
    assert fetch_model(REPO, FILE).sha256 == sha256(MODEL)


def test_catalog_name_with_a_pin_that_does_not_match(hub: FakeHub, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from ambereval.models import catalog

    entry = catalog.judge_entry("qwen2.5-7b")
    assert entry is not None and entry.sha256 is None  # unpinned: trust on first use
    hub.add(entry.repo or "", entry.file, MODEL)
    assert fetch_model("qwen2.5-7b").trust == "tofu"
    assert resolve_judge("qwen2.5-7b") == root(tmp_path) / entry.file

    pinned = dataclasses.replace(entry, name="pinned-7b", sha256="f" * 64, file="other.gguf")
    monkeypatch.setattr(catalog, "JUDGES", (*catalog.JUDGES, pinned))
    hub.add(entry.repo or "", "other.gguf", MODEL)
    with pytest.raises(ModelError, match="is not the pinned"):
        fetch_model("pinned-7b")
    assert "pinned-7b" not in load_registrations(root(tmp_path))


def test_token_is_sent_and_required(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.token = "hf_test_token"
    with pytest.raises(ModelError, match="gated repository"):
        fetch_model(REPO, FILE)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    assert fetch_model(REPO, FILE).action == "fetched"
    assert all(r["auth"] == "Bearer hf_test_token" for r in hub.requests[-2:])


def test_missing_file_and_offline(hub: FakeHub, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelError, match="no such file in the repository"):
        fetch_model(REPO, "nope.gguf")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = len(hub.requests)
    with pytest.raises(ModelError, match="HF_HUB_OFFLINE is set .* hint|HF_HUB_OFFLINE"):
        fetch_model(REPO, FILE)
    root(tmp_path).mkdir(parents=True, exist_ok=True)
    (root(tmp_path) / FILE).write_bytes(MODEL)  # copied in by hand
    assert fetch_model(REPO, FILE).action == "registered"
    assert len(hub.requests) == before  # offline means no request at all


def test_cli_fetch_then_list(hub: FakeHub, tmp_path: Path) -> None:
    env = {"HF_ENDPOINT": hub.url, "AMBER_HOME": str(tmp_path / "home"),
           "HF_HOME": str(tmp_path / "hf")}
    proc = run_amber("models", "fetch", REPO, FILE, "--name", "tiny", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["sha256"] == sha256(MODEL)
    listed = run_amber("models", "list", "--json", env=env)
    row = next(j for j in json.loads(listed.stdout)["judges"] if j["name"] == "tiny")
    assert (row["present"], row["trust"], row["sha256"]) == (True, "tofu", sha256(MODEL))
    bad = run_amber("models", "fetch", REPO, env=env)
    assert bad.returncode == 2 and "give the GGUF file too" in bad.stderr
    unknown = run_amber("models", "fetch", "lama-3.1-8b", env=env)
    assert unknown.returncode == 2 and "did you mean 'llama-3.1-8b'" in unknown.stderr


def test_one_fetch_of_a_file_at_a_time(hub: FakeHub, tmp_path: Path) -> None:
    import fcntl

    root(tmp_path).mkdir(parents=True)
    with open(root(tmp_path) / f".fetch-{FILE}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(ModelError, match="another fetch of .* is running"):
            fetch_model(REPO, FILE)
    assert hub.gets() == []
    assert fetch_model(REPO, FILE).action == "fetched"


def test_fetch_after_huggingface_hub_froze_offline_mode(hub: FakeHub, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub freezes HF_HUB_OFFLINE at import; a process that loaded the embedder
    first (it sets the variable for its own offline load) must still fetch when the
    environment no longer says offline."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert fetch_model(REPO, FILE).action == "fetched"
    assert constants.HF_HUB_OFFLINE is True  # restored afterwards
