"""``amber bundle``: verify, pack, unpack, stats, show."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ambereval.cli.output import handled, print_json, stdout

app = typer.Typer(no_args_is_help=True, help="Check, pack and inspect evidence bundles.")

BundleArg = Annotated[Path, typer.Argument(help="Bundle directory.")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@app.command("verify")
def verify_cmd(bundle: BundleArg, as_json: Json = False) -> None:
    """Recompute every digest and check the index against the WARCs (exit 3 on mismatch).

    Example: amber bundle verify bundle/
    """
    from ambereval.snapshots import verify_bundle

    with handled():
        report = verify_bundle(bundle)
    if as_json:
        print_json(report.as_dict())
    elif report.ok:
        stdout.print(f"ok: {report.files} files, {report.records} records, "
                     f"{report.bytes} bytes verified")
    if not report.ok:
        if not as_json:
            typer.echo(f"amber: mismatch: {report.mismatch}", err=True)
        raise typer.Exit(3)


@app.command("pack")
def pack_cmd(
    bundle: BundleArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="The .wacz file to write.")],
) -> None:
    """Write the bundle as one .wacz file (WACZ 1.1.1 zip).

    Example: amber bundle pack bundle/ --out bundle.wacz
    """
    from ambereval.snapshots import pack_bundle

    with handled():
        path = pack_bundle(bundle, out)
    stdout.print(f"wrote {path} ({path.stat().st_size} bytes)")


@app.command("unpack")
def unpack_cmd(
    wacz: Annotated[Path, typer.Argument(help="A .wacz written by `amber bundle pack`.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Empty target directory.")],
) -> None:
    """Extract a .wacz; refuses any path that would escape the target directory.

    Example: amber bundle unpack bundle.wacz --out bundle/
    """
    from ambereval.snapshots import unpack_bundle

    with handled():
        path = unpack_bundle(wacz, out)
    stdout.print(f"unpacked into {path}")


@app.command("stats")
def stats_cmd(bundle: BundleArg, as_json: Json = False) -> None:
    """Summarise what a bundle holds.

    Example: amber bundle stats bundle/ --json
    """
    from ambereval.snapshots import bundle_stats

    with handled():
        stats = bundle_stats(bundle)
    if as_json:
        print_json(stats)
        return
    table = Table(title=f"Bundle {bundle}", show_header=False)
    for key, value in stats.items():
        if key != "bundle":
            table.add_row(key, str(value))
    stdout.print(table)


@app.command("show")
def show_cmd(
    bundle: BundleArg,
    ref: Annotated[str, typer.Argument(help="A capture id (cap-...) or a URL.")],
    as_json: Json = False,
) -> None:
    """Read one capture back from the WARC by offset: status, headers and extracted text.

    Example: amber bundle show bundle/ https://example.com/
    """
    from ambereval.snapshots import Bundle

    with handled(), Bundle.open(bundle) as b:
        cap = b.read_capture(ref)
    doc = {
        "capture_id": cap.capture_id, "url": cap.url, "state": cap.state, "status": cap.status,
        "error": cap.error, "content_type": cap.content_type, "title": cap.title,
        "text_status": cap.text_status, "response_record": cap.response_record,
        "text_record": cap.text_record, "warc_file": cap.warc_file, "offset": cap.offset,
        "body_bytes": len(cap.body), "text": cap.text,
    }
    if as_json:
        print_json(doc)
        return
    for key, value in doc.items():
        if key != "text":
            stdout.print(f"{key}: {value}")
    if cap.text is not None:
        stdout.print("")
        stdout.print(cap.text, markup=False)


from ambereval.cli.drift_cmd import drift_cmd  # noqa: E402  (the online one, own module)

app.command("drift")(drift_cmd)
