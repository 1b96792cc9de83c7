"""Judge cards: a judge's measured quality, stored once and carried with its verdicts.

``amber judge-bench --suite DIR`` runs every labeled set in ``DIR`` (judge-bench JSONL,
e.g. from ``scripts/make_judge_sets.py``) and writes a card, format
``amber-judge-card/1``::

    {"format": "amber-judge-card/1",
     "judge": {"backend", "name", "sha256", "chat_template_sha256", "n_ctx", ...},
     "prompt_sha256": "...",            # the judge-bench verdict prompt and schema
     "split": "full" | "dev" | "test",  # which files of DIR were run
     "limit": null | int,               # pairs per set, when capped
     "sets": {"<set>": {"n", "labels", "accuracy", "balanced_accuracy", "kappa",
                        "confusion", "seconds_per_call", "unusable_answers",
                        "data_sha256", "retrieval"?}},
     "mean_kappa": float}               # unweighted mean of the sets' kappas

Cards live in ``$AMBER_HOME/cards/<judge sha256>.json`` (``amber models list`` reads
them). A served judge has no weights file: its card key is the sha256 of its canonical
served name (:func:`judge_sha256`), so a card measured through one server is found again
for the same model name. ``amber evaluate`` and ``amber verify`` record the card of each
judge they use (:func:`card_entry`) and warn on stderr when its mean kappa is below
:data:`KAPPA_FLOOR` or when the judge was never measured.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ambereval.engine.judge_bench import run_judge_bench
from ambereval.errors import InputError
from ambereval.models import Judge
from ambereval.models.canonical import content_key
from ambereval.models.registry import cards_dir, judge_card

CARD_FORMAT = "amber-judge-card/1"
KAPPA_FLOOR = 0.2
#: a card on fewer labeled pairs than this (all sets together) is too small to trust: its
#: kappa can be 1.0 on a single pair, so it does not silence the warning
MIN_CARD_PAIRS = 50
SPLITS = ("full", "dev", "test")
DEFAULT_RETRIEVE_K = 3  # for sets whose lines carry whole pages

_log = logging.getLogger("ambereval.judge_card")


def judge_sha256(judge: Judge) -> str:
    """The key a judge's card is stored under: the model file's sha256, or for a served
    model (no file) the sha256 of ``{"served_model": name}``."""
    model = judge.backend.identity()["model"]
    if model.get("sha256"):
        return str(model["sha256"])
    return content_key({"served_model": model.get("name")})


def judge_identity(judge: Judge) -> dict[str, Any]:
    """What the card says about the judge (no server address: it cannot change answers)."""
    identity = judge.backend.identity()
    model = {k: v for k, v in identity["model"].items() if k != "base_url"}
    return {"backend": judge.backend.name, **model, "sha256": judge_sha256(judge),
            "chat_template_sha256": identity.get("chat_template_sha256"),
            "n_ctx": identity.get("n_ctx", judge.n_ctx), "seed": judge.seed}


def suite_files(directory: str | Path, split: str = "full") -> dict[str, Path]:
    """``{set name: file}`` for the labeled sets of ``directory``, sorted by name.

    ``full``: every ``*.jsonl`` that is not a ``.dev``/``.test`` half; ``dev``/``test``:
    only those halves (named ``<set>.<split>.jsonl``)."""
    directory = Path(directory)
    if split not in SPLITS:
        raise InputError(f"unknown split {split!r} ({', '.join(SPLITS)})")
    if not directory.is_dir():
        raise InputError(f"{directory}: no such suite directory",
                         hint="make one with scripts/make_judge_sets.py")
    found: dict[str, Path] = {}
    for path in sorted(directory.glob("*.jsonl")):
        stem = path.name[: -len(".jsonl")]
        half = stem.rsplit(".", 1)[1] if "." in stem else None
        if split == "full" and half not in ("dev", "test"):
            found[stem] = path
        elif split != "full" and half == split:
            found[stem.rsplit(".", 1)[0]] = path
    if not found:
        raise InputError(f"{directory}: no {'' if split == 'full' else split + ' '}labeled "
                         "sets (*.jsonl)", hint="make them with scripts/make_judge_sets.py")
    return found


def has_pages(path: Path) -> bool:
    """Whether the set's first line carries a whole ``page`` and no ``evidence``."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                try:
                    obj = json.loads(line)
                except ValueError:
                    return False  # run_judge_bench names the bad line
                return isinstance(obj, dict) and "page" in obj and not obj.get("evidence")
    return False


