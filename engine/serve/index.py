"""The frozen web: one in-memory index over the captures of several bundles, answering
Serper searches, Jina Reader reads and direct page fetches from them ("capture in
reverse").

Only metadata lives in memory (keys and WARC offsets); bodies are streamed from the
WARC files when a request is answered. The same request captured more than once is
answered from the earliest capture; when the captures differ in bytes the clash is
listed in :attr:`FrozenWeb.conflicts`.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from warcio.exceptions import ArchiveLoadFailed

from ambereval.engine.serve.answer import (
    Answer,
    Frozen,
    RecordLoc,
    decoded_payload,
    jina_envelope,
    jina_fields,
    jina_text,
    miss,
    rendered,
    replay,
    serper_top,
)
from ambereval.engine.serve.match import (
    NotASearch,
    differing_options,
    normalize_url,
    options_key,
    reader_options,
    reader_targets,
    search_params,
    wants_json,
    wants_stream,
)
from ambereval.engine.serve.recorded import RecordedJudges
from ambereval.engine.serve.upstreams import SERVICE_HOSTS, service_for_path
from ambereval.errors import BundleError
from ambereval.snapshots.bundle.exchanges import exchange_rows
from ambereval.snapshots.bundle.store import Bundle
from ambereval.snapshots.bundle.warc import read_record
from ambereval.snapshots.capture.transport import archived_url


@dataclass(frozen=True)
class Conflict:
    """The same request captured with different bytes: ``used`` answers, ``other`` not."""

    service: str
    request: str
    used: str
    other: str

    def as_dict(self) -> dict[str, str]:
        return dict(self.__dict__)

    def line(self) -> str:
        return f"{self.service} {self.request}: answering from {self.used}, not {self.other}"


def _where(item: Frozen) -> str:
    ref = (f"capture {item.capture_id}" if item.capture_id else
           f"record {item.response.record_id}" if item.response else "?")
    return f"{item.bundle} {ref} ({item.captured_at})"


def _same_bytes(a: Frozen, b: Frozen) -> bool:
    """Two captures of one request that do not conflict: the same payload and status. A
    redirect hop's status is not indexed (None): it agrees with a redirect (3xx) of the
    same payload, nothing else."""
    if a.digest != b.digest:
        return False
    if a.status is None or b.status is None:
        known = a.status if a.status is not None else b.status
        return known is None or 300 <= known < 400
    return a.status == b.status


def _parse_warcinfo(body: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in body.decode("utf-8", "replace").splitlines():
        name, sep, value = line.partition(":")
        if sep:
            out[name.strip()] = value.strip()
    return out


class _Loader:
    """Reads one bundle's index into :class:`Frozen` items (metadata only)."""

    def __init__(self, bundle: Bundle, order: int) -> None:
        self.bundle = bundle
        self.order = order
        self.name = str(bundle.root)
        self.records = {r["record_id"]: r for r in bundle.index.rows(
            "SELECT record_id, warc_file, offset, length, type, target_uri, date,"
            " payload_digest, refers_to FROM records"
            " WHERE type IN ('response', 'revisit', 'request', 'warcinfo')")}
        self._options: dict[str, dict[str, str] | None] = {}

    def loc(self, record_id: str | None) -> RecordLoc | None:
        row = self.records.get(record_id) if record_id else None
        if row is None:
            return None
        path = self.bundle.root / "archive" / row["warc_file"]
        return RecordLoc(path, row["offset"], row["length"], row["record_id"])

    def payload_loc(self, record_id: str | None) -> RecordLoc | None:
        row = self.records.get(record_id) if record_id else None
        if row is not None and row["type"] == "revisit" and row["refers_to"]:
            return self.loc(row["refers_to"])
        return self.loc(record_id)

    def read_body(self, record_id: str) -> bytes:
        loc = self.loc(record_id)
        if loc is None:
            raise BundleError(f"{self.name}: record {record_id} is not in the index")
        return read_record(loc.path, loc.offset, loc.length).body

    def session_options(self, request_record: str | None) -> dict[str, str] | None:
        """The reader options of the capture session that wrote ``request_record``
        (from its WARC file's warcinfo), or the request's own headers as a fallback."""
        row = self.records.get(request_record) if request_record else None
        if row is None:
            return None
        name = row["warc_file"]
        if name not in self._options:
            info_row = self.bundle.index.one(
                "SELECT warcinfo_id FROM warc_files WHERE name = ?", [name])
            info: dict[str, str] = {}
            if info_row and info_row["warcinfo_id"] in self.records:
                info = _parse_warcinfo(self.read_body(info_row["warcinfo_id"]))
            raw = info.get("amber-reader-options")
            self._options[name] = reader_options(json.loads(raw).items()) if raw else None
        found = self._options[name]
        if found is not None:
            return found
        loc = self.loc(request_record)
        if loc is None:
            return None
        record = read_record(loc.path, loc.offset, loc.length)
        return reader_options(record.http_headers)

    def item(self, row: dict[str, Any], service: str, key: str, label: str,
             num: int | None = None) -> Frozen:
        return Frozen(
            service=service, key=key, label=label, bundle=self.name, bundle_order=self.order,
            capture_id=row["id"], captured_at=row["captured_at"],
            response=self.loc(row["response_record"]),
            payload=self.payload_loc(row["response_record"]),
            digest=row["payload_sha256"], status=row["status"], error=row["error"], num=num,
            content_type=row["content_type"])

    def load(self) -> Iterable[Frozen]:
        service_responses: set[str] = set()
        direct_captures: dict[str, dict[str, Any]] = {}
        for row in self.bundle.index.rows("SELECT * FROM captures ORDER BY captured_at, id"):
            if row["response_record"] and row["reader"] != "direct":
                service_responses.add(row["response_record"])
            if row["kind"] == "search":
                try:
                    params = json.loads(self.read_body(row["request_record"]))
                    key, num = search_params(params)
                except (NotASearch, ValueError, TypeError, BundleError):
                    continue
                yield self.item(row, "serper", key, json.dumps(params.get("q")), num)
            elif row["reader"] == "jina":
                options = self.session_options(row["request_record"]) or {}
                url = normalize_url(row["url"])
                yield self.item(row, "jina", f"{url} {options_key(options)}",
                                archived_url(row["url"]))
            elif row["reader"] == "direct":
                if row["response_record"]:
                    direct_captures[row["response_record"]] = row
                elif row["state"] == "failed":  # nothing came back: answered with a 502
                    yield self.item(row, "direct", normalize_url(row["url"]),
                                    archived_url(row["url"]))
        # recorded judge answers, and answers a recording archived but never replays
        service_responses.update(r["response_record"] for r in exchange_rows(self.bundle.index))
        service_responses.update(
            r["record_id"] for r in self.bundle.index.rows(
                "SELECT f.record_id FROM failures f JOIN records r ON r.record_id = f.record_id"
                " WHERE r.type = 'response'") if r["record_id"] not in direct_captures)
        for rec in self.records.values():
            if rec["type"] not in ("response", "revisit") or not rec["target_uri"]:
                continue
            if rec["record_id"] in service_responses:
                continue
            capture = direct_captures.get(rec["record_id"])
            url = normalize_url(rec["target_uri"])
            yield Frozen(
                service="direct", key=url, label=archived_url(rec["target_uri"]), bundle=self.name,
                bundle_order=self.order, capture_id=capture["id"] if capture else None,
                captured_at=capture["captured_at"] if capture else rec["date"],
                response=self.loc(rec["record_id"]),
                payload=self.payload_loc(rec["record_id"]), digest=rec["payload_digest"],
                status=capture["status"] if capture else None, error=None)


