"""``amber verify``: judge every claim of a bundle offline, with provenance."""

from __future__ import annotations

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
    check_ledger_mode,
)
from ambereval.cli.output import (
    handled,
    print_json,
    progress_bar,
    stdout,
    truncation_warning,
    warn_if_damaged,
)


def verify_cmd(
    bundle: Annotated[Path, typer.Argument(help="A bundle made by `amber snapshot`.")],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Where verdicts.jsonl, summary.json, the ledger and the FAISS "
        "cache go (default: BUNDLE-verify next to the bundle).")] = None,
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
    embedder: Annotated[Path | None, typer.Option(
        "--embedder", help="A local sentence-transformers directory (default MiniLM).")] = None,
    whole_bundle: Annotated[bool, typer.Option(
        "--whole-bundle", help="Also search every page in the bundle, not only the "
        "claim's own.")] = False,
    page_rule: Annotated[str, typer.Option(
        "--page-rule", help="cited-first (default) or any-page.")] = "cited-first",
    as_json: Annotated[bool, typer.Option("--json", help="Print claims and summary.")] = False,
) -> None:
    """Verify every claim in a bundle, offline: Correct, Incorrect or Unknown.

    Each verdict keeps the captured bytes behind it (WARC record, offsets, ledger key).

    Example: amber verify bundle/ --json
    """
    from urllib.parse import urlsplit

    from ambereval.engine.verification import (
        VerifyOptions,
        deciding_evidence,
        verify_claims,
        write_results,
    )
    from ambereval.models import Embedder, open_judge
    from ambereval.netguard import install_offline_guard

    install_offline_guard(tuple(h for h in [urlsplit(judge_url).hostname if judge_url
                                            else None] if h))
    check_ledger_mode(ledger_mode)
    out = out or bundle.with_name(bundle.name.rstrip("/") + "-verify")
    with handled():
        if page_rule not in ("cited-first", "any-page"):
            from ambereval.errors import InputError

            raise InputError(f"unknown --page-rule {page_rule!r} (cited-first or any-page)")
        from ambereval.snapshots import Bundle

        Bundle.open(bundle).close()
        warn_if_damaged([bundle])
        encoder = Embedder(embedder)  # checked before the judge's ledger is created
        judge = open_judge(judge_model, judge_url, judge_name, ledger or out / "ledger.sqlite",
                           ledger_mode, n_ctx=judge_ctx, threads=threads, seed=seed,
                           concurrency=judge_concurrency, judge=judge_ref)
        options = VerifyOptions(whole_bundle=whole_bundle, page_rule=page_rule)
        with progress_bar(not as_json) as progress:
            result = verify_claims(bundle, judge, encoder, options,
                                   cache_dir=out / "faiss", progress=progress)
        write_results(result, out)
        judge.close()
    stats = judge.stats()
    truncation_warning(stats["truncated"])  # stderr: with --json too
    if as_json:
        print_json({**result, "stats": stats})
        return
    summary = result["summary"]
    table = Table("claim", "verdict", "reason", "evidence", title=f"Verified {bundle}")
    for claim in result["claims"][:200]:
        shown = deciding_evidence(claim)
        table.add_row(claim["id"], claim["verdict"], claim["reason"],
                      "-" if shown is None else shown["url"] + ("" if shown["cited"]
                                                                else " (found)"))
    stdout.print(table)
    stdout.print(f"Correct {summary['correct']}, Incorrect {summary['incorrect']}, Unknown "
                 f"{summary['unknown']} (no evidence: {summary['no_evidence']}); "
                 f"{summary['judge_calls']} judge questions ({stats['calls']} asked, "
                 f"{stats['ledger_hits']} from the ledger), {stats['prompt_tokens']} prompt + "
                 f"{stats['completion_tokens']} generated tokens, {stats['retries']} retries, "
                 f"{stats['throttled']} throttled, {stats['errors']} unusable; written to {out}")