def run_suite(directory: str | Path, judge: Judge, split: str = "full",
              limit: int | None = None, retrieve_k: int = DEFAULT_RETRIEVE_K,
              progress: Callable[[str, int, int], None] | None = None,
              run_set: Callable[..., dict[str, Any]] | None = None,
              decision: str = "auto") -> dict[str, Any]:
    """Run every labeled set of ``directory`` and return the judge card.

    Sets whose lines carry whole pages are judged on the top ``retrieve_k`` retrieved
    chunks (``judge-bench --retrieve``). ``seconds_per_call`` is model time per answer
    when the model answered, else wall time per pair (answers replayed from a ledger).
    Example: ``card = run_suite("out/judge-sets", open_judge(), split="test", limit=40)``
    """
    run_set = run_set or run_judge_bench
    sets: dict[str, Any] = {}
    prompt = None
    decided = None
    for name, path in suite_files(directory, split).items():
        before = judge.stats()
        started = time.monotonic()
        result = run_set(path, judge, limit=limit, progress=progress,
                         retrieve_k=retrieve_k if has_pages(path) else None,
                         decision=decision)
        wall = time.monotonic() - started
        after = judge.stats()
        calls = after["calls"] - before["calls"]
        model_s = after["model_seconds"] - before["model_seconds"]
        per_call = model_s / calls if calls else wall / max(1, result["n"])
        prompt = result["prompt_sha256"]
        decided = result.get("decision")
        entry = {k: result[k] for k in ("n", "labels", "accuracy", "balanced_accuracy",
                                        "kappa", "confusion", "data_sha256")}
        entry["seconds_per_call"] = round(per_call, 3)
        entry["unusable_answers"] = result.get("unusable_answers", 0)  # counted as unknown
        entry["ledger_hits"] = after["ledger_hits"] - before["ledger_hits"]
        if "retrieval" in result:
            entry["retrieval"] = {k: v for k, v in result["retrieval"].items()
                                  if k != "embedder"}
        sets[name] = entry
    kappas = [s["kappa"] for s in sets.values()]
    return {"format": CARD_FORMAT, "judge": judge_identity(judge), "prompt_sha256": prompt,
            "decision": decided, "split": split, "limit": limit, "sets": sets,
            "mean_kappa": round(sum(kappas) / len(kappas), 6)}


def card_markdown(card: dict[str, Any]) -> str:
    """The card as a Markdown table, one row per set, plus the judge's identity."""
    judge = card["judge"]
    lines = [f"# Judge card: {judge.get('name')}", "",
             f"- judge sha256: `{judge.get('sha256')}` ({judge.get('backend')}, "
             f"n_ctx {judge.get('n_ctx')}, seed {judge.get('seed')})",
             f"- prompt sha256: `{card.get('prompt_sha256')}`",
             f"- decision: {(card.get('decision') or {}).get('method', 'generate')}"
             + (f" (calibration {card['decision']['bias']})"
                if (card.get("decision") or {}).get("bias") else ""),
             f"- split: {card.get('split')}"
             + (f", first {card['limit']} pairs per set" if card.get("limit") else ""),
             f"- mean kappa: {card['mean_kappa']:.3f}", "",
             "| set | n | accuracy | balanced accuracy | kappa | confusion (gold → judged) "
             "| s/call |", "|---|---|---|---|---|---|---|"]
    for name, s in card["sets"].items():
        confusion = "; ".join(f"{g}: " + ", ".join(f"{p} {n}" for p, n in row.items())
                              for g, row in s["confusion"].items())
        lines.append(f"| {name} | {s['n']} | {s['accuracy']:.3f} | "
                     f"{s['balanced_accuracy']:.3f} | {s['kappa']:.3f} | {confusion} | "
                     f"{s['seconds_per_call']:.2f} |")
    return "\n".join(lines) + "\n"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_card(card: dict[str, Any], out: str | Path | None = None) -> list[Path]:
    """Store the card under ``$AMBER_HOME/cards/<sha256>.json`` (with its ``.md``), and
    also at ``out`` (``X.json`` and ``X.md``) when given. Returns the JSON paths."""
    text = json.dumps(card, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    markdown = card_markdown(card)
    targets = [cards_dir() / f"{card['judge']['sha256']}.json"]
    if out is not None:
        out = Path(out)
        targets.append(out if out.suffix == ".json" else out.with_suffix(".json"))
    for path in targets:
        _write_atomic(path, text)
        _write_atomic(path.with_suffix(".md"), markdown)
    return targets


_WARNED: set[tuple[str, Any, int]] = set()  # (judge sha256, kappa, pairs) warned about


def card_entry(judge: Judge, label: str | None = None) -> dict[str, Any]:
    """What a run records about its judge's measured quality, and the one-line warning
    (logged to stderr) when that quality is unknown or below :data:`KAPPA_FLOOR`.

    ``{"sha256", "card": card | null, "mean_kappa": float | null, "warning": str | null}``
    """
    sha = judge_sha256(judge)
    card = judge_card(sha)
    name = label or judge.backend.identity()["model"].get("name") or sha[:12]
    kappa = card.get("mean_kappa") if card else None
    pairs = sum(int(s.get("n", 0)) for s in (card or {}).get("sets", {}).values())
    warning = None
    if not isinstance(kappa, int | float):
        warning = (f"judge {name} has no judge card: its quality is unmeasured "
                   "(measure it: amber judge-bench --suite DIR with the same judge options)")
    elif pairs < MIN_CARD_PAIRS:
        limit = (card or {}).get("limit")
        cut = bool(limit) and any(int(s.get("n", 0)) >= limit
                                  for s in (card or {}).get("sets", {}).values())
        how = "without a small --limit" if cut else \
            f"on labeled sets of {MIN_CARD_PAIRS} pairs or more in all"
        warning = (f"judge {name}'s card rests on {pairs} labeled pairs (fewer than "
                   f"{MIN_CARD_PAIRS}): its kappa {kappa:.3f} is not a measurement (run "
                   f"amber judge-bench --suite DIR {how})")
    elif kappa < KAPPA_FLOOR:
        warning = (f"judge {name} measured mean kappa {kappa:.3f} < {KAPPA_FLOOR}: its "
                   "verdicts are close to chance")
    seen = (sha, kappa, pairs)  # once per judge and card, not per report or per name
    if warning and seen not in _WARNED:
        _WARNED.add(seen)
        _log.warning("amber: warning: %s", warning)
    return {"sha256": sha, "card": card, "mean_kappa": kappa, "warning": warning}



def card_entries(judges: list[tuple[str, Judge]]) -> dict[str, dict[str, Any]]:
    """:func:`card_entry` for each named judge of a run."""
    return {name: card_entry(judge, name) for name, judge in judges}
