"""``amber replay RUN_DIR --recompute-retrieval``: the cross-machine retrieval check.

A replay answers every retrieval from the run's record, so it is identical anywhere; this
check asks whether THIS machine would have chosen the same passages. It loads the run's
embedder (the same name and sha256 as the manifest's, or it refuses), rebuilds each
recorded retriever from its recorded identity (``RetrieverSpec.from_identity``) over the
same chunks of the bundle, re-runs every recorded search and compares:

- ``chunks``: another set of chunk ids was chosen;
- ``order``: the same chunks, ranked in another order;
- ``score``: same chunks and order, but a score moved by more than
  :data:`SCORE_TOLERANCE` (absolute). Float32 dot products on another CPU or BLAS differ
  in the last bits (about 1e-7 on cosine scores); reciprocal-rank-fusion scores are sums
  of ``1/(60 + rank)`` and BM25 scores are computed in float32 from the same tokens, so
  anything above 1e-4 means the embedding or the index really changed;
- ``index``: the verification index's chunks (digest) are not the recorded ones, or
  ``missing``: a recorded capture is no longer a valid page of the bundle.

Passage choices are rebuilt per page (chunked as evaluation chunks pages, the default
``ChunkParams``); a verification index over the recorded captures with the recorded
chunking. Read-only: nothing in the run directory changes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ambereval.engine.eval_context import VERIFY_SEARCH_STEP, chunks_digest
from ambereval.engine.evidence import load_page
from ambereval.engine.runs.evaluate import plan_reports
from ambereval.engine.runs.replay import check_inputs, load_manifest, read_record
from ambereval.errors import InputError, ModelError
from ambereval.models import Chunk, ChunkParams, Embedder, Hit, Retriever, RetrieverSpec
from ambereval.models.canonical import canonical_json
from ambereval.snapshots import Bundle

#: largest absolute score difference still counted as agreement (see the module doc)
SCORE_TOLERANCE = 1e-4


def recorded_spec(identity: dict[str, Any]) -> RetrieverSpec:
    """The retriever a record names, or one line saying this amber cannot rebuild it."""
    try:
        return RetrieverSpec.from_identity(identity)
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise InputError(f"the run's retrieval record names a retriever this amber cannot "
                         f"rebuild ({err})",
                         hint="recompute it with the amber version that wrote it") from None


def compare_hits(recorded: list[dict[str, Any]], found: list[Hit]) -> dict[str, Any] | None:
    """How a recomputed ranking differs from the recorded one, or None when it agrees."""
    ids = [h["chunk_id"] for h in recorded]
    now = [h.chunk.chunk_id for h in found]
    if sorted(ids) != sorted(now):
        kind = "chunks"
    elif ids != now:
        kind = "order"
    else:
        delta = max((abs(float(h["score"]) - float(f.score))
                     for h, f in zip(recorded, found, strict=True)), default=0.0)
        if delta <= SCORE_TOLERANCE:
            return None
        kind = "score"
    return {"kind": kind, "recorded": ids, "recomputed": now,
            "recorded_scores": [float(h["score"]) for h in recorded],
            "recomputed_scores": [float(f.score) for f in found]}


def _params(chunking: dict[str, Any]) -> ChunkParams:
    return ChunkParams(int(chunking["max_tokens"]), int(chunking["overlap"]))


def _check_report(bundle: Bundle, fname: str, record_path: Path, embedder: Embedder,
                  differences: list[dict[str, Any]]) -> int:
    record = read_record(record_path)
    checked = 0
    params = ChunkParams()  # evaluation chunks every page with the defaults
    pages: dict[tuple[str, str], list[Chunk] | None] = {}

    def chunks_of(capture_id: str, chunking: ChunkParams) -> list[Chunk] | None:
        key = (capture_id, canonical_json(chunking.as_dict()))
        if key not in pages:
            page = load_page(bundle, capture_id, "", chunking)
            pages[key] = page.chunks if page.valid else None
        return pages[key]

    def report(where: dict[str, Any], diff: dict[str, Any]) -> None:
        differences.append({"report": fname, **where, **diff})

    # passages picked from one page: one retriever per (capture, recorded identity)
    built: dict[tuple[str, str], Retriever] = {}
    for (capture_id, query, k), line in sorted(record.passages.items()):
        where = {"step": "passages", "capture_id": capture_id, "query": query, "k": k}
        checked += 1
        chunks = chunks_of(capture_id, params)
        if chunks is None:
            report(where, {"kind": "missing", "recorded": [h["chunk_id"] for h in line["hits"]],
                           "recomputed": []})
            continue
        key = (capture_id, canonical_json(line["retriever"]))
        if key not in built:
            built[key] = Retriever.build(chunks, embedder, params.as_dict(),
                                         recorded_spec(line["retriever"]))
        diff = compare_hits(line["hits"], built[key].search(query, k))
        if diff:
            report(where, diff)

    # claim verification: the recorded index over the recorded captures, then its searches
    for digest, line in sorted(record.indexes.items()):
        chunking = _params(line["chunking"])
        searches = [s for s in record.searches.values()
                    if s["index"] == digest and s.get("step") == VERIFY_SEARCH_STEP]
        chunks: list[Chunk] = []
        lost = [c for c in line["captures"] if chunks_of(c, chunking) is None]
        for capture_id in line["captures"]:
            chunks += chunks_of(capture_id, chunking) or []
        if lost or chunks_digest(chunks) != digest:
            checked += len(searches)
            report({"step": "verification-index", "index": digest, "captures": lost or None,
                    "query": None, "k": None},
                   {"kind": "missing" if lost else "index", "recorded": [], "recomputed": []})
            continue
        index = Retriever.build(chunks, embedder, chunking.as_dict(),
                                recorded_spec(line["retriever"]))
        for s in sorted(searches, key=lambda s: (s["captures"] or [], s["query"], s["k"])):
            checked += 1
            captures = set(s["captures"]) if s["captures"] is not None else None
            diff = compare_hits(s["hits"], index.search(s["query"], int(s["k"]), captures))
            if diff:
                report({"step": "verification", "index": digest, "captures": s["captures"],
                        "query": s["query"], "k": s["k"]}, diff)
    return checked


def recompute_retrieval(run_dir: str | Path,
                        embedder: Embedder | None = None) -> dict[str, Any]:
    """Re-run every retrieval recorded in ``run_dir`` with the run's embedder.

    -> ``{"agree", "checked", "differences": [{"report", "step", "capture_id" |
    "captures", "query", "k", "kind", "recorded", "recomputed", ...}], "tolerance",
    "embedder", "seconds"}``. Raises InputError/BundleError (as replay) and ModelError
    when this machine's embedder is not the run's.
    Example: ``recompute_retrieval("runs/smol")["agree"]``
    """
    started = time.perf_counter()
    run = Path(run_dir)
    manifest = load_manifest(run)
    check_inputs(manifest)
    wanted = manifest.get("embedder")
    differences: list[dict[str, Any]] = []
    checked = 0
    if wanted is not None:
        embedder = embedder or Embedder()
        have = embedder.identity()
        if (have.get("name"), have.get("sha256")) != (wanted.get("name"),
                                                       wanted.get("sha256")):
            raise ModelError(f"the run used embedder {wanted.get('name')} (sha256 "
                             f"{str(wanted.get('sha256'))[:12]}), this machine has "
                             f"{have.get('name')} (sha256 {str(have.get('sha256'))[:12]})",
                             hint="install the run's embedder to compare retrieval")
        for job in plan_reports(list(manifest["bundles"]), manifest["tasks_file"]):
            with Bundle.open(job.path) as bundle:
                checked += _check_report(
                    bundle, job.fname, run / "retrieval" / (Path(job.fname).stem + ".jsonl"),
                    embedder, differences)
    return {"agree": not differences, "checked": checked, "differences": differences,
            "tolerance": SCORE_TOLERANCE, "embedder": wanted, "run": str(run),
            "seconds": round(time.perf_counter() - started, 3)}
