"""Peak memory (max RSS of the amber process) of the two biggest offline jobs.

1. ``amber verify`` over a bundle of 1,000 captured pages (--pages): pages are built
   from WiCE's Wikipedia sentences (../shared/data), two articles a page, served by the
   loopback fake web and captured with the snapshot library; 250 claims cite 4 pages
   each. The judge is the loopback fake OpenAI-compatible server (tests/fakejudge.py),
   so the figure is Amber's own: the bundle, every page's chunks, their MiniLM
   embeddings, the retriever (FAISS + BM25), the prompts and verdicts.
2. ``amber evaluate --protocol all`` with the default models (SmolLM2 judge in process,
   MiniLM) on the longest LiveResearchBench reference report (4,830 words), its cited
   URLs served as loopback pages holding the sentences that cite them plus filler
   paragraphs (``lrb_bundle`` of scripts/bench_report_cost.py); its wall and CPU time
   and the judge's calls and tokens (from the run's ledger) are printed with the peak.

Each job runs as its own process; its peak RSS is read from ``wait4``'s rusage.

    .venv/bin/python scripts/bench_memory.py [--pages 1000] [--skip-evaluate]
        [--whole-bundle] [--articles-per-page 2] [--claims N] [--before /tmp/old]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_report_cost import ledger_figures, lrb_bundle  # noqa: E402
from fakejudge import FakeJudgeServer  # noqa: E402

from ambereval.engine.protocols.deepeval import RELEVANCE_SYSTEM, SUPPORT_SYSTEM  # noqa: E402
from ambereval.engine.protocols.dr3 import FA_SYSTEM  # noqa: E402
from ambereval.snapshots import (  # noqa: E402
    Bundle,
    CaptureOptions,
    RetryPolicy,
    capture_claims,
    capture_urls,
    load_claims,
)

from fakeweb import FakeWeb, html_page  # noqa: E402

WICE = ROOT.parent / "shared" / "data" / "entailment" / "wice" / "oracle_chunks_claim_dev.jsonl"
AMBER = [sys.executable, "-m", "ambereval.cli"]
REPORT_QID = "policyfX8vyl8vSaEC7Jue"
FILLER_QID = "marketDEJL1uDRvx5UqKKm"


def peak_rss(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
             ) -> tuple[float, float, str, float]:
    """(peak RSS in MB, wall seconds, stdout, CPU seconds) of one process; fails loudly."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd[:4])} failed: {err.read().decode()[-2000:]}")
        return (usage.ru_maxrss / 1024, wall, out.read().decode(),
                usage.ru_utime + usage.ru_stime)


def wice_articles() -> list[tuple[str, list[str]]]:
    rows = [json.loads(line) for line in WICE.read_text(encoding="utf-8").splitlines()]
    return [(r["claim"], r["evidence"]) for r in rows if len(r["evidence"]) >= 6]


