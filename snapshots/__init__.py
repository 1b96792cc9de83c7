"""Evidence capture and snapshot bundles (WARC + SQLite).

Public nouns: :class:`Bundle`, :func:`capture_claims`, :func:`capture_urls`,
:class:`CaptureOptions`, :func:`verify_bundle`, :func:`pack_bundle`,
:func:`unpack_bundle`, :func:`bundle_stats`, :func:`load_claims`, :func:`load_urls`,
:func:`finish_bundle`, :func:`generate_key`, :func:`sign_bundle`, :func:`load_public_key`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ambereval.errors import (
    AmberError,
    BundleError,
    ConfigError,
    InputError,
    ServiceError,
    UnsafeArchiveError,
    VerificationError,
)

if TYPE_CHECKING:
    from ambereval.snapshots.bundle.seal import finish_bundle, sign_bundle
    from ambereval.snapshots.bundle.signing import (
        SignatureInfo,
        generate_key,
        load_public_key,
    )
    from ambereval.snapshots.bundle.stats import bundle_stats
    from ambereval.snapshots.bundle.store import Bundle, StoredCapture
    from ambereval.snapshots.bundle.verify import VerifyReport, verify_bundle
    from ambereval.snapshots.bundle.wacz import pack_bundle, unpack_bundle
    from ambereval.snapshots.capture.claims_input import ClaimInput, load_claims, load_urls
    from ambereval.snapshots.capture.pipeline import (
        CaptureOptions,
        CaptureSummary,
        capture_claims,
        capture_urls,
    )
    from ambereval.snapshots.capture.transport import RetryPolicy

# Exported lazily (PEP 562): `amber bundle stats` must not pay for the capture clients
# (httpx, trafilatura) it never uses.
_LAZY = {
    "Bundle": "bundle.store", "StoredCapture": "bundle.store",
    "CaptureOptions": "capture.pipeline", "CaptureSummary": "capture.pipeline",
    "capture_claims": "capture.pipeline", "capture_urls": "capture.pipeline",
    "ClaimInput": "capture.claims_input", "load_claims": "capture.claims_input",
    "load_urls": "capture.claims_input", "bundle_stats": "bundle.stats",
    "RetryPolicy": "capture.transport", "VerifyReport": "bundle.verify",
    "verify_bundle": "bundle.verify", "pack_bundle": "bundle.wacz",
    "unpack_bundle": "bundle.wacz", "finish_bundle": "bundle.seal",
    "SignatureInfo": "bundle.signing", "generate_key": "bundle.signing",
    "load_public_key": "bundle.signing", "sign_bundle": "bundle.seal",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'ambereval.snapshots' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"ambereval.snapshots.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "AmberError", "Bundle", "BundleError", "CaptureOptions", "CaptureSummary", "ClaimInput",
    "ConfigError", "InputError", "RetryPolicy", "ServiceError", "StoredCapture",
    "UnsafeArchiveError", "VerificationError", "VerifyReport", "bundle_stats",
    "capture_claims", "capture_urls", "load_claims", "load_urls", "pack_bundle",
    "unpack_bundle", "verify_bundle", "SignatureInfo", "finish_bundle", "generate_key",
    "load_public_key", "sign_bundle",
]
