"""Sealing a bundle: :func:`finish_bundle` rebuilds the derived files and the manifest
(refusing to re-seal edited evidence), :func:`sign_bundle` signs what verifies. Both sit
above :mod:`.verify`, whose checks they run, so the store, the checks and the signature
code below them import one way."""

from __future__ import annotations

import json
from pathlib import Path

from ambereval.errors import BundleError, VerificationError
from ambereval.snapshots.bundle import manifest
from ambereval.snapshots.bundle.signing import (
    SignatureInfo,
    key_fingerprint,
    load_private_key,
    sign_data,
)
from ambereval.snapshots.bundle.store import UNFINISHED, Bundle, unfinished_state
from ambereval.snapshots.bundle.verify import manifest_mismatch, records_mismatch, verify_bundle


def finish_bundle(root: str | Path, force: bool = False) -> list[str]:
    """Rebuild a bundle's derived files and manifest (the repair after a failed finish or
    an interrupted capture); returns the notes of the torn-tail repair, if any.

    A finished bundle whose files still match its manifest (after torn tails are taken
    out) is left as it is, signature included. One whose files no longer match was
    changed after it was sealed: it is refused, so a finish never makes edited evidence
    verify. ``force`` re-seals either (any signature is dropped)."""
    root = Path(root)
    Bundle.open(root).close()  # it must already be a bundle: never create one here
    sealed = unfinished_state(root) is None and (root / manifest.MANIFEST).is_file()
    with Bundle.create(root) as bundle:
        changed = manifest_mismatch(root) if sealed and not force else None
        if changed is not None:
            (root / UNFINISHED).unlink(missing_ok=True)  # as sealed as before: no marker
            if changed.file == manifest.DIGEST and not (root / manifest.DIGEST).exists():
                raise VerificationError(
                    f"{root}: has no {manifest.DIGEST} (sealed by an older amber), so "
                    "its files cannot be checked against the manifest",
                    hint="`amber bundle finish --force` seals it anew, if you trust it")
            raise VerificationError(
                f"{root}: changed after it was finished ({changed}); finish repairs "
                "interrupted captures, it does not re-seal edited files",
                hint="restore the bundle, or re-seal it on purpose with "
                     "`amber bundle finish --force` (drops any signature)")
        if sealed and not force:  # nothing to rebuild: its manifest and signature stand
            (root / UNFINISHED).unlink(missing_ok=True)
            return list(bundle.repaired)
        damaged = records_mismatch(bundle) if force else None
        if damaged is not None:  # a manifest must never vouch for damaged records
            if sealed:
                (root / UNFINISHED).unlink(missing_ok=True)
            raise VerificationError(
                f"{root}: not re-sealed: {damaged}",
                hint="restore the damaged WARC (or an edited index) from a copy")
        bundle.finalize()
        return list(bundle.repaired)


def sign_bundle(root: str | Path, key_path: str | Path) -> SignatureInfo:
    """Sign a finished, verified bundle in place (its digest file gains ``signedData``).

    Refuses a bundle that does not verify: a signature vouches for what is there.
    """
    root = Path(root)
    key = load_private_key(key_path)
    report = verify_bundle(root)
    if not report.ok:
        raise BundleError(f"{root}: refusing to sign a bundle that does not verify "
                          f"({report.mismatch})", hint="run `amber bundle verify` for details")
    data = (root / manifest.MANIFEST).read_bytes()
    created = json.loads(data)["created"]
    signed = sign_data(manifest.manifest_hash(data), created, key)
    manifest.write_group([(root / manifest.DIGEST, manifest.digest_document(data, signed))])
    return SignatureInfo(key_fingerprint(key.public_key()), created, signed["software"],
                         signed["hash"])
