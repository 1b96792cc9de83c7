"""``amber bundle verify``: recompute every digest and check index <-> WARC consistency.

Checks, stopping at the first mismatch (reported with file, offset and record id):
0. ``datapackage-digest.json``: present, and its hash is the sha256 of
   ``datapackage.json`` (so no byte of the manifest, descriptive fields included, can
   change unnoticed); its signature, when present (or required), verifies;
1. ``datapackage.json``: every listed file exists with the listed size and sha256, and
   every file in the bundle is listed;
2. every WARC file, record by record: each gzip member is whole, each record's
   ``WARC-Block-Digest`` and ``WARC-Payload-Digest`` match its bytes, the record sits
   in the index at exactly that offset and length, and the index's copy of its headers
   (target URI, date, digests, links) is exact;
3. the index: every record the index names is found in its file (nothing points past
   the end), captures and texts point at records of the right type, SQLite integrity
   and foreign keys hold;
4. captures and texts: each capture's response came from its URL and holds the payload
   it names, each text is its conversion record's, extracted from that payload;
5. claims and reports: each claim's text and links are those of its last WARC metadata
   record, each report's id is the sha256 of its archived text;
6. judge exchanges (``amber serve --record``): each points at a request/response pair
   holding the payload it names, a stream's chunk lengths are its metadata record's
   and add up to that payload.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from cryptography.hazmat.primitives.asymmetric import ec

from ambereval.snapshots.bundle import manifest
from ambereval.snapshots.bundle.exchanges import check_exchanges
from ambereval.snapshots.bundle.signing import SignatureProblem, check_signed_data
from ambereval.snapshots.bundle.store import (
    INDEX_PATH,
    Bundle,
    describe_unfinished,
    unfinished_state,
)

CHUNK = 1 << 16
# A directory with none of these is not a bundle at all (rather than a damaged one).
BUNDLE_MARKERS = (str(INDEX_PATH), manifest.MANIFEST, manifest.DIGEST)


@dataclass(frozen=True)
class Mismatch:
    file: str
    offset: int | None
    record_id: str | None
    problem: str

    def __str__(self) -> str:
        where = self.file
        if self.offset is not None:
            where += f" @ offset {self.offset}"
        if self.record_id:
            where += f" (record {self.record_id})"
        return f"{where}: {self.problem}"


@dataclass
class VerifyReport:
    bundle: str
    files: int = 0
    records: int = 0
    bytes: int = 0
    mismatch: Mismatch | None = None
    notes: list[str] = field(default_factory=list)
    signature: dict[str, str] | None = None

    @property
    def ok(self) -> bool:
        return self.mismatch is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "bundle": self.bundle, "ok": self.ok, "files": self.files, "records": self.records,
            "bytes": self.bytes, "mismatch": None if self.mismatch is None else {
                "file": self.mismatch.file, "offset": self.mismatch.offset,
                "record_id": self.mismatch.record_id, "problem": self.mismatch.problem},
            "signature": self.signature, "notes": list(self.notes),
        }


class _Stop(Exception):
    def __init__(self, mismatch: Mismatch) -> None:
        self.mismatch = mismatch


def _digest(algo_value: str | None, data: bytes) -> bool | None:
    """True/False when the digest header can be checked, None when it is absent."""
    if not algo_value or ":" not in algo_value:
        return None
    algo, _, expected = algo_value.partition(":")
    try:
        h = hashlib.new(algo.lower().replace("-", ""), data).digest()
    except ValueError:
        return None
    return expected in (base64.b32encode(h).decode(), h.hex(), base64.b64encode(h).decode())


def _parse_headers(block: bytes) -> tuple[str, dict[str, str], int]:
    end = block.find(b"\r\n\r\n")
    if end < 0:
        raise ValueError("no end of WARC headers")
    lines = block[:end].decode("utf-8").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers, end + 4


def _read_member(fh: Any, offset: int) -> tuple[bytes, int]:
    """Decompress the gzip member at ``offset``; returns (data, compressed length)."""
    fh.seek(offset)
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out: list[bytes] = []
    fed = 0
    while not d.eof:
        chunk = fh.read(CHUNK)
        if not chunk:
            raise ValueError("truncated gzip member (file ends mid-record)")
        fed += len(chunk)
        out.append(d.decompress(chunk))
    return b"".join(out), fed - len(d.unused_data)


@dataclass(frozen=True)
class _Record:
    """One WARC record as read back: its id, type, headers (lower-case names) and the
    sha256 of its payload (the HTTP body of a response, the text of a conversion)."""

    record_id: str
    kind: str
    headers: dict[str, str]
    payload_sha256: str
    payload: bytes = b""  # kept for conversion and resource records only (their text)


# index column of ``records`` -> the WARC header it copies
_HEADER_COLUMNS = (("target_uri", "warc-target-uri"), ("date", "warc-date"),
                   ("content_type", "content-type"), ("block_digest", "warc-block-digest"),
                   ("payload_digest", "warc-payload-digest"),
                   ("refers_to", "warc-refers-to"), ("concurrent_to", "warc-concurrent-to"))


def _check_record(name: str, offset: int, data: bytes) -> _Record:
    try:
        version, headers, start = _parse_headers(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _Stop(Mismatch(name, offset, None, f"unreadable WARC headers: {exc}")) from None
    rid = headers.get("warc-record-id")
    if not version.startswith("WARC/"):
        raise _Stop(Mismatch(name, offset, rid, f"not a WARC record ({version[:20]!r})"))
    try:
        length = int(headers.get("content-length", ""))
    except ValueError:
        raise _Stop(Mismatch(name, offset, rid, "missing Content-Length")) from None
    block = data[start : start + length]
    if len(block) != length or data[start + length :] != b"\r\n\r\n":
        raise _Stop(Mismatch(name, offset, rid, "record length does not match Content-Length"))
    if _digest(headers.get("warc-block-digest"), block) is False:
        raise _Stop(Mismatch(name, offset, rid, "WARC-Block-Digest does not match the block"))
    payload = block
    kind = headers.get("warc-type", "")
    if kind in ("response", "request", "revisit") and "application/http" in headers.get(
        "content-type", ""
    ):
        cut = block.find(b"\r\n\r\n")
        payload = block[cut + 4 :] if cut >= 0 else b""
    if kind != "revisit" and _digest(headers.get("warc-payload-digest"), payload) is False:
        raise _Stop(Mismatch(name, offset, rid, "WARC-Payload-Digest does not match the payload"))
    return _Record(rid or "", kind, headers, hashlib.sha256(payload).hexdigest(),
                   payload if kind in ("conversion", "resource") else b"")


def _check_digest(root: Path, report: VerifyReport, require_signature: bool,
                  trusted: list[ec.EllipticCurvePublicKey] | None) -> None:
    name = manifest.DIGEST
    path = root / name
    if not path.is_file():
        raise _Stop(Mismatch(name, None, None, "missing (the manifest is not protected)"))
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # UnicodeDecodeError included
        raise _Stop(Mismatch(name, None, None, f"unreadable: {type(exc).__name__}")) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("hash"), str) \
            or set(doc) - {"path", "hash", "signedData"} or "path" not in doc:
        raise _Stop(Mismatch(name, None, None, "not a WACZ digest (path, hash, signedData)"))
    expected, target = doc["hash"], doc["path"]
    if target != manifest.MANIFEST:
        raise _Stop(Mismatch(name, None, None, f"names {target!r}, not {manifest.MANIFEST}"))
    mpath = root / manifest.MANIFEST
    if not mpath.is_file():
        raise _Stop(Mismatch(manifest.MANIFEST, None, None, "missing"))
    data = mpath.read_bytes()
    if manifest.manifest_hash(data) != expected:
        raise _Stop(Mismatch(manifest.MANIFEST, None, None,
                             "sha256 differs from datapackage-digest.json"))
    signed = doc.get("signedData")
    if signed is None:
        if require_signature or trusted is not None:
            raise _Stop(Mismatch(name, None, None, "not signed (a signature is required)"))
        return
    try:
        report.signature = check_signed_data(signed, data, trusted).as_dict()
    except SignatureProblem as exc:
        raise _Stop(Mismatch(name, None, None, f"signature: {exc}")) from None


def _check_manifest(root: Path, report: VerifyReport) -> None:
    path = root / manifest.MANIFEST
    if not path.is_file():
        raise _Stop(Mismatch(manifest.MANIFEST, None, None, "missing"))
    try:
        package = json.loads(path.read_text(encoding="utf-8"))
        resources = {r["path"]: r for r in package["resources"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise _Stop(Mismatch(manifest.MANIFEST, None, None, f"unreadable: {exc}")) from None
    present = {p.relative_to(root).as_posix(): p for p in manifest.bundle_files(root)}
    for rel, res in sorted(resources.items()):
        if rel not in present:
            raise _Stop(Mismatch(rel, None, None, "listed in datapackage.json but missing"))
        digest, size = manifest.sha256_file(present[rel])
        report.files += 1
        report.bytes += size
        if size != res.get("bytes"):
            raise _Stop(Mismatch(rel, None, None,
                                 f"size {size} differs from datapackage.json ({res.get('bytes')})"))
        if f"sha256:{digest}" != res.get("hash"):
            raise _Stop(Mismatch(rel, None, None, "sha256 differs from datapackage.json"))
    for rel in sorted(set(present) - set(resources)):
        raise _Stop(Mismatch(rel, None, None, "not listed in datapackage.json"))


@dataclass
class _Seen:
    """What the record pass learned for the index checks after it: the payload sha256 of
    every response record, and the text sha256 and length of every conversion record."""

    payloads: dict[str, str] = field(default_factory=dict)
    texts: dict[str, tuple[str, int | None]] = field(default_factory=dict)

    def add(self, record: _Record) -> None:
        if record.kind == "response":
            self.payloads[record.record_id] = record.payload_sha256
        elif record.kind in ("conversion", "resource"):
            try:
                chars: int | None = len(record.payload.decode("utf-8"))
            except UnicodeDecodeError:
                chars = None
            self.texts[record.record_id] = (record.payload_sha256, chars)


def _check_warcs(bundle: Bundle, report: VerifyReport, seen: _Seen | None = None) -> None:
    index = bundle.index
    files = [r["name"] for r in index.rows("SELECT name FROM warc_files ORDER BY name")]
    on_disk = sorted(p.name for p in (bundle.root / "archive").glob("*.warc*"))
    for name in on_disk:
        if name not in files:
            raise _Stop(Mismatch(f"archive/{name}", None, None, "WARC file not in the index"))
    for name in files:
        rel = f"archive/{name}"
        path = bundle.root / "archive" / name
        rows = index.rows("SELECT * FROM records WHERE warc_file = ? ORDER BY offset", [name])
        by_offset = {r["offset"]: r for r in rows}
        if not path.is_file():
            first = rows[0] if rows else {"offset": None, "record_id": None}
            raise _Stop(Mismatch(rel, first["offset"], first["record_id"], "file is missing"))
        size = path.stat().st_size
        for r in rows:
            if r["offset"] + r["length"] > size:
                raise _Stop(Mismatch(rel, r["offset"], r["record_id"],
                                     f"index points past end of file ({size} bytes)"))
        offset = 0
        with open(path, "rb") as fh:
            while offset < size:
                row = by_offset.get(offset)
                try:
                    data, used = _read_member(fh, offset)
                except (ValueError, zlib.error) as exc:
                    rid = row["record_id"] if row else None
                    raise _Stop(Mismatch(rel, offset, rid, str(exc))) from None
                record = _check_record(rel, offset, data)
                rid, kind = record.record_id, record.kind
                if row is None:
                    raise _Stop(Mismatch(rel, offset, rid, "record is not in the index"))
                if row["record_id"] != rid or row["length"] != used or row["type"] != kind:
                    raise _Stop(Mismatch(rel, offset, rid,
                                         f"index says {row['record_id']} ({row['type']}, "
                                         f"{row['length']} bytes), file has {kind}, {used} bytes"))
                for column, header in _HEADER_COLUMNS:  # values compared as parsed: trimmed
                    if _trimmed(row[column]) != record.headers.get(header):
                        raise _Stop(Mismatch(rel, offset, rid, f"index says {column} "
                                             f"{row[column]!r}, the record's {header} is "
                                             f"{record.headers.get(header)!r}"))
                if seen is not None:
                    seen.add(record)
                report.records += 1
                offset += used


def _check_index(bundle: Bundle) -> None:
    index = bundle.index
    db = str(INDEX_PATH)
    problem = index.db.execute("PRAGMA integrity_check").fetchone()[0]
    if problem != "ok":
        raise _Stop(Mismatch(db, None, None, f"SQLite integrity: {problem}"))
    broken = index.db.execute("PRAGMA foreign_key_check").fetchone()
    if broken:
        raise _Stop(Mismatch(db, None, None, f"foreign key broken in table {broken[0]}"))
    expect = (
        ("SELECT c.id, r.record_id, r.type FROM captures c JOIN records r "
         "ON r.record_id = c.response_record WHERE r.type NOT IN ('response', 'revisit')",
         "response_record is not a response"),
        ("SELECT c.id, r.record_id, r.type FROM captures c JOIN records r "
         "ON r.record_id = c.request_record WHERE r.type != 'request'",
         "request_record is not a request"),
        ("SELECT t.capture_id AS id, r.record_id, r.type FROM texts t JOIN records r "
         "ON r.record_id = t.record_id WHERE r.type NOT IN ('conversion', 'resource')",
         "text record is not a conversion"),
    )
    for sql, message in expect:
        bad = index.one(sql)
        if bad:
            raise _Stop(Mismatch(db, None, bad["record_id"], f"capture {bad['id']}: {message}"))


def _check_claims_and_reports(bundle: Bundle) -> None:
    """The index's claims and reports say what their WARC records say: each linked
    claim's text and links digest are those of its last indexed ``urn:amber:claim:<id>``
    metadata record, and each report's id is the sha256 of its archived text. (The
    manifest check catches an edited index; this catches one re-sealed after the edit.)
    A claim registered but never linked (a capture stopped between the two) has no
    record yet and is not checked."""
    index = bundle.index
    db = str(INDEX_PATH)
    for claim in index.rows("SELECT id, text, links_sha256 FROM claims "
                            "WHERE links_sha256 IS NOT NULL ORDER BY id"):
        newest = index.one(
            "SELECT record_id FROM records WHERE type = 'metadata' AND target_uri = ? "
            "ORDER BY rowid DESC LIMIT 1", [f"urn:amber:claim:{claim['id']}"])  # last indexed
        if newest is None:
            raise _Stop(Mismatch(db, None, None,
                                 f"claim {claim['id']}: no WARC record holds it"))
        body = bundle.read_record(newest["record_id"]).body
        try:
            text = json.loads(body)["claim"]["text"]
        except (ValueError, KeyError, TypeError):
            text = None
        if hashlib.sha256(body).hexdigest() != claim["links_sha256"] or text != claim["text"]:
            raise _Stop(Mismatch(db, None, newest["record_id"],
                                 f"claim {claim['id']}: the index differs from its WARC record"))
    for report in index.rows("SELECT id, record_id FROM reports ORDER BY id"):
        body = bundle.read_record(report["record_id"]).body
        if hashlib.sha256(body).hexdigest() != report["id"]:
            raise _Stop(Mismatch(db, None, report["record_id"],
                                 f"report {report['id'][:16]}: its text differs from its id"))


def _trimmed(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def _host(netloc: str) -> str:
    host = netloc.rsplit("@", 1)[-1]
    if host.startswith("["):  # an IPv6 literal
        return host.split("]", 1)[0].lower() + "]"
    host = host.split(":", 1)[0].rstrip(".").lower()
    labels = []
    for label in host.split("."):
        if label.startswith("xn--"):
            with contextlib.suppress(UnicodeError, ValueError):
                label = label[4:].encode("ascii").decode("punycode").lower()
        labels.append(label)
    return ".".join(labels)


def _path(path: str) -> str:
    """RFC 3986 dot-segment removal that keeps empty segments (a reader URL embeds
    ``https://`` in its path), percent-decoded; the empty path is ``/``."""
    out: list[str] = []
    for segment in unquote(path).split("/")[1:]:
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
    return "/" + "/".join(out)


def _page_key(url: str) -> tuple[str, str]:
    """What a URL and the URL the HTTP client sent for it (normalised: case, IDNA, default
    port, dot segments, percent-encoding; credentials and secret query values removed
    before archiving) surely share: the host and the path. The query is left out (the
    archived copy may hide its values), so two pages that differ only in their query are
    not told apart here."""
    parts = urlsplit(url.strip())
    return _host(parts.netloc), _path(parts.path)


def _same_url(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and _page_key(a) == _page_key(b)


def _check_captures_and_texts(bundle: Bundle, seen: _Seen) -> None:
    """Each capture and each extracted text say what their WARC records say: a capture's
    response was fetched from its URL (its fetch, final or given URL, by host and path:
    :func:`_page_key`) and holds the payload whose sha256 the capture names (a revisit,
    the payload of the record it revisits), its request is the response's; a text is
    the conversion record's text, extracted from a response with that same payload.
    (Evaluation reads page text through these rows: an index edited to hand one URL
    another page's text, then re-sealed, is caught here.)"""
    index = bundle.index
    db = str(INDEX_PATH)

    def stop(record_id: str | None, problem: str) -> _Stop:
        return _Stop(Mismatch(db, None, record_id, problem))

    def payload_of(record_id: str | None) -> str | None:
        row = index.record(record_id) if record_id else None
        if row is None:
            return None
        if row["type"] == "revisit":
            return seen.payloads.get(row["refers_to"] or "")
        return seen.payloads.get(record_id or "")

    for cap in index.rows("SELECT * FROM captures WHERE response_record IS NOT NULL "
                          "ORDER BY id"):
        response = index.record(cap["response_record"]) or {}
        if not any(_same_url(response.get("target_uri"), cap[k])
                   for k in ("fetch_url", "final_url", "url")):
            raise stop(cap["response_record"], f"capture {cap['id']}: its response was "
                       f"fetched from {response.get('target_uri')}, not {cap['fetch_url']}")
        if payload_of(cap["response_record"]) != cap["payload_sha256"]:
            raise stop(cap["response_record"], f"capture {cap['id']}: the index's payload "
                       "sha256 differs from its WARC response")
        request = index.record(cap["request_record"]) if cap["request_record"] else None
        if request is not None and request["concurrent_to"] != cap["response_record"]:
            raise stop(cap["request_record"], f"capture {cap['id']}: its request record "
                       "belongs to another response")
    for text in index.rows("SELECT t.capture_id, t.record_id, t.sha256, t.chars, "
                           "c.payload_sha256, c.url, r.refers_to, r.type, r.target_uri "
                           "FROM texts t "
                           "JOIN captures c ON c.id = t.capture_id "
                           "JOIN records r ON r.record_id = t.record_id ORDER BY t.capture_id"):
        if seen.texts.get(text["record_id"]) != (text["sha256"], text["chars"]):
            raise stop(text["record_id"], f"capture {text['capture_id']}: the index's text "
                       "differs from its WARC conversion record")
        if text["type"] == "resource":  # an imported page: the record is the page itself
            extracted_from = text["sha256"] if _same_url(text["target_uri"], text["url"]) \
                else None
        elif text["refers_to"] is not None:
            extracted_from = payload_of(text["refers_to"])
        else:
            continue
        if extracted_from != text["payload_sha256"]:
            raise stop(text["record_id"], f"capture {text['capture_id']}: its text was "
                       "extracted from another page")


def manifest_mismatch(root: str | Path) -> Mismatch | None:
    """The first file of a bundle that no longer matches its manifest (or the manifest
    its digest), or None: the byte check of :func:`verify_bundle` alone, without the
    index and WARC checks or the unfinished-bundle wording."""
    report = VerifyReport(str(root))
    try:
        _check_digest(Path(root), report, False, None)
        _check_manifest(Path(root), report)
    except _Stop as stop:
        return stop.mismatch
    return None


def records_mismatch(bundle: Bundle) -> Mismatch | None:
    """The first WARC record of an open bundle that is damaged or not where the index
    says (check 2 of :func:`verify_bundle`), or None."""
    try:
        _check_warcs(bundle, VerifyReport(str(bundle.root)))
    except _Stop as stop:
        return stop.mismatch
    return None


def integrity_warning(root: str | Path) -> str | None:
    """One line when a bundle about to be judged is unfinished or its files no longer
    match its manifest (what `amber bundle verify` would say first), else None. Byte
    checks only: cheap next to judging."""
    state = unfinished_state(Path(root))
    if state is not None:
        return f"{root}: {describe_unfinished(state)} (`amber bundle finish` repairs it)"
    if not (Path(root) / manifest.MANIFEST).is_file():
        return f"{root}: no datapackage.json, so its bytes cannot be checked"
    changed = manifest_mismatch(root)
    if changed is not None:
        return (f"{root}: does not match its manifest ({changed}); its evidence may have "
                "been edited: `amber bundle verify` for details")
    return None


def verify_bundle(root: str | Path, require_signature: bool = False,
                  trusted_keys: list[ec.EllipticCurvePublicKey] | None = None) -> VerifyReport:
    """Check a bundle end to end; ``report.mismatch`` names the first problem.

    A signature is checked when present; ``require_signature`` makes it mandatory, and
    ``trusted_keys`` (implies required) also demands that one of these keys made it.
    """
    report = VerifyReport(str(root))
    path = Path(root)
    if not path.is_dir() or not any((path / name).exists() for name in BUNDLE_MARKERS):
        Bundle.open(root)  # raises the usual "no such bundle" / "not an Amber bundle" error
    unfinished = unfinished_state(path)
    try:
        # first: they need no index, so they name damage to it
        _check_digest(path, report, require_signature, trusted_keys)
        _check_manifest(path, report)
    except _Stop as stop:
        report.mismatch = stop.mismatch
        if unfinished is not None:
            report.mismatch = Mismatch(
                stop.mismatch.file, stop.mismatch.offset, stop.mismatch.record_id,
                f"{stop.mismatch.problem} (the bundle is unfinished: "
                f"{describe_unfinished(unfinished)}; rerun the capture or "
                "`amber bundle finish` to repair)")
        return report
    if unfinished is not None and unfinished.get("step"):
        report.notes.append(f"the bytes match the manifest, but {describe_unfinished(unfinished)}"
                            ": pages.jsonl or the CDXJ index may miss the newest captures; "
                            "`amber bundle finish` repairs it")
    bundle = Bundle.open(root)
    try:
        seen = _Seen()
        _check_warcs(bundle, report, seen)
        _check_index(bundle)
        _check_captures_and_texts(bundle, seen)
        _check_claims_and_reports(bundle)
        found = check_exchanges(bundle.index, seen.payloads,
                                lambda rid: bundle.read_record(rid).body)
        if found is not None:
            raise _Stop(Mismatch(str(INDEX_PATH), None, found[0], found[1]))
    except _Stop as stop:
        report.mismatch = stop.mismatch
    finally:
        bundle.close()
    return report
