"""Retrieval benchmarks, measured in one run:

1. embedding throughput (passages/s) of the default embedder on real passages (the WiCE
   embeddings themselves are cached outside the repo, ~/.cache/amber/bench);
2. FAISS search latency p50/p95, exact (IndexFlatIP) vs the approximate index Amber
   builds above its threshold (up to 2,000,000 chunks an 8-bit scan re-ranked exactly,
   IndexRefineFlat over SQ8; ``--hnsw`` adds the HNSW graph used above that and by
   earlier runs, ``--ivf`` the IVF index older runs used), side by side on the same
   queries, one query at a time on one thread, with each index's recall@5 against exact
   search and its build time. Each index is built once per case and searched at several
   settings of its search-time knob (``--k-factor`` for the scan, ``--ef-search`` for
   HNSW; Amber's default for that size is marked). Cases (``--data``):
   - real: the MiniLM embeddings of WiCE's 16,868 sentences, WiCE claims as queries;
   - perturbed: those embeddings, then copies of them plus noise shaped like their own
     spread (``--sigma`` times it) up to each size -- corpus-like: many near-paraphrases
     around real sentences; WiCE claims as queries;
   - gaussian: draws from a Gaussian with the mean and covariance of the real embeddings,
     normalised, queries drawn the same way -- no neighbourhood structure at all, the
     worst case for a graph or cluster index among shapes an embedder can give;
   - uniform: directions drawn uniformly on the sphere (an isotropic Gaussian,
     normalised), queries the same way -- worse still, and unlike any text;
3. quality and speed of the retrievers on WiCE from ../shared/data: for each claim, rank
   the sentences of its cited page; gold = the sentences annotators marked as evidence.
   Dense (MiniLM + FAISS), BM25 (rank-bm25, the retriever DR3-Eval uses; and bm25s as
   Amber runs it) and hybrid (Amber's Retriever: reciprocal rank fusion of the two).
   Reports recall@5 and MRR.

    .venv/bin/python scripts/bench_retrieval.py [--sizes 100000,1000000]
        [--data real,perturbed,gaussian,uniform] [--hnsw] [--ivf] [--skip-scale]
        [--skip-quality]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from pathlib import Path

import faiss
import numpy as np
from rank_bm25 import BM25Okapi

from ambereval.models import Chunk, Embedder, Retriever, RetrieverSpec, VectorIndex
from ambereval.models.bm25 import Bm25Index
from ambereval.models.canonical import content_key
from ambereval.models.vector_index import IndexSpec

WICE = (Path(__file__).resolve().parents[2] / "shared" / "data" / "entailment" / "wice"
        / "oracle_chunks_claim_dev.jsonl")
_TOKEN = re.compile(r"\w+")
QUERIES = 300
THROUGHPUT_SAMPLE = 1_000
SIGMA = 0.75
CACHE = Path.home() / ".cache" / "amber" / "bench"


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


def cached_embeddings(embedder: Embedder, texts: list[str], cache: Path) -> np.ndarray:
    """``embedder.embed(texts)``, kept in ``cache`` (outside the repo) under a key of the
    embedder's identity and the texts, so a rerun does not spend minutes re-embedding."""
    key = content_key([embedder.identity(), texts])
    path = cache / f"embeddings-{key[:32]}.npy"
    if path.is_file():
        return np.load(path)
    vectors = embedder.embed(texts)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
    np.save(tmp, vectors)
    os.replace(tmp, path)
    return vectors


def score(ranked: list[int], gold: set[int]) -> tuple[float, float]:
    recall = len(set(ranked[:5]) & gold) / len(gold)
    rr = next((1 / (r + 1) for r, i in enumerate(ranked) if i in gold), 0.0)
    return recall, rr


class Shaped:
    """Normalised draws from a Gaussian fitted to real embeddings: no cluster structure
    at all, the worst case for an approximate index."""

    def __init__(self, real: np.ndarray, seed: int = 0) -> None:
        self.mean = real.mean(axis=0)
        cov = np.cov(real - self.mean, rowvar=False)
        values, vectors = np.linalg.eigh(cov)
        self.basis = (vectors * np.sqrt(np.clip(values, 0, None))).T.astype(np.float32)
        self.rng = np.random.default_rng(seed)

    def noise(self, m: int) -> np.ndarray:
        z = self.rng.standard_normal((m, len(self.mean)), dtype=np.float32)
        return z @ self.basis

    def draw(self, n: int) -> np.ndarray:
        out = np.empty((n, len(self.mean)), dtype=np.float32)
        for start in range(0, n, 100_000):
            m = min(100_000, n - start)
            out[start:start + m] = self.noise(m) + self.mean
        faiss.normalize_L2(out)
        return out


