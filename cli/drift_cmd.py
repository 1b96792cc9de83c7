"""``amber bundle drift``: fetch a bundle's evidence again and list what changed (online)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ambereval.cli.output import handled, print_json, progress_bar, stdout
from ambereval.cli.snapshot import Concurrency, Rate, Retries, Timeout
from ambereval.cli.terminal_text import escape

AllowPrivate = Annotated[bool, typer.Option(
    "--allow-private-addresses", help="Let the direct reader reach loopback and private "
    "addresses (a local test site); also AMBER_ALLOW_PRIVATE_ADDRESSES=1.")]


def drift_cmd(
    bundle: Annotated[Path, typer.Argument(help="Bundle directory.")],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Keep the new captures as a bundle here (a new directory).")]
    = None,
    concurrency: Concurrency = 4,
    retries: Retries = 4,
    timeout: Timeout = 30.0,
    rate: Rate = 5.0,
    allow_private: AllowPrivate = False,
    limit: Annotated[int, typer.Option("--limit", min=1,
                                       help="Rows shown in the terminal.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Fetch a bundle's searches and pages again (ONLINE) and list which changed.

    Same readers as the capture; each change is shown by status, payload digest and
    extracted-text similarity. Separates "the evidence changed" from "the judge changed".

    Example: SERPER_API_KEY=... amber bundle drift bundle/ --out bundle-2026-12/
    """
    from ambereval.snapshots import CaptureOptions, RetryPolicy
    from ambereval.snapshots.capture.drift import drift_bundle

    with handled():
        extra: dict[str, Any] = {"allow_private_addresses": True} if allow_private else {}
        base = CaptureOptions.from_env(
            concurrency=concurrency, policy=RetryPolicy(attempts=retries, timeout=timeout),
            serper_rate=rate or None, reader_rate=rate or None, **extra)
        with progress_bar(not as_json) as progress:
            result = drift_bundle(bundle, base, out, progress)
    if as_json:
        print_json(result)
        return
    counts = ", ".join(f"{k} {v}" for k, v in result["counts"].items() if v)
    from rich.table import Column, Table  # the table view only: rich is slow to import

    table = Table("state", "kind", Column("url", overflow="fold"), "status", "similarity",
                  title=f"Drift of {escape(str(bundle))}: {counts}")
    for e in result["captures"][:limit]:
        old, new = e["old"] or {}, e["new"] or {}
        status = f"{old.get('status', '-')} -> {new.get('status', '-')}"
        sim = e.get("similarity")
        table.add_row(e["state"], e.get("kind") or "", escape(e.get("url") or ""), status,
                      "-" if sim is None else f"{sim:.3f}")
    stdout.print(table)
    if result["counts"].get("refused"):
        n = result["counts"]["refused"]
        stdout.print(f"refused: {n} capture{'s were' if n != 1 else ' was'} not fetched again "
                     "(the address policy; this bundle holds local or private addresses: "
                     "add --allow-private-addresses)", markup=False)
    if result["out"]:
        stdout.print(f"new captures written to {result['out']}")
