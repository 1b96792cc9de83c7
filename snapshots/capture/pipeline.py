"""Capture orchestration: search each claim's queries, read the pages, archive it all.

Fetching runs on a bounded thread pool; every write (WARC bytes, then the index rows in
one transaction) happens on the calling thread, so the archive has a single writer and
a crash loses at most the capture being written.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from ambereval.errors import ConfigError, InputError
from ambereval.snapshots.bundle import manifest
from ambereval.snapshots.bundle.store import INDEX_PATH, Bundle, dumps
from ambereval.snapshots.bundle.warc import RecordRef, warc_date
from ambereval.snapshots.capture.address_policy import (
    AddressPolicy,
    allow_private_from_env,
    scheme_problem,
)
from ambereval.snapshots.capture.claims_input import ClaimInput
from ambereval.snapshots.capture.direct import DirectReader
from ambereval.snapshots.capture.jina import DEFAULT_JINA_URL, JinaReader
from ambereval.snapshots.capture.page import PageFetch
from ambereval.snapshots.capture.serper import (
    DEFAULT_SERPER_URL,
    SearchParams,
    SerperClient,
    parse_results,
)
from ambereval.snapshots.capture.transport import (
    REDACTED,
    Exchange,
    RetryPolicy,
    Transport,
    is_secret,
)

Progress = Callable[[str, int, int], None]


class Reader(Protocol):
    name: str

    def read(self, url: str) -> PageFetch: ...
    def fetch_url(self, url: str) -> str: ...
    def options(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class CaptureOptions:
    """Everything that shapes a capture. Secrets are read here and never stored."""

    reader: str = "direct"
    top_k: int = 3
    gl: str = "us"
    hl: str = "en"
    num: int = 10
    tbs: str | None = None
    page: int | None = None
    concurrency: int = 4
    serper_url: str = DEFAULT_SERPER_URL
    serper_key: str | None = None
    jina_url: str = DEFAULT_JINA_URL
    jina_key: str | None = None
    jina_options: Mapping[str, str] = field(default_factory=dict)
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    serper_rate: float | None = 5.0
    reader_rate: float | None = 10.0
    seed: int = 0
    allow_private_addresses: bool = False
    """Let the direct reader reach loopback, private and link-local addresses (local
    test sites); service base URLs are never checked."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kw: Any) -> CaptureOptions:
        """Base URLs and keys from SERPER_*/JINA_* variables, AMBER_ALLOW_PRIVATE_ADDRESSES,
        the rest from ``kw``."""
        env = os.environ if env is None else env
        if "allow_private_addresses" not in kw:
            kw["allow_private_addresses"] = allow_private_from_env(env)
        return cls(
            serper_url=env.get("SERPER_BASE_URL") or DEFAULT_SERPER_URL,
            serper_key=env.get("SERPER_API_KEY") or None,
            jina_url=env.get("JINA_BASE_URL") or DEFAULT_JINA_URL,
            jina_key=env.get("JINA_API_KEY") or None,
            **kw,
        )

    def search_params(self, q: str) -> SearchParams:
        return SearchParams(q=q, gl=self.gl, hl=self.hl, num=self.num, tbs=self.tbs, page=self.page)


@dataclass
class CaptureSummary:
    """What one capture run did. ``bytes`` counts WARC bytes written in this run."""

    bundle: str
    claims: int = 0
    searches: int = 0
    pages: int = 0
    captured: int = 0
    failed: int = 0
    skipped: int = 0
    deduplicated: int = 0
    bytes: int = 0
    repaired: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def request_key(obj: Mapping[str, Any]) -> str:
    return hashlib.sha256(dumps(obj)).hexdigest()


def capture_id(key: str) -> str:
    return f"cap-{key[:16]}"


