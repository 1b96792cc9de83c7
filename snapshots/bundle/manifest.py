"""The bundle's derived files: ``pages/pages.jsonl``, the CDXJ index, ``datapackage.json``
and ``datapackage-digest.json``.

They are rebuilt from the WARCs and the SQLite index at the end of every capture, so a
crash never leaves them authoritative: ``amber bundle verify`` checks them against the
bytes. Each is built in full before anything is replaced, then swapped in atomically
(temporary file, fsync, rename); files that must agree (the CDXJ and its summary, the
datapackage and its digest) are swapped as a group, rolled back if a rename fails.

``datapackage-digest.json`` (WACZ 1.1.1) holds the sha256 of ``datapackage.json``, so an
edit of any byte of the manifest, its descriptive fields included, is detected; it also
carries the optional signature (``signedData``, see ``signing.py``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

from ambereval import __version__

WACZ_VERSION = "1.1.1"  # the version py-wacz (0.6) validates; see docs/formats.md
MANIFEST = "datapackage.json"
DIGEST = "datapackage-digest.json"
EXCLUDED_NAMES = frozenset({MANIFEST, DIGEST})


def software() -> str:
    return f"amber-eval {__version__}"


def sha256_file(path: Path, chunk: int = 1 << 20) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def bundle_files(root: Path) -> list[Path]:
    """Every file that belongs in the manifest, sorted; hidden files (locks) excluded."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or name in EXCLUDED_NAMES and Path(dirpath) == root:
                continue
            if name.endswith(("-journal", "-wal", "-shm")):
                continue
            found.append(Path(dirpath, name))
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def write_pages(root: Path, pages: list[dict[str, Any]]) -> None:
    out = root / "pages" / "pages.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"format": "json-pages-1.0", "id": "pages", "title": "Captured pages"})]
    lines += [json.dumps(page, sort_keys=True, ensure_ascii=False) for page in pages]
    write_group([(out, ("\n".join(lines) + "\n").encode("utf-8"))])


def cdx_bytes(warc_paths: list[Path]) -> tuple[bytes, bytes]:
    """(index.cdx.gz, index.idx) over every record of ``warc_paths``, built in memory."""
    data = io.BytesIO()
    summary = io.StringIO()
    if warc_paths:
        from cdxj_indexer.main import CDXJIndexer  # slow import; only writers need it

        indexer = CDXJIndexer(
            summary,
            [str(p) for p in warc_paths],
            sort=True,
            post_append=True,
            compress=data,
            data_out_name="index.cdx.gz",
            fields="referrer",
            records="all",
        )
        indexer.process_all()
    return data.getvalue(), summary.getvalue().encode("utf-8")


def write_cdx(root: Path, warc_paths: list[Path]) -> None:
    """CDXJ over every record, ZipNum-compressed as WACZ replay tools expect."""
    indexes = root / "indexes"
    indexes.mkdir(parents=True, exist_ok=True)
    cdx, idx = cdx_bytes(warc_paths)
    write_group([(indexes / "index.cdx.gz", cdx), (indexes / "index.idx", idx)])


def write_datapackage(root: Path, title: str, created: str, modified: str) -> dict[str, Any]:
    """List every file with its sha256 and size; write ``datapackage.json`` and its digest
    together (a signature over an older manifest no longer applies and is dropped)."""
    resources = []
    for path in bundle_files(root):
        digest, size = sha256_file(path)
        rel = path.relative_to(root).as_posix()
        resources.append(
            {"name": path.name.lower(), "path": rel, "hash": f"sha256:{digest}", "bytes": size}
        )
    package = {
        "profile": "data-package",
        "title": title,
        "created": created,
        "modified": modified,
        "wacz_version": WACZ_VERSION,
        "software": software(),
        "resources": resources,
    }
    data = (json.dumps(package, indent=2) + "\n").encode("utf-8")
    write_group([(root / MANIFEST, data), (root / DIGEST, digest_document(data))])
    return package


def read_datapackage(root: Path) -> dict[str, Any]:
    return json.loads((root / MANIFEST).read_text(encoding="utf-8"))


def manifest_hash(data: bytes) -> str:
    """The digest of ``datapackage.json`` bytes as WACZ writes it: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_document(data: bytes, signed: dict[str, Any] | None = None) -> bytes:
    """``datapackage-digest.json`` for the manifest bytes ``data``, optionally signed."""
    doc: dict[str, Any] = {"path": MANIFEST, "hash": manifest_hash(data)}
    if signed is not None:
        doc["signedData"] = signed
    return (json.dumps(doc, indent=2) + "\n").encode("utf-8")


def write_group(files: list[tuple[Path, bytes]]) -> None:
    """Replace every file in ``files`` or none: all temporaries are written and synced
    first; if a rename fails, the files already swapped get their old bytes back."""
    temps: list[tuple[Path, Path]] = []
    try:
        for path, data in files:
            tmp = path.with_name(f".{path.name}.tmp")
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            temps.append((tmp, path))
        old = {path: (path.read_bytes() if path.exists() else None) for _, path in temps}
        done: list[Path] = []
        try:
            for tmp, path in temps:
                os.replace(tmp, path)
                done.append(path)
        except BaseException:
            for path in done:
                previous = old[path]
                if previous is None:
                    path.unlink(missing_ok=True)
                else:
                    _restore(path, previous)
            raise
        if files:
            _fsync_dir(files[0][0].parent)
    finally:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)


def _restore(path: Path, data: bytes) -> None:
    back = path.with_name(f".{path.name}.restore")
    with open(back, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(back, path)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
