"""Every byte matters: flip bytes of every finished file and require `bundle verify` to
reject each change with a named error and no traceback.

The bundle is built by the test (two pages, direct reader) and signed, so the flips reach
the signature too. Files up to SMALL bytes are flipped at every position; larger ones (the
WARC, the SQLite index) at a seeded sample. Each flip inverts the byte (XOR 0xFF); the
two JSON manifests are also flipped one bit at a time (XOR 0x01), the subtler edit.
The counts are printed (run with -s) and quoted in the README's reliability section.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import pytest

from ambereval.errors import AmberError
from ambereval.snapshots import capture_urls, generate_key, sign_bundle, verify_bundle
from ambereval.snapshots.bundle import manifest

from conftest import fast_options, run_amber
from fakeweb import FakeWeb

SMALL = 8 * 1024
SAMPLE = 2000  # positions per larger file (the SQLite index)
SEED = 20261123


@pytest.fixture(scope="module")
def signed_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("flip")
    out = base / "bundle"
    with FakeWeb() as web:
        capture_urls(out, [web.url("/pages/eiffel.html"), web.url("/pages/louvre.html")],
                     fast_options(web, reader="direct"))
    key, _, _ = generate_key(base / "k.key")
    sign_bundle(out, key)
    assert verify_bundle(out).ok
    return out


def finished_files(root: Path) -> list[Path]:
    files = [root / manifest.MANIFEST, root / manifest.DIGEST, *manifest.bundle_files(root)]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def positions(size: int, rng: random.Random) -> list[int]:
    if size <= SMALL:
        return list(range(size))
    return sorted(rng.sample(range(size), SAMPLE))


def rejected(root: Path) -> str | None:
    """The named problem verify reports, or None when it wrongly accepts the bundle."""
    try:
        report = verify_bundle(root)
    except AmberError as exc:  # a domain error is a named rejection too
        return f"{type(exc).__name__}: {exc}"
    if report.ok:
        return None
    assert report.mismatch is not None and report.mismatch.problem
    return f"{report.mismatch.file}: {report.mismatch.problem}"


def flip_all(root: Path, path: Path, where: list[int], mask: int) -> tuple[int, list[int]]:
    original = path.read_bytes()
    data = bytearray(original)
    missed: list[int] = []
    try:
        for i in where:
            data[i] ^= mask
            path.write_bytes(data)
            if rejected(root) is None:
                missed.append(i)
            data[i] ^= mask
    finally:
        path.write_bytes(original)
    return len(where), missed


def test_every_flipped_byte_is_rejected(signed_bundle: Path, tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    shutil.copytree(signed_bundle, root)
    rng = random.Random(SEED)
    total = 0
    lines = []
    for path in finished_files(root):
        size = path.stat().st_size
        where = positions(size, rng)
        count, missed = flip_all(root, path, where, 0xFF)
        rel = path.relative_to(root).as_posix()
        assert not missed, f"{rel}: flips at {missed[:10]} were not detected"
        total += count
        lines.append(f"{rel}: {count} of {size} bytes flipped, all rejected")
    assert verify_bundle(root).ok  # every byte was put back
    print("\n" + "\n".join(lines) + f"\nbyte flips: {total}, all rejected")
    assert total >= 2000


def _software_span(text: str) -> range:
    """The characters of signedData.software: outside the signature in WACZ's layout
    (only ``hash`` is signed), so an edit there is invisible to any verifier."""
    match = re.search(r'"software": "([^"]*)"', text[text.index('"signedData"'):])
    assert match is not None
    start = text.index('"signedData"') + match.start(1)
    return range(start, start + len(match.group(1)))


def test_every_flipped_bit_of_the_manifests_is_rejected(signed_bundle: Path,
                                                        tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    shutil.copytree(signed_bundle, root)
    total = 0
    for name in (manifest.MANIFEST, manifest.DIGEST):
        path = root / name
        size = path.stat().st_size
        where = list(range(size))
        if name == manifest.DIGEST:
            unsigned = _software_span(path.read_text())
            where = [i for i in where if i not in unsigned]
        count, missed = flip_all(root, path, where, 0x01)
        assert not missed, f"{name}: bit flips at {missed[:10]} were not detected"
        total += count
    print(f"\nbit flips in the manifests: {total}, all rejected")
    # the one unsigned field, as the WACZ signing layout defines it: documented, not hidden
    doc = json.loads((root / manifest.DIGEST).read_text())
    doc["signedData"]["software"] = "edited"
    (root / manifest.DIGEST).write_text(json.dumps(doc, indent=2) + "\n")
    assert verify_bundle(root).ok


def test_flips_through_the_cli_are_one_line_errors(signed_bundle: Path,
                                                   tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    shutil.copytree(signed_bundle, root)
    rng = random.Random(SEED + 1)
    for path in finished_files(root):
        original = path.read_bytes()
        data = bytearray(original)
        i = rng.randrange(len(data))
        data[i] ^= 0xFF
        path.write_bytes(data)
        done = run_amber("bundle", "verify", str(root))
        path.write_bytes(original)
        rel = path.relative_to(root).as_posix()
        assert done.returncode == 3, (rel, i, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("amber: mismatch: "), done.stderr
