"""``amber judge-bench``: measure a judge on labeled claim/evidence pairs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ambereval.cli.judge_options import (
    JudgeConcurrency,
    JudgeCtx,
    JudgeModel,
    JudgeName,
    JudgeRef,
    JudgeUrl,
    LedgerMode,
    LedgerPath,
    Seed,
    Threads,
)
from ambereval.cli.output import fail, handled, print_json, progress_bar, stdout


def judge_bench_cmd(
    data: Annotated[Path, typer.Argument(help="JSONL: {id, claim, evidence, label} per line.")],
    judge_model: JudgeModel = None,
    judge_ref: JudgeRef = None,
    judge_url: JudgeUrl = None,
    judge_name: JudgeName = None,
    judge_ctx: JudgeCtx = 4096,
    judge_concurrency: JudgeConcurrency = None,
    threads: Threads = None,
    seed: Seed = 0,
    ledger: LedgerPath = None,
    ledger_mode: LedgerMode = "reuse",
    limit: Annotated[int | None, typer.Option(help="Only the first N pairs.")] = None,
    retrieve: Annotated[int | None, typer.Option(
        "--retrieve", min=1, help="Pairs carry whole pages: judge only the top-K retrieved "
        "chunks, and report recall@K of the gold evidence.")] = None,
    chunk_tokens: Annotated[int, typer.Option(
        "--chunk-tokens", min=8, help="Chunk size in words for --retrieve.")] = 64,
    predictions: Annotated[Path | None, typer.Option(
        help="Write one JSON line per pair (label, verdict, ledger key).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run a judge on labeled pairs: accuracy, balanced accuracy, Cohen's kappa, confusion.

    Example: amber judge-bench pairs.jsonl --ledger judge.sqlite --json
    """
    from ambereval.engine.judge_bench import run_judge_bench
    from ambereval.models import LEDGER_MODES, open_judge

    if ledger_mode not in LEDGER_MODES:
        fail(f"unknown --ledger-mode {ledger_mode!r}", hint="record, reuse or replay",
             exit_code=2)
    if ledger_mode == "replay" and ledger is None:
        fail("--ledger-mode replay needs --ledger PATH", exit_code=2)
    with handled():
        judge = open_judge(judge_model, judge_url, judge_name, ledger, ledger_mode,
                           n_ctx=judge_ctx, threads=threads, seed=seed,
                           concurrency=judge_concurrency, judge=judge_ref)
        with progress_bar(not as_json) as progress:
            result = run_judge_bench(data, judge, limit=limit, progress=progress,
                                     retrieve_k=retrieve, chunk_tokens=chunk_tokens)
    rows = result.pop("predictions")
    if predictions is not None:
        predictions.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    if as_json:
        print_json(result)
        return
    stdout.print(f"judge: {result['judge']}")
    if "retrieval" in result:
        r = result["retrieval"]
        stdout.print(f"retrieval: recall@{r['k']} = {r['recall_at_k']} over "
                     f"{r['items_with_gold']} items with gold evidence")
    stdout.print(f"n = {result['n']}  accuracy = {result['accuracy']:.3f}  "
                 f"balanced accuracy = {result['balanced_accuracy']:.3f}  "
                 f"kappa = {result['kappa']:.3f}")
    labels = result["labels"]
    table = Table("gold \\ judged", *labels, title="confusion")
    for gold in labels:
        table.add_row(gold, *(str(result["confusion"][gold][p]) for p in labels))
    stdout.print(table)
