"""Finishing a bundle never leaves it unverifiable: a failure is injected into each step.

A second capture adds a page; its finish fails at one step. The error is one line naming
the step, the previous consistent files stay, and the next run repairs the bundle.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ambereval.errors import BundleError
from ambereval.snapshots import (
    Bundle,
    capture_urls,
    finish_bundle,
    pack_bundle,
    verify_bundle,
)
from ambereval.snapshots.bundle import manifest
from ambereval.snapshots.bundle.store import UNFINISHED, unfinished_state

from conftest import fast_options, no_traceback, run_amber
from fakeweb import FakeWeb


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("finish") / "bundle"
    with FakeWeb() as web:
        capture_urls(out, [web.url("/pages/eiffel.html")], fast_options(web, reader="direct"))
    assert verify_bundle(out).ok and unfinished_state(out) is None
    return out


def copy(src: Path, tmp: Path) -> Path:
    dst = tmp / "bundle"
    shutil.copytree(src, dst)
    return dst


def snapshot(root: Path, *names: str) -> dict[str, bytes]:
    return {n: (root / n).read_bytes() for n in names}


def fail_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any, **k: Any) -> None:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(manifest, "write_pages", boom)


def fail_cdx(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the issue saw: cdxj-indexer raising inside its own code."""
    from cdxj_indexer.main import CDXJIndexer

    def boom(self: Any, *a: Any, **k: Any) -> None:
        raise AttributeError("'NoneType' object has no attribute 'get_header'")
    monkeypatch.setattr(CDXJIndexer, "process_all", boom)


def fail_datapackage_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(path: Path, chunk: int = 0) -> Any:
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(manifest, "sha256_file", boom)


def fail_digest_rename(monkeypatch: pytest.MonkeyPatch) -> None:
    """The datapackage step fails between its two renames: the first is rolled back."""
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if str(dst).endswith(manifest.DIGEST):
            raise OSError(28, "No space left on device")
        real(src, dst)
    monkeypatch.setattr(os, "replace", replace)


STEPS: list[tuple[str, Callable[[pytest.MonkeyPatch], None], bool]] = [
    ("pages", fail_pages, True),
    ("cdx index", fail_cdx, True),
    ("datapackage", fail_datapackage_hashing, False),
    ("datapackage", fail_digest_rename, False),
]


@pytest.mark.parametrize("step, inject, verifies", STEPS,
                         ids=["pages", "cdx", "datapackage-hash", "datapackage-rename"])
def test_failed_step_keeps_previous_state_and_next_run_repairs(
        first: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str,
        inject: Callable[[pytest.MonkeyPatch], None], verifies: bool) -> None:
    root = copy(first, tmp_path)
    derived = ("pages/pages.jsonl", "indexes/index.cdx.gz", "indexes/index.idx",
               "datapackage.json", "datapackage-digest.json")
    before = snapshot(root, *derived)
    with FakeWeb() as web:
        new = web.url("/pages/tea.html")
        with monkeypatch.context() as m:
            inject(m)
            with pytest.raises(BundleError) as err:
                capture_urls(root, [new], fast_options(web, reader="direct"))
        message = str(err.value)
        assert "\n" not in message
        assert f"finishing the bundle failed at step '{step}'" in message
        assert "amber bundle finish" in (err.value.hint or "")
        # the capture itself is kept
        with Bundle.open(root) as b:
            assert b.index.one("SELECT state FROM captures WHERE url = ?", [new])["state"] == "ok"
        state = unfinished_state(root)
        assert state is not None and state["step"] == step
        after = snapshot(root, *derived)
        report = verify_bundle(root)
        if verifies:
            # the failed file is the previous one, and the manifest describes the bytes
            failed_file = "pages/pages.jsonl" if step == "pages" else "indexes/index.cdx.gz"
            assert after[failed_file] == before[failed_file]
            assert report.ok, report.mismatch
            assert any(step in n for n in report.notes)
            with pytest.raises(BundleError, match="unfinished"):
                pack_bundle(root, tmp_path / "x.wacz")
        else:
            # the manifest and its digest stay the previous, consistent pair
            assert after["datapackage.json"] == before["datapackage.json"]
            assert after["datapackage-digest.json"] == before["datapackage-digest.json"]
            assert not report.ok
            assert "unfinished" in report.mismatch.problem
            assert f"step '{step}'" in report.mismatch.problem
        # the next run repairs it (nothing left to fetch, the finish runs again)
        hits = len(web.seen)
        again = capture_urls(root, [new], fast_options(web, reader="direct"))
        assert again.skipped == 1 and len(web.seen) == hits
    assert unfinished_state(root) is None and not (root / UNFINISHED).exists()
    report = verify_bundle(root)
    assert report.ok and not report.notes
    assert b"tea.html" in (root / "pages" / "pages.jsonl").read_bytes()
    assert not list(root.rglob(".*.tmp"))


def test_interrupted_capture_is_reported_as_unfinished_and_finish_repairs(
        first: Path, tmp_path: Path) -> None:
    root = copy(first, tmp_path)
    with Bundle.create(root) as b:  # a writer that dies before finishing
        b.store_report("r.md", "# A report\n")
    report = verify_bundle(root)
    assert not report.ok
    assert "unfinished" in report.mismatch.problem and "interrupted" in report.mismatch.problem
    done = run_amber("bundle", "verify", str(root))
    assert done.returncode == 3 and "amber bundle finish" in done.stderr
    assert "Traceback" not in done.stderr
    fixed = run_amber("bundle", "finish", str(root), "--json")
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout) == {"bundle": str(root), "repaired": [], "resealed": True,
                                         "signature_dropped": False}
    assert verify_bundle(root).ok and unfinished_state(root) is None


