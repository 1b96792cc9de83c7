"""The run directory ``amber evaluate`` writes: format ``amber-run/3``, field by field.

``amber-run/3`` (amber-eval 0.2.0) changed the aggregation, not the layout: DeepEval depth
pooled per system, summaries from column means, undefined scores null
(docs/aggregation.md). ``amber-run/2`` runs were written by amber-eval 0.1.0.

::

    RUN_DIR/manifest.json      written first, before any judging
      format                   "amber-run/3" (this layout and aggregation; bumped on any
                               change of either)
      software                 "amber-eval <version>"
      protocols                the protocols run, in order
      bundles                  {bundle path: sha256 of its datapackage.json (or null)}
      tasks_file, tasks_sha256 the tasks file and its digest
      judges                   {judge name: model identity (GGUF sha256 or served name)}
      seed                     the one seed
      embedder                 embedder identity (name, sha256) or null
      rules                    every [our rule] per protocol, as applied
      report_clip_chars        reports longer than this were clipped before judging
      reports                  [per-report file name, in run order] (the planned work)
    RUN_DIR/reports/<n>.json   one per report, written as soon as it and every report
                               before it are done (run order, never completion order):
      report, report_id        the report's stored name and id in its bundle
      bundle, system, task     where it came from, its system, its task id
      scores                   {protocol: {dimension: mean over judges}}
      judges                   {judge name: {protocol: the protocol's full result, every
                               sub-score with the ledger key of the call behind it}}
    RUN_DIR/retrieval/<n>.jsonl  what retrieval chose for that report, written just before
                               its report file (``amber replay`` answers from it), three
                               kinds of line, in this order:
      passage lines            one per (capture, query, k) in sorted order, no ``step``:
                               capture_id, query, k, retriever (identity), hits (chunk_id,
                               start, end, score, rank); pages with no more chunks than k
                               are not retrieved and not listed
      step "verification-index"  DailyReport's claim verification index, one per index
                               (sorted by ``index``): index (sha256 of its chunks' ids,
                               spans and texts), captures (sorted ids), chunks (count),
                               chunking (ChunkParams), retriever (identity)
      step "verification"      one per search on that index, sorted by (index, captures,
                               query, k): index, captures (the one page searched, or null
                               for the whole index), query (a claim's question, or the
                               claim for a whole-bundle search), k, retriever, hits
                               (as above). Any judge's verification searches the same
                               index, so a search is listed once.
                               Runs written before these lines existed hold passage lines
                               only; they still replay (nothing of DailyReport verified).
    RUN_DIR/run.json, run.csv  written last: their presence means the run finished.
      aggregation              "amber-agg/2" (engine/aggregation.py)
      columns                  "protocol.dimension" names
      rows                     one per report (system, report, task, columns), run order
      systems                  one per system: reports, each column (the mean of the
                               non-null report values; DeepEval depth pooled per judge
                               then the judges' mean; dr3.avg and deepeval.average the
                               mean of the system's column means), valid (reports behind
                               each column), pooled ({"deepeval.depth": {judge: wins,
                               losses, ties, decisive, reports, win_rate}}) and
                               null_columns ({protocol: summary columns left out})
                               run.csv: the report rows, then one row per system with
                               report "(system)" and an empty task
    RUN_DIR/ledger.sqlite      every judge call (models/ledger.py), keyed by the sha256 of
                               its canonical request; compare runs by rows in key order
    RUN_DIR/.ledger-shards/<n>.sqlite  a worker's answers for a report it is evaluating
                               (--executor processes or ray); merged into ledger.sqlite
                               in key order and deleted when that report is written. A
                               run that stops leaves none: the driver merges what its
                               workers had answered (and --resume merges any a crash left)
    RUN_DIR/stats.json         timings and counters, different on every run: executor,
                               judge concurrency, wall seconds, per judge calls, ledger
                               hits, tokens, retries, 429/503 throttles, errors

Everything above except ``stats.json`` and the ledger's ``created`` and ``seconds``
columns is a function of the inputs: a run at any ``--judge-concurrency``, or on Ray,
writes the same bytes. Every file is written atomically (a temporary file renamed into
place), so a file that exists is complete.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

RUN_FORMAT = "amber-run/3"
#: formats written before the aggregation changed -> the amber-eval release that wrote them
OLD_AGGREGATION = {"amber-run/2": "0.1.0", "amber-run/1": "0.1.0"}
STATS_FORMAT = "amber-run-stats/1"
SHARDS = ".ledger-shards"


def remove_shard(path: Path) -> None:
    """Delete a ledger shard and its SQLite side files."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def merge_leftover_shards(ledger: Any) -> int:
    """Merge into the run's ``ledger`` the shards that workers stopped mid-report left in
    ``RUN_DIR/.ledger-shards`` (their answers are answers, whoever asked), in file name
    order, and delete them. -> rows merged. Call only when no worker is running."""
    from ambereval.models.ledger import Ledger

    if ledger is None:
        return 0
    merged = 0
    for path in sorted((Path(ledger.path).parent / SHARDS).glob("*.sqlite")):
        shard = Ledger(path, "reuse")
        try:
            rows = shard.rows()
        finally:
            shard.close()
        if rows:
            merged += ledger.merge(rows)
        remove_shard(path)
    return merged


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()  # read once, at import: os.umask can only be read by setting it


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory, fsynced
    and renamed over the target: readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.chmod(fh.fileno(), 0o666 & ~_UMASK)  # as open() would, not mkstemp's 0600
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


class RunWriter:
    """The one writer of a run directory. Executors hand it results in run order."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        (self.out / "reports").mkdir(parents=True, exist_ok=True)

    def manifest(self, manifest: dict[str, Any]) -> None:
        write_atomic(self.out / "manifest.json", dump_json({"format": RUN_FORMAT,
                                                            **manifest}))

    def report(self, fname: str, doc: dict[str, Any]) -> None:
        write_atomic(self.out / "reports" / fname, dump_json(doc))

    def retrieval(self, fname: str, records: list[dict[str, Any]]) -> None:
        lines = [json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records]
        write_atomic(self.out / "retrieval" / (Path(fname).stem + ".jsonl"), "".join(lines))

    def table(self, table: dict[str, Any]) -> None:
        write_atomic(self.out / "run.csv", _csv(table))
        write_atomic(self.out / "run.json", dump_json(table))  # last: the run is complete

    def stats(self, stats: dict[str, Any]) -> None:
        write_atomic(self.out / "stats.json", dump_json({"format": STATS_FORMAT, **stats}))


def _csv(table: dict[str, Any]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["system", "report", "task", *table["columns"]])
    for row in table["rows"]:
        writer.writerow([row["system"], row["report"], row["task"],
                         *["" if row.get(c) is None else row[c] for c in table["columns"]]])
    for row in table.get("systems") or []:
        writer.writerow([row["system"], SYSTEM_ROW, "",
                         *["" if row.get(c) is None else row[c] for c in table["columns"]]])
    return buf.getvalue()


SYSTEM_ROW = "(system)"  # run.csv's report cell on a system's row