class Capturer:
    """One capture session against one bundle."""

    def __init__(self, bundle: Bundle, options: CaptureOptions, progress: Progress | None) -> None:
        self.bundle = bundle
        self.options = options
        self.progress = progress or (lambda phase, done, total: None)
        self.summary = CaptureSummary(str(bundle.root), repaired=list(bundle.repaired))
        policy = options.policy
        self._transports: list[Transport] = []
        self.reader = self._make_reader()
        self._serper: SerperClient | None = None
        self._info = {
            "software": manifest.software(),
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
            "amber-reader": self.reader.name,
            "amber-reader-options": json.dumps(
                {k: REDACTED if is_secret(k) else v for k, v in self.reader.options().items()},
                sort_keys=True),
            "amber-search": json.dumps(
                {"gl": options.gl, "hl": options.hl, "num": options.num, "tbs": options.tbs,
                 "page": options.page, "top_k": options.top_k}, sort_keys=True),
            "amber-retry": json.dumps(policy.__dict__, sort_keys=True),
        }

    def _transport(self, name: str, rate: float | None,
                   address_policy: AddressPolicy | None = None) -> Transport:
        t = Transport(name, self.options.policy, rate=rate, seed=self.options.seed,
                      address_policy=address_policy)
        self._transports.append(t)
        return t

    def _make_reader(self) -> Reader:
        o = self.options
        if o.reader == "jina":
            t = self._transport("jina", o.reader_rate)
            return JinaReader(o.jina_url, o.jina_key, t, dict(o.jina_options))
        if o.reader == "direct":
            policy = AddressPolicy(allow_private=o.allow_private_addresses)
            return DirectReader(self._transport("direct", o.reader_rate, policy))
        raise ConfigError(f"unknown reader {o.reader!r}", hint="use --reader jina or direct")

    def serper(self) -> SerperClient:
        if self._serper is None:
            if not self.options.serper_key:
                raise ConfigError(
                    "SERPER_API_KEY is not set but the claims have search queries",
                    hint="export SERPER_API_KEY=... (or remove 'queries' from the input)",
                )
            t = self._transport("serper", self.options.serper_rate)
            self._serper = SerperClient(self.options.serper_url, self.options.serper_key, t)
        return self._serper

    def close(self) -> None:
        for t in self._transports:
            t.close()

    # -- keys ------------------------------------------------------------------------
    def page_key(self, url: str) -> str:
        return request_key(
            {"kind": "page", "reader": self.reader.name, "url": url,
             "options": self.reader.options()}
        )

    def search_key(self, params: SearchParams) -> str:
        return request_key({"kind": "search", "service": "serper", "params": params.payload()})

    def _done(self, key: str) -> bool:
        row = self.bundle.index.capture_by_key(key)
        return row is not None and (row["state"] == "ok" or bool(row["permanent"]))

    # -- running jobs ----------------------------------------------------------------
    def _run(
        self, phase: str, jobs: list[tuple[str, Callable[[], Any]]],
        write: Callable[[str, Any], None],
    ) -> None:
        """Run fetch jobs concurrently; write each result here, in completion order."""
        total = len(jobs)
        self.progress(phase, 0, total)
        if not jobs:
            return
        done = 0
        pool = ThreadPoolExecutor(max_workers=max(1, self.options.concurrency))
        pending: dict[Future[Any], str] = {}
        try:
            for key, fn in jobs:
                pending[pool.submit(fn)] = key
            while pending:
                finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for future in sorted(finished, key=lambda f: pending[f]):
                    key = pending.pop(future)
                    write(key, future.result())
                    done += 1
                    self.progress(phase, done, total)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    # -- writing ---------------------------------------------------------------------
    def _write_exchanges(
        self, exchanges: list[Exchange], dedup: bool
    ) -> tuple[list[RecordRef], RecordRef | None, RecordRef | None, str | None]:
        """Archive a chain of exchanges. Returns (records, request, response, revisit_of)."""
        warc = self.bundle.warc(self._info)
        refs: list[RecordRef] = []
        request = response = None
        revisit_of = None
        exchanges = [ex for ex in exchanges if not ex.blocked]
        for i, ex in enumerate(exchanges):
            last = i == len(exchanges) - 1
            if ex.status is None:
                request = warc.write_request_only(ex)
                response = None
                refs.append(request)
                continue
            original = None
            if last and dedup and ex.ok and ex.body:
                original = self.bundle.index.original_for_payload(sha256(ex.body))
            if original is not None:
                orig_ref = self.bundle.index.record(original["response_record"])
                request, response = warc.write_revisit(
                    ex, RecordRef(**orig_ref), orig_ref["payload_digest"]
                )
                revisit_of = original["id"]
                self.summary.deduplicated += 1
            else:
                request, response = warc.write_exchange(ex)
            refs += [response, request]
        return refs, request, response, revisit_of

    def _failure_record(self, url: str, error: str, status: int | None, attempts: int) -> RecordRef:
        body = dumps({"amber": "failed-capture", "url": url, "error": error, "status": status,
                      "attempts": attempts})
        return self.bundle.warc(self._info).write_metadata(url, body)

    def _store(
        self, key: str, kind: str, url: str, fetch_url: str, exchanges: list[Exchange],
        ok: bool, error: str | None, permanent: bool, status: int | None,
        final_url: str | None = None, text: tuple[str, str | None, str, str] | None = None,
        results: list[dict[str, Any]] | None = None,
    ) -> str:
        cid = capture_id(key)
        exchanges = [ex for ex in exchanges if not ex.blocked]
        refs, request, response, revisit_of = self._write_exchanges(exchanges, dedup=ok)
        final = exchanges[-1] if exchanges else None
        failure_ref = None
        if not ok:
            failure_ref = self._failure_record(url, error or "failed", status,
                                               final.attempts if final else 0)
            refs.append(failure_ref)
        text_ref = None
        text_row = None
        if ok and text is not None and response is not None:
            body, title, extractor, text_status = text
            if revisit_of is not None:
                text_row = self.bundle.index.one(
                    "SELECT * FROM texts WHERE capture_id = ?", [revisit_of])
                if text_row is not None:
                    text_row = dict(text_row, capture_id=cid)
            if text_row is None and final is not None:
                date = warc_date(final.started)
                text_ref = self.bundle.warc(self._info).write_conversion(
                    url, body, response.record_id, date)
                refs.append(text_ref)
                text_row = {
                    "capture_id": cid, "record_id": text_ref.record_id, "extractor": extractor,
                    "title": title, "chars": len(body),
                    "sha256": hashlib.sha256(body.encode("utf-8")).hexdigest(),
                    "status": text_status,
                }
        self.bundle.warc(self._info).flush()
        written = sum(r.length for r in refs)
        row = {
            "id": cid, "request_key": key, "kind": kind, "url": url, "fetch_url": fetch_url,
            "final_url": final_url, "reader": "serper" if kind == "search" else self.reader.name,
            "state": "ok" if ok else "failed", "permanent": int(permanent), "status": status,
            "error": error, "attempts": sum(e.attempts for e in exchanges),
            "content_type": final.header("content-type") if final and final.status else None,
            "payload_sha256": sha256(final.body) if final and final.status else None,
            "payload_bytes": len(final.body) if final and final.status else None,
            "request_record": request.record_id if request else None,
            "response_record": response.record_id if response else None,
            "revisit_of": revisit_of,
            "captured_at": (final.started if final else self.bundle.clock()).strftime(
                "%Y-%m-%dT%H:%M:%S.%fZ"),
        }
        index = self.bundle.index
        with index.transaction():
            for ref in refs:
                index.add_record(ref)
            index.upsert_capture(row)
            index.db.conn.execute("DELETE FROM texts WHERE capture_id = ?", [cid])
            if text_row is not None:
                index.put("texts", text_row)
            if results is not None:
                index.db.conn.execute("DELETE FROM search_results WHERE capture_id = ?", [cid])
                for r in results:
                    index.put("search_results", {"capture_id": cid, **r})
            if not ok:
                index.put("failures", {
                    "capture_key": key, "url": url, "at": row["captured_at"], "status": status,
                    "error": error or "failed", "permanent": int(permanent),
                    "attempts": row["attempts"],
                    "record_id": failure_ref.record_id if failure_ref else None})
        self.summary.bytes += written
        if ok:
            self.summary.captured += 1
        else:
            self.summary.failed += 1
            self.summary.failures.append(
                {"url": url, "status": status, "error": error, "permanent": permanent})
        return cid

    def _write_search(self, key: str, exchange: Exchange) -> None:
        ok = exchange.ok
        error = exchange.error or (None if ok else f"HTTP {exchange.status}")
        rows: list[dict[str, Any]] = []
        if ok:
            try:
                rows = [r.__dict__ for r in parse_results(exchange.decoded_body())]
            except (ValueError, TypeError, AttributeError) as exc:
                ok, error = False, f"unusable search response: {exc}"
        # the results are committed with the capture: a crash leaves both or neither
        self._store(key, "search", self.serper().endpoint, exchange.url, [exchange], ok,
                    error, exchange.permanent, exchange.status, results=rows)

    def _write_page(self, key: str, fetch: PageFetch) -> None:
        text = None
        if fetch.ok and fetch.text is not None:
            text = (fetch.text, fetch.title, fetch.extractor, fetch.text_status or "ok")
        self._store(
            key, "page", fetch.url, self.reader.fetch_url(fetch.url), fetch.exchanges,
            fetch.ok, fetch.error, fetch.permanent, fetch.status, fetch.final_url, text)

    # -- phases ----------------------------------------------------------------------
    def search_all(self, queries: Iterable[SearchParams]) -> None:
        jobs: dict[str, Callable[[], Any]] = {}
        for params in queries:
            key = self.search_key(params)
            if key in jobs:
                continue
            if self._done(key):
                self.summary.skipped += 1
                continue
            jobs[key] = (lambda p=params: self.serper().search(p))
        self.summary.searches = len(jobs)
        if jobs:
            self.serper()
        self._run("search", sorted(jobs.items()), self._write_search)

    def read_all(self, urls: Iterable[str]) -> None:
        jobs: dict[str, Callable[[], Any]] = {}
        for url in urls:
            key = self.page_key(url)
            if key in jobs:
                continue
            if self._done(key):
                self.summary.skipped += 1
                continue
            jobs[key] = (lambda u=url: self._read(u))
        self.summary.pages = len(jobs)
        self._run("read", sorted(jobs.items()), self._write_page)

    def _read(self, url: str) -> PageFetch:
        """Read one page; a URL that is not http(s) fails here, before any request."""
        problem = scheme_problem(url)
        if problem is not None:
            return PageFetch(url=url, error=problem, permanent=True)
        return self.reader.read(url)

    def results_for(self, params: SearchParams) -> list[dict[str, Any]]:
        row = self.bundle.index.capture_by_key(self.search_key(params))
        if row is None or row["state"] != "ok":
            return []
        return self.bundle.index.rows(
            "SELECT * FROM search_results WHERE capture_id = ? AND rank <= ? ORDER BY rank",
            [row["id"], self.options.top_k])


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _register_claims(cap: Capturer, claims: list[ClaimInput]) -> None:
    """Store the claims, their URLs and queries; a changed claim drops its old links."""
    index = cap.bundle.index
    with index.transaction():
        for ordinal, claim in enumerate(claims):
            params = [cap.options.search_params(q).payload() for q in claim.queries]
            digest = request_key({"text": claim.text, "urls": list(claim.urls), "queries": params,
                                  "extra": claim.extra})
            old = index.one("SELECT input_sha256 FROM claims WHERE id = ?", [claim.id])
            if old is not None and old["input_sha256"] == digest:
                index.db.conn.execute("UPDATE claims SET ordinal = ? WHERE id = ?",
                                      [ordinal, claim.id])
                continue
            for table in ("links", "queries", "claim_urls"):
                index.db.conn.execute(f"DELETE FROM {table} WHERE claim_id = ?", [claim.id])
            index.db.conn.execute(
                "INSERT INTO claims (id, ordinal, text, extra, input_sha256) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET ordinal = excluded.ordinal,"
                " text = excluded.text, extra = excluded.extra,"
                " input_sha256 = excluded.input_sha256, links_sha256 = NULL",
                [claim.id, ordinal, claim.text, json.dumps(claim.extra, sort_keys=True), digest])
            for i, url in enumerate(claim.urls):
                index.put("claim_urls", {"claim_id": claim.id, "ordinal": i, "url": url})
            for i, p in enumerate(params):
                index.put("queries", {"id": f"{claim.id}#q{i + 1}", "claim_id": claim.id,
                                      "ordinal": i + 1, "q": p["q"],
                                      "params": json.dumps(p, sort_keys=True)})


