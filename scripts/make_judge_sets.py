"""Turn the labeled claim/evidence data in ../shared/data/entailment into judge-bench JSONL.

    .venv/bin/python scripts/make_judge_sets.py [--out out/judge-sets] [--per-set 200]

Writes ``<set>.jsonl`` (the sample) and its two halves ``<set>.dev.jsonl`` and
``<set>.test.jsonl``: a pair is in the dev half when the first byte of sha256("split:" +
id) is even. Tune prompts and calibrate on dev halves only; report on test halves.

Label mappings (../shared/data/README.md): FactCheck-GPT stance completely-support ->
supported, refute -> contradicted, irrelevant -> unknown (partially-support dropped);
WiCE claims supported / not_supported -> unsupported (partial dropped; evidence = the
claim's oracle sentences); AttributionBench attributable -> supported, else
unsupported; Climate-FEVER SUPPORTS / REFUTES / NOT_ENOUGH_INFO (DISPUTED dropped).
A set larger than --per-set keeps a deterministic sample (lowest sha256 of the id).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "entailment"


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def factcheck() -> Iterator[dict[str, str]]:
    mapping = {"completely-support": "supported", "refute": "contradicted",
               "irrelevant": "unknown"}
    path = DATA / "factcheck_gpt" / "subtask3_claim_evidence_stance.shared.jsonl"
    for i, row in enumerate(_jsonl(path)):
        if row["stance"] in mapping:
            yield {"id": f"fcg-{i:05d}", "claim": row["claim"], "evidence": row["evidence"],
                   "label": mapping[row["stance"]]}


def wice() -> Iterator[dict[str, str]]:
    by_claim: dict[str, dict[str, Any]] = {}
    for row in _jsonl(DATA / "wice" / "oracle_chunks_claim_dev.jsonl"):
        entry = by_claim.setdefault(row["claim"], {"labels": set(), "evidence": [],
                                                   "id": row["meta"]["id"]})
        entry["labels"].add(row["label"])
        for sentence in row["evidence"]:
            if sentence not in entry["evidence"]:
                entry["evidence"].append(sentence)
    for claim, entry in by_claim.items():
        if "supported" in entry["labels"]:
            label = "supported"
        elif entry["labels"] == {"not_supported"}:
            label = "unsupported"
        else:
            continue
        yield {"id": f"wice-{entry['id']}", "claim": claim,
               "evidence": " ".join(entry["evidence"]), "label": label}


def attribution() -> Iterator[dict[str, str]]:
    path = DATA / "attributionbench" / "test_all_subset_balanced_sampled500.jsonl"
    for row in _jsonl(path):
        claim = f"{row['question'].strip().rstrip('?')}? {row['claim'].strip()}"
        label = "supported" if row["attribution_label"] == "attributable" else "unsupported"
        yield {"id": f"attr-{row['id']}", "claim": claim,
               "evidence": "\n\n".join(row["references"]), "label": label}


def climate() -> Iterator[dict[str, str]]:
    mapping = {"SUPPORTS": "supported", "REFUTES": "contradicted",
               "NOT_ENOUGH_INFO": "unknown"}
    for row in _jsonl(DATA / "climate_fever" / "climate-fever.jsonl"):
        if row["claim_label"] in mapping:
            evidence = " ".join(e["evidence"] for e in row["evidences"])
            yield {"id": f"cf-{row['claim_id']}", "claim": row["claim"], "evidence": evidence,
                   "label": mapping[row["claim_label"]]}


def wice_pages() -> Iterator[dict[str, Any]]:
    """WiCE rows as whole pages (the cited article's sentences) with gold evidence spans,
    for ``judge-bench --retrieve K``."""
    for row in _jsonl(DATA / "wice" / "oracle_chunks_claim_dev.jsonl"):
        meta = row["meta"]
        label = {"supported": "supported", "not_supported": "unsupported"}.get(row["label"])
        if label is None or "oracle_idx" not in meta:
            continue
        oracle = set(meta["oracle_idx"])
        page, gold = "", []
        for idx, sentence in zip(meta["chunk_idx"], row["evidence"], strict=True):
            start = len(page)
            page += sentence + "\n\n"
            if idx in oracle:
                gold.append([start, start + len(sentence)])
        yield {"id": f"wicep-{meta['id']}-{len(gold)}-{hash_text(page)}", "claim": row["claim"],
               "page": page, "gold": gold, "label": label}


def hash_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


SETS = {"factcheck_gpt": factcheck, "wice": wice, "attributionbench": attribution,
        "climate_fever": climate, "wice_pages": wice_pages}


def split_of(pair_id: str) -> str:
    """``dev`` or ``test``, from the pair id alone: stable across samples and runs."""
    return "dev" if hashlib.sha256(f"split:{pair_id}".encode()).digest()[0] % 2 == 0 \
        else "test"


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("out/judge-sets"))
    ap.add_argument("--per-set", type=int, default=200)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, make in SETS.items():
        rows = list(make())
        if len(rows) > args.per_set:
            rows.sort(key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())
            rows = rows[: args.per_set]
        path = args.out / f"{name}.jsonl"
        _write(path, rows)
        halves = {h: [r for r in rows if split_of(r["id"]) == h] for h in ("dev", "test")}
        for half, part in halves.items():
            _write(args.out / f"{name}.{half}.jsonl", part)
        print(f"{path}: {len(rows)} pairs (dev {len(halves['dev'])}, "
              f"test {len(halves['test'])})")


if __name__ == "__main__":
    main()
