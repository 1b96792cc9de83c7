"""``amber bundle drift``: has the live web moved away from a bundle's evidence?

Online, on purpose: the bundle's captures are fetched again through the same readers
(Serper searches, Jina Reader or direct pages) with the same reader options and search
parameters, recovered from the bundle (``warcinfo`` records, ``queries.params``). The
re-capture is an ordinary capture (``capture.py``) into a fresh bundle — a temporary one,
or ``out`` to keep it — holding the same claims and reports, so it can be evaluated in
place of the old one. Old and new captures are then matched by request key (the sha256
of the canonical request, the same in both bundles) and compared:

``state``       ``unchanged`` (same status, same payload digest), ``same-text`` (payload
                differs, extracted text identical), ``changed`` (text differs:
                ``similarity`` is the word-level difflib ratio, 1.0 = identical), ``gone``
                (captured before, fails now), ``back`` (failed before, captured now),
                ``failing`` (failed both times), ``new`` (only in the new capture: a page
                the new search results lead to), ``refused`` (this run's address
                policy would not fetch it again: a bundle of local pages needs
                ``--allow-private-addresses``; nothing is known about the page),
                ``not-refetchable`` (imported corpus pages: nothing to fetch)
``status``      old and new HTTP status; ``payload_sha256`` old and new
``results``     for searches: old and new result links, and the share of the old top
                links still present (``similarity``)

Result format ``amber-drift/1``: ``bundle``, ``out`` (or null), ``counts`` per state,
``captures`` (most changed first: changed by similarity, gone, back, new, failing,
refused, same-text, unchanged), and the capture summary of the new capture.
"""

from __future__ import annotations

import difflib
import json
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ambereval.errors import InputError
from ambereval.snapshots.bundle.store import Bundle
from ambereval.snapshots.capture.address_policy import REFUSAL
from ambereval.snapshots.capture.claims_input import ClaimInput
from ambereval.snapshots.capture.pipeline import CaptureOptions, capture_claims, capture_urls

DRIFT_FORMAT = "amber-drift/1"
ORDER = ("changed", "gone", "back", "new", "failing", "refused", "same-text", "unchanged",
         "not-refetchable")
REFETCHABLE = ("jina", "direct", "serper")
MAX_WORDS = 50_000


def text_similarity(a: str | None, b: str | None) -> float | None:
    """Word-level difflib ratio of two extracted texts (1.0 identical), None if either is
    missing. Very long texts fall back to the bag-of-words bound (``quick_ratio``)."""
    if a is None or b is None:
        return None
    if a == b:
        return 1.0
    wa, wb = a.split(), b.split()
    matcher = difflib.SequenceMatcher(None, wa, wb, autojunk=True)
    if max(len(wa), len(wb)) > MAX_WORDS:
        return round(matcher.quick_ratio(), 4)
    return round(matcher.ratio(), 4)


def _warcinfo(bundle: Bundle) -> list[dict[str, str]]:
    """The fields of every warcinfo record, oldest file first."""
    out = []
    for row in bundle.index.rows("SELECT warcinfo_id FROM warc_files WHERE warcinfo_id IS "
                                 "NOT NULL ORDER BY name"):
        body = bundle.read_record(row["warcinfo_id"]).body.decode("utf-8", errors="replace")
        fields = {}
        for line in body.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        out.append(fields)
    return out


def capture_plan(bundle: Bundle, base: CaptureOptions) -> dict[str, Any]:
    """How the bundle was captured: per reader, the options to capture with again, the
    claims (with their URLs and queries) and the other page URLs; and its reports."""
    infos = _warcinfo(bundle)
    reader_options: dict[str, dict[str, str]] = {}
    search: dict[str, Any] = {}
    for info in infos:
        reader = info.get("amber-reader")
        if reader and reader not in reader_options:
            try:
                reader_options[reader] = json.loads(info.get("amber-reader-options") or "{}")
            except ValueError:
                reader_options[reader] = {}
        if info.get("amber-search") and not search:
            try:
                search = json.loads(info["amber-search"])
            except ValueError:
                search = {}
    pages = bundle.index.rows("SELECT url, reader FROM captures WHERE kind = 'page' "
                              "ORDER BY url")
    counts = Counter(p["reader"] for p in pages if p["reader"] in REFETCHABLE)
    main = counts.most_common(1)[0][0] if counts else base.reader
    if any(v == "[redacted]" for opts in reader_options.values() for v in opts.values()):
        raise InputError(f"{bundle.root}: a reader option was a secret and was redacted "
                         "in the bundle; drift cannot send the same request",
                         hint="capture again with `amber snapshot` and your key")
    claims: list[ClaimInput] = []
    params: dict[str, Any] = {}
    for row in bundle.index.rows("SELECT * FROM claims ORDER BY ordinal, id"):
        urls = [r["url"] for r in bundle.index.rows(
            "SELECT url FROM claim_urls WHERE claim_id = ? ORDER BY ordinal", [row["id"]])]
        queries = bundle.index.rows("SELECT q, params FROM queries WHERE claim_id = ? "
                                    "ORDER BY ordinal", [row["id"]])
        if queries and not params:
            params = json.loads(queries[0]["params"] or "{}")
        claims.append(ClaimInput(row["id"], row["text"], tuple(urls),
                                 tuple(q["q"] for q in queries),
                                 json.loads(row["extra"] or "{}")))
    def options_for(reader: str) -> CaptureOptions:
        return replace(base, reader=reader, jina_options=reader_options.get(reader, {}),
                       top_k=int(search.get("top_k", base.top_k)),
                       gl=params.get("gl", search.get("gl", base.gl)),
                       hl=params.get("hl", search.get("hl", base.hl)),
                       num=int(params.get("num", search.get("num", base.num))),
                       tbs=params.get("tbs", search.get("tbs")),
                       page=params.get("page", search.get("page")))

    return {"main": main, "options": {r: options_for(r) for r in sorted(set(counts) | {main})},
            "claims": claims,
            "urls": {r: sorted({p["url"] for p in pages if p["reader"] == r})
                     for r in counts},
            "reports": bundle.index.rows("SELECT * FROM reports ORDER BY stored_at, id")}