def verify_bundle_of(pages: int, work: Path, per_page: int = 2,
                     claims_wanted: int | None = None) -> tuple[Path, int]:
    articles = wice_articles()
    site = {}
    for i in range(pages):
        sentences = [s for j in range(per_page)
                     for s in articles[(per_page * i + j) % len(articles)][1]]
        paragraphs = [" ".join(sentences[j:j + 3]) for j in range(0, len(sentences), 3)]
        site[f"/pages/p{i:05d}.html"] = html_page(f"Page {i}", *paragraphs)
    bundle = work / "bundle-verify"
    with FakeWeb(pages=site) as web:
        claims = [{"id": f"c{n:04d}", "text": articles[(8 * n) % len(articles)][0],
                   "urls": [web.url(f"/pages/p{4 * n + j:05d}.html") for j in range(4)]}
                  for n in range(min(pages // 4, claims_wanted or pages))]
        path = work / "claims.jsonl"
        path.write_text("".join(json.dumps(c) + "\n" for c in claims), encoding="utf-8")
        options = CaptureOptions.from_env(
            web.env(), reader="direct", concurrency=4, serper_rate=None, reader_rate=None,
            allow_private_addresses=True,  # the fake web is on loopback
            policy=RetryPolicy(attempts=2, backoff=0.01, timeout=10.0))
        capture_claims(bundle, load_claims(path), options)
        cited = {u for c in claims for u in c["urls"]}
        rest = [web.url(p) for p in sorted(site) if web.url(p) not in cited]
        if rest:  # pages no claim cites: only --whole-bundle reads them
            capture_urls(bundle, rest, options)
    text_bytes = sum(len(p.body) for p in site.values())
    with Bundle.open(bundle) as b:
        held = b.index.rows("SELECT COUNT(*) AS n FROM captures WHERE kind = 'page' "
                            "AND state = 'ok'")[0]["n"]
    print(f"bundle: {pages} pages served, {held} captured, {text_bytes / 1e6:.1f} MB of "
          f"HTML, {len(claims)} claims citing {len(cited)}", flush=True)
    return bundle, len(claims)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--skip-evaluate", action="store_true")
    ap.add_argument("--skip-verify", action="store_true")
    ap.add_argument("--qid", default=REPORT_QID, help="the LRB report evaluate scores")
    ap.add_argument("--articles-per-page", type=int, default=2,
                    help="WiCE articles on each page (more: a bigger bundle text)")
    ap.add_argument("--claims", type=int, help="claims of the verify bundle (default pages/4)")
    ap.add_argument("--whole-bundle", action="store_true",
                    help="verify with --whole-bundle (every page indexed and searched)")
    ap.add_argument("--before", type=Path, help="PYTHONPATH of an older copy of the code "
                    "(laid out as the package ambereval): its verify measured side by side")
    args = ap.parse_args()
    base, _, _, _ = peak_rss([sys.executable, "-c", "import ambereval.models as m; "
                              "m.Embedder().embed(['warm'])"])
    print(f"reference: a Python process holding just the embedder: {base:,.0f} MB", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not args.skip_verify:
            bundle, claims = verify_bundle_of(args.pages, work, args.articles_per_page,
                                              args.claims)
            extra = ["--whole-bundle"] if args.whole_bundle else []
            versions = [("", None)]
            if args.before:
                versions.append((" (before)", {**os.environ, "PYTHONPATH": str(args.before)}))
            for label, env in versions:
                with FakeJudgeServer() as judge:
                    rss, wall, out, _ = peak_rss(
                        [*AMBER, "verify", str(bundle), *extra, "--out",
                         str(work / f"verify{label.strip()}"), "--judge-url", judge.url,
                         "--judge-name", "fake", "--json"], env,
                        cwd=work)  # not the checkout: its ambereval/ would shadow --before
                summary = json.loads(out)["summary"] if out.strip().startswith("{") else {}
                print(f"amber verify{' --whole-bundle' if extra else ''}{label}, "
                      f"{args.pages} pages, {claims} claims "
                      f"({summary.get('chunks', '?')} chunks, "
                      f"{summary.get('judge_calls', '?')} judge calls, fake served judge): "
                      f"peak RSS {rss:,.0f} MB, {wall:.0f} s", flush=True)
        if not args.skip_evaluate:
            made = lrb_bundle(args.qid, FILLER_QID, work / "lrb")
            rss, wall, _, cpu = peak_rss([*AMBER, "evaluate", str(made["bundle"]), "--task",
                                          str(made["tasks"]), "--protocol", "all", "--out",
                                          str(work / "eval"), "--threads", "2", "--json"])
            figures = ledger_figures(work / "eval" / "ledger.sqlite")
            print(f"amber evaluate --protocol all, {made['words']}-word report "
                  f"({made['claims']} claims, {made['cited_urls']} cited URLs), default "
                  f"models: peak RSS {rss:,.0f} MB, {wall:.0f} s wall, {cpu:.0f} s CPU; "
                  f"{figures['calls']} judge calls, {figures['prompt_tokens']:,} prompt and "
                  f"{figures['generated_tokens']:,} generated tokens, "
                  f"{figures['model_seconds']:.0f} s in the model", flush=True)
            for kind, (calls, seconds, tokens) in sorted(by_kind(work / "eval").items()):
                print(f"  {kind:34} {calls:4d} calls, {seconds:7.0f} s in the model, "
                      f"{tokens:9,} prompt tokens", flush=True)


def by_kind(run: Path) -> dict[str, tuple[int, float, int]]:
    """(calls, model seconds, prompt tokens) per kind of judge call in a run's ledger."""
    kinds = {FA_SYSTEM: "DR3 FA (statement vs page)",
             SUPPORT_SYSTEM: "DeepEval E3 (statement vs page)",
             RELEVANCE_SYSTEM: "DeepEval E2 relevance (page opening)"}
    out: dict[str, list[float]] = {}
    conn = sqlite3.connect(f"file:{run / 'ledger.sqlite'}?mode=ro", uri=True)
    for request, seconds, tokens in conn.execute(
            "SELECT request, seconds, prompt_tokens FROM calls"):
        system = json.loads(request)["messages"][0]["content"]
        kind = kinds.get(system, "report-level (checklists, lists, scores)")
        row = out.setdefault(kind, [0, 0.0, 0])
        row[0] += 1
        row[1] += seconds or 0.0
        row[2] += tokens or 0
    conn.close()
    return {k: (int(v[0]), v[1], int(v[2])) for k, v in out.items()}


if __name__ == "__main__":
    main()