class Perturbed(Shaped):
    """Corpus-like vectors: every real embedding, then copies of real embeddings (drawn
    in turn) plus ``sigma`` times noise shaped like the real spread, normalised -- many
    near-paraphrases around each real sentence, as pages quoting each other give."""

    def __init__(self, real: np.ndarray, sigma: float, seed: int = 0) -> None:
        super().__init__(real, seed)
        self.real = real
        self.sigma = sigma

    def draw(self, n: int) -> np.ndarray:
        out = np.empty((n, len(self.mean)), dtype=np.float32)
        head = min(n, len(self.real))
        out[:head] = self.real[:head]
        for start in range(head, n, 100_000):
            m = min(100_000, n - start)
            source = self.real[self.rng.integers(0, len(self.real), size=m)]
            out[start:start + m] = source + self.sigma * self.noise(m)
        faiss.normalize_L2(out)
        return out

    def similarity_to_source(self, m: int = 2_000) -> float:
        source = self.real[:m]
        copy = source + self.sigma * self.noise(len(source))
        faiss.normalize_L2(copy)
        return float(np.mean(np.sum(copy * source, axis=1)))


def uniform(n: int, dim: int, seed: int) -> np.ndarray:
    """``n`` directions drawn uniformly on the unit sphere of ``dim`` dimensions."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        out[start:start + m] = rng.standard_normal((m, dim), dtype=np.float32)
    faiss.normalize_L2(out)
    return out


def latencies(index: VectorIndex, queries: np.ndarray, k: int = 5,
              ) -> tuple[list[float], list[float], list]:
    """Per-query wall and CPU milliseconds (this thread's CPU time: what a query costs
    when it does not wait for a core shared with other jobs), sorted, and the hits."""
    lat, cpu, found = [], [], []
    for q in queries:
        t, c = time.perf_counter(), time.thread_time()
        hits = index.search(q, k=k)
        lat.append((time.perf_counter() - t) * 1000)
        cpu.append((time.thread_time() - c) * 1000)
        found.append([h.chunk.chunk_id for h in hits])
    return sorted(lat), sorted(cpu), found


def p(lat: list[float], q: float) -> float:
    return lat[min(len(lat) - 1, int(len(lat) * q))]


def recall_at(found: list, truth: list) -> float:
    return statistics.mean(len(set(a) & set(e)) / len(e)
                           for a, e in zip(found, truth, strict=True) if e)


def knob_of(params: dict) -> tuple[str, str, int]:
    """(display name, search-time knob, Amber's setting) of a resolved index."""
    if params["type"] == "IndexRefineFlat":
        return f"{params['base']} scan, exact re-rank", "k_factor", params["k_factor"]
    if params["type"] == "IndexHNSWFlat":
        return (f"HNSW M {params['M']} efConstruction {params['ef_construction']}",
                "efSearch", params["ef_search"])
    return f"IVF nlist {params['nlist']}", "nprobe", params["nprobe"]


def turn(index: VectorIndex, knob: str, setting: int) -> None:
    if knob == "k_factor":
        index.index.k_factor = float(setting)
    elif knob == "efSearch":
        index.index.hnsw.efSearch = setting


def compare(data: np.ndarray, queries: np.ndarray, label: str, specs: list[IndexSpec],
            sweeps: dict[str, list[int]], log: Path | None) -> None:
    """Exact vs the approximate index each of ``specs`` builds at this size, same queries,
    one run; each index is built once and searched at every setting of ``sweeps`` for its
    knob (search-time settings: the index does not change)."""
    size, dim = data.shape
    chunks = [Chunk(f"c:{i:07d}", f"cap-{i % 500}", 0, 1, "", "") for i in range(size)]
    exact = VectorIndex(chunks, data, {"dim": dim, "index": IndexSpec().resolve(0)})
    lat_e, cpu_e, found_e = latencies(exact, queries)
    del exact
    print(f"{size:>9,} chunks ({label}): exact IndexFlatIP p50 "
          f"{statistics.median(lat_e):6.2f} ms, p95 {p(lat_e, 0.95):6.2f} ms "
          f"(CPU p50 {statistics.median(cpu_e):6.2f}, p95 {p(cpu_e, 0.95):6.2f})", flush=True)
    for spec in specs:
        params = spec.resolve(size)
        t, cpu = time.perf_counter(), time.process_time()
        approx = VectorIndex(chunks, data, {"dim": dim, "index": params})
        built, built_cpu = time.perf_counter() - t, time.process_time() - cpu
        name, knob, default = knob_of(params)
        settings = sorted(set(sweeps.get(knob, [])) | {default})
        print(f"{'':>11}{name}: built in {built:.1f} s ({built_cpu:.1f} s CPU)", flush=True)
        for setting in settings:
            turn(approx, knob, setting)
            lat_a, cpu_a, found_a = latencies(approx, queries)
            recall = recall_at(found_a, found_e)
            mark = "  <- default" if setting == default else ""
            print(f"{'':>13}{knob} {setting:>4}: p50 {statistics.median(lat_a):5.2f} ms, "
                  f"p95 {p(lat_a, 0.95):5.2f} ms (CPU p50 {statistics.median(cpu_a):5.2f}, "
                  f"p95 {p(cpu_a, 0.95):5.2f}; exact/this CPU p95 "
                  f"{p(cpu_e, 0.95) / p(cpu_a, 0.95):.1f}x), recall@5 vs exact "
                  f"{recall:.4f}{mark}", flush=True)
            if log is not None:
                with log.open("a", encoding="utf-8") as out:
                    out.write(json.dumps({
                        "size": size, "data": label, "type": params["type"], knob: setting,
                        "default": setting == default, "recall_at_5": round(recall, 4),
                        **({"M": params["M"], "ef_construction": params["ef_construction"]}
                           if "M" in params else {}),
                        "p50_ms": round(statistics.median(lat_a), 3),
                        "p95_ms": round(p(lat_a, 0.95), 3),
                        "cpu_p50_ms": round(statistics.median(cpu_a), 3),
                        "cpu_p95_ms": round(p(cpu_a, 0.95), 3),
                        "exact_cpu_p95_ms": round(p(cpu_e, 0.95), 3),
                        "exact_p50_ms": round(statistics.median(lat_e), 3),
                        "exact_p95_ms": round(p(lat_e, 0.95), 3),
                        "build_s": round(built, 1), "build_cpu_s": round(built_cpu, 1),
                        "queries": len(queries)}, sort_keys=True) + "\n")
        del approx


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--data", default="real,perturbed,gaussian",
                        help="scale cases: real (WiCE as is), perturbed, gaussian, uniform")
    parser.add_argument("--sigma", type=float, default=SIGMA,
                        help="noise of the perturbed copies (times the real spread)")
    parser.add_argument("--k-factor", default="2,4",
                        help="scan re-rank factors measured besides Amber's default")
    parser.add_argument("--ef-search", default="32,64,128,256",
                        help="HNSW efSearch values measured besides Amber's default")
    parser.add_argument("--hnsw", action="store_true",
                        help="also measure the HNSW graph (slow to build at 1M)")
    parser.add_argument("--hnsw-m", type=int, default=IndexSpec.hnsw_m,
                        help="HNSW graph degree to build (default: Amber's)")
    parser.add_argument("--ef-construction", type=int, default=IndexSpec.ef_construction,
                        help="HNSW build effort (default: Amber's)")
    parser.add_argument("--ivf", action="store_true",
                        help="also measure the IVF index earlier runs used")
    parser.add_argument("--log", type=Path, help="append every measured row as JSON here")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--cache", type=Path, default=CACHE,
                        help="where WiCE embeddings are kept between runs")
    args = parser.parse_args()
    faiss.omp_set_num_threads(1)  # one query at a time, as verification searches
    embedder = Embedder()
    cases = wice_cases()
    passages = [s for _, sents, _ in cases for s in sents]
    embedder.embed(passages[:64])  # warm-up
    start = time.perf_counter()
    embedder.embed(passages[:THROUGHPUT_SAMPLE])
    elapsed = time.perf_counter() - start
    print(f"embedding: {THROUGHPUT_SAMPLE / elapsed:,.0f} passages/s "
          f"({THROUGHPUT_SAMPLE} of {len(passages)} WiCE sentences, {embedder.name}, CPU)",
          flush=True)
    vectors = cached_embeddings(embedder, passages, args.cache)
    claims = cached_embeddings(embedder, [c for c, _, _ in cases], args.cache)

    if not args.skip_scale:
        kinds = args.data.split(",")
        sweeps = {"efSearch": [int(v) for v in args.ef_search.split(",") if v],
                   "k_factor": [int(v) for v in args.k_factor.split(",") if v]}
        specs = [IndexSpec(ann_threshold=0)]
        if args.hnsw:
            specs.append(IndexSpec(ann_threshold=0, approximate="IndexHNSWFlat",
                                   hnsw_m=args.hnsw_m, ef_construction=args.ef_construction))
        if args.ivf:
            specs.append(IndexSpec(ann_threshold=0, approximate="IndexIVFFlat"))
        rng = np.random.default_rng(0)
        pick = rng.choice(len(claims), size=min(QUERIES, len(claims)), replace=False)
        if "real" in kinds:
            compare(vectors, claims[pick], "real WiCE sentences, claims as queries", specs,
                    sweeps, args.log)
        for size in (int(s) for s in args.sizes.split(",")):
            if "perturbed" in kinds:
                perturbed = Perturbed(vectors, args.sigma)
                label = (f"perturbed real, sigma {args.sigma} (cos to source "
                         f"{perturbed.similarity_to_source():.2f}), claims as queries")
                compare(perturbed.draw(size), claims[pick], label, specs, sweeps, args.log)
            if "gaussian" in kinds:
                shaped = Shaped(vectors)
                data = shaped.draw(size)
                compare(data, shaped.draw(QUERIES), "fitted Gaussian", specs, sweeps,
                        args.log)
                del data
            if "uniform" in kinds:
                data = uniform(size, vectors.shape[1], seed=0)
                compare(data, uniform(QUERIES, vectors.shape[1], seed=1), "uniform",
                        specs, sweeps, args.log)
                del data
    if args.skip_quality:
        return

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