def _link_claims(cap: Capturer, claims: list[ClaimInput]) -> None:
    """Write one metadata record per claim stating claim -> query -> rank -> capture."""
    index = cap.bundle.index
    for claim in claims:
        rows: list[dict[str, Any]] = []
        doc: dict[str, Any] = {"claim": {"id": claim.id, "text": claim.text}, "cited": [],
                               "queries": []}
        for url in claim.urls:
            page = index.capture_by_key(cap.page_key(url))
            cid = page["id"] if page else None
            doc["cited"].append({"url": url, "capture": cid})
            rows.append({"source": "cited", "query_id": None, "rank": None, "url": url,
                         "capture_id": cid})
        for i, q in enumerate(claim.queries):
            params = cap.options.search_params(q)
            qid = f"{claim.id}#q{i + 1}"
            search = index.capture_by_key(cap.search_key(params))
            entry: dict[str, Any] = {"id": qid, "q": q, "search_capture": search["id"] if search
                                     else None, "results": []}
            for r in cap.results_for(params):
                page = index.capture_by_key(cap.page_key(r["link"]))
                cid = page["id"] if page else None
                entry["results"].append({"rank": r["rank"], "url": r["link"], "capture": cid})
                rows.append({"source": "search", "query_id": qid, "rank": r["rank"],
                             "url": r["link"], "capture_id": cid})
            doc["queries"].append(entry)
        body = dumps(doc)
        digest = sha256(body)
        old = index.one("SELECT links_sha256 FROM claims WHERE id = ?", [claim.id])
        if old is not None and old["links_sha256"] == digest:
            continue
        ref = cap.bundle.warc(cap._info).write_metadata(f"urn:amber:claim:{claim.id}", body)
        cap.bundle.warc(cap._info).flush()
        cap.summary.bytes += ref.length
        with index.transaction():
            index.add_record(ref)
            index.db.conn.execute("DELETE FROM links WHERE claim_id = ?", [claim.id])
            for row in rows:
                index.put("links", {"claim_id": claim.id, **row, "record_id": ref.record_id})
            index.db.conn.execute("UPDATE claims SET links_sha256 = ? WHERE id = ?",
                                  [digest, claim.id])
            for q in doc["queries"]:
                index.db.conn.execute("UPDATE queries SET capture_id = ? WHERE id = ?",
                                      [q["search_capture"], q["id"]])


