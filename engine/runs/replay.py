"""``amber replay RUN_DIR``: re-evaluate a finished run with no model and no luck.

Every judge answers only from ``RUN_DIR/ledger.sqlite`` through a :class:`LedgerBackend`
whose identity (backend, model key, chat template, n_ctx) is read from the ledger's own
recorded requests, so no model file is opened and llama.cpp is never imported. Every
retrieval is answered from ``RUN_DIR/retrieval/<report>.jsonl`` (no embedder, no torch):
the passages picked from a page, and DailyReport's claim verification, whose index over
the claims' pages and every search on it were recorded (``eval_context.py``). Each
recorded hit must still be a chunk of the bundle with the recorded span, else the
replay stops naming the record. The replayed run is written to a temporary directory
and its per-report JSON, retrieval records, ``run.json`` and ``run.csv`` are compared
byte for byte with the run's; the first difference is named (file and JSON path).

``recompute_retrieval`` (``amber replay --recompute-retrieval``) is the other half: it
loads the run's embedder and re-runs every recorded retrieval on this machine
(``runs/recompute_retrieval.py``).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ambereval.engine.aggregation import run_table
from ambereval.engine.eval_context import (
    VERIFY_INDEX_STEP,
    VERIFY_SEARCH_STEP,
    EvalContext,
    open_context,
    search_key,
)
from ambereval.engine.evidence import Page
from ambereval.engine.judging_rules import BEFORE_RULE, PROMPT_LAYOUT
from ambereval.engine.protocols.switches import from_manifest
from ambereval.engine.runs.evaluate import plan_reports, work_totals
from ambereval.engine.runs.report_job import RunSetup, evaluate_report
from ambereval.engine.runs.run_dir import OLD_AGGREGATION, RUN_FORMAT, RunWriter
from ambereval.errors import AmberError, BundleError, InputError, LedgerMiss, ReplayDifference
from ambereval.models import Chunk, ChunkParams, Hit, RetrieverSpec
from ambereval.models.chunk_source import ChunkSource
from ambereval.models.judge import Completion, Judge
from ambereval.models.ledger import Ledger
from ambereval.snapshots import Bundle

RecordKey = tuple[str, str, int]
SearchKey = tuple[str, str, str, int]


class LedgerBackend:
    """A judge backend that only knows who it was: the identity recorded in the ledger.
    Asked to complete (the ledger had no answer) it raises :class:`LedgerMiss`."""

    def __init__(self, backend: str, model: dict[str, Any],
                 chat_template_sha256: str | None, n_ctx: int) -> None:
        self.name = backend
        # verification decides from label log-probabilities only with a judge that can
        # score labels (verification.decision_for): the in-process llama.cpp judge
        self.scores_labels = backend == "llamacpp"
        self._identity = {"model": model, "chat_template_sha256": chat_template_sha256,
                          "n_ctx": n_ctx}

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def complete(self, messages: Any, schema: Any, max_tokens: int,
                 seed: int) -> Completion:
        raise LedgerMiss("replay asked the model a question the ledger does not hold")


def _model_key(model: dict[str, Any]) -> dict[str, Any]:
    return {"sha256": model["sha256"]} if "sha256" in model else {"name": model.get("name")}


def ledger_judge(name: str, model: dict[str, Any], ledger: Ledger, seed: int) -> Judge:
    """The judge ``name`` of a run, answering only from ``ledger`` (mode replay)."""
    key = _model_key(model)
    model_id = key.get("sha256") or key.get("name") or ""
    seen: set[str] = set()
    for row in ledger._conn().execute("SELECT backend, request FROM calls WHERE model = ?",
                                      [model_id]):
        req = json.loads(row["request"])
        seen.add(json.dumps([req.get("backend"), req.get("model"),
                             req.get("chat_template_sha256"), req.get("n_ctx")]))
    if len(seen) > 1:
        raise InputError(f"judge {name!r}: the ledger holds requests of {len(seen)} "
                         f"different backends/templates for model {model_id}; cannot tell "
                         "which one this run used")
    if seen:
        backend, _, template, n_ctx = json.loads(seen.pop())
    else:  # the judge asked nothing the ledger kept: any question will be a miss
        backend, template, n_ctx = "unknown", None, 4096
    # the manifest's whole model identity (file name, size, ...), as the live judge
    # reported it to the summaries; its ledger key part is the same sha256 or name
    return Judge(LedgerBackend(backend, dict(model), template, n_ctx), ledger, seed=seed,
                 n_ctx=n_ctx)


@dataclass
class RunRecord:
    """One report's retrieval record, read back (format in ``run_dir.py``)."""

    passages: dict[RecordKey, dict[str, Any]] = field(default_factory=dict)
    indexes: dict[str, dict[str, Any]] = field(default_factory=dict)
    searches: dict[SearchKey, dict[str, Any]] = field(default_factory=dict)
    #: judge model key (sha256 or name) -> the verification decision the run recorded
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)


