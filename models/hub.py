"""``amber models fetch``: a GGUF from the Hugging Face Hub into Amber's model directory.

The download goes through ``huggingface_hub`` (its URL scheme, headers, token, redirects
and in-flight retries), so ``HF_ENDPOINT`` (a mirror), ``HF_TOKEN`` (gated repositories)
and ``HF_HUB_OFFLINE`` behave as everywhere else. Amber keeps the partial file itself,
``<file>.incomplete`` beside a small JSON naming the Hub's ETag, so an interrupted fetch of
a 20 GB file resumes where it stopped on the next run (an HTTP Range request), and
restarts from zero when the file changed on the Hub in between.

Integrity: the finished file's sha256 must equal the catalog's pin when there is one;
otherwise it must equal the Hub's LFS object id (the ETag of a GGUF is its sha256) and is
registered as trusted on first use, every later use being checked against it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ambereval.errors import ConfigError, ModelError
from ambereval.models.catalog import judge_entry
from ambereval.models.registry import (
    file_sha256,
    load_registrations,
    model_dir,
    register_file,
)

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class FetchResult:
    name: str
    repo: str
    file: str
    path: str
    sha256: str
    bytes: int
    #: ``verified`` (already here), ``registered`` (file was here), ``fetched``
    action: str
    #: ``pinned`` (catalog sha256) or ``tofu`` (trusted on first use, checked against the
    #: Hub's LFS object id)
    trust: str
    #: bytes that were already on disk from an interrupted fetch
    resumed_from: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def fetch_target(name_or_repo: str, file: str | None, name: str | None
                 ) -> tuple[str, str, str, str | None]:
    """(name, repo, file, pinned sha256) for ``NAME`` or ``REPO FILE``."""
    if "/" in name_or_repo:
        if not file:
            raise ConfigError(f"{name_or_repo} is a repository: give the GGUF file too",
                              hint=f"amber models fetch {name_or_repo} FILE.gguf")
        if not file.endswith(".gguf"):
            raise ConfigError(f"{file}: not a .gguf file", hint="Amber's judges are GGUF files")
        entry = next((j for j in _catalog() if j.repo == name_or_repo and j.file == file), None)
        return ((name or (entry.name if entry else Path(file).stem.lower())), name_or_repo,
                file, entry.sha256 if entry else None)
    entry = judge_entry(name_or_repo)
    if entry is None:
        from ambereval.models.catalog import unknown_judge

        raise unknown_judge(name_or_repo, [j.name for j in _catalog()])
    if entry.source != "hf" or not entry.repo:
        raise ConfigError(f"judge {entry.name!r} does not come from the Hugging Face Hub",
                          hint=entry.obtain_hint)
    chosen = file or entry.file
    return (name or entry.name, entry.repo, chosen,
            entry.sha256 if chosen == entry.file else None)


def _catalog() -> tuple[Any, ...]:
    from ambereval.models.catalog import JUDGES

    return JUDGES


def fetch_model(name_or_repo: str, file: str | None = None, *, name: str | None = None,
                revision: str = "main", root: Path | None = None,
                show_progress: bool = False) -> FetchResult:
    """Download (or resume, or just verify) one GGUF and register it under ``name``.

    Example: ``fetch_model("qwen2.5-7b")`` or
    ``fetch_model("bartowski/Qwen2.5-7B-Instruct-GGUF", "Qwen2.5-7B-Instruct-Q4_K_M.gguf")``"""
    started = time.monotonic()
    name, repo, file, pinned = fetch_target(name_or_repo, file, name)
    root = root or model_dir()
    root.mkdir(parents=True, exist_ok=True)
    final = root / Path(file).name
    source = f"hf:{repo}/{file}"

    def done(action: str, trust: str, resumed: int) -> FetchResult:
        reg = load_registrations(root)[name]
        return FetchResult(name, repo, file, str(final), reg.sha256, reg.bytes, action,
                           trust, resumed, round(time.monotonic() - started, 1))

    if final.is_file():
        reg = load_registrations(root).get(name)
        sha = file_sha256(final)
        if reg is not None and reg.path(root) == final and sha == reg.sha256 \
                and (not pinned or sha == pinned):
            return done("verified", reg.trust, 0)
        if (pinned and sha == pinned) or (not pinned and reg is None):
            register_file(name, final, source, pinned, root)  # copied in by hand
            return done("registered", "pinned" if pinned else "tofu", 0)
        if _offline():
            raise ModelError(f"{final} (sha256 {sha[:16]}…) does not match "
                             f"{'the pin' if pinned else 'its registration'} and "
                             "HF_HUB_OFFLINE is set", hint="delete it and copy a good one "
                             f"in, then amber models add PATH --name {name}")
        final.unlink()  # a wrong or damaged file: fetch it again
    if _offline():
        raise ModelError(f"HF_HUB_OFFLINE is set and {Path(file).name} is not in {root}",
                         hint=f"copy it there by hand and run amber models add PATH "
                         f"--name {name}, or unset HF_HUB_OFFLINE")
    with _fetch_lock(final):
        resumed = _download(repo, file, revision, final, show_progress)
    partial = final.with_name(final.name + ".incomplete")
    sha = file_sha256(partial)
    expected = pinned or _json(_sidecar(partial)).get("etag")
    if expected and _SHA256.match(expected) and sha != expected:
        partial.unlink()
        _sidecar(partial).unlink(missing_ok=True)
        raise ModelError(f"{repo}/{file}: downloaded sha256 {sha} is not the "
                         f"{'pinned' if pinned else 'Hub-announced'} {expected}; deleted",
                         hint="run the same command again")
    os.replace(partial, final)
    _sidecar(partial).unlink(missing_ok=True)
    register_file(name, final, source, pinned, root)
    return done("fetched", "pinned" if pinned else "tofu", resumed)


@contextmanager
def _fetch_lock(final: Path) -> Iterator[None]:
    """One fetch of a file at a time: two would append to the same partial file."""
    with open(final.with_name(f".fetch-{final.name}.lock"), "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ModelError(f"another fetch of {final.name} is running",
                             hint="wait for it to finish") from None
        yield


def _sidecar(partial: Path) -> Path:
    return partial.with_name(partial.name + ".json")


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _download(repo: str, file: str, revision: str, final: Path, show_progress: bool) -> int:
    """Fill ``<final>.incomplete`` from the Hub, resuming it when the Hub's ETag is the
    one it was started with. Returns the number of bytes that were already there."""
    from huggingface_hub import constants

    # huggingface_hub freezes HF_HUB_OFFLINE when it is first imported; in a process that
    # loaded the embedder first (which sets it for its own offline load) that would block
    # this fetch. Amber reads the variable now (``_offline``), so the frozen value must
    # follow the current environment for the duration of the download.
    was_offline, constants.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE, _offline()
    try:
        return _download_online(repo, file, revision, final, show_progress, constants)
    finally:
        constants.HF_HUB_OFFLINE = was_offline


def _download_online(repo: str, file: str, revision: str, final: Path, show_progress: bool,
                     constants: Any) -> int:
    import httpx2
    from huggingface_hub import hf_hub_url
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.file_download import get_hf_file_metadata, http_get
    from huggingface_hub.utils import build_hf_headers

    endpoint = os.environ.get("HF_ENDPOINT") or constants.ENDPOINT
    token = os.environ.get("HF_TOKEN") or None  # None: huggingface_hub's stored login
    url = hf_hub_url(repo, file, revision=revision, endpoint=endpoint.rstrip("/"))
    where = f"{repo}/{file} at {endpoint}"
    try:
        meta = get_hf_file_metadata(url, token=token, endpoint=endpoint)
    except GatedRepoError:
        raise ModelError(f"{where}: gated repository (accept its licence on the Hub)",
                         hint="set HF_TOKEN to a token of an account that accepted it"
                         ) from None
    except RepositoryNotFoundError:
        raise ModelError(f"{where}: repository not found (or private)",
                         hint="check the name; private repositories need HF_TOKEN") from None
    except RevisionNotFoundError:
        raise ModelError(f"{where}: revision {revision!r} not found") from None
    except EntryNotFoundError:
        raise ModelError(f"{where}: no such file in the repository",
                         hint="check the file name on the model's page") from None
    except HfHubHTTPError as err:
        raise ModelError(f"{where}: {str(err).splitlines()[0]}") from None
    except (httpx2.HTTPError, OSError) as err:
        raise ModelError(f"{where}: cannot reach the Hub ({type(err).__name__}: {err})",
                         hint="check the connection or HF_ENDPOINT; offline: amber models "
                         "add PATH") from None
    partial = final.with_name(final.name + ".incomplete")
    state = {"url": url, "etag": meta.etag, "size": meta.size, "commit": meta.commit_hash}
    previous = _json(_sidecar(partial))
    have = partial.stat().st_size if partial.is_file() else 0
    if previous.get("etag") != meta.etag or (meta.size is not None and have > meta.size):
        have = 0
        partial.write_bytes(b"")
    free = shutil.disk_usage(final.parent).free
    if meta.size is not None and free < meta.size - have + (64 << 20):
        raise ModelError(f"not enough disk space in {final.parent}: {free >> 20} MiB free, "
                         f"{(meta.size - have) >> 20} MiB still to download",
                         hint="free some space or point AMBER_HOME at a larger disk")
    _sidecar(partial).write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
    if not show_progress:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    headers = build_hf_headers(token=token)
    try:
        with open(partial, "ab") as out:
            http_get(meta.location or url, out, resume_size=have, headers=headers,
                     expected_size=meta.size, displayed_filename=Path(file).name)
            out.flush()
            os.fsync(out.fileno())
    except KeyboardInterrupt:
        sys.stderr.write(f"amber: fetch interrupted; {partial} is kept and the next run "
                         "resumes it\n")
        raise
    except (HfHubHTTPError, httpx2.HTTPError, OSError) as err:
        raise ModelError(f"{where}: download failed ({str(err).splitlines()[0]}); "
                         f"{partial.stat().st_size if partial.exists() else 0} bytes kept",
                         hint="run the same command again: it resumes") from None
    return have
