"""Packing a bundle into a ``.wacz`` and unpacking one safely."""

from __future__ import annotations

import shutil
import stat
import zipfile
from pathlib import Path, PurePosixPath

from ambereval.errors import BundleError, InputError, UnsafeArchiveError
from ambereval.snapshots import manifest
from ambereval.snapshots.bundle import Bundle

STORED_SUFFIXES = (".warc.gz", ".warc", ".cdx.gz", ".sqlite")


def pack_bundle(root: str | Path, out: str | Path) -> Path:
    """Write ``out`` (a WACZ zip): WARCs and compressed indexes STORED, the rest deflated."""
    root, out = Path(root), Path(out)
    Bundle.open(root).close()  # it must be a bundle
    if not (root / manifest.MANIFEST).is_file():
        raise BundleError(f"{root}: no datapackage.json", hint="run a capture to finish it")
    files = [root / manifest.MANIFEST] + manifest.bundle_files(root)
    tmp = out.with_name(f".{out.name}.tmp")
    with zipfile.ZipFile(tmp, "w") as zf:
        for path in files:
            rel = path.relative_to(root).as_posix()
            stored = rel.endswith(STORED_SUFFIXES)
            info = zipfile.ZipInfo.from_file(path, rel)
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            with open(path, "rb") as src, zf.open(info, "w") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    tmp.replace(out)
    return out


def _safe_member(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if name.startswith(("/", "\\")) or path.is_absolute() or ".." in path.parts:
        raise UnsafeArchiveError(f"refusing to unpack {name!r}: path escapes the target directory")
    if "\\" in name or (path.parts and ":" in path.parts[0]):
        raise UnsafeArchiveError(f"refusing to unpack {name!r}: not a relative POSIX path")
    return path


def unpack_bundle(wacz: str | Path, out: str | Path) -> Path:
    """Extract ``wacz`` into ``out``; every member is checked before anything is written."""
    wacz, out = Path(wacz), Path(out)
    if not wacz.is_file():
        raise InputError(f"{wacz}: no such file")
    if out.exists() and any(out.iterdir()):
        raise BundleError(f"{out}: target directory is not empty")
    try:
        zf = zipfile.ZipFile(wacz)
    except zipfile.BadZipFile:
        raise InputError(f"{wacz}: not a zip/WACZ file") from None
    with zf:
        members = zf.infolist()
        for info in members:
            _safe_member(info.filename)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise UnsafeArchiveError(f"refusing to unpack {info.filename!r}: symbolic link")
        out.mkdir(parents=True, exist_ok=True)
        base = out.resolve()
        for info in members:
            target = (out / _safe_member(info.filename)).resolve()
            if base not in target.parents and target != base:
                raise UnsafeArchiveError(f"refusing to unpack {info.filename!r}: escapes {out}")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    return out