class RecordedEmbedder:
    """Stands in for the run's embedder: its identity (for the summaries that name it),
    never a vector."""

    def __init__(self, identity: dict[str, Any]) -> None:
        self._identity = dict(identity)

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def embed(self, texts: list[str]) -> Any:
        raise ReplayDifference("replay asked for an embedding that the run's retrieval "
                               "record does not hold")


def _checked_chunk(report: str, by_id: dict[str, Chunk], hit: dict[str, Any],
                   where: str) -> Chunk:
    chunk = by_id.get(hit["chunk_id"])
    if chunk is None:
        raise ReplayDifference(f"report {report}: recorded chunk {hit['chunk_id']} is not "
                               f"a chunk of {where} any more")
    if (chunk.start, chunk.end) != (hit.get("start"), hit.get("end")):
        raise ReplayDifference(f"report {report}: recorded chunk {hit['chunk_id']} of "
                               f"{where} spans {hit.get('start')}-{hit.get('end')}, the "
                               f"bundle's spans {chunk.start}-{chunk.end}")
    return chunk


@dataclass
class ReplayContext(EvalContext):
    """An :class:`EvalContext` whose retrieval returns the recorded chunks."""

    recorded: RunRecord = field(default_factory=RunRecord, repr=False)
    retrieved: bool = False  # the run had an embedder (so long pages were retrieved)

    def verify_decision(self, judge_model: dict[str, Any]) -> dict[str, Any] | None:
        key = json.dumps(_model_key(judge_model), sort_keys=True)
        return self.recorded.decisions.get(key)

    def ranked(self, page: Page, query: str, k: int = 3) -> list[Chunk]:
        if not page.chunks:
            return []
        if not self.retrieved or len(page.chunks) <= k:
            return page.chunks[:k]
        key = (page.capture_id, query, k)
        record = self.recorded.passages.get(key)
        if record is None:
            raise ReplayDifference(f"report {self.name}: retrieval on capture "
                                   f"{page.capture_id} for query {query[:60]!r} (k={k}) "
                                   "was not recorded by the run")
        by_id = {c.chunk_id: c for c in page.chunks}
        chunks = [_checked_chunk(self.name, by_id, h, f"capture {page.capture_id}")
                  for h in sorted(record["hits"], key=lambda h: h["rank"])]
        with self._lock:
            self._retrievals[key] = record
        return chunks

    def claim_index(self, source: ChunkSource, params: ChunkParams,  # type: ignore[override]
                    spec: RetrieverSpec) -> RecordedIndex:
        digest = source.digest
        line = self.recorded.indexes.get(digest)
        if line is None:
            raise ReplayDifference(f"report {self.name}: claim verification's index over "
                                   f"{len(source.chunks)} chunks (sha256 {digest[:12]}) was "
                                   "not recorded by the run")
        with self._lock:
            self._index_records[digest] = line
        return RecordedIndex(line, source.chunks, self)