def _text(bundle: Bundle, capture_id: str) -> str | None:
    row = bundle.index.one("SELECT record_id, status FROM texts WHERE capture_id = ?",
                           [capture_id])
    if row is None or row["status"] != "ok":
        return None
    return bundle.read_record(row["record_id"]).body.decode("utf-8", errors="replace")


def _links(bundle: Bundle, capture_id: str) -> list[str]:
    return [r["link"] for r in bundle.index.rows(
        "SELECT link FROM search_results WHERE capture_id = ? ORDER BY rank", [capture_id])]


def _compare(old: Bundle, new: Bundle, o: dict[str, Any] | None,
             n: dict[str, Any] | None) -> dict[str, Any]:
    row = o or n or {}
    entry: dict[str, Any] = {"kind": row.get("kind"), "url": row.get("url"),
                             "reader": row.get("reader"),
                             "old": _side(o), "new": _side(n)}
    if o is None:
        entry["state"] = "new"
        return entry
    if o["reader"] not in REFETCHABLE:
        entry["state"] = "not-refetchable"
        return entry
    if n is None:  # not fetched again (should not happen: every old URL is re-read)
        entry["state"] = "gone"
        entry["reason"] = "not fetched again"
        return entry
    ok_o, ok_n = o["state"] == "ok", n["state"] == "ok"
    if not ok_n and str(n.get("error") or "").startswith(REFUSAL):
        entry["state"] = "refused"  # not asked again: says nothing about the web
        entry["reason"] = n["error"]
    elif not ok_o and not ok_n:
        entry["state"] = "failing"
    elif ok_o and not ok_n:
        entry["state"] = "gone"
    elif not ok_o and ok_n:
        entry["state"] = "back"
    elif o["payload_sha256"] == n["payload_sha256"] and o["status"] == n["status"]:
        entry["state"] = "unchanged"
        entry["similarity"] = 1.0
    elif o["kind"] == "search":
        before, after = _links(old, o["id"]), _links(new, n["id"])
        kept = len(set(before) & set(after))
        entry["similarity"] = round(kept / len(before), 4) if before else 1.0
        entry["results"] = {"old": before, "new": after}
        entry["state"] = "same-text" if before == after else "changed"
    else:
        sim = text_similarity(_text(old, o["id"]), _text(new, n["id"]))
        entry["similarity"] = sim
        entry["state"] = "same-text" if sim == 1.0 else "changed"
    return entry


def _side(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {"capture_id": row["id"], "state": row["state"], "status": row["status"],
            "error": row["error"], "payload_sha256": row["payload_sha256"],
            "captured_at": row["captured_at"]}


def _sort_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    sim = entry.get("similarity")
    return (ORDER.index(entry["state"]), sim if sim is not None else 1.0,
            entry.get("kind") or "", entry.get("url") or "")


def drift_bundle(bundle: str | Path, base: CaptureOptions, out: str | Path | None = None,
                 progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Capture the bundle's claims, searches and pages again and compare, capture by
    capture. ``base`` supplies keys, service URLs, retries and concurrency; reader,
    reader options and search parameters come from the bundle.

    Example: ``drift_bundle("bundle/", CaptureOptions.from_env())["counts"]``
    """
    bundle = Path(bundle)
    if out is not None:
        out = Path(out)
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise InputError(f"{out}: exists and is not empty",
                             hint="give a new directory for the re-captured bundle")
    with Bundle.open(bundle) as old:
        plan = capture_plan(old, base)
        with tempfile.TemporaryDirectory(prefix="amber-drift-") as tmp:
            target = Path(out) if out is not None else Path(tmp) / "bundle"
            summaries = []
            if plan["reports"]:
                with Bundle.create(target) as new:
                    for r in plan["reports"]:
                        _, text = old.report_text(r["id"])
                        new.store_report(r["name"], text,
                                         json.loads(r["task"]) if r["task"] else None,
                                         json.loads(r["meta"]) if r["meta"] else None)
                    new.finalize()
            main = plan["main"]
            if plan["claims"]:
                summaries.append(capture_claims(target, plan["claims"],
                                                plan["options"][main], progress))
            for reader, urls in sorted(plan["urls"].items()):
                summaries.append(capture_urls(target, urls, plan["options"][reader],
                                              progress))
            if not summaries and not plan["reports"]:
                raise InputError(f"{bundle}: nothing to fetch again (no claims, no pages)")
            with Bundle.open(target) as new:
                old_rows = {r["request_key"]: r for r in old.index.rows(
                    "SELECT * FROM captures ORDER BY id")}
                new_rows = {r["request_key"]: r for r in new.index.rows(
                    "SELECT * FROM captures ORDER BY id")}
                entries = [_compare(old, new, old_rows.get(k), new_rows.get(k))
                           for k in sorted(set(old_rows) | set(new_rows))]
    entries.sort(key=_sort_key)
    counts = {s: sum(1 for e in entries if e["state"] == s) for s in ORDER}
    return {"format": DRIFT_FORMAT, "bundle": str(bundle),
            "out": str(out) if out is not None else None, "counts": counts,
            "captures": entries,
            "capture": [s.as_dict() for s in summaries]}
