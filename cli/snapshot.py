"""``amber snapshot``: capture evidence into a bundle."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

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
from ambereval.cli.output import fail, handled, print_json, progress_bar, stderr, stdout

if TYPE_CHECKING:
    from ambereval.snapshots import CaptureOptions, CaptureSummary

app = typer.Typer(no_args_is_help=True, help="Capture web evidence into a bundle (online).")

Out = Annotated[Path, typer.Option("--out", "-o", help="Bundle directory (created or resumed).")]
Reader = Annotated[str, typer.Option("--reader", help="How pages are read: jina or direct.")]
Concurrency = Annotated[int, typer.Option("--concurrency", "-j", min=1, max=64,
                                          help="Concurrent fetches.")]
Json = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]
JinaOpt = Annotated[list[str] | None, typer.Option(
    "--reader-header", "--jina-option",
    help="A Jina Reader option sent with every read, 'X-Name: value', or a benchmark's "
    "profile by name (deepresearch-bench); repeatable. Capture with the options the "
    "benchmark's own code will send, and amber serve answers it exactly.")]
Retries = Annotated[int, typer.Option(
    "--attempts", "--retries", min=1, max=20,
    help="Attempts per request, the first try included (--retries is the older name).")]
Timeout = Annotated[float, typer.Option(
    "--timeout", min=0.1, help="Seconds for one fetch in total: connect, headers and body.")]
AllowPrivate = Annotated[bool, typer.Option(
    "--allow-private-addresses", help="Let the direct reader reach loopback, private and "
    "link-local addresses (a local test site); also AMBER_ALLOW_PRIVATE_ADDRESSES=1.")]
Backoff = Annotated[float, typer.Option("--backoff", min=0.0, help="Base backoff seconds.")]
Rate = Annotated[float, typer.Option("--rate", min=0.0,
                                     help="Max requests/s per service (0 = unlimited).")]


def _jina_options(specs: list[str] | None) -> dict[str, str]:
    from ambereval.snapshots.capture.jina import reader_headers

    try:
        return reader_headers(specs or [])
    except ValueError as err:
        fail(f"--reader-header {err}", hint="e.g. --reader-header 'X-With-Generated-Alt: "
             "true' or --reader-header deepresearch-bench", exit_code=2)
        raise  # fail() exits


def _options(reader: str, concurrency: int, jina: list[str] | None, retries: int,
             timeout: float, backoff: float, rate: float, allow_private: bool = False,
             **search: object) -> CaptureOptions:
    if reader not in ("jina", "direct"):
        fail(f"unknown reader {reader!r}", hint="use --reader jina or --reader direct",
             exit_code=2)
    from ambereval.snapshots import CaptureOptions, RetryPolicy

    policy = RetryPolicy(attempts=retries, timeout=timeout, backoff=backoff)
    limit = rate or None
    if allow_private:  # else from_env reads AMBER_ALLOW_PRIVATE_ADDRESSES
        search["allow_private_addresses"] = True
    return CaptureOptions.from_env(
        reader=reader, concurrency=concurrency, jina_options=_jina_options(jina),
        policy=policy, serper_rate=limit, reader_rate=limit, **search)  # type: ignore[arg-type]


def _render(summary: CaptureSummary, as_json: bool, reader: str) -> None:
    if as_json:
        print_json(summary.as_dict())
        return
    for note in summary.repaired:
        stdout.print(f"repaired: {note}")
    from rich.table import Table  # the table view only: rich is slow to import

    table = Table(title=f"Bundle {summary.bundle}", show_header=False)
    for name in ("claims", "searches", "pages", "captured", "failed", "deduplicated",
                 "skipped", "bytes"):
        table.add_row(name, str(getattr(summary, name)))
    stdout.print(table)
    for failure in summary.failures[:20]:
        stdout.print(f"failed: {failure['url']} ({failure['error']})", markup=False)
    if len(summary.failures) > 20:
        stdout.print(f"... and {len(summary.failures) - 20} more failures (--json lists all)")
    if summary.failed and not summary.captured and not summary.skipped:
        hint = ("is the Jina reader able to reach these pages? try --reader direct"
                if reader == "jina" else "are these pages reachable from this machine? "
                "the direct reader refuses private and loopback addresses unless "
                "--allow-private-addresses is given")
        stderr.print(f"amber: warning: no page was captured ({summary.failed} failed), so the "
                     f"bundle holds no evidence; check the reasons above ({hint})",
                     markup=False)


@app.command("claims")
def claims_cmd(
    claims: Annotated[Path, typer.Argument(help="JSONL: {id, text, urls?, queries?} per line.")],
    out: Out,
    reader: Reader = "jina",
    top_k: Annotated[int, typer.Option("--top-k", min=0, help="Result pages read per query.")] = 3,
    gl: Annotated[str, typer.Option(help="Search country.")] = "us",
    hl: Annotated[str, typer.Option(help="Search language.")] = "en",
    num: Annotated[int, typer.Option(min=1, max=100, help="Results asked per query.")] = 10,
    tbs: Annotated[str | None, typer.Option(help="Search time filter, e.g. qdr:y.")] = None,
    page: Annotated[int | None, typer.Option(help="Search results page.")] = None,
    concurrency: Concurrency = 4,
    jina_option: JinaOpt = None,
    retries: Retries = 4,
    timeout: Timeout = 30.0,
    backoff: Backoff = 0.5,
    rate: Rate = 5.0,
    allow_private_addresses: AllowPrivate = False,
    as_json: Json = False,
) -> None:
    """Search each claim's queries, read the top-k pages and every cited URL.

    Example: SERPER_API_KEY=... amber snapshot claims claims.jsonl --out bundle/
    """
    with handled():
        options = _options(reader, concurrency, jina_option, retries, timeout, backoff, rate,
                           allow_private_addresses, top_k=top_k, gl=gl, hl=hl, num=num,
                           tbs=tbs, page=page)
        from ambereval.snapshots import capture_claims, load_claims

        items = load_claims(claims)
        with progress_bar(not as_json) as progress:
            summary = capture_claims(out, items, options, progress)
    _render(summary, as_json, reader)


@app.command("report")
def report_cmd(
    report: Annotated[Path, typer.Argument(help="A Markdown research report.")],
    out: Out,
    task: Annotated[Path | None, typer.Option("--task", help="Task JSON for the report.")]
    = None,
    extractor: Annotated[str, typer.Option(
        "--extractor", help="judge (atomic claims, PROTOCOLS §1) or sentences (one claim per "
        "citing or numeric sentence, no judge).")] = "judge",
    reader: Reader = "jina",
    reader_header: JinaOpt = None,
    top_k: Annotated[int, typer.Option(
        "--top-k", min=0, help="Result pages read per query (0: no search, cited pages "
        "only; no SERPER_API_KEY needed).")] = 3,
    concurrency: Concurrency = 4,
    retries: Retries = 4,
    timeout: Timeout = 30.0,
    backoff: Backoff = 0.5,
    rate: Rate = 5.0,
    allow_private_addresses: AllowPrivate = False,
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
    as_json: Json = False,
) -> None:
    """Extract the report's claims with the judge, then search and capture their evidence.

    Example: SERPER_API_KEY=... amber snapshot report report.md --out bundle/
    """
    from ambereval.engine.snapshot_report import snapshot_report
    from ambereval.models import open_judge

    check_ledger_mode(ledger_mode)
    with handled():
        options = _options(reader, concurrency, reader_header, retries, timeout, backoff,
                           rate, allow_private_addresses, top_k=top_k)
        judge = open_judge(judge_model, judge_url, judge_name, ledger, ledger_mode,
                           n_ctx=judge_ctx, threads=threads, seed=seed,
                           concurrency=judge_concurrency, judge=judge_ref)
        with progress_bar(not as_json) as progress:
            summary, claims, account = snapshot_report(report, out, judge, options, task,
                                                       progress, extractor)
    if account["warning"]:
        stderr.print(f"amber: warning: {account['warning']}", markup=False)
    if as_json:
        print_json({**summary.as_dict(), "claims": len(claims), "judge_calls": judge.calls,
                    "extraction": account})
        return
    by = account["by_extractor"]
    stdout.print(f"extracted {len(claims)} claims with {judge.calls} judge calls: "
                 f"{by['judge']} by the judge, {by['sentences']} by the sentence extractor "
                 f"(which alone makes {account['sentence_baseline']})")
    _render(summary, as_json, reader)


@app.command("urls")
def urls_cmd(
    urls: Annotated[Path, typer.Argument(help="Text file: one URL per line.")],
    out: Out,
    reader: Reader = "jina",
    concurrency: Concurrency = 4,
    jina_option: JinaOpt = None,
    retries: Retries = 4,
    timeout: Timeout = 30.0,
    backoff: Backoff = 0.5,
    rate: Rate = 5.0,
    allow_private_addresses: AllowPrivate = False,
    as_json: Json = False,
) -> None:
    """Read a plain list of URLs into a bundle.

    Example: amber snapshot urls urls.txt --out bundle/ --reader direct
    """
    with handled():
        options = _options(reader, concurrency, jina_option, retries, timeout, backoff, rate,
                           allow_private_addresses)
        from ambereval.snapshots import capture_urls, load_urls

        items = load_urls(urls)
        with progress_bar(not as_json) as progress:
            summary = capture_urls(out, items, options, progress)
    _render(summary, as_json, reader)
