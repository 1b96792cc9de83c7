"""Signed bundles: an ECDSA signature over ``datapackage-digest.json``'s hash.

The layout follows Webrecorder's "WACZ Signing and Verification" recommendation in its
anonymous, public-key mode: ``datapackage-digest.json`` gains a ``signedData`` object ::

    {"hash": "sha256:<hex of datapackage.json>", "created": "<the datapackage's created>",
     "software": "amber-eval X", "signature": "<base64>", "publicKey": "<base64 SPKI DER>"}

The signature is ECDSA with SHA-256 over the ASCII bytes of ``hash``, on a P-256 key,
encoded as WebCrypto writes it (``r || s``, 64 bytes; a DER signature is accepted on
reading too). ``created`` equals the datapackage's ``created``, as py-wacz's validator
requires. Because the datapackage lists every file's sha256, the signature covers every
byte of the bundle; ``publicKey`` says which key vouched for it, and ``bundle verify
--trusted-key`` says whether that key is one the auditor trusts.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from ambereval.errors import InputError
from ambereval.snapshots.bundle import manifest

CURVES: dict[str, type[ec.EllipticCurve]] = {"secp256r1": ec.SECP256R1, "secp384r1": ec.SECP384R1}
SIGNED_FIELDS = ("hash", "created", "software", "signature", "publicKey")


@dataclass(frozen=True)
class SignatureInfo:
    """Who signed a bundle and when (as the signer stated it)."""

    key_sha256: str
    """sha256 of the public key's DER (SubjectPublicKeyInfo): the key's fingerprint."""
    created: str
    software: str
    hash: str

    def as_dict(self) -> dict[str, str]:
        return {"key_sha256": self.key_sha256, "created": self.created,
                "software": self.software, "hash": self.hash}


class SignatureProblem(Exception):
    """A signature that is missing, malformed, invalid or from an untrusted key."""


# -- keys --------------------------------------------------------------------------------
def key_fingerprint(public_key: ec.EllipticCurvePublicKey) -> str:
    return hashlib.sha256(_spki(public_key)).hexdigest()


def _spki(public_key: ec.EllipticCurvePublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)


def generate_key(out: str | Path) -> tuple[Path, Path, str]:
    """Write a new P-256 private key to ``out`` (PEM, PKCS#8, mode 0600) and its public
    key to ``out.pub``; returns (private path, public path, fingerprint). Never
    overwrites an existing file."""
    out = Path(out)
    pub = out.with_name(out.name + ".pub")
    for path in (out, pub):
        if path.exists():
            raise InputError(f"{path}: already exists", hint="choose another --out; keys "
                             "are never overwritten")
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise InputError(f"{out}: cannot write the key ({exc.strerror})") from None
    with os.fdopen(fd, "wb") as fh:
        fh.write(private)
    pub.write_bytes(public)
    return out, pub, key_fingerprint(key.public_key())


def load_private_key(path: str | Path) -> ec.EllipticCurvePrivateKey:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the key ({exc.strerror})") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise InputError(f"{path}: not an unencrypted PEM private key ({exc})",
                         hint="make one with `amber bundle keygen --out KEY`") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name not in CURVES:
        raise InputError(f"{path}: not an ECDSA P-256/P-384 key",
                         hint="make one with `amber bundle keygen --out KEY`")
    return key


def load_public_key(spec: str | Path) -> ec.EllipticCurvePublicKey:
    """A public key from a PEM file (``KEY.pub``), or a private key file's public half."""
    path = Path(spec)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the key ({exc.strerror})") from None
    try:
        if b"PRIVATE KEY" in data:
            key: Any = serialization.load_pem_private_key(data, password=None).public_key()
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise InputError(f"{path}: not a PEM public key ({exc})") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name not in CURVES:
        raise InputError(f"{path}: not an ECDSA P-256/P-384 public key")
    return key


# -- signing -----------------------------------------------------------------------------
def _raw_signature(der: bytes, curve: ec.EllipticCurve) -> bytes:
    r, s = decode_dss_signature(der)
    size = (curve.key_size + 7) // 8
    return r.to_bytes(size, "big") + s.to_bytes(size, "big")


def sign_data(hash_value: str, created: str, key: ec.EllipticCurvePrivateKey) -> dict[str, str]:
    """The ``signedData`` object for a datapackage hash."""
    der = key.sign(hash_value.encode("ascii"), ec.ECDSA(hashes.SHA256()))
    return {
        "hash": hash_value,
        "created": created,
        "software": manifest.software(),
        "signature": base64.b64encode(_raw_signature(der, key.curve)).decode("ascii"),
        "publicKey": base64.b64encode(_spki(key.public_key())).decode("ascii"),
    }


# -- checking ----------------------------------------------------------------------------
def _canonical_b64(text: str, name: str) -> bytes:
    """Decode base64, refusing any other spelling of the same bytes (unused padding bits
    set, missing padding), so no character of a signed field can change unnoticed."""
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise SignatureProblem(f"{name} is not base64") from None
    if base64.b64encode(data).decode("ascii") != text:
        raise SignatureProblem(f"{name} is not canonical base64")
    return data


def _signature_bytes(text: Any, curve: ec.EllipticCurve) -> bytes:
    if not isinstance(text, str):
        raise SignatureProblem("signature is not a string")
    sig = _canonical_b64(text, "signature")
    size = (curve.key_size + 7) // 8
    if len(sig) == 2 * size:  # WebCrypto's r || s
        return encode_dss_signature(int.from_bytes(sig[:size], "big"),
                                    int.from_bytes(sig[size:], "big"))
    return sig  # DER, as authsign writes it


def check_signed_data(signed: Any, manifest_bytes: bytes,
                      trusted: list[ec.EllipticCurvePublicKey] | None = None) -> SignatureInfo:
    """Check ``signedData`` against the manifest bytes; raise SignatureProblem."""
    if not isinstance(signed, dict):
        raise SignatureProblem("signedData is not an object")
    extra = sorted(set(signed) - set(SIGNED_FIELDS))
    if extra:
        raise SignatureProblem(f"signedData has fields {', '.join(extra)} (only the anonymous "
                               "public-key mode is supported)")
    missing = [f for f in SIGNED_FIELDS if not isinstance(signed.get(f), str)]
    if missing:
        raise SignatureProblem(f"signedData lacks {', '.join(missing)} (only the anonymous "
                               "public-key mode is supported)")
    actual = manifest.manifest_hash(manifest_bytes)
    if signed["hash"] != actual:
        raise SignatureProblem("signed hash differs from the sha256 of datapackage.json")
    der = _canonical_b64(signed["publicKey"], "publicKey")
    try:
        key = serialization.load_der_public_key(der)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise SignatureProblem("publicKey is not a base64 DER public key") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name not in CURVES:
        raise SignatureProblem("publicKey is not an ECDSA P-256/P-384 key")
    try:
        key.verify(_signature_bytes(signed["signature"], key.curve),
                   signed["hash"].encode("ascii"), ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError, UnicodeEncodeError):
        raise SignatureProblem("signature does not verify with its publicKey") from None
    try:
        created = json.loads(manifest_bytes).get("created")
    except (ValueError, AttributeError):
        created = None
    if signed["created"] != created:
        raise SignatureProblem("signed created date differs from datapackage.json's")
    fingerprint = key_fingerprint(key)
    if trusted is not None and fingerprint not in {key_fingerprint(k) for k in trusted}:
        raise SignatureProblem(f"signed by key sha256:{fingerprint}, which is not a trusted key")
    return SignatureInfo(fingerprint, signed["created"], signed["software"], signed["hash"])