def test_finish_refuses_a_directory_that_is_not_a_bundle(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    with pytest.raises(BundleError, match="not an Amber bundle"):
        finish_bundle(tmp_path / "x")
    done = run_amber("bundle", "finish", str(tmp_path / "x"))
    assert done.returncode == 1 and done.stderr.startswith("amber: error:")


def test_finish_cuts_a_torn_tail_and_says_so(first: Path, tmp_path: Path) -> None:
    root = copy(first, tmp_path)
    warc = next((root / "archive").glob("*.warc.gz"))
    good = warc.stat().st_size
    with open(warc, "ab") as fh:  # half a gzip member, as a crash mid-write leaves it
        fh.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03partial-record")
    assert not verify_bundle(root).ok
    fixed = run_amber("bundle", "finish", str(root), "--json")
    assert fixed.returncode == 0, fixed.stderr
    kept = Path(".amber-repaired") / f"{warc.name}.tail-{good}"
    assert json.loads(fixed.stdout) == {
        "bundle": str(root),
        "repaired": [f"{warc.name}: cut a torn tail of 24 bytes at offset {good}, "
                     f"kept in {kept}"],
        "resealed": False,  # the tail cut, the sealed files match their manifest again
        "signature_dropped": False}
    assert warc.stat().st_size == good and verify_bundle(root).ok
    assert (root / kept).read_bytes().endswith(b"partial-record")  # nothing is lost
    text = run_amber("bundle", "finish", str(root))
    assert text.returncode == 0 and "repaired" not in text.stdout  # nothing left to cut
    assert "was already finished; left as it is" in text.stdout
    packed = run_amber("bundle", "pack", str(root), "--out", str(tmp_path / "b.wacz"))
    assert packed.returncode == 0, packed.stderr
    with zipfile.ZipFile(tmp_path / "b.wacz") as zf:  # what was cut never travels
        assert not [n for n in zf.namelist() if ".amber-repaired" in n]


def test_finish_keeps_a_never_indexed_warc_aside(first: Path, tmp_path: Path) -> None:
    root = copy(first, tmp_path)
    orphan = root / "archive" / "amber-20990101000000-00009.warc.gz"
    orphan.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03half")
    done = run_amber("bundle", "finish", str(root), "--json")
    assert done.returncode == 0, done.stderr
    [note] = json.loads(done.stdout)["repaired"]
    assert note.startswith(f"{orphan.name}: never indexed (")
    assert note.endswith(f"moved to .amber-repaired/{orphan.name}")
    assert not orphan.exists()
    assert (root / ".amber-repaired" / orphan.name).read_bytes().endswith(b"half")
    assert verify_bundle(root).ok


def test_finish_refuses_a_warc_the_bundle_did_not_write(first: Path, tmp_path: Path) -> None:
    root = copy(first, tmp_path)
    stranger = root / "archive" / "example.warc.gz"
    stranger.write_bytes(next((root / "archive").glob("amber-*.warc.gz")).read_bytes())
    before = (root / "datapackage.json").read_bytes()
    done = run_amber("bundle", "finish", str(root))
    assert done.returncode == 1 and no_traceback(done.stderr)
    assert "archive/example.warc.gz was not written by this bundle" in done.stderr
    assert stranger.exists() and (root / "datapackage.json").read_bytes() == before


def test_finish_never_reseals_a_bundle_edited_after_it_was_finished(first: Path,
                                                                    tmp_path: Path) -> None:
    import sqlite3

    root = copy(first, tmp_path)
    db = sqlite3.connect(root / "evidence" / "amber.sqlite")
    db.execute("UPDATE captures SET error = 'edited' WHERE 1")
    db.commit()
    db.close()
    done = run_amber("bundle", "finish", str(root))
    assert done.returncode == 3 and no_traceback(done.stderr)
    assert "changed after it was finished (evidence/amber.sqlite" in done.stderr
    assert unfinished_state(root) is None  # no marker that a second finish could use
    assert run_amber("bundle", "finish", str(root)).returncode == 3
    assert not verify_bundle(root).ok
    forced = run_amber("bundle", "finish", str(root), "--force")
    assert forced.returncode == 0, forced.stderr
    assert verify_bundle(root).ok


def test_finish_names_a_bundle_sealed_without_a_digest(first: Path, tmp_path: Path) -> None:
    root = copy(first, tmp_path)
    (root / "datapackage-digest.json").unlink()  # as the first amber sealed bundles
    done = run_amber("bundle", "finish", str(root))
    assert done.returncode == 3 and no_traceback(done.stderr)
    assert "has no datapackage-digest.json (sealed by an older amber)" in done.stderr
    assert run_amber("bundle", "finish", str(root), "--force").returncode == 0
    assert verify_bundle(root).ok


def test_a_forced_finish_never_seals_a_damaged_warc(first: Path, tmp_path: Path) -> None:
    root = copy(first, tmp_path)
    warc = next((root / "archive").glob("amber-*.warc.gz"))
    data = bytearray(warc.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside a record
    warc.write_bytes(bytes(data))
    before = (root / "datapackage.json").read_bytes()
    done = run_amber("bundle", "finish", str(root), "--force")
    assert done.returncode == 3 and no_traceback(done.stderr)
    assert f"not re-sealed: archive/{warc.name}" in done.stderr
    assert (root / "datapackage.json").read_bytes() == before  # the manifest still says
    assert unfinished_state(root) is None                      # what the bytes were
