"""Read a GGUF file's key/value metadata without loading any weights.

Used to identify a judge model (chat template, architecture) for the ledger key, and to
reject a missing or corrupt model file with a clear message before llama.cpp sees it.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, BinaryIO

from ambereval.errors import ModelError

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def _read(fh: BinaryIO, n: int) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise EOFError
    return data


def _string(fh: BinaryIO) -> str:
    (length,) = struct.unpack("<Q", _read(fh, 8))
    return _read(fh, length).decode("utf-8", errors="replace")


def _value(fh: BinaryIO, kind: int) -> Any:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, _read(fh, struct.calcsize(fmt)))[0]
    if kind == _STRING:
        return _string(fh)
    if kind == _ARRAY:
        item_kind, count = struct.unpack("<IQ", _read(fh, 12))
        if item_kind in _SCALARS:
            fh.seek(struct.calcsize(_SCALARS[item_kind]) * count, 1)
        else:
            for _ in range(count):
                _value(fh, item_kind)
        return f"<array of {count}>"
    raise ValueError(f"unknown GGUF value type {kind}")


def read_metadata(path: str | Path) -> dict[str, Any]:
    """All scalar and string metadata of a GGUF file (arrays summarised)."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: model file not found", hint="expected a .gguf file")
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
            if magic != b"GGUF":
                raise ModelError(
                    f"{path}: not a GGUF model (starts with {magic!r}, expected b'GGUF')",
                    hint="pass a llama.cpp .gguf file")
            version, _tensors, count = struct.unpack("<IQQ", _read(fh, 20))
            if version not in (2, 3):
                raise ModelError(f"{path}: unsupported GGUF version {version}")
            meta: dict[str, Any] = {"gguf.version": version}
            for _ in range(count):
                key = _string(fh)
                (kind,) = struct.unpack("<I", _read(fh, 4))
                meta[key] = _value(fh, kind)
            return meta
    except (EOFError, ValueError, struct.error):
        raise ModelError(f"{path}: corrupt or truncated GGUF header",
                         hint="re-download the model file") from None