class RecordedIndex:
    """Claim verification's index, answering each search from the run's record."""

    def __init__(self, line: dict[str, Any], chunks: list[Chunk], ctx: ReplayContext) -> None:
        self.line, self.ctx = line, ctx
        self.by_id = {c.chunk_id: c for c in chunks}

    def identity(self) -> dict[str, Any]:
        return self.line["retriever"]

    def search(self, query: str, k: int = 5, captures: set[str] | None = None) -> list[Hit]:
        return self.search_many([query], k, captures)[0]

    def search_many(self, queries: list[str], k: int = 5,
                    captures: set[str] | None = None) -> list[list[Hit]]:
        out = []
        where = ", ".join(sorted(captures)) if captures is not None else "the whole index"
        for query in queries:
            record = self.ctx.recorded.searches.get(
                search_key(self.line["index"], captures, query, k))
            if record is None:
                raise ReplayDifference(f"report {self.ctx.name}: verification search on "
                                       f"{where} for {query[:60]!r} (k={k}) was not "
                                       "recorded by the run")
            hits = []
            for h in record["hits"]:
                chunk = _checked_chunk(self.ctx.name, self.by_id, h,
                                       f"the verification index ({where})")
                if captures is not None and chunk.capture_id not in captures:
                    raise ReplayDifference(f"report {self.ctx.name}: recorded chunk "
                                           f"{chunk.chunk_id} is not on {where}")
                hits.append(Hit(chunk, float(h["score"]), int(h["rank"])))
            self.ctx.record_search(record)
            out.append(hits)
        return out


def read_record(path: Path) -> RunRecord:
    """A report's retrieval record (empty when the run wrote none)."""
    out = RunRecord()
    if not path.is_file():
        return out
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            step = r.get("step")
            if step is None:
                out.passages[(r["capture_id"], r["query"], int(r["k"]))] = r
            elif step == VERIFY_INDEX_STEP:
                out.indexes[r["index"]] = r
            elif step == VERIFY_SEARCH_STEP:
                out.searches[search_key(r["index"], r["captures"], r["query"],
                                        int(r["k"]))] = r
            else:
                raise InputError(f"{path}:{number}: unknown retrieval step {step!r}",
                                 hint="replay it with the amber version that wrote it")
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise InputError(f"{path}:{number}: not a retrieval record ({err})") from None
    return out


def load_manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "manifest.json"
    if not path.is_file():
        raise InputError(f"{run_dir}: no manifest.json (not a run directory)",
                         hint="give the directory `amber evaluate --out` wrote")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("format") in OLD_AGGREGATION:  # its per-report scores and table
        fmt = manifest["format"]                    # follow the aggregation of then
        raise InputError(f"{run_dir}: run directory format {fmt!r} (aggregated before "
                         f"{RUN_FORMAT}): replay it with amber-eval "
                         f"{OLD_AGGREGATION[fmt]}, which wrote it")
    if manifest.get("format") != RUN_FORMAT:
        raise InputError(f"{run_dir}: run directory format {manifest.get('format')!r}, "
                         f"this amber replays {RUN_FORMAT}",
                         hint="replay it with the amber version that wrote it")
    if not (run_dir / "run.json").is_file():
        raise InputError(f"{run_dir}: the run did not finish (no run.json)",
                         hint="finish it with `amber evaluate --resume`")
    if not (run_dir / "ledger.sqlite").is_file():
        raise InputError(f"{run_dir}: no ledger.sqlite to answer from")
    return manifest


def check_inputs(manifest: dict[str, Any]) -> None:
    """Every bundle and the tasks file are there and are what the run used."""
    for name, digest in sorted(manifest["bundles"].items()):
        path = Path(name)
        if not path.is_dir():
            raise InputError(f"bundle {name} (from the manifest) not found",
                             hint="run replay from the directory the run was made in")
        dp = path / "datapackage.json"
        now = hashlib.sha256(dp.read_bytes()).hexdigest() if dp.is_file() else None
        if now != digest:
            raise BundleError(f"bundle {name}: datapackage.json sha256 {now} differs from "
                              f"the manifest's {digest}")
    tasks = Path(manifest["tasks_file"])
    if not tasks.is_file():
        raise InputError(f"tasks file {tasks} (from the manifest) not found")
    if hashlib.sha256(tasks.read_bytes()).hexdigest() != manifest["tasks_sha256"]:
        raise InputError(f"tasks file {tasks}: sha256 differs from the manifest's")


