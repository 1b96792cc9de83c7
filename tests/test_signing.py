"""datapackage-digest.json and signed bundles (WACZ signing, anonymous public-key mode)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from ambereval.errors import BundleError, InputError
from ambereval.snapshots import (
    capture_urls,
    generate_key,
    load_public_key,
    pack_bundle,
    sign_bundle,
    unpack_bundle,
    verify_bundle,
)
from ambereval.snapshots.bundle import manifest
from ambereval.snapshots.bundle.signing import key_fingerprint, load_private_key, sign_data

from conftest import fast_options, run_amber
from fakeweb import FakeWeb


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sign") / "bundle"
    with FakeWeb() as web:
        capture_urls(out, [web.url("/pages/eiffel.html"), web.url("/pages/tea.html")],
                     fast_options(web, reader="direct"))
    return out


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("keys")
    a, a_pub, _ = generate_key(d / "alice.key")
    b, b_pub, _ = generate_key(d / "mallory.key")
    return {"alice": a, "alice.pub": a_pub, "mallory": b, "mallory.pub": b_pub}


def copy(src: Path, tmp: Path, name: str = "bundle") -> Path:
    dst = tmp / name
    shutil.copytree(src, dst)
    return dst


def digest_doc(root: Path) -> dict:
    return json.loads((root / manifest.DIGEST).read_text())


def test_digest_is_written_and_matches(clean: Path) -> None:
    doc = digest_doc(clean)
    data = (clean / manifest.MANIFEST).read_bytes()
    assert doc == {"path": "datapackage.json", "hash": manifest.manifest_hash(data)}
    assert verify_bundle(clean).ok and verify_bundle(clean).signature is None


@pytest.mark.parametrize("field, value", [("title", "Edited title"),
                                          ("created", "1999-01-01T00:00:00Z"),
                                          ("software", "someone else")])
def test_edit_of_descriptive_field_is_detected(clean: Path, tmp_path: Path, field: str,
                                               value: str) -> None:
    root = copy(clean, tmp_path)
    path = root / manifest.MANIFEST
    package = json.loads(path.read_text())
    package[field] = value
    path.write_text(json.dumps(package, indent=2) + "\n")
    report = verify_bundle(root)
    assert not report.ok
    assert report.mismatch.file == "datapackage.json"
    assert "datapackage-digest.json" in report.mismatch.problem


def test_missing_or_malformed_digest(clean: Path, tmp_path: Path) -> None:
    root = copy(clean, tmp_path)
    (root / manifest.DIGEST).unlink()
    assert "missing" in verify_bundle(root).mismatch.problem
    (root / manifest.DIGEST).write_text('{"path": "other.json", "hash": "sha256:00"}')
    assert "names 'other.json'" in verify_bundle(root).mismatch.problem
    (root / manifest.DIGEST).write_text('{"hash": "sha256:00", "pathx": "datapackage.json"}')
    assert "not a WACZ digest" in verify_bundle(root).mismatch.problem


def test_keygen_writes_private_key_0600_and_never_overwrites(tmp_path: Path) -> None:
    key, pub, fingerprint = generate_key(tmp_path / "k")
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert pub.name == "k.pub" and b"PUBLIC KEY" in pub.read_bytes()
    assert len(fingerprint) == 64
    with pytest.raises(InputError, match="already exists"):
        generate_key(tmp_path / "k")
    with pytest.raises(InputError, match="not an unencrypted PEM private key"):
        load_private_key(pub)


def test_sign_then_verify_with_and_without_trusted_keys(clean: Path, tmp_path: Path,
                                                        keys: dict[str, Path]) -> None:
    root = copy(clean, tmp_path)
    info = sign_bundle(root, keys["alice"])
    signed = digest_doc(root)["signedData"]
    assert set(signed) == {"hash", "created", "software", "signature", "publicKey"}
    assert signed["hash"] == digest_doc(root)["hash"]
    assert signed["created"] == manifest.read_datapackage(root)["created"]
    assert len(base64.b64decode(signed["signature"])) == 64  # WebCrypto's r || s
    report = verify_bundle(root)
    assert report.ok and report.signature["key_sha256"] == info.key_sha256
    alice = load_public_key(keys["alice.pub"])
    mallory = load_public_key(keys["mallory.pub"])
    assert verify_bundle(root, require_signature=True).ok
    assert verify_bundle(root, trusted_keys=[mallory, alice]).ok
    wrong = verify_bundle(root, trusted_keys=[mallory])
    assert not wrong.ok and "not a trusted key" in wrong.mismatch.problem
    unsigned = verify_bundle(clean, require_signature=True)
    assert not unsigned.ok and "not signed" in unsigned.mismatch.problem
    assert not verify_bundle(clean, trusted_keys=[alice]).ok


def test_signature_survives_nothing_but_the_signed_bytes(clean: Path, tmp_path: Path,
                                                         keys: dict[str, Path]) -> None:
    root = copy(clean, tmp_path)
    sign_bundle(root, keys["alice"])
    alice = load_public_key(keys["alice.pub"])
    # an attacker edits the manifest and recomputes its digest, keeping the signature
    path = root / manifest.MANIFEST
    package = json.loads(path.read_text())
    package["title"] = "forged"
    data = (json.dumps(package, indent=2) + "\n").encode()
    path.write_bytes(data)
    doc = digest_doc(root)
    doc["hash"] = manifest.manifest_hash(data)
    (root / manifest.DIGEST).write_text(json.dumps(doc))
    report = verify_bundle(root)
    assert not report.ok and "signed hash differs" in report.mismatch.problem
    # ... or re-signs with a key of their own: valid, but not the trusted key
    forged = sign_data(doc["hash"], package["created"], load_private_key(keys["mallory"]))
    (root / manifest.DIGEST).write_bytes(manifest.digest_document(data, forged))
    assert verify_bundle(root).ok  # a signature, but by whom? the fingerprint says
    assert verify_bundle(root).signature["key_sha256"] != key_fingerprint(alice)
    report = verify_bundle(root, trusted_keys=[alice])
    assert not report.ok and "not a trusted key" in report.mismatch.problem


def test_bad_signatures_are_named(clean: Path, tmp_path: Path, keys: dict[str, Path]) -> None:
    root = copy(clean, tmp_path)
    sign_bundle(root, keys["alice"])
    data = (root / manifest.MANIFEST).read_bytes()
    good = digest_doc(root)["signedData"]

    def check(signed: dict, expect: str) -> None:
        (root / manifest.DIGEST).write_bytes(manifest.digest_document(data, signed))
        report = verify_bundle(root)
        assert not report.ok and expect in report.mismatch.problem, report.mismatch

    sig = bytearray(base64.b64decode(good["signature"]))
    sig[5] ^= 1
    check({**good, "signature": base64.b64encode(sig).decode()}, "does not verify")
    check({**good, "signature": "***"}, "not base64")
    check({**good, "publicKey": base64.b64encode(b"junk").decode()}, "not a base64 DER")
    check({**good, "created": "2000-01-01T00:00:00Z"}, "created date differs")
    check({k: v for k, v in good.items() if k != "publicKey"}, "lacks publicKey")
    check({**good, "domain": "example.com"}, "only the anonymous")
    check("nope", "not an object")  # type: ignore[arg-type]


def test_der_signatures_as_authsign_writes_them_are_accepted(clean: Path, tmp_path: Path,
                                                             keys: dict[str, Path]) -> None:
    root = copy(clean, tmp_path)
    data = (root / manifest.MANIFEST).read_bytes()
    key = load_private_key(keys["alice"])
    signed = sign_data(manifest.manifest_hash(data), manifest.read_datapackage(root)["created"],
                       key)
    der = key.sign(signed["hash"].encode(), ec.ECDSA(hashes.SHA256()))
    signed["signature"] = base64.b64encode(der).decode()
    (root / manifest.DIGEST).write_bytes(manifest.digest_document(data, signed))
    assert verify_bundle(root).ok


def test_sign_refuses_a_bundle_that_does_not_verify(clean: Path, tmp_path: Path,
                                                    keys: dict[str, Path]) -> None:
    root = copy(clean, tmp_path)
    (root / "pages" / "pages.jsonl").write_text("tampered\n")
    with pytest.raises(BundleError, match="refusing to sign"):
        sign_bundle(root, keys["alice"])
    assert "signedData" not in digest_doc(root)


def test_finish_keeps_the_signature_of_an_unchanged_bundle(clean: Path, tmp_path: Path,
                                                           keys: dict[str, Path]) -> None:
    from ambereval.snapshots import finish_bundle

    root = copy(clean, tmp_path)
    sign_bundle(root, keys["alice"])
    signed = digest_doc(root)
    assert finish_bundle(root) == [] and digest_doc(root) == signed  # nothing to redo
    assert verify_bundle(root, require_signature=True).ok
    forced = run_amber("bundle", "finish", str(root), "--force", "--json")
    assert forced.returncode == 0, forced.stderr  # re-sealed on purpose: a new digest
    assert json.loads(forced.stdout)["signature_dropped"] is True
    assert "signedData" not in digest_doc(root) and verify_bundle(root).ok


def test_packed_wacz_keeps_the_signature_and_validates(clean: Path, tmp_path: Path,
                                                       keys: dict[str, Path]) -> None:
    root = copy(clean, tmp_path)
    sign_bundle(root, keys["alice"])
    wacz = pack_bundle(root, tmp_path / "b.wacz")
    with zipfile.ZipFile(wacz) as zf:
        assert json.loads(zf.read(manifest.DIGEST)) == digest_doc(root)
    wacz_cli = shutil.which("wacz", path=os.path.dirname(sys.executable))
    assert wacz_cli, "py-wacz is installed with the dev extras"
    check = subprocess.run([wacz_cli, "validate", "-f", str(wacz)], capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 0 and "Validation succeeded" in check.stdout, check.stdout
    out = unpack_bundle(wacz, tmp_path / "unpacked")
    alice = load_public_key(keys["alice.pub"])
    assert verify_bundle(out, trusted_keys=[alice]).ok
    # py-wacz's validator sees an edited title through the digest
    edited = tmp_path / "edited.wacz"
    with zipfile.ZipFile(wacz) as src, zipfile.ZipFile(edited, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            if info.filename == manifest.MANIFEST:
                body = body.replace(b'"title": "', b'"title": "X')
            dst.writestr(info, body)
    bad = subprocess.run([wacz_cli, "validate", "-f", str(edited)], capture_output=True,
                         text=True, timeout=120)
    assert "Validation succeeded" not in bad.stdout
    assert "datapackage.json hash mismatch" in bad.stdout


def test_cli_keygen_sign_verify(clean: Path, tmp_path: Path) -> None:
    root = copy(clean, tmp_path)
    key = tmp_path / "k.key"
    made = run_amber("bundle", "keygen", "--out", str(key), "--json")
    assert made.returncode == 0, made.stderr
    fingerprint = json.loads(made.stdout)["key_sha256"]
    unsigned = run_amber("bundle", "verify", str(root), "--require-signature")
    assert unsigned.returncode == 3 and "not signed" in unsigned.stderr
    signed = run_amber("bundle", "sign", str(root), "--key", str(key))
    assert signed.returncode == 0 and fingerprint in signed.stdout, signed.stderr
    ok = run_amber("bundle", "verify", str(root), "--trusted-key", f"{key}.pub", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["signature"]["key_sha256"] == fingerprint
    other = tmp_path / "o.key"
    assert run_amber("bundle", "keygen", "--out", str(other)).returncode == 0
    refused = run_amber("bundle", "verify", str(root), "--trusted-key", f"{other}.pub")
    assert refused.returncode == 3 and "not a trusted key" in refused.stderr
    again = run_amber("bundle", "keygen", "--out", str(key))
    assert again.returncode == 2 and "already exists" in again.stderr
    bad_key = run_amber("bundle", "sign", str(root), "--key", str(tmp_path / "nope"))
    assert bad_key.returncode == 2 and "Traceback" not in bad_key.stderr


NODE_CHECK = r"""
const fs = require('fs');
const {subtle} = require('crypto').webcrypto;
const s = JSON.parse(fs.readFileSync(process.argv[2], 'utf8')).signedData;
(async () => {
  const key = await subtle.importKey('spki', Buffer.from(s.publicKey, 'base64'),
                                     {name: 'ECDSA', namedCurve: 'P-256'}, true, ['verify']);
  const ok = await subtle.verify({name: 'ECDSA', hash: 'SHA-256'}, key,
                                 Buffer.from(s.signature, 'base64'),
                                 new TextEncoder().encode(s.hash));
  console.log(ok ? 'valid' : 'invalid');
})();
"""


def test_webcrypto_verifies_the_signature(clean: Path, tmp_path: Path,
                                          keys: dict[str, Path]) -> None:
    """An independent verifier: WebCrypto (what ArchiveWeb.page and ReplayWeb.page use),
    run by Node.js, imports the SPKI key and checks the r || s signature over the hash."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    root = copy(clean, tmp_path)
    sign_bundle(root, keys["alice"])
    script = tmp_path / "check.js"
    script.write_text(NODE_CHECK)
    done = subprocess.run([node, str(script), str(root / manifest.DIGEST)],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "valid", done.stderr
    doc = digest_doc(root)
    last = doc["signedData"]["hash"][-1]
    doc["signedData"]["hash"] = doc["signedData"]["hash"][:-1] + ("1" if last == "0" else "0")
    (root / manifest.DIGEST).write_text(json.dumps(doc))
    done = subprocess.run([node, str(script), str(root / manifest.DIGEST)],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "invalid", done.stderr
