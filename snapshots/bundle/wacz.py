"""Packing a bundle into a ``.wacz`` and unpacking one safely."""

from __future__ import annotations

import shutil
import stat
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from ambereval.errors import BundleError, InputError, UnsafeArchiveError
from ambereval.snapshots.bundle import manifest
from ambereval.snapshots.bundle.store import Bundle, describe_unfinished, unfinished_state

STORED_SUFFIXES = (".warc.gz", ".warc", ".cdx.gz", ".sqlite")


def pack_bundle(root: str | Path, out: str | Path) -> Path:
    """Write ``out`` (a WACZ zip): WARCs and compressed indexes STORED, the rest deflated."""
    root, out = Path(root), Path(out)
    Bundle.open(root).close()  # it must be a bundle
    if not (root / manifest.MANIFEST).is_file():
        raise BundleError(f"{root}: no datapackage.json", hint="run `amber bundle finish`")
    state = unfinished_state(root)
    if state is not None:
        raise BundleError(f"{root}: the bundle is unfinished ({describe_unfinished(state)})",
                          hint="let the capture end, or run `amber bundle finish`")
    _check_pack_target(root, out)
    files = [root / manifest.MANIFEST] + manifest.bundle_files(root)
    if (root / manifest.DIGEST).is_file():  # the digest (and its signature) travel along
        files.insert(1, root / manifest.DIGEST)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        with zipfile.ZipFile(tmp, "w") as zf:
            for path in files:
                rel = path.relative_to(root).as_posix()
                stored = rel.endswith(STORED_SUFFIXES)
                info = zipfile.ZipInfo.from_file(path, rel)
                info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
                with open(path, "rb") as src, zf.open(info, "w") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        tmp.replace(out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BundleError(f"{out}: cannot write the WACZ ({exc.strerror or exc})") from None
    return out


def _check_pack_target(root: Path, out: Path) -> None:
    """``--out`` must be a file path outside the bundle, in a directory that exists."""
    if out.is_dir():
        raise InputError(f"{out}: is a directory", hint="give the .wacz file to write")
    if not out.parent.is_dir():
        raise InputError(f"{out.parent}: no such directory (for --out {out})")
    if out.resolve().is_relative_to(root.resolve()):
        raise InputError(f"{out}: inside the bundle it packs", hint="write it elsewhere")


def _safe_member(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if name.startswith(("/", "\\")) or path.is_absolute() or ".." in path.parts:
        raise UnsafeArchiveError(f"refusing to unpack {name!r}: path escapes the target directory")
    if not path.parts or path.parts == (".",):
        raise UnsafeArchiveError(f"refusing to unpack {name!r}: no file name")
    if "\\" in name or (path.parts and ":" in path.parts[0]):
        raise UnsafeArchiveError(f"refusing to unpack {name!r}: not a relative POSIX path")
    return path


MAX_RATIO = 1000  # a deflated member may expand this much (a zip bomb expands far more)
MAX_RATIO_FLOOR = 10 << 20  # ... once it is larger than this
_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError,
                NotImplementedError, ValueError, OverflowError)


def _check_members(members: list[zipfile.ZipInfo]) -> None:
    """Every member is checked before anything is written."""
    seen: set[str] = set()
    for info in members:
        path = _safe_member(info.filename)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise UnsafeArchiveError(f"refusing to unpack {info.filename!r}: symbolic link")
        key = path.as_posix()
        if key in seen:
            raise UnsafeArchiveError(f"refusing to unpack {info.filename!r}: duplicate member")
        seen.add(key)
        if info.flag_bits & 0x1:
            raise InputError(f"cannot unpack {info.filename!r}: the member is encrypted")
        if info.file_size > MAX_RATIO_FLOOR and info.file_size > MAX_RATIO * max(
                1, info.compress_size):
            raise UnsafeArchiveError(f"refusing to unpack {info.filename!r}: expands "
                                     f"{info.compress_size} bytes to {info.file_size}")


def unpack_bundle(wacz: str | Path, out: str | Path) -> Path:
    """Extract ``wacz`` into ``out`` (absent or empty).

    Every member is checked before anything is written (no absolute paths, ``..``,
    symlinks, duplicates, encrypted members or zip bombs); extraction goes to a staging
    directory next to ``out`` that is renamed into place at the end, so a corrupt member
    raises a one-line error and leaves nothing behind.
    """
    wacz, out = Path(wacz), Path(out)
    if wacz.is_dir():
        raise InputError(f"{wacz}: is a directory, not a .wacz file")
    if not wacz.is_file():
        raise InputError(f"{wacz}: no such file")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: is a file", hint="give an empty or new directory as --out")
    if out.exists() and any(out.iterdir()):
        raise BundleError(f"{out}: target directory is not empty")
    try:
        zf = zipfile.ZipFile(wacz)
    except _READ_ERRORS:
        raise InputError(f"{wacz}: not a zip/WACZ file") from None
    with zf:
        members = zf.infolist()
        _check_members(members)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.unpacking-", dir=out.parent))
        except OSError as exc:
            raise BundleError(f"{out}: cannot create it ({exc.strerror or exc})") from None
        try:
            _extract(zf, members, staging, wacz)
            if out.exists():
                out.rmdir()
            staging.rename(out)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return out


def _extract(zf: zipfile.ZipFile, members: list[zipfile.ZipInfo], staging: Path,
             wacz: Path) -> None:
    base = staging.resolve()
    for info in members:
        target = (staging / _safe_member(info.filename)).resolve()
        if base not in target.parents and target != base:
            raise UnsafeArchiveError(f"refusing to unpack {info.filename!r}: escapes the target")
        try:
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "xb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except _READ_ERRORS as exc:
            text = " ".join(str(exc).split()) or type(exc).__name__
            raise InputError(f"{wacz}: cannot unpack member {info.filename!r} ({text[:200]})",
                             hint="the file is damaged; get a fresh copy") from None