def capture_claims(
    out: str | Path,
    claims: list[ClaimInput],
    options: CaptureOptions,
    progress: Progress | None = None,
    clock: Callable[[], datetime] | None = None,
) -> CaptureSummary:
    """Search every claim's queries, read the top-k results and every cited URL, and
    freeze all of it into the bundle at ``out``. Rerunning fetches only what is missing."""
    if any(c.queries for c in claims) and not options.serper_key:
        raise ConfigError(
            "SERPER_API_KEY is not set but the claims have search queries",
            hint="export SERPER_API_KEY=... (or remove 'queries' from the input)")
    _refuse_overwriting_another_input(Path(out), claims)
    with Bundle.create(out) as bundle:
        if clock is not None:
            bundle.clock = clock
        cap = Capturer(bundle, options, progress)
        cap.summary.claims = len(claims)
        try:
            _register_claims(cap, claims)
            all_params = [options.search_params(q) for c in claims for q in c.queries]
            cap.search_all(all_params)
            urls: list[str] = []
            for claim in claims:
                urls.extend(claim.urls)
                for q in claim.queries:
                    urls.extend(r["link"] for r in cap.results_for(options.search_params(q)))
            cap.read_all(dict.fromkeys(urls))
            _link_claims(cap, claims)
        finally:
            cap.close()
            bundle.finalize()
        return cap.summary


