"""How much of the annotators' evidence the passages sent to the judge hold, by the
number of chunks chosen per statement (the judging rule ``statement_chunks``).

    .venv/bin/python scripts/bench_passage_recall.py [--min-chunks 3]

WiCE (../shared/data) gives, for each Wikipedia claim, sentences of the page it cites
(several rows of sentence indices per claim) and the sentences annotators marked as its
evidence. Each claim's page is rebuilt from the union of its rows' sentences in index
order (consecutive sentences one paragraph, a gap a paragraph break), chunked as Amber
chunks a captured page (160 words, 32 overlap) and ranked with Amber's default retriever
(hybrid: MiniLM + FAISS and BM25, reciprocal rank fusion), the claim as the query, as a
run ranks a page's chunks for a statement citing it. For k = 1..4 chosen chunks it
prints, over claims whose page has at least ``--min-chunks`` chunks:

- evidence recall: the share of evidence sentences wholly inside a chosen chunk;
- all evidence: the share of claims whose every evidence sentence is inside one;
- words sent: the mean words of the chosen chunks, overlaps merged (as ``passages=merged``).

Exact, deterministic, no judge call (the embedder runs on CPU, about a minute).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from ambereval.engine.eval_context import merged_spans
from ambereval.models import Embedder, Retriever, RetrieverSpec
from ambereval.models.chunker import ChunkParams, chunk_text

WICE = (Path(__file__).resolve().parents[2] / "shared" / "data" / "entailment" / "wice"
        / "oracle_chunks_claim_dev.jsonl")


def pages() -> list[tuple[str, str, list[tuple[int, int]]]]:
    """(claim, page text, evidence sentence spans) per WiCE claim with evidence, in id order."""
    rows: dict[str, list[dict]] = defaultdict(list)
    for line in WICE.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        rows[row["meta"]["id"]].append(row)
    out = []
    for cid in sorted(rows):
        sentences: dict[int, str] = {}
        gold: set[int] = set()
        for row in rows[cid]:
            sentences.update(zip(row["meta"]["chunk_idx"], row["evidence"], strict=True))
            gold |= set(row["meta"].get("oracle_idx") or [])
        if not gold & set(sentences):
            continue
        text, spans, last = "", {}, None
        for i in sorted(sentences):
            sep = "" if last is None else (" " if i == last + 1 else "\n\n")
            start = len(text) + len(sep)
            text += sep + " ".join(sentences[i].split())
            spans[i] = (start, len(text))
            last = i
        out.append((rows[cid][0]["claim"], text, [spans[i] for i in sorted(gold & set(spans))]))
    return out


def covered(span: tuple[int, int], chosen: list[tuple[int, int]]) -> bool:
    return any(a <= span[0] and span[1] <= b for a, b in chosen)


def merged_words(text: str, chosen: list[tuple[int, int]]) -> int:
    return sum(len(text[a:b].split()) for a, b in merged_spans(chosen))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-chunks", type=int, default=3,
                    help="only pages with at least this many chunks (fewer: any k sends all)")
    ap.add_argument("--max-k", type=int, default=4)
    args = ap.parse_args()
    if not WICE.is_file():
        raise SystemExit(f"WiCE not found at {WICE} (../shared/data)")
    embedder, params = Embedder(), ChunkParams()
    ks = range(1, args.max_k + 1)
    recall = {k: 0.0 for k in ks}
    whole = {k: 0 for k in ks}
    words = {k: 0 for k in ks}
    claims, sizes = 0, []
    for n, (claim, text, gold) in enumerate(pages()):
        chunks = chunk_text(text, f"wice{n:04d}", params)
        if len(chunks) < args.min_chunks:
            continue
        claims += 1
        sizes.append(len(chunks))
        index = Retriever.build(chunks, embedder, params.as_dict(), RetrieverSpec())
        hits = index.search(claim, args.max_k)
        for k in ks:
            chosen = [(h.chunk.start, h.chunk.end) for h in hits[:k]]
            inside = sum(covered(s, chosen) for s in gold)
            recall[k] += inside / len(gold)
            whole[k] += inside == len(gold)
            words[k] += merged_words(text, chosen)
    if not claims:
        raise SystemExit("no WiCE page has that many chunks")
    sizes.sort()
    print(f"{claims} WiCE claims whose page has >= {args.min_chunks} chunks "
          f"(median {sizes[len(sizes) // 2]}, max {sizes[-1]}; 160 words, 32 overlap; "
          "hybrid retriever)")
    print(f"{'k':>3} {'evidence recall':>16} {'all evidence':>13} {'words sent':>11}")
    for k in ks:
        print(f"{k:>3} {recall[k] / claims:>16.3f} {whole[k] / claims:>13.3f} "
              f"{words[k] / claims:>11.0f}")


if __name__ == "__main__":
    main()
