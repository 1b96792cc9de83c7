"""``amber bundle``: verify, pack, unpack, stats, show, finish, keygen, sign."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ambereval.cli.output import handled, print_json, stderr, stdout

app = typer.Typer(no_args_is_help=True, help="Check, pack and inspect evidence bundles.")

BundleArg = Annotated[Path, typer.Argument(help="Bundle directory.")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@app.command("verify")
def verify_cmd(
    bundle: BundleArg,
    require_signature: Annotated[bool, typer.Option(
        "--require-signature", help="Fail unless the bundle carries a valid signature.")]
    = False,
    trusted_key: Annotated[list[Path] | None, typer.Option(
        "--trusted-key", help="A public key (KEY.pub) whose signature is accepted; "
        "repeatable; implies --require-signature.")] = None,
    as_json: Json = False,
) -> None:
    """Recompute every digest and check the index against the WARCs (exit 3 on mismatch).

    A signed bundle's signature is checked too.

    Example: amber bundle verify bundle/ --trusted-key auditor.key.pub
    """
    from ambereval.snapshots import load_public_key, verify_bundle

    with handled():
        trusted = [load_public_key(k) for k in trusted_key] if trusted_key else None
        report = verify_bundle(bundle, require_signature=require_signature,
                               trusted_keys=trusted)
    if as_json:
        print_json(report.as_dict())
    elif report.ok:
        signed = ""
        if report.signature:
            signed = (f", signed by key sha256:{report.signature['key_sha256']} "
                      f"({report.signature['created']})")
        typer.echo(f"ok: {report.files} files, {report.records} records, "  # no rich: fast
                   f"{report.bytes} bytes verified{signed}")
    if not as_json:
        for note in report.notes:
            typer.echo(f"amber: warning: {note}", err=True)
    if not report.ok:
        if not as_json:
            typer.echo(f"amber: mismatch: {report.mismatch}", err=True)
        raise typer.Exit(3)


@app.command("pack")
def pack_cmd(
    bundle: BundleArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="The .wacz file to write.")],
    as_json: Json = False,
) -> None:
    """Write the bundle as one .wacz file (WACZ 1.1.1 zip).

    Example: amber bundle pack bundle/ --out bundle.wacz
    """
    from ambereval.snapshots import pack_bundle
    from ambereval.snapshots.bundle.manifest import sha256_file

    with handled():
        path = pack_bundle(bundle, out)
        digest, size = sha256_file(path)
    if as_json:
        print_json({"wacz": str(path), "bytes": size, "sha256": digest})
        return
    stdout.print(f"wrote {path} ({size} bytes, sha256:{digest})")


@app.command("unpack")
def unpack_cmd(
    wacz: Annotated[Path, typer.Argument(help="A .wacz written by `amber bundle pack`.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Empty target directory.")],
    as_json: Json = False,
) -> None:
    """Extract a .wacz; refuses any path that would escape the target directory.

    Example: amber bundle unpack bundle.wacz --out bundle/
    """
    from ambereval.snapshots import unpack_bundle

    with handled():
        path = unpack_bundle(wacz, out)
    if as_json:
        print_json({"bundle": str(path), "wacz": str(wacz)})
        return
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
    from rich.table import Table  # the table view only: rich is slow to import

    table = Table(title=f"Bundle {bundle}", show_header=False)
    for key, value in stats.items():
        if key == "judge_exchanges":  # recorded API judges, one line per provider and model
            value = "; ".join(
                f"{j['provider']} {j['model'] or '-'}: {j['exchanges']} "
                f"({', '.join(j['operations'])}; {j['streamed']} streamed, {j['errors']} "
                "errors)" for j in value) or 0
        if key != "bundle":
            table.add_row(key, str(value))
    stdout.print(table)


@app.command("show")
def show_cmd(
    bundle: BundleArg,
    ref: Annotated[str, typer.Argument(
        help="A capture id (cap-...), a URL, or a recorded judge exchange (jx-...).")],
    as_json: Json = False,
) -> None:
    """Read one capture back from the WARC by offset: status, headers and extracted text.

    A recorded judge exchange (jx-...) shows the request as sent and the judge's answer.

    Example: amber bundle show bundle/ https://example.com/
    """
    from ambereval.snapshots import Bundle
    from ambereval.snapshots.bundle.exchanges import read_exchange

    with handled(), Bundle.open(bundle) as b:
        exchange = read_exchange(b, ref) if ref.startswith(("jx-", "<urn:")) else None
        if exchange is not None:
            if as_json:
                print_json(exchange)
                return
            for key, value in exchange.items():
                if key not in ("request_body", "response_body", "request_headers",
                               "response_headers", "request_key"):
                    stdout.print(f"{key}: {value}", markup=False)
            stdout.print(f"request:\n{exchange['request_body']}", markup=False)
            stdout.print(f"answer:\n{exchange['response_body']}", markup=False)
            return
        cap = b.read_capture(ref)
    doc = {
        "capture_id": cap.capture_id, "url": cap.url, "final_url": cap.final_url,
        "state": cap.state, "status": cap.status,
        "error": cap.error, "content_type": cap.content_type, "title": cap.title,
        "text_status": cap.text_status, "response_record": cap.response_record,
        "text_record": cap.text_record, "warc_file": cap.warc_file, "offset": cap.offset,
        "body_bytes": len(cap.body), "text": cap.text,
    }
    if as_json:
        print_json(doc)
        return
    for key, value in doc.items():
        if key != "text" and not (key == "final_url" and value is None):
            stdout.print(f"{key}: {value}", markup=False)
    if cap.text is not None:
        stdout.print("")
        stdout.print(cap.text, markup=False)


@app.command("finish")
def finish_cmd(
    bundle: BundleArg,
    force: Annotated[bool, typer.Option(
        "--force", help="Re-seal a finished bundle whose files were changed since (its "
        "manifest is rewritten to match them; any signature is dropped).")] = False,
    as_json: Json = False,
) -> None:
    """Rebuild pages.jsonl, the CDXJ index and the manifest from the WARCs.

    The repair after a failed finish or an interrupted capture; nothing is fetched. A
    finished bundle whose files no longer match its manifest is refused (exit 3) unless
    --force.

    Example: amber bundle finish bundle/
    """
    from ambereval.snapshots import finish_bundle
    from ambereval.snapshots.bundle.manifest import DIGEST

    digest = bundle / DIGEST
    before = digest.read_bytes() if digest.is_file() else None
    with handled():
        notes = finish_bundle(bundle, force=force)
    resealed = before is None or not digest.is_file() or digest.read_bytes() != before
    unsigned = resealed and before is not None and b'"signedData"' in before
    if as_json:
        print_json({"bundle": str(bundle), "repaired": list(notes), "resealed": resealed,
                    "signature_dropped": unsigned})
        return
    for note in notes:
        stdout.print(f"repaired: {note}")
    stdout.print(f"finished {bundle}" if resealed
                 else f"{bundle} was already finished; left as it is")
    if unsigned:
        stderr.print(f"amber: note: {bundle}'s signature was dropped with its old digest "
                     "(sign it again: amber bundle sign)", markup=False)


@app.command("keygen")
def keygen_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="Private key file to create "
                                      "(the public key goes to OUT.pub).")],
    as_json: Json = False,
) -> None:
    """Create an ECDSA P-256 signing key (PEM, mode 0600) and its public key.

    Example: amber bundle keygen --out amber.key
    """
    from ambereval.snapshots import generate_key

    with handled():
        private, public, fingerprint = generate_key(out)
    if as_json:
        print_json({"private_key": str(private), "public_key": str(public),
                    "key_sha256": fingerprint})
        return
    stdout.print(f"wrote {private} (keep it secret) and {public}; key sha256:{fingerprint}")


@app.command("sign")
def sign_cmd(
    bundle: BundleArg,
    key: Annotated[Path, typer.Option("--key", help="Private key from `amber bundle keygen`.")],
    as_json: Json = False,
) -> None:
    """Verify the bundle, then sign its datapackage digest (WACZ signing).

    Anonymous public-key mode; `bundle verify` and a packed WACZ keep the signature.

    Example: amber bundle sign bundle/ --key amber.key
    """
    from ambereval.snapshots import sign_bundle

    with handled():
        info = sign_bundle(bundle, key)
    if as_json:
        print_json(info.as_dict())
        return
    stdout.print(f"signed {bundle} with key sha256:{info.key_sha256} ({info.hash})")


from ambereval.cli.drift_cmd import drift_cmd  # noqa: E402  (the online one, own module)

app.command("drift")(drift_cmd)