def stored_claim_sources(out: Path) -> list[tuple[str, str | None]]:
    """(claim id, the report id it came from, None for a claims file's claim) for every
    claim of the bundle at ``out``, in claim order; [] when there is no bundle yet."""
    if not (out / INDEX_PATH).is_file():
        return []
    with Bundle.open(out) as bundle:
        rows = bundle.index.rows("SELECT id, extra FROM claims ORDER BY ordinal, id")
    return [(r["id"], _report_of(r["extra"])) for r in rows]


def _report_of(extra: str | None) -> str | None:
    try:
        value = json.loads(extra or "null")
    except ValueError:
        return None
    return value.get("report_id") if isinstance(value, dict) else None


def _refuse_overwriting_another_input(out: Path, claims: list[ClaimInput]) -> None:
    """A claim id already in the bundle from another input (a report's claim vs. a claims
    file's, or another report's) would be overwritten: refused before anything is
    written. The same input again (an edited claims file, the same report) goes on."""
    incoming = {c.id: c.extra.get("report_id") for c in claims}
    clash = [cid for cid, source in stored_claim_sources(out)
             if cid in incoming and source != incoming[cid]]
    if clash:
        raise InputError(
            f"{out}: claim {clash[0]!r} is already there from another input "
            f"({len(clash)} such id{'s' if len(clash) != 1 else ''}); it would be overwritten",
            hint="give each input its own --out bundle, or other claim ids")


def capture_urls(
    out: str | Path,
    urls: list[str],
    options: CaptureOptions,
    progress: Progress | None = None,
) -> CaptureSummary:
    """Read a plain list of URLs into the bundle at ``out``."""
    with Bundle.create(out) as bundle:
        cap = Capturer(bundle, options, progress)
        try:
            cap.read_all(dict.fromkeys(urls))
        finally:
            cap.close()
            bundle.finalize()
        return cap.summary