class FrozenWeb:
    """Answers requests from the bundles, never from the network.

    Example::

        web = FrozenWeb(["bundle-a", "bundle-b"])
        answer = web.search([{"q": "largest tea producer", "num": 5}])
        answer.match, answer.status, answer.read()
    """

    def __init__(self, bundles: Sequence[str | Path], strict: bool = False) -> None:
        self.bundles = [str(b) for b in bundles]
        self._items: dict[tuple[str, str], Frozen] = {}
        self.conflicts: list[Conflict] = []
        self._reader_urls: set[str] = set()
        #: per reader URL, its captures' output options (the nearest answers a request
        #: whose options no capture has, unless ``strict``)
        self._reader_variants: dict[str, list[tuple[dict[str, str], Frozen]]] = {}
        self.strict = strict
        self.hosts: dict[str, str] = dict(SERVICE_HOSTS)
        self.counts = {"serper": 0, "jina": 0, "direct": 0}
        self.judges = RecordedJudges()  # judge exchanges frozen by amber serve --record
        self._searches_by_num: dict[tuple[str, int | None], Frozen] = {}
        found: dict[tuple[str, str], list[Frozen]] = {}
        for order, root in enumerate(self.bundles):
            with Bundle.open(root) as bundle:
                self.judges.load(bundle, order)
                loader = _Loader(bundle, order)
                try:
                    for item in loader.load():
                        found.setdefault((item.service, item.key), []).append(item)
                except (ArchiveLoadFailed, EOFError, OSError, zlib.error) as exc:
                    raise BundleError(f"{root}: a record cannot be read ({exc})",
                                      hint=f"run `amber bundle verify {root}`") from None
                for row in bundle.index.rows(
                        "SELECT DISTINCT reader, fetch_url FROM captures"
                        " WHERE reader IN ('serper', 'jina')"):
                    netloc = urlsplit(row["fetch_url"]).netloc.lower()
                    if netloc and self.hosts.get(netloc, row["reader"]) != row["reader"]:
                        self.hosts[netloc] = "both"  # one server for both (amber serve)
                    elif netloc:
                        self.hosts[netloc] = row["reader"]
        for key, items in sorted(found.items()):
            items.sort(key=lambda i: (i.captured_at, i.bundle_order, i.capture_id or "",
                                      i.response.record_id if i.response else ""))
            first = items[0]
            self._items[key] = first
            for item in reversed(items):  # a recorded search: its own num answers exactly
                if item.service == "serper":
                    self._searches_by_num[(item.key, item.num)] = item
            if first.service == "jina":
                url, _, options = first.key.partition(" ")
                self._reader_urls.add(url)
                self._reader_variants.setdefault(url, []).append((json.loads(options), first))
            self.counts[first.service] += 1
            seen = [first]
            for other in items[1:]:
                if other.num != first.num or any(_same_bytes(other, s) for s in seen):
                    continue
                seen.append(other)
                self.conflicts.append(Conflict(first.service, first.label, _where(first),
                                               _where(other)))

    def _get(self, service: str, key: str) -> Frozen | None:
        return self._items.get((service, key))

    def judge(self, service: str, method: str, target: str, body: bytes) -> Answer:
        """An OpenAI or Gemini request, answered with the recorded judge's own answer."""
        return self.judges.answer(service, method, target, body)

    def service_for_host(self, netloc: str, path: str = "/") -> str | None:
        """``serper``/``jina``/``openai``/``gemini`` for a service host (the real ones and
        every base URL the captures used; a host that served several is told apart by the
        path), else None (a page, replayed as captured)."""
        found = self.hosts.get(netloc.lower())
        if found == "both":
            return service_for_path(path)
        return found

    # -- Serper ------------------------------------------------------------------------
    def search(self, queries: list[dict[str, Any]], batch: bool = False) -> Answer:
        """A Serper ``POST /search`` (a batch when the body was a JSON list)."""
        answers: list[Answer] = []
        for query in queries:
            answer = self._search_one(query)
            if answer.match == "miss" or not batch:
                return answer
            answers.append(answer)
        parts = [a.read() for a in answers]
        body = b"[" + b",".join(parts) + b"]"
        ids = ",".join(a.record_id or "" for a in answers)
        return Answer(200, "OK", [("Content-Type", "application/json; charset=utf-8"),
                                  ("X-Amber-Match", "rendered"), ("X-Amber-Record", ids)],
                      "rendered", "serper", body=body, length=len(body))

    def _search_one(self, query: dict[str, Any]) -> Answer:
        try:
            key, num = search_params(query)
        except NotASearch as exc:
            return miss("serper", f"not a search request ({exc})")
        item = self._searches_by_num.get((key, num)) or self._get("serper", key)
        if item is None:
            return miss("serper", f"search {query.get('q')!r} with these parameters was "
                        "never captured")
        if item.num is None or num == item.num or item.status != 200:
            return replay(item)
        if num > item.num:
            return miss("serper", f"search {query.get('q')!r} was captured with "
                        f"num={item.num}, asked for num={num}")
        try:
            return serper_top(item, num)
        except (ValueError, AttributeError):
            return replay(item)

    # -- Jina Reader -------------------------------------------------------------------
    def read(self, target: str, headers: list[tuple[str, str]],
             head_only: bool = False) -> Answer:
        """A Jina Reader ``GET /<target>``, in the format the headers ask for."""
        accept = next((v for k, v in headers if k.lower() == "accept"), None)
        if wants_stream(accept):
            return miss("jina", "streamed (text/event-stream) answers are not replayed")
        options = reader_options(headers)
        candidates = reader_targets(target)
        if not candidates:
            return miss("jina", "no target URL after the reader's /")
        item = None
        for url in candidates:
            item = self._get("jina", f"{url} {options_key(options)}")
            if item is not None:
                break
        if item is None:
            variants = [v for url in candidates for v in self._reader_variants.get(url, [])]
            shown = archived_url(candidates[0])
            if variants and not self.strict:
                return self._nearest(variants, accept, options, head_only)
            if variants:
                return miss("jina", f"{shown} was captured with other reader "
                            f"options than {options or 'the defaults'}")
            why = f"{shown} was never read through Jina Reader"
            if any(self._get("direct", url) for url in candidates):
                why += " (it was fetched directly: use amber serve --proxy)"
            return miss("jina", why)
        return self._reader_format(item, wants_json(accept), options, head_only)

    def _nearest(self, variants: list[tuple[dict[str, str], Frozen]], accept: str | None,
                 options: dict[str, str], head_only: bool) -> Answer:
        """The capture whose output options differ least from the request's (then the
        earliest bundle and capture), marked ``nearest`` with the options that differ."""
        captured, item = min(variants, key=lambda v: (
            len(differing_options(options, v[0])), v[1].bundle_order, v[1].captured_at,
            v[1].capture_id or ""))
        answer = self._reader_format(item, wants_json(accept), captured, head_only)
        if answer.match == "miss":
            return answer
        differ = differing_options(options, captured)
        answer.match = "nearest"
        answer.headers = [(k, v) for k, v in answer.headers if k.lower() != "x-amber-match"]
        answer.headers += [("X-Amber-Match", "nearest"),
                           ("X-Amber-Options-Differ", ", ".join(differ))]
        answer.nearest = differ
        return answer

    def _reader_has(self, url: str) -> bool:
        return url in self._reader_urls

    def _reader_format(self, item: Frozen, want_json: bool, options: dict[str, str],
                       head_only: bool) -> Answer:
        if item.response is None or item.status != 200:
            return replay(item, head_only)
        captured_json = "json" in (item.content_type or "").lower()
        if want_json == captured_json:
            return replay(item, head_only)
        _, _, body = decoded_payload(item)
        data = jina_envelope(body)
        if captured_json and data is None:  # a JSON error object: replayed as it came
            return replay(item, head_only)
        if data is not None:
            if options.get("x-return-format", "markdown") != "markdown":
                return miss("jina", f"{item.label} was captured as JSON; its text form for "
                            f"X-Return-Format={options['x-return-format']} is not rendered")
            return rendered(item, jina_text(data), "text/plain; charset=utf-8",
                            "text format from the captured JSON envelope")
        fields = jina_fields(body)
        envelope = {"code": 200, "status": 20000, "data": fields}
        out = json.dumps(envelope, ensure_ascii=False).encode("utf-8")
        return rendered(item, out, "application/json; charset=utf-8",
                        "JSON envelope from the captured text format")

    # -- pages -------------------------------------------------------------------------
    def page(self, method: str, url: str) -> Answer:
        """A page fetched directly (proxy mode), replayed as captured."""
        if method not in ("GET", "HEAD"):
            return miss("direct", f"{method} {archived_url(url)}: only GET and HEAD of "
                        "captured pages are replayed")
        key = normalize_url(url)
        item = self._get("direct", key)
        if item is None:
            why = f"{archived_url(url)} was never fetched directly"
            if self._reader_has(key):
                why += " (only its text, through Jina Reader, was captured)"
            return miss("direct", why)
        return replay(item, head_only=method == "HEAD")

    def summary(self) -> dict[str, Any]:
        return {"bundles": self.bundles, "searches": self.counts["serper"],
                "reader_pages": self.counts["jina"], "direct_responses": self.counts["direct"],
                "judge_exchanges": len(self.judges),
                "conflicts": [c.as_dict() for c in self.conflicts]}
