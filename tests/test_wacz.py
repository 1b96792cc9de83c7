"""Packing to .wacz (validated by py-wacz) and refusing unsafe archives on unpack."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ambereval.snapshots import UnsafeArchiveError, capture_urls, unpack_bundle, verify_bundle

from conftest import fast_options, run_amber
from fakeweb import FakeWeb


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wacz") / "bundle"
    with FakeWeb() as web:
        capture_urls(out, [web.url("/pages/eiffel.html"), web.url("/pages/tea.html")],
                     fast_options(web, reader="direct"))
    return out


def test_pack_is_valid_wacz_and_round_trips(bundle: Path, tmp_path: Path) -> None:
    wacz = tmp_path / "b.wacz"
    done = run_amber("bundle", "pack", str(bundle), "--out", str(wacz), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"wacz": str(wacz), "bytes": wacz.stat().st_size,
                                       "sha256": hashlib.sha256(wacz.read_bytes()).hexdigest()}
    wacz_cli = shutil.which("wacz", path=os.path.dirname(sys.executable))
    assert wacz_cli, "py-wacz is installed with the dev extras"
    check = subprocess.run([wacz_cli, "validate", "-f", str(wacz)], capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "Validation succeeded" in check.stdout
    with zipfile.ZipFile(wacz) as zf:
        kinds = {i.filename: i.compress_type for i in zf.infolist()}
    assert all(t == zipfile.ZIP_STORED for n, t in kinds.items() if n.endswith(".warc.gz"))
    assert "datapackage.json" in kinds and "pages/pages.jsonl" in kinds
    out = tmp_path / "unpacked"
    done = run_amber("bundle", "unpack", str(wacz), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"bundle": str(out), "wacz": str(wacz)}
    assert verify_bundle(out).ok


@pytest.mark.parametrize("name", ["../evil.txt", "a/../../evil.txt", "/etc/evil", "C:\\evil"])
def test_unpack_refuses_escaping_paths(tmp_path: Path, name: str) -> None:
    bad = tmp_path / "bad.wacz"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("datapackage.json", "{}")
        zf.writestr(name, "pwned")
    target = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError):
        unpack_bundle(bad, target)
    assert not (tmp_path / "evil.txt").exists()
    assert not target.exists() or not any(target.iterdir())  # nothing written at all
    done = run_amber("bundle", "unpack", str(bad), "--out", str(target))
    assert done.returncode == 1 and "refusing to unpack" in done.stderr
    assert "Traceback" not in done.stderr


def test_unpack_refuses_symlinks(tmp_path: Path) -> None:
    bad = tmp_path / "link.wacz"
    with zipfile.ZipFile(bad, "w") as zf:
        info = zipfile.ZipInfo("archive/link")
        info.external_attr = (0o120777 << 16)
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(UnsafeArchiveError, match="symbolic link"):
        unpack_bundle(bad, tmp_path / "out")


def test_unpack_not_a_zip(tmp_path: Path) -> None:
    junk = tmp_path / "junk.wacz"
    junk.write_bytes(b"not a zip")
    done = run_amber("bundle", "unpack", str(junk), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "not a zip" in done.stderr
