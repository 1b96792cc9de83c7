"""``amber bundle stats``: what a bundle holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ambereval.snapshots.bundle.exchanges import judge_summary
from ambereval.snapshots.bundle.index import SCHEMA_VERSION
from ambereval.snapshots.bundle.store import Bundle


def bundle_stats(root: str | Path) -> dict[str, Any]:
    """Counts per table, capture states, text status, WARC files and bytes, and the
    judge exchanges a recording froze, per provider and model."""
    with Bundle.open(root) as bundle:
        q = bundle.index.one
        warcs = bundle.warc_paths()
        return {
            "bundle": str(root),
            "schema_version": SCHEMA_VERSION,
            "created": bundle.index.meta("created"),
            "claims": q("SELECT COUNT(*) AS n FROM claims")["n"],
            "queries": q("SELECT COUNT(*) AS n FROM queries")["n"],
            "searches": q("SELECT COUNT(*) AS n FROM captures WHERE kind = 'search'")["n"],
            "search_results": q("SELECT COUNT(*) AS n FROM search_results")["n"],
            "pages": q("SELECT COUNT(*) AS n FROM captures WHERE kind = 'page'")["n"],
            "pages_ok": q("SELECT COUNT(*) AS n FROM captures WHERE kind = 'page' "
                          "AND state = 'ok'")["n"],
            "failed": q("SELECT COUNT(*) AS n FROM captures WHERE state = 'failed'")["n"],
            "deduplicated": q("SELECT COUNT(*) AS n FROM captures "
                              "WHERE revisit_of IS NOT NULL")["n"],
            "texts": q("SELECT COUNT(*) AS n FROM texts WHERE status = 'ok'")["n"],
            "empty_texts": q("SELECT COUNT(*) AS n FROM texts WHERE status != 'ok'")["n"],
            "links": q("SELECT COUNT(*) AS n FROM links")["n"],
            "judge_exchanges": judge_summary(bundle.index),
            "records": q("SELECT COUNT(*) AS n FROM records")["n"],
            "warc_files": len(warcs),
            "warc_bytes": sum(p.stat().st_size for p in warcs if p.exists()),
            "bundle_bytes": sum(
                p.stat().st_size for p in Path(root).rglob("*") if p.is_file()
            ),
        }