def first_difference(a: Any, b: Any, path: str = "$") -> str | None:
    """The JSON path of the first place ``a`` and ``b`` differ (keys sorted), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}"
            found = first_difference(a[k], b[k], f"{path}.{k}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None if len(a) == len(b) else f"{path}[{min(len(a), len(b))}]"
    return None if a == b and type(a) is type(b) else path


def _compare(run: Path, replayed: Path, rel: str) -> dict[str, Any] | None:
    a, b = run / rel, replayed / rel
    da = a.read_bytes() if a.is_file() else None
    db = b.read_bytes() if b.is_file() else None
    if da == db or (da is None and db == b"" and rel.startswith("retrieval/")):
        return None  # a run from before retrieval was recorded that retrieved nothing
    where = "file missing" if da is None or db is None else "bytes"
    if da is not None and db is not None:
        try:
            if rel.endswith(".jsonl"):
                ja: Any = [json.loads(x) for x in da.decode().splitlines()]
                jb: Any = [json.loads(x) for x in db.decode().splitlines()]
            elif rel.endswith(".json"):
                ja, jb = json.loads(da), json.loads(db)
            else:
                ja = jb = None
            where = (first_difference(ja, jb) if ja is not None else None) or "bytes"
        except ValueError:
            where = "bytes (not JSON)"
    return {"file": rel, "path": where}


def recorded_decisions(report: Path) -> dict[str, dict[str, Any]]:
    """Each judge's verification decision as a run's report recorded it (keyed like
    ``ReplayContext.verify_decision``), so a replay decides as the run did even after the
    calibration table changed. A summary from before decisions were recorded generated."""
    if not report.is_file():
        return {}  # the comparison names the missing file
    doc = json.loads(report.read_text(encoding="utf-8"))
    decisions = {}
    for protocols in (doc.get("judges") or {}).values():
        summary = (protocols.get("dailyreport") or {}).get("verification") or {}
        if summary.get("judge"):
            key = json.dumps(_model_key(summary["judge"]), sort_keys=True)
            decisions[key] = summary.get("decision") or {"method": "generate", "bias": None}
    return decisions


def _in_run_order(manifest: dict[str, Any], run: Path) -> list[str]:
    """The manifest's bundles (keyed, so stored sorted) in the order the run was given
    them: a run of ``modelB/ modelA/`` replays as such. From ``invocation.json`` when it
    names the same bundles, else (older runs) from the order of the run's reports."""
    given = _read_invocation_bundles(run)
    if given is not None and sorted(given) == sorted(manifest["bundles"]):
        return given
    reports = {name: i for i, name in enumerate(manifest["reports"])}

    def first_report(bundle: str) -> int:
        planned = plan_reports([bundle], manifest["tasks_file"])
        return min((reports.get(j.fname, len(reports)) for j in planned), default=len(reports))

    return sorted(manifest["bundles"], key=first_report)


def _read_invocation_bundles(run: Path) -> list[str] | None:
    """The bundles as the run was given them, or None (an older run has no
    invocation.json)."""
    from ambereval.engine.runs.invocation import read_invocation

    try:
        return [str(b) for b in read_invocation(run).bundles]
    except (AmberError, OSError):
        return None


