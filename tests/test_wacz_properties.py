"""Property tests over WACZ unpacking: any input gives a result or a clean error.

Two generators: archives assembled from hostile member names, contents, directory and
symlink flags; and a real packed bundle with bytes flipped, cut or inserted. For each,
``unpack_bundle`` must return the target or raise an Amber error (never anything else),
and must write nothing outside the target, nor leave a half-written target behind.
``AMBER_PROPERTY_EXAMPLES`` sets the examples per test (default 5,000: 10,000 in all).
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import warnings
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ambereval.errors import AmberError
from ambereval.snapshots import capture_urls, pack_bundle, unpack_bundle

from conftest import fast_options
from fakeweb import FakeWeb

EXAMPLES = int(os.environ.get("AMBER_PROPERTY_EXAMPLES", "5000"))
PROPS = settings(max_examples=EXAMPLES, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

segment = st.one_of(
    st.sampled_from(["..", ".", "", "archive", "datapackage.json", "a.warc.gz", "C:", "~",
                     "\\..\\x", "con", "a" * 300, "\x00x", "é", "..\\..", "/"]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12),
)
member_name = st.lists(segment, min_size=1, max_size=5).map("/".join) | st.sampled_from(
    ["/etc/passwd", "../evil", "a/../../evil", "\\evil", "C:\\evil", "archive/", "a//b",
     "./a", "a/./b", "datapackage.json"])
member = st.tuples(member_name, st.binary(max_size=64), st.sampled_from(
    ["file", "dir", "symlink", "deflated"]))


def build_zip(members: list[tuple[str, bytes, str]]) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as zf:
        warnings.simplefilter("ignore")  # duplicate names are part of the test
        for name, data, kind in members:
            info = zipfile.ZipInfo(name)
            if kind == "dir":
                info.external_attr = (0o40755 << 16) | 0x10
            elif kind == "symlink":
                info.external_attr = 0o120777 << 16
            elif kind == "deflated":
                info.compress_type = zipfile.ZIP_DEFLATED
            try:
                zf.writestr(info, data)
            except (ValueError, UnicodeEncodeError):
                continue  # a name zipfile itself cannot write
    return buf.getvalue()


def unpack_checked(blob: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src = root / "in.wacz"
        src.write_bytes(blob)
        out = root / "sub" / "out"
        try:
            result = unpack_bundle(src, out)
        except AmberError as exc:
            assert str(exc) and "\n" not in str(exc)
            assert not out.exists()  # nothing half-written
        else:
            assert result == out and out.is_dir()
            for path in out.rglob("*"):
                assert not path.is_symlink()
                assert out.resolve() in path.resolve().parents
        # nothing escaped: the only entries are the input and the target's parent
        assert sorted(p.name for p in root.iterdir()) in (["in.wacz"], ["in.wacz", "sub"])
        if (root / "sub").exists():
            assert [p.name for p in (root / "sub").iterdir()] in ([], ["out"])


@PROPS
@given(st.lists(member, max_size=6))
def test_hostile_archives_unpack_or_fail_cleanly(members: list[tuple[str, bytes, str]]) -> None:
    unpack_checked(build_zip(members))


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    base = tmp_path_factory.mktemp("packed")
    with FakeWeb() as web:
        capture_urls(base / "b", [web.url("/pages/tea.html")], fast_options(web, reader="direct"))
    wacz = pack_bundle(base / "b", base / "b.wacz")
    data = wacz.read_bytes()
    shutil.rmtree(base)
    return data


edit = st.tuples(st.sampled_from(["flip", "cut", "insert", "zero"]),
                 st.floats(min_value=0, max_value=1, allow_nan=False),
                 st.binary(min_size=1, max_size=16))


@PROPS
@given(edits=st.lists(edit, min_size=1, max_size=4))
def test_damaged_wacz_unpacks_or_fails_cleanly(packed: bytes,
                                               edits: list[tuple[str, float, bytes]]) -> None:
    data = bytearray(packed)
    for kind, where, blob in edits:
        i = min(len(data) - 1, int(where * len(data))) if data else 0
        if kind == "flip" and data:
            data[i] ^= blob[0] or 0xFF
        elif kind == "cut":
            del data[i:]
        elif kind == "insert":
            data[i:i] = blob
        elif kind == "zero" and data:
            data[i : i + len(blob)] = bytes(len(data[i : i + len(blob)]))
    unpack_checked(bytes(data))
