"""How a run was asked for: ``RUN_DIR/invocation.json``, so it can be resumed or rerun.

``manifest.json`` says what went into a run (judge identities, bundle digests, rules);
this file says how to open the same inputs again: the bundles and tasks file as the user
named them, the protocols, each judge as it was given (a GGUF path, a registered name, a
served URL and model name), the context size, seed, clip and rules. It holds no option
that only changes speed (judge concurrency, threads, executor, Ray address): those may
differ on a resume or rerun, and two runs of the same inputs, started from the same
directory, write the same file at any concurrency. ``cwd`` is that directory: relative
bundle and task paths are read from it when a resume, rerun or replay starts elsewhere.

Format ``amber-invocation/1``::

    {"format", "bundles": [..], "tasks": "..", "protocols": [..], "judges": [
       {"kind": "url", "url": "..", "model": ".." | null, "label": ".."} |
       {"kind": "name", "name": "..", "label": ".."} |
       {"kind": "model", "path": ".." | null, "label": ".."}],
     "judge_ctx": 4096, "seed": 0, "clip_chars": 12000, "rules": ["c1_empty=zero", ..],
     "cwd": "/abs/dir" (absent in files written before it was recorded)}

``label`` is the judge's name in the run (the per-report JSON and ledger use it).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ambereval.engine.runs.run_dir import dump_json, write_atomic
from ambereval.errors import InputError
from ambereval.models import Judge, open_judge

INVOCATION_FORMAT = "amber-invocation/1"
FILE = "invocation.json"


@dataclass(frozen=True)
class JudgeSpec:
    kind: str  # url | name | model
    label: str
    url: str | None = None
    model: str | None = None  # the served model name (kind url)
    name: str | None = None  # a registered judge (kind name)
    path: str | None = None  # a GGUF file, None for the default judge (kind model)


@dataclass(frozen=True)
class Invocation:
    bundles: list[str]
    tasks: str
    protocols: list[str]
    judges: list[JudgeSpec]
    judge_ctx: int = 4096
    seed: int = 0
    clip_chars: int = 12_000
    rules: list[str] = field(default_factory=list)
    #: the directory the run was made in: relative input paths are relative to it
    cwd: str | None = None

    def as_dict(self) -> dict[str, Any]:
        judges = [{k: v for k, v in asdict(j).items() if v is not None} for j in self.judges]
        out = {"format": INVOCATION_FORMAT, "bundles": list(self.bundles),
               "tasks": self.tasks, "protocols": list(self.protocols), "judges": judges,
               "judge_ctx": self.judge_ctx, "seed": self.seed,
               "clip_chars": self.clip_chars, "rules": list(self.rules)}
        if self.cwd is not None:
            out["cwd"] = self.cwd
        return out

    def write(self, run_dir: str | Path) -> None:
        write_atomic(Path(run_dir) / FILE, dump_json(self.as_dict()))

    def check_judges(self) -> None:
        """Fail now on a judge name nobody knows, a judge not installed, or one model given
        twice (it would be counted as two judges of an ensemble). Nothing is hashed,
        loaded or written; :meth:`open_judges` verifies the files."""
        from ambereval.errors import InputError
        from ambereval.models.registry import default_judge_path, locate_judge

        seen: dict[str, str] = {}
        for spec in self.judges:
            if spec.kind == "url":
                what = f"{spec.url} {spec.model}"
            elif spec.kind == "name" and spec.name:
                what = str(locate_judge(spec.name).resolve())
            else:
                if spec.path and not Path(spec.path).is_file():
                    raise InputError(f"{spec.path}: model file not found",
                                     hint="expected a .gguf file")
                what = str((Path(spec.path) if spec.path else default_judge_path()).resolve())
            if what in seen:
                raise InputError(f"judges {seen[what]!r} and {spec.label!r} are the same model",
                                 hint="an ensemble needs different judges")
            seen[what] = spec.label

    def open_judges(self, ledger: str | Path, ledger_mode: str = "reuse",
                    concurrency: int | None = None, threads: int | None = None
                    ) -> list[tuple[str, Judge]]:
        """Open every judge, in order, all writing to ``ledger``."""
        judges = []
        for spec in self.judges:
            if spec.kind == "url":
                judge = open_judge(None, spec.url, spec.model, ledger, ledger_mode,
                                   n_ctx=self.judge_ctx, seed=self.seed,
                                   concurrency=concurrency)
            elif spec.kind == "name":
                judge = open_judge(None, None, None, ledger, ledger_mode, n_ctx=self.judge_ctx,
                                   threads=threads, seed=self.seed, judge=spec.name)
            else:
                judge = open_judge(Path(spec.path) if spec.path else None, None, None, ledger,
                                   ledger_mode, n_ctx=self.judge_ctx, threads=threads,
                                   seed=self.seed)
            judges.append((spec.label, judge))
        return judges


def judge_specs(urls: list[tuple[str, str | None]], names: list[str],
                paths: list[str | None]) -> list[JudgeSpec]:
    """The judges of a command line, in the order ``amber evaluate`` opens them: the
    served one, then the registered names, then GGUF files (two files with the same
    name get ``#2``, ``#3``... so their results stay apart)."""
    specs = [JudgeSpec("url", model or "server", url=url, model=model) for url, model in urls]
    specs += [JudgeSpec("name", name, name=name) for name in names]
    for path in paths:
        label = Path(path).name if path else "default"
        taken = {s.label for s in specs}
        base, n = label, 2
        while label in taken:
            label, n = f"{base}#{n}", n + 1
        specs.append(JudgeSpec("model", label, path=path))
    return specs


def read_invocation(run_dir: str | Path) -> Invocation:
    """The invocation a run directory records; one-line errors for what is not one."""
    run_dir = Path(run_dir)
    path = run_dir / FILE
    if not path.is_file():
        why = "not a run directory" if not (run_dir / "manifest.json").is_file() else \
            "written by an amber that did not record its invocation"
        raise InputError(f"{run_dir}: no {FILE} ({why})",
                         hint="give the directory `amber evaluate --out` wrote")
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc})") from None
    if obj.get("format") != INVOCATION_FORMAT:
        raise InputError(f"{path}: format {obj.get('format')!r}, this amber reads "
                         f"{INVOCATION_FORMAT}")
    try:
        return Invocation(list(obj["bundles"]), obj["tasks"], list(obj["protocols"]),
                          [JudgeSpec(**j) for j in obj["judges"]], int(obj["judge_ctx"]),
                          int(obj["seed"]), int(obj["clip_chars"]), list(obj["rules"]),
                          obj.get("cwd"))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: malformed ({exc})") from None


def inputs_home(run_dir: str | Path) -> Path | None:
    """The directory to read a run's relative input paths from, when it is not the
    current one: the run recorded where it was made (``cwd``), its bundles and tasks are
    not found from here, and they are from there. None otherwise (nothing to change)."""
    try:
        invocation = read_invocation(run_dir)
    except (InputError, OSError):
        return None  # the command itself will say what is wrong with the run
    home = Path(invocation.cwd) if invocation.cwd else None
    if home is None or not home.is_dir() or home.resolve() == Path.cwd().resolve():
        return None

    def found(base: Path) -> bool:
        return all((base / b).is_dir() for b in invocation.bundles) and \
            (base / invocation.tasks).is_file()

    return home if not found(Path.cwd()) and found(home) else None
