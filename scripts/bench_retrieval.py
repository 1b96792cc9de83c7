"""Retrieval benchmarks, measured in one run:

1. embedding throughput (passages/s) of the default embedder on real passages;
2. FAISS search latency p50/p95, exact (IndexFlatIP) vs the approximate index Amber
   builds above its threshold (IndexIVFFlat), side by side, with the approximate index's
   recall@5 against exact search, at 100,000 and 1,000,000 chunks. Vectors are synthetic
   but shaped like real ones: drawn from a Gaussian with the mean and covariance of the
   MiniLM embeddings of WiCE's sentences, then normalised (uniformly random vectors
   have no neighbourhood structure and would misrepresent any approximate index);
   queries are drawn the same way. The recall on the real WiCE embeddings is printed too;
3. quality and speed of the retrievers on WiCE from ../shared/data: for each claim, rank
   the sentences of its cited page; gold = the sentences annotators marked as evidence.
   Dense (MiniLM + FAISS), BM25 (rank-bm25, the retriever DR3-Eval uses; and bm25s as
   Amber runs it) and hybrid (Amber's Retriever: reciprocal rank fusion of the two).
   Reports recall@5 and MRR.

    .venv/bin/python scripts/bench_retrieval.py [--sizes 100000,1000000] [--skip-scale]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

import faiss
import numpy as np
from rank_bm25 import BM25Okapi

from ambereval.models import Chunk, Embedder, Retriever, RetrieverSpec, VectorIndex
from ambereval.models.bm25 import Bm25Index
from ambereval.models.vector_index import IndexSpec

WICE = (Path(__file__).resolve().parents[2] / "shared" / "data" / "entailment" / "wice"
        / "oracle_chunks_claim_dev.jsonl")
_TOKEN = re.compile(r"\w+")
QUERIES = 300


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


class Shaped:
    """Normalised draws from a Gaussian fitted to real embeddings."""

    def __init__(self, real: np.ndarray, seed: int = 0) -> None:
        self.mean = real.mean(axis=0)
        cov = np.cov(real - self.mean, rowvar=False)
        values, vectors = np.linalg.eigh(cov)
        self.basis = (vectors * np.sqrt(np.clip(values, 0, None))).T.astype(np.float32)
        self.rng = np.random.default_rng(seed)

    def draw(self, n: int) -> np.ndarray:
        out = np.empty((n, len(self.mean)), dtype=np.float32)
        for start in range(0, n, 100_000):
            m = min(100_000, n - start)
            z = self.rng.standard_normal((m, len(self.mean)), dtype=np.float32)
            out[start:start + m] = z @ self.basis + self.mean
        faiss.normalize_L2(out)
        return out


def latencies(index: VectorIndex, queries: np.ndarray, k: int = 5) -> tuple[list[float], list]:
    lat, found = [], []
    for q in queries:
        t = time.perf_counter()
        hits = index.search(q, k=k)
        lat.append((time.perf_counter() - t) * 1000)
        found.append([h.chunk.chunk_id for h in hits])
    lat.sort()
    return lat, found


def p(lat: list[float], q: float) -> float:
    return lat[min(len(lat) - 1, int(len(lat) * q))]


def compare(data: np.ndarray, queries: np.ndarray, label: str) -> None:
    size, dim = data.shape
    chunks = [Chunk(f"c:{i:07d}", f"cap-{i % 500}", 0, 1, "", "") for i in range(size)]
    exact = VectorIndex(chunks, data, {"dim": dim, "index": IndexSpec().resolve(0)})
    lat_e, found_e = latencies(exact, queries)
    del exact
    params = IndexSpec(ann_threshold=0).resolve(size)  # the IVF Amber builds above 20,000
    t = time.perf_counter()
    approx = VectorIndex(chunks, data, {"dim": dim, "index": params})
    built = time.perf_counter() - t
    lat_a, found_a = latencies(approx, queries)
    recall = statistics.mean(len(set(a) & set(e)) / len(e)
                             for a, e in zip(found_a, found_e, strict=True) if e)
    print(f"{size:>9,} chunks ({label}): exact p50 {statistics.median(lat_e):6.2f} ms, "
          f"p95 {p(lat_e, 0.95):6.2f} ms | IVF nlist {params['nlist']} nprobe "
          f"{params['nprobe']}: p50 {statistics.median(lat_a):5.2f} ms, p95 "
          f"{p(lat_a, 0.95):5.2f} ms, recall@5 vs exact {recall:.4f} "
          f"(built in {built:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--skip-scale", action="store_true")
    args = parser.parse_args()
    faiss.omp_set_num_threads(1)  # one query at a time, as verification searches
    embedder = Embedder()
    cases = wice_cases()
    passages = [s for _, sents, _ in cases for s in sents]
    embedder.embed(passages[:64])  # warm-up
    start = time.perf_counter()
    vectors = embedder.embed(passages)
    elapsed = time.perf_counter() - start
    print(f"embedding: {len(passages) / elapsed:,.0f} passages/s "
          f"({len(passages)} WiCE sentences, {embedder.name}, CPU)")
    claims = embedder.embed([c for c, _, _ in cases])

    if not args.skip_scale:
        rng = np.random.default_rng(0)
        pick = rng.choice(len(claims), size=min(QUERIES, len(claims)), replace=False)
        compare(vectors, claims[pick], "real WiCE sentence embeddings, claims as queries")
        shaped = Shaped(vectors)
        for size in (int(s) for s in args.sizes.split(",")):
            data = shaped.draw(size)
            compare(data, shaped.draw(QUERIES), "shaped synthetic")
            del data

    lookup = {c: claims[i] for i, (c, _, _) in enumerate(cases)}

    class Precomputed:
        """The embeddings computed above, so each retriever below ranks the same
        vectors (the embedder's own speed is the first line)."""

        def identity(self) -> dict[str, str]:
            return embedder.identity()

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.stack([lookup[t] for t in texts])

    results: dict[str, list[tuple[float, float]]] = {
        "dense (MiniLM)": [], "BM25 (rank-bm25)": [], "BM25 (bm25s)": [], "hybrid (RRF)": []}
    seconds = dict.fromkeys(results, 0.0)
    offset = 0
    for claim, sents, gold in cases:
        vecs = vectors[offset: offset + len(sents)]
        offset += len(sents)
        chunks = [Chunk(f"s:{i:04d}", "page", 0, 0, s, "") for i, s in enumerate(sents)]
        index = VectorIndex(chunks, vecs, {"dim": vecs.shape[1]})
        t = time.perf_counter()
        dense = [int(h.chunk.chunk_id[2:]) for h in index.search(lookup[claim], len(sents))]
        seconds["dense (MiniLM)"] += time.perf_counter() - t
        results["dense (MiniLM)"].append(score(dense, gold))
        t = time.perf_counter()
        bm25 = BM25Okapi([tokens(s) or ["_"] for s in sents])
        ranked = list(np.argsort(-bm25.get_scores(tokens(claim)), kind="stable"))
        seconds["BM25 (rank-bm25)"] += time.perf_counter() - t
        results["BM25 (rank-bm25)"].append(score(ranked, gold))
        t = time.perf_counter()
        lexical = Bm25Index(chunks)
        ranked = [pos for _, pos in lexical.scored(claim, len(sents))]
        seconds["BM25 (bm25s)"] += time.perf_counter() - t
        results["BM25 (bm25s)"].append(score(ranked, gold))
        t = time.perf_counter()
        hybrid = Retriever(chunks, RetrieverSpec(), Precomputed(), index, lexical)
        ranked = [int(h.chunk.chunk_id[2:]) for h in hybrid.search(claim, len(sents))]
        seconds["hybrid (RRF)"] += time.perf_counter() - t
        results["hybrid (RRF)"].append(score(ranked, gold))
    for name, res in results.items():
        recall = sum(r for r, _ in res) / len(res)
        mrr = sum(m for _, m in res) / len(res)
        print(f"{name:>17}: recall@5 {recall:.3f}, MRR {mrr:.3f}, "
              f"{len(res) / seconds[name]:,.0f} queries/s ({len(res)} WiCE claims)")
    print(f"hybrid = {RetrieverSpec().as_dict()}")


if __name__ == "__main__":
    main()
