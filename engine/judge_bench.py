"""Measuring a judge on labeled claim/evidence pairs: accuracy, balanced accuracy, kappa.

Input: JSONL ``{"id", "claim", "evidence", "label"}`` with labels ``supported``,
``contradicted``, ``unknown`` (ternary) or ``supported``/``unsupported`` (binary; then a
``contradicted`` or ``unknown`` verdict counts as ``unsupported``).

The judge is asked exactly as ``amber verify`` asks it about one (question, page): the
same instructions, passages listing, yes/no question (the one ``--extractor sentences``
writes), schema and decision method (engine/verification.py); ``true``/``false``/``none``
count as supported/contradicted/unknown. The evidence's blank-line separated paragraphs
(or, with ``--retrieve``, the retrieved chunks) are the passages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ambereval.engine.progress_count import ProgressCount
from ambereval.engine.verify_question import (
    VERIFY_PROMPT,
    decision_for,
    page_prefix,
    question_for,
    question_messages,
    read_answer,
)
from ambereval.errors import InputError, ModelError, PromptError
from ambereval.jsonl import iter_objects
from ambereval.models import Judge
from ambereval.models.canonical import content_key

TERNARY = ("contradicted", "supported", "unknown")
BINARY = ("supported", "unsupported")

VERDICTS = {"true": "supported", "false": "contradicted", "none": "unknown"}


@dataclass(frozen=True)
class Pair:
    id: str
    claim: str
    evidence: str
    label: str
    page: str | None = None
    gold: tuple[tuple[int, int], ...] = ()


def load_pairs(path: str | Path, limit: int | None = None) -> tuple[list[Pair], tuple[str, ...]]:
    """Read labeled pairs; returns them and the label space (ternary or binary)."""
    pairs: list[Pair] = []
    for where, obj in iter_objects(path):
        needed = ("id", "claim", "label", "page" if "page" in obj else "evidence")
        missing = [k for k in needed if obj.get(k) in (None, "")]
        if missing:
            raise InputError(f"{where}: missing {', '.join(missing)}")
        gold = obj.get("gold") or []
        if not isinstance(gold, list) or not all(
                isinstance(g, list) and len(g) == 2 and all(isinstance(x, int) for x in g)
                for g in gold):
            raise InputError(f"{where}: 'gold' must be a list of [start, end] spans")
        size = len(str(obj.get("page") or obj.get("evidence") or ""))
        outside = next((g for g in gold if not 0 <= g[0] < g[1] <= size), None)
        if outside is not None:
            raise InputError(f"{where}: gold span {outside} is not inside the "
                             f"{'page' if 'page' in obj else 'evidence'} ({size} characters)")
        label = str(obj["label"]).strip().lower()
        if label not in TERNARY + BINARY:
            raise InputError(f"{where}: unknown label {label!r} "
                             "(use supported, contradicted, unknown or unsupported)")
        pairs.append(Pair(str(obj["id"]), str(obj["claim"]), str(obj.get("evidence") or ""),
                          label, obj.get("page"), tuple((g[0], g[1]) for g in gold)))
        if limit is not None and len(pairs) >= limit:
            break
    if not pairs:
        raise InputError(f"{path}: no labeled pairs")
    labels = {p.label for p in pairs}
    if labels <= set(BINARY):
        return pairs, BINARY
    if labels <= set(TERNARY):
        return pairs, TERNARY
    raise InputError(f"{path}: mixes 'unsupported' with 'contradicted'/'unknown'; "
                     "use one label scheme per file")


def messages_for(claim: str, passages: list[str]) -> list[dict[str, str]]:
    """The verification prompt for one labeled pair (see the module doc)."""
    return question_messages(page_prefix(passages), question_for(claim), claim)


def passages_of(evidence: str) -> list[str]:
    return [p.strip() for p in evidence.split("\n\n") if p.strip()] or [evidence.strip()]


def _retrieval_context(pairs: list[Pair], embedder: Any, k: int,
                       chunk_tokens: int) -> tuple[list[list[str]], float | None, int]:
    """Chunk each pair's page, retrieve the top-k chunks for its claim from that page only,
    and measure recall@k of the gold spans. Returns (evidence texts, recall, items)."""
    from ambereval.models import ChunkParams, VectorIndex, chunk_text

    params = ChunkParams(chunk_tokens, max(0, chunk_tokens // 5))
    chunks = [c for i, p in enumerate(pairs)
              for c in chunk_text(p.page or "", f"item{i:06d}", params)]
    index = VectorIndex.build(chunks, embedder, params.as_dict())
    queries = embedder.embed([p.claim for p in pairs])
    contexts: list[list[str]] = []
    recalls: list[float] = []
    for i, (pair, q) in enumerate(zip(pairs, queries, strict=True)):
        hits = index.search(q, k, captures={f"item{i:06d}"})
        ordered = sorted(hits, key=lambda h: h.chunk.start)
        contexts.append([h.chunk.text for h in ordered])
        if pair.gold:
            covered = sum(1 for gs, ge in pair.gold
                          if any(h.chunk.start < ge and gs < h.chunk.end for h in hits))
            recalls.append(covered / len(pair.gold))
    recall = round(sum(recalls) / len(recalls), 6) if recalls else None
    return contexts, recall, len(recalls)


def metrics(gold: list[str], pred: list[str], labels: tuple[str, ...]) -> dict[str, Any]:
    """Accuracy, balanced accuracy (mean recall over gold classes present), Cohen's kappa,
    and the confusion matrix ``{gold: {predicted: count}}``."""
    n = len(gold)
    confusion = {g: {p: 0 for p in labels} for g in labels}
    for g, p in zip(gold, pred, strict=True):
        confusion[g][p] += 1
    correct = sum(confusion[c][c] for c in labels)
    recalls = [confusion[c][c] / sum(confusion[c].values()) for c in labels
               if sum(confusion[c].values())]
    observed = correct / n if n else 0.0
    expected = sum(sum(confusion[c].values()) * sum(confusion[g][c] for g in labels)
                   for c in labels) / (n * n) if n else 0.0
    kappa = (observed - expected) / (1 - expected) if expected < 1 else (
        1.0 if observed == 1 else 0.0)
    return {"n": n, "labels": list(labels), "accuracy": round(observed, 6),
            "balanced_accuracy": round(sum(recalls) / len(recalls), 6) if recalls else 0.0,
            "kappa": round(kappa, 6), "confusion": confusion}


#: how models/judge.py words an answer the model gave but that cannot be used
_UNUSABLE = ("judge returned invalid JSON", "judge output does not match the schema",
             "judge output was cut")


def _unusable(answer: object) -> bool:
    """An answer the model gave that is unusable (not JSON, off-schema, cut short) or a
    prompt it can never answer: counted as ``unknown``, as verify does. A server that
    cannot be reached is not an answer: that still fails the run."""
    return isinstance(answer, PromptError) or (
        isinstance(answer, ModelError) and str(answer).startswith(_UNUSABLE))


def run_judge_bench(
    path: str | Path,
    judge: Judge,
    limit: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    max_tokens: int = 32,
    embedder: Any = None,
    retrieve_k: int | None = None,
    chunk_tokens: int = 64,
    decision: str = "auto",
) -> dict[str, Any]:
    """Judge every pair; the result depends only on the data, the model and the prompts.

    With ``retrieve_k``, pairs carry a whole ``page`` (and ``gold`` evidence spans): the
    judge sees only the top-k retrieved chunks, and the result adds recall@k of the gold
    evidence and the end-to-end verdict metrics."""
    pairs, labels = load_pairs(path, limit)
    progress = progress or (lambda phase, done, total: None)
    retrieval: dict[str, Any] | None = None
    if retrieve_k:
        if any(p.page is None for p in pairs):
            raise InputError(f"{path}: --retrieve needs a 'page' on every line")
        if embedder is None:
            from ambereval.models import Embedder

            embedder = Embedder()
        contexts, recall, with_gold = _retrieval_context(pairs, embedder, retrieve_k,
                                                         chunk_tokens)
        retrieval = {"k": retrieve_k, "recall_at_k": recall, "items_with_gold": with_gold,
                     "chunk_tokens": chunk_tokens, "embedder": embedder.identity()}
    else:
        if any(not p.evidence for p in pairs):
            raise InputError(f"{path}: lines with a 'page' and no 'evidence' need --retrieve K")
        contexts = [passages_of(p.evidence) for p in pairs]
    gold, pred, rows = [], [], []
    tick = ProgressCount(progress, "judge", len(pairs))  # pairs finish together

    method, schema, bias = decision_for(judge, decision)
    calls = [(messages_for(pair.claim, contexts[i]), schema, max_tokens)
             for i, pair in enumerate(pairs)]
    answers = judge.map(calls, on_done=tick)
    unusable = 0
    for pair, answer, call in zip(pairs, answers, calls, strict=True):
        row: dict[str, Any] = {"id": pair.id, "label": pair.label}
        if _unusable(answer):  # as in verify: an unusable answer settles nothing
            unusable += 1
            verdict = "unknown"
            row.update(error=str(answer), ledger_key=judge.key(*call))
        elif isinstance(answer, Exception):
            raise answer
        else:
            verdict = VERDICTS[read_answer(answer.obj, bias)[0]]
            row["ledger_key"] = answer.key
            row["answer"] = verdict  # before a binary set folds it into "unsupported"
            if "logprobs" in answer.obj:  # raw, so a calibration can be fitted offline
                row["logprobs"] = answer.obj["logprobs"]
        if labels == BINARY and verdict != "supported":
            verdict = "unsupported"
        gold.append(pair.label)
        pred.append(verdict)
        rows.append({**row, "verdict": verdict})
    result = metrics(gold, pred, labels)
    result["unusable_answers"] = unusable
    result["judge"] = judge.backend.identity()["model"]
    result["decision"] = {"method": method, "bias": bias}
    result["prompt_sha256"] = content_key([VERIFY_PROMPT, schema])  # = amber verify's
    result["data_sha256"] = content_key([[p.id, p.claim, p.evidence, p.label, p.page,
                                          list(p.gold)] for p in pairs])
    if retrieval is not None:
        result["retrieval"] = retrieval
    result["predictions"] = rows
    return result
