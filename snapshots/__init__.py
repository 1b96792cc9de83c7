"""Evidence capture and snapshot bundles (WARC + SQLite).

Public nouns: :class:`Bundle`, :func:`capture_claims`, :func:`capture_urls`,
:class:`CaptureOptions`, :func:`verify_bundle`, :func:`pack_bundle`,
:func:`unpack_bundle`, :func:`bundle_stats`, :func:`load_claims`, :func:`load_urls`.
"""

from ambereval.errors import (
    AmberError,
    BundleError,
    ConfigError,
    InputError,
    ServiceError,
    UnsafeArchiveError,
    VerificationError,
)
from ambereval.snapshots.bundle import Bundle, StoredCapture
from ambereval.snapshots.capture import CaptureOptions, CaptureSummary, capture_claims, capture_urls
from ambereval.snapshots.claims_input import ClaimInput, load_claims, load_urls
from ambereval.snapshots.stats import bundle_stats
from ambereval.snapshots.transport import RetryPolicy
from ambereval.snapshots.verify import VerifyReport, verify_bundle
from ambereval.snapshots.wacz import pack_bundle, unpack_bundle

__all__ = [
    "AmberError", "Bundle", "BundleError", "CaptureOptions", "CaptureSummary", "ClaimInput",
    "ConfigError", "InputError", "RetryPolicy", "ServiceError", "StoredCapture",
    "UnsafeArchiveError", "VerificationError", "VerifyReport", "bundle_stats",
    "capture_claims", "capture_urls", "load_claims", "load_urls", "pack_bundle",
    "unpack_bundle", "verify_bundle",
]
