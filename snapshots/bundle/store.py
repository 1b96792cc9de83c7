"""A snapshot bundle on disk: layout, locking, torn-tail repair, reading back.

Layout (WACZ-compatible directory)::

    datapackage.json  archive/*.warc.gz  indexes/index.cdx.gz  indexes/index.idx
    pages/pages.jsonl  evidence/amber.sqlite
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ambereval.errors import BundleError
from ambereval.snapshots.bundle import manifest
from ambereval.snapshots.bundle.index import Index
from ambereval.snapshots.bundle.warc import (
    Clock,
    IdFactory,
    WarcFile,
    new_record_id,
    read_record,
    utc_now,
)

INDEX_PATH = Path("evidence") / "amber.sqlite"
MAX_WARC_BYTES = 1 << 30
UNFINISHED = ".amber-unfinished"  # hidden: not in the manifest, never packed
REPAIRED = ".amber-repaired"  # hidden too: the bytes a repair took out of archive/, kept


def unfinished_state(root: str | Path) -> dict[str, Any] | None:
    """What the marker of an unfinished bundle says (a writer is running or was
    interrupted, or its last finish failed at ``step``), or None for a finished bundle."""
    path = Path(root) / UNFINISHED
    if not path.is_file():
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = None
    return state if isinstance(state, dict) else {"step": None}


def describe_unfinished(state: dict[str, Any]) -> str:
    step = state.get("step")
    if step:
        return f"its last finish failed at step '{step}' ({state.get('error', '')})"
    return "a capture is writing it or was interrupted before finishing"


@dataclass
class StoredCapture:
    """A capture read straight from the WARC: response and extracted text."""

    capture_id: str
    url: str
    state: str
    status: int | None
    error: str | None
    content_type: str | None
    response_headers: list[tuple[str, str]]
    body: bytes
    text: str | None
    title: str | None
    text_status: str | None
    response_record: str | None
    text_record: str | None
    warc_file: str | None
    offset: int | None
    final_url: str | None = None  # where redirects led, when they did


class Bundle:
    """An evidence bundle. ``Bundle.create`` to write, ``Bundle.open`` to read."""

    def __init__(self, root: Path, index: Index, writable: bool) -> None:
        self.root = root
        self.index = index
        self.writable = writable
        self._lock_fh: Any = None
        self._warc: WarcFile | None = None
        self.ids: IdFactory = new_record_id
        self.clock: Clock = utc_now

    # -- opening -----------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | Path) -> Bundle:
        root = Path(root)
        if root.exists() and not root.is_dir():
            hint = "unpack it first: amber bundle unpack" if root.suffix == ".wacz" else None
            raise BundleError(f"{root}: is a file; a bundle is a directory", hint=hint)
        if not root.is_dir():
            raise BundleError(f"{root}: no such bundle directory")
        db = root / INDEX_PATH
        if not db.is_file():
            raise BundleError(f"{root}: not an Amber bundle (no {INDEX_PATH})")
        try:
            return cls(root, Index(db), writable=False)
        except (ValueError, sqlite3.DatabaseError) as exc:
            raise BundleError(f"{root}: evidence index unreadable ({exc})") from None

    @classmethod
    def create(cls, root: str | Path) -> Bundle:
        """Open for writing (creating it if needed), take the lock, repair torn tails."""
        root = Path(root)
        db = root / INDEX_PATH
        if root.exists() and not root.is_dir():
            raise BundleError(f"{root}: exists and is not a directory")
        if root.is_dir() and not db.exists() and any(root.iterdir()):
            raise BundleError(
                f"{root}: directory is not empty and is not an Amber bundle",
                hint="choose a new --out directory",
            )
        for sub in ("archive", "indexes", "pages", "evidence"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        lock = open(root / ".amber.lock", "a+")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise BundleError(f"{root}: another amber process is writing this bundle") from None
        try:
            index = Index(db, create=True)
        except (ValueError, sqlite3.DatabaseError) as exc:
            lock.close()
            raise BundleError(f"{root}: evidence index unreadable ({exc})") from None
        bundle = cls(root, index, writable=True)
        bundle._lock_fh = lock
        if index.meta("created") is None:
            index.set_meta("created", manifest_date(bundle.clock()))
            index.set_meta("software", manifest.software())
        try:
            bundle.repaired = bundle.repair()
        except BaseException:
            bundle.close()  # the lock and the index go with the refusal
            raise
        if unfinished_state(root) is None:  # keep a failed step's note until it is repaired
            bundle._mark_unfinished(None, None)
        return bundle

    def close(self) -> None:
        if self._warc is not None:
            self._warc.close()
            self._warc = None
        self.index.close()
        if self._lock_fh is not None:
            self._lock_fh.close()
            self._lock_fh = None

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------------
    def warc(self, info: dict[str, str]) -> WarcFile:
        """The WARC file this session appends to (new per session, rolled at 1 GiB)."""
        if self._warc is not None and self._warc.size < MAX_WARC_BYTES:
            return self._warc
        if self._warc is not None:
            self._warc.close()
        archive = self.root / "archive"
        stamp = self.clock().strftime("%Y%m%d%H%M%S")
        seq = len(list(archive.glob("*.warc.gz"))) + 1
        path = archive / f"amber-{stamp}-{seq:05d}.warc.gz"
        while path.exists():
            seq += 1
            path = archive / f"amber-{stamp}-{seq:05d}.warc.gz"
        warc = WarcFile(path, info, ids=self.ids, clock=self.clock)
        warc.flush()
        with self.index.transaction():
            self.index.add_warc_file(warc.name, warc.warcinfo.date, warc.warcinfo.record_id)
            self.index.add_record(warc.warcinfo)
        self._warc = warc
        return warc

    def repair(self) -> list[str]:
        """Take out any WARC bytes the index does not know (a record torn by a crash).

        The index is committed only after a record's bytes are flushed, so bytes past
        the last indexed record are at most one capture's worth of partial output; it
        is fetched again. Nothing is deleted: a cut tail, or a whole ``amber-*`` WARC the
        index never saw, moves to ``.amber-repaired/`` (hidden, outside the manifest). A
        file in ``archive/`` this bundle did not write is refused. Returns one message per
        file touched.
        """
        notes: list[str] = []
        known = {
            r["name"]: r["end"]
            for r in self.index.rows(
                "SELECT w.name, MAX(r.offset + r.length) AS end FROM warc_files w "
                "LEFT JOIN records r ON r.warc_file = w.name GROUP BY w.name"
            )
        }
        files = sorted(p for p in (self.root / "archive").glob("*")
                       if p.is_file() and not p.name.startswith("."))
        foreign = [p.name for p in files if p.name not in known
                   and not (p.name.startswith("amber-") and p.name.endswith(".warc.gz"))]
        if foreign:
            raise BundleError(
                f"{self.root}: archive/{foreign[0]} was not written by this bundle "
                f"(not in its index{f'; {len(foreign) - 1} more' if len(foreign) > 1 else ''})",
                hint="move it out of archive/; a bundle holds only the WARCs it captured")
        for path in files:
            size = path.stat().st_size
            end = known.get(path.name)
            if end is None:
                kept = self._keep_aside(path.name)
                os.replace(path, kept)
                notes.append(f"{path.name}: never indexed ({size} bytes), moved to "
                             f"{kept.relative_to(self.root)}")
                continue
            if size > end:
                kept = self._keep_aside(f"{path.name}.tail-{end}")
                with open(path, "r+b") as fh:
                    fh.seek(end)
                    with open(kept, "wb") as out:
                        shutil.copyfileobj(fh, out, 1 << 20)
                        out.flush()
                        os.fsync(out.fileno())
                    fh.truncate(end)
                    fh.flush()
                    os.fsync(fh.fileno())
                notes.append(f"{path.name}: cut a torn tail of {size - end} bytes at offset "
                             f"{end}, kept in {kept.relative_to(self.root)}")
            elif size < end:
                raise BundleError(
                    f"{path.name}: index points past end of file ({end} > {size} bytes)",
                    hint="run `amber bundle verify` for details",
                )
        return notes

    def _keep_aside(self, name: str) -> Path:
        """A new path in ``.amber-repaired/`` for bytes a repair takes out."""
        folder = self.root / REPAIRED
        folder.mkdir(exist_ok=True)
        path, n = folder / name, 1
        while path.exists():
            n += 1
            path = folder / f"{name}.{n}"
        return path

    def _mark_unfinished(self, step: str | None, error: str | None) -> None:
        state = {"step": step, "error": error, "since": manifest_date(self.clock())}
        manifest.write_group([(self.root / UNFINISHED, dumps(state))])

    def finalize(self) -> None:
        """Rebuild pages.jsonl, the CDXJ index and datapackage.json (+ its digest) from the
        bytes, in that order.

        Each step builds its file in full and swaps it in atomically, so a failing step
        leaves that file as it was; the datapackage step runs even after an earlier step
        failed, so the manifest always describes the bytes on disk. A failure is raised
        afterwards as one line naming the step; the hidden marker ``.amber-unfinished``
        keeps the step until a later finish succeeds (any rerun of the capture, or
        ``amber bundle finish``), which repairs it.
        """
        if self._warc is not None:
            self._warc.close()
            self._warc = None
        failed: list[tuple[str, BaseException]] = []
        for step, run in (("pages", self._finish_pages), ("cdx index", self._finish_cdx)):
            try:
                run()
            except Exception as exc:  # noqa: BLE001 - any failure: keep the old file
                failed.append((step, exc))
        try:
            if failed:
                step, exc = failed[0]
                self._mark_unfinished(step, _one_line(exc))
            created = self.index.meta("created") or manifest_date(self.clock())
            manifest.write_datapackage(
                self.root, f"Amber evidence bundle {self.root.name}", created,
                manifest_date(self.clock()))
        except Exception as exc:  # noqa: BLE001
            failed.append(("datapackage", exc))
            step, first = failed[0]
            with contextlib.suppress(OSError):
                self._mark_unfinished(step, _one_line(first))
        if failed:
            step, exc = failed[0]
            raise BundleError(
                f"{self.root}: finishing the bundle failed at step '{step}': {_one_line(exc)}",
                hint="the captured records are kept; run the same command again (or "
                     "`amber bundle finish`) to repair it")
        (self.root / UNFINISHED).unlink(missing_ok=True)

    def _finish_pages(self) -> None:
        pages = [
            {
                "id": row["id"],
                "url": row["url"],
                "ts": row["captured_at"],
                **({"title": row["title"]} if row["title"] else {}),
            }
            for row in self.index.rows(
                "SELECT c.id, c.url, c.captured_at, t.title FROM captures c "
                "LEFT JOIN texts t ON t.capture_id = c.id "
                "WHERE c.kind = 'page' AND c.state = 'ok' ORDER BY c.url, c.id"
            )
        ]
        manifest.write_pages(self.root, pages)

    def _finish_cdx(self) -> None:
        manifest.write_cdx(self.root, self.warc_paths())

    def store_report(self, name: str, text: str, task: Any = None,
                     meta: Any = None) -> str:
        """Archive a report's text as a ``resource`` record; returns its id (sha256)."""
        data = text.encode("utf-8")
        report_id = report_key(text)
        if self.index.one("SELECT id FROM reports WHERE id = ?", [report_id]):
            return report_id
        warc = self.warc({"software": manifest.software()})
        ref = warc.write_resource(f"urn:amber:report:{report_id}", data,
                                  "text/markdown; charset=utf-8")
        warc.flush()
        with self.index.transaction():
            self.index.add_record(ref)
            self.index.put("reports", {
                "id": report_id, "name": name, "chars": len(text), "record_id": ref.record_id,
                "task": json.dumps(task, sort_keys=True) if task is not None else None,
                "meta": json.dumps(meta, sort_keys=True) if meta is not None else None,
                "stored_at": manifest_date(self.clock())})
        return report_id

    def report_text(self, report_id: str | None = None) -> tuple[str, str]:
        """(id, text) of a stored report (the only one when ``report_id`` is None)."""
        rows = self.index.rows("SELECT * FROM reports ORDER BY stored_at, id")
        if report_id is not None:
            rows = [r for r in rows if r["id"] == report_id]
        if not rows:
            raise BundleError(f"{self.root}: no report stored in this bundle")
        row = rows[0]
        return row["id"], self.read_record(row["record_id"]).body.decode("utf-8")

    def warc_paths(self) -> list[Path]:
        names = [r["name"] for r in self.index.rows("SELECT name FROM warc_files ORDER BY name")]
        return [self.root / "archive" / n for n in names]

    # -- reading -----------------------------------------------------------------------
    def read_record(self, record_id: str) -> Any:
        row = self.index.record(record_id)
        if row is None:
            raise BundleError(f"record {record_id} is not in the index")
        return read_record(self.root / "archive" / row["warc_file"], row["offset"], row["length"])

    def find_capture(self, ref: str) -> dict[str, Any]:
        """A capture row by id, else the best page capture of a URL (ok ones first)."""
        row = self.index.capture(ref)
        if row is None:
            row = self.index.one(
                "SELECT * FROM captures WHERE (url = ? OR final_url = ? OR fetch_url = ?) "
                "ORDER BY state = 'ok' DESC, kind = 'page' DESC, captured_at DESC, id LIMIT 1",
                [ref, ref, ref],
            )
        if row is None:
            raise BundleError(f"no capture for {ref!r} in {self.root}")
        return row

    def read_capture(self, ref: str, body: bool = True) -> StoredCapture:
        """The stored response and extracted text for a capture id or URL, by offset.
        ``body=False`` reads the text alone (headers and body are left empty): the
        response record is neither read nor decompressed."""
        row = self.find_capture(ref)
        body_row = row
        if row["revisit_of"]:
            body_row = self.index.capture(row["revisit_of"]) or row
        headers: list[tuple[str, str]] = []
        payload = b""
        where: dict[str, Any] = {}
        if body_row["response_record"]:
            where = self.index.record(body_row["response_record"]) or {}
            if body:
                rec = self.read_record(body_row["response_record"])
                headers, payload = rec.http_headers, rec.body
        if body and row["response_record"] and row["revisit_of"]:
            headers = self.read_record(row["response_record"]).http_headers
        text_row = self.index.one("SELECT * FROM texts WHERE capture_id = ?", [row["id"]])
        text = None
        if text_row is not None:
            text = self.read_record(text_row["record_id"]).body.decode("utf-8")
        return StoredCapture(
            capture_id=row["id"],
            url=row["url"],
            state=row["state"],
            status=row["status"],
            error=row["error"],
            content_type=row["content_type"],
            response_headers=headers,
            body=payload,
            text=text,
            title=text_row["title"] if text_row else None,
            text_status=text_row["status"] if text_row else None,
            response_record=row["response_record"],
            text_record=text_row["record_id"] if text_row else None,
            warc_file=where.get("warc_file"),
            offset=where.get("offset"),
            final_url=row["final_url"] if row["final_url"] != row["url"] else None,
        )

    def links_for_claim(self, claim_id: str) -> list[dict[str, Any]]:
        return self.index.rows(
            "SELECT * FROM links WHERE claim_id = ? ORDER BY source, query_id, rank, url",
            [claim_id],
        )


def report_key(text: str) -> str:
    """A stored report's id: the sha256 of its UTF-8 text."""
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def manifest_date(moment: Any) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def dumps(obj: Any) -> bytes:
    """Canonical JSON: sorted keys, compact separators, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
