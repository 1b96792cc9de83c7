"""Retrieval benchmarks, measured in one run:

1. embedding throughput (passages/s) of the default embedder on real passages;
2. FAISS exact search latency p50/p95 at 10k and 100k chunks (random unit vectors of
   the embedder's dimension: latency depends on size, not content);
3. quality and speed of dense retrieval (MiniLM + FAISS) vs BM25 (rank-bm25, the
   retriever DR3-Eval uses) on WiCE from ../shared/data: for each claim, rank the
   sentences of its cited page; gold = the sentences annotators marked as evidence.
   Reports recall@5 and MRR.

    .venv/bin/python scripts/bench_retrieval.py
"""

from __future__ import annotations

import json
import re
import statistics
import time
from pathlib import Path

import faiss
import numpy as np
from rank_bm25 import BM25Okapi

from ambereval.models import Chunk, Embedder, VectorIndex

WICE = (Path(__file__).resolve().parents[2] / "shared" / "data" / "entailment" / "wice"
        / "oracle_chunks_claim_dev.jsonl")
_TOKEN = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def wice_cases() -> list[tuple[str, list[str], set[int]]]:
    cases = []
    for line in WICE.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        meta = row["meta"]
        if "oracle_idx" not in meta or len(row["evidence"]) < 6:
            continue
        gold = {i for i, c in enumerate(meta["chunk_idx"]) if c in set(meta["oracle_idx"])}
        if gold:
            cases.append((row["claim"], row["evidence"], gold))
    return cases


def score(ranked: list[int], gold: set[int]) -> tuple[float, float]:
    recall = len(set(ranked[:5]) & gold) / len(gold)
    rr = next((1 / (r + 1) for r, i in enumerate(ranked) if i in gold), 0.0)
    return recall, rr


def main() -> None:
    embedder = Embedder()
    cases = wice_cases()
    passages = [s for _, sents, _ in cases for s in sents]
    embedder.embed(passages[:64])  # warm-up
    start = time.perf_counter()
    vectors = embedder.embed(passages)
    elapsed = time.perf_counter() - start
    print(f"embedding: {len(passages) / elapsed:,.0f} passages/s "
          f"({len(passages)} WiCE sentences, {embedder.name}, CPU)")

    rng = np.random.default_rng(0)
    dim = vectors.shape[1]
    for size in (10_000, 100_000):
        data = rng.standard_normal((size, dim)).astype(np.float32)
        faiss.normalize_L2(data)
        chunks = [Chunk(f"c:{i:06d}", f"cap-{i % 500}", 0, 1, "", "") for i in range(size)]
        index = VectorIndex(chunks, data, {"dim": dim})
        queries = rng.standard_normal((200, dim)).astype(np.float32)
        faiss.normalize_L2(queries)
        lat = []
        for q in queries:
            t = time.perf_counter()
            index.search(q, k=5)
            lat.append((time.perf_counter() - t) * 1000)
        lat.sort()
        print(f"FAISS exact search at {size:>7,} chunks: p50 {statistics.median(lat):.2f} ms, "
              f"p95 {lat[int(len(lat) * 0.95)]:.2f} ms (k=5, dim {dim})")

    dense, sparse = [], []
    t_dense = t_bm25 = 0.0
    offset = 0
    for claim, sents, gold in cases:
        vecs = vectors[offset : offset + len(sents)]
        offset += len(sents)
        t = time.perf_counter()
        q = embedder.embed([claim])[0]
        ranked = list(np.argsort(-(vecs @ q), kind="stable"))
        t_dense += time.perf_counter() - t
        dense.append(score(ranked, gold))
        t = time.perf_counter()
        bm25 = BM25Okapi([tokens(s) or ["_"] for s in sents])
        scores = bm25.get_scores(tokens(claim))
        ranked = list(np.argsort(-scores, kind="stable"))
        t_bm25 += time.perf_counter() - t
        sparse.append(score(ranked, gold))
    for name, res, secs in (("dense (MiniLM)", dense, t_dense), ("BM25", sparse, t_bm25)):
        recall = sum(r for r, _ in res) / len(res)
        mrr = sum(m for _, m in res) / len(res)
        print(f"{name:>15}: recall@5 {recall:.3f}, MRR {mrr:.3f}, "
              f"{len(res) / secs:,.0f} queries/s ({len(res)} WiCE claims)")


if __name__ == "__main__":
    main()
