"""The bundle's derived files: ``pages/pages.jsonl``, the CDXJ index, ``datapackage.json``.

They are rebuilt from the WARCs and the SQLite index at the end of every capture, so a
crash never leaves them authoritative: ``amber bundle verify`` checks them against the
bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

from ambereval import __version__

WACZ_VERSION = "1.1.1"  # the version py-wacz (0.6) validates; see README "Formats"
MANIFEST = "datapackage.json"
EXCLUDED_NAMES = frozenset({MANIFEST, "datapackage-digest.json"})


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
    _atomic_write(out, ("\n".join(lines) + "\n").encode("utf-8"))


def write_cdx(root: Path, warc_paths: list[Path]) -> None:
    """CDXJ over every record, ZipNum-compressed as WACZ replay tools expect."""
    indexes = root / "indexes"
    indexes.mkdir(parents=True, exist_ok=True)
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
    _atomic_write(indexes / "index.cdx.gz", data.getvalue())
    _atomic_write(indexes / "index.idx", summary.getvalue().encode("utf-8"))


def write_datapackage(root: Path, title: str, created: str, modified: str) -> dict[str, Any]:
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
    _atomic_write(root / MANIFEST, (json.dumps(package, indent=2) + "\n").encode("utf-8"))
    return package


def read_datapackage(root: Path) -> dict[str, Any]:
    return json.loads((root / MANIFEST).read_text(encoding="utf-8"))


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