def judging_of(manifest: dict[str, Any], run: Path) -> dict[str, str]:
    """How the run asked its judge (``judging`` in the manifest). A run made before the
    prompts were laid out report first and DR3 FA and DeepEval E3 shared one support
    question asked other prompts than this amber can: refused in one line naming the
    amber that made it, instead of a ledger miss deep in the first report."""
    judging = manifest.get("judging")
    if not isinstance(judging, dict) or judging.get("prompt_layout") != PROMPT_LAYOUT:
        made = manifest.get("software") or "an older amber-eval"
        layout = (judging.get("prompt_layout") if isinstance(judging, dict) else None) or \
            "before the report-first layout and the shared support question"
        raise InputError(f"{run}: made by {made} with other judge prompts ({layout}); "
                         f"this amber asks {PROMPT_LAYOUT} prompts",
                         hint=f"replay it with the amber that made it ({made})")
    # a rule the manifest does not name was not there yet: the run asked as before it
    return {**BEFORE_RULE, **{k: str(v) for k, v in judging.items() if k != "prompt_layout"}}


def replay_run(run_dir: str | Path) -> dict[str, Any]:
    """Re-evaluate ``run_dir`` from its ledger and retrieval record; compare byte for byte.

    -> ``{"identical", "difference" ({"file", "path"} or None), "reports", "files",
    "ledger_hits", "seconds"}``. Raises LedgerMiss, ReplayDifference (a retrieval record
    that does not fit the bundle any more), BundleError or InputError.
    Example: ``replay_run("runs/smol")["identical"]``
    """
    started = time.perf_counter()
    run = Path(run_dir)
    manifest = load_manifest(run)
    check_inputs(manifest)
    protocols = list(manifest["protocols"])
    had_embedder = manifest.get("embedder") is not None
    jobs = plan_reports(_in_run_order(manifest, run), manifest["tasks_file"])
    if [j.fname for j in jobs] != manifest["reports"]:
        raise ReplayDifference(f"{run}: the bundles now plan other reports than the run's")
    ledger = Ledger(run / "ledger.sqlite", "replay")
    judges = [(name, ledger_judge(name, model, ledger, manifest["seed"]))
              for name, model in manifest["judges"].items()]
    rules = from_manifest(manifest.get("rules"))
    records = RunRecord()
    embedder = RecordedEmbedder(manifest["embedder"]) if had_embedder else None

    def context(bundle: Bundle, row: dict[str, Any], task: Any, _: Any) -> EvalContext:
        base = open_context(bundle, row, task, None)
        return ReplayContext(base.name, base.report_id, base.text, base.report, base.task,
                             base.bundle, base.claims, embedder,  # type: ignore[arg-type]
                             recorded=records, retrieved=had_embedder)

    setup = RunSetup(protocols, judges, None, int(manifest["report_clip_chars"]), rules,
                     context_factory=context, judging=judging_of(manifest, run))
    try:
        with tempfile.TemporaryDirectory(prefix="amber-replay-") as tmp:
            out = Path(tmp)
            writer = RunWriter(out)
            docs = []
            for job in jobs:
                read = read_record(run / "retrieval" / (Path(job.fname).stem + ".jsonl"))
                records.passages, records.indexes, records.searches = \
                    read.passages, read.indexes, read.searches
                records.decisions = recorded_decisions(run / "reports" / job.fname)
                try:
                    doc = evaluate_report(job, setup)
                except LedgerMiss as err:  # name the report whose question is missing
                    raise LedgerMiss(f"report {job.report_name}: {err}",
                                     hint=err.hint) from None
                writer.retrieval(job.fname, doc.pop("retrieval", []))
                doc.pop("spent", None)  # what the run paid is a timing, not a result
                writer.report(job.fname, doc)
                docs.append(doc)
            table = run_table(docs, protocols, rules)
            table["judge_work"] = work_totals(docs)
            writer.table(table)
            files = []
            for fname in manifest["reports"]:
                files += [f"reports/{fname}", f"retrieval/{Path(fname).stem}.jsonl"]
            files += ["run.json", "run.csv"]
            difference = None
            for rel in files:
                difference = _compare(run, out, rel)
                if difference:
                    break
    finally:
        ledger.close()
    return {"identical": difference is None, "difference": difference, "run": str(run),
            "reports": len(jobs), "files": len(files),
            "ledger_hits": sum(j.ledger_hits for _, j in judges),
            "seconds": round(time.perf_counter() - started, 3)}
