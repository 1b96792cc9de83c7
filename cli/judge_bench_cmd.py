"""``amber judge-bench``: measure a judge on labeled claim/evidence pairs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

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
    check_ledger_mode,
)
from ambereval.cli.output import fail, handled, print_json, progress_bar, stdout


def judge_bench_cmd(
    data: Annotated[Path | None, typer.Argument(
        help="JSONL: {id, claim, evidence, label} per line (or use --suite DIR).")] = None,
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
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N pairs.")] = None,
    retrieve: Annotated[int | None, typer.Option(
        "--retrieve", min=1, help="Pairs carry whole pages: judge only the top-K retrieved "
        "chunks, and report recall@K of the gold evidence.")] = None,
    chunk_tokens: Annotated[int, typer.Option(
        "--chunk-tokens", min=8, help="Chunk size in words for --retrieve.")] = 64,
    predictions: Annotated[Path | None, typer.Option(
        help="Write one JSON line per pair (label, verdict, ledger key).")] = None,
    decision: Annotated[str, typer.Option(
        "--decision", help="auto (log-probabilities where the judge has a fitted "
        "calibration, else generate), generate (the schema-constrained answer) or "
        "logprobs (the labels' log-probabilities; in-process llama.cpp only).")] = "auto",
    suite: Annotated[Path | None, typer.Option(
        "--suite", help="Run every labeled set (*.jsonl) in this directory and write the "
        "judge card to $AMBER_HOME/cards/<judge sha256>.json.")] = None,
    split: Annotated[str, typer.Option(
        "--split", help="With --suite: full (sets without .dev/.test), dev or test.")]
    = "full",
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="With --suite: also write the card here (X.json and X.md).")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run a judge on labeled pairs: accuracy, balanced accuracy, Cohen's kappa, confusion.

    Example: amber judge-bench pairs.jsonl --ledger judge.sqlite --json

    Example: amber judge-bench --suite out/judge-sets --split test --limit 40 --out card.json
    """
    from ambereval.engine.judge_bench import run_judge_bench
    from ambereval.models import open_judge

    check_ledger_mode(ledger_mode)
    if ledger_mode == "replay" and ledger is None:
        fail("--ledger-mode replay needs --ledger PATH", exit_code=2)
    if (data is None) == (suite is None):
        fail("give one labeled set (DATA.jsonl) or --suite DIR", exit_code=2)
    if suite is None and (split != "full" or out is not None):
        fail("--split and --out go with --suite DIR", exit_code=2)
    if suite is not None:
        return _suite(suite, split, out, limit, retrieve, as_json, decision, lambda: open_judge(
            judge_model, judge_url, judge_name, ledger, ledger_mode, n_ctx=judge_ctx,
            threads=threads, seed=seed, concurrency=judge_concurrency, judge=judge_ref))
    with handled():
        judge = open_judge(judge_model, judge_url, judge_name, ledger, ledger_mode,
                           n_ctx=judge_ctx, threads=threads, seed=seed,
                           concurrency=judge_concurrency, judge=judge_ref)
        with progress_bar(not as_json) as progress:
            result = run_judge_bench(data, judge, limit=limit, progress=progress,
                                     retrieve_k=retrieve, chunk_tokens=chunk_tokens,
                                     decision=decision)
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


def _suite(suite: Path, split: str, out: Path | None, limit: int | None,
           retrieve: int | None, as_json: bool, decision: str,
           opener: Callable[[], Any]) -> None:
    from ambereval.engine.judge_card import DEFAULT_RETRIEVE_K, run_suite, write_card

    with handled():
        judge = opener()
        with progress_bar(not as_json) as progress:
            card = run_suite(suite, judge, split=split, limit=limit,
                             retrieve_k=retrieve or DEFAULT_RETRIEVE_K, progress=progress,
                             decision=decision)
        paths = write_card(card, out)
        judge.close()
    if as_json:
        print_json({**card, "written": [str(p) for p in paths]})
        return
    judge_id = card["judge"]
    table = Table("set", "n", "accuracy", "balanced acc.", "kappa", "s/call",
                  title=f"Judge card: {judge_id.get('name')} ({judge_id['sha256'][:12]})")
    for name, s in card["sets"].items():
        table.add_row(name, str(s["n"]), f"{s['accuracy']:.3f}",
                      f"{s['balanced_accuracy']:.3f}", f"{s['kappa']:.3f}",
                      f"{s['seconds_per_call']:.2f}")
    stdout.print(table)
    stdout.print(f"mean kappa {card['mean_kappa']:.3f}; card written to "
                 + ", ".join(str(p) for p in paths))
