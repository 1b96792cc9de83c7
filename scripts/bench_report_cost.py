"""What one report costs the judge: calls, prompt and generated tokens, wall time, per
protocol and per claim, on a real LiveResearchBench report.

    .venv/bin/python scripts/bench_report_cost.py [--qid policyfX8vyl8vSaEC7Jue]
        [--protocols deepeval,dr3,verify] [--judge-model X.gguf] [--label after]

The report comes from ../shared/data/lrb/reference_reports and its task from the
checklist CSV (``amber import lrb``: checklist, baseline report). Its cited URLs cannot
be fetched offline, so each one is served by a loopback fake page holding the report's
sentences that cite it plus unrelated filler paragraphs (another LRB report's text):
the prompts then have the shape and length of real evidence, which is what the cost
depends on (the verdicts themselves mean nothing here). The bundle is made with
``amber snapshot report --extractor sentences --top-k 0`` and scored with ``amber
evaluate`` and ``amber verify`` (one process each, as a user runs them), each with its
own ledger; the figures are read from the ledgers. To measure older code, point
``PYTHONPATH`` at a copy of it laid out as the package ``ambereval``. CPU is whatever the
machine gives: wall times on a shared machine are upper bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LRB = ROOT.parent / "shared" / "data" / "lrb"
sys.path.insert(0, str(ROOT / "tests"))

from ambereval.engine.importers import import_lrb  # noqa: E402
from ambereval.engine.report import parse_report  # noqa: E402
from ambereval.engine.tasks import dump_tasks  # noqa: E402

from fakeweb import FakeWeb, html_page  # noqa: E402


def fake_site(text: str, filler: str) -> tuple[dict[str, list[str]], str]:
    """URL -> paragraphs of its fake page; the report with each URL made local."""
    report = parse_report(text)
    citing: dict[str, list[str]] = {}
    for s in report.sentences:
        for c in report.citations_in(s.start, s.end):
            for url in c.urls:
                sentence = re.sub(r"\[[^\]]*\]", "", text[s.start:s.end]).strip()
                citing.setdefault(url, [])
                if sentence and sentence not in citing[url]:
                    citing[url].append(sentence)
    paragraphs = [p.strip() for p in filler.split("\n\n") if len(p.strip()) > 200]
    pages = {}
    for i, url in enumerate(sorted(citing)):
        pages[url] = [paragraphs[(2 * i + j) % len(paragraphs)] for j in range(2)] + \
            citing[url] + [paragraphs[(2 * i + 2) % len(paragraphs)]]
    return pages, text


def ledger_figures(path: Path) -> dict[str, Any]:
    db = sqlite3.connect(path)
    rows = db.execute("SELECT request, prompt_tokens, completion_tokens, seconds FROM calls"
                      ).fetchall()
    db.close()
    calls = len(rows)
    gen = [r[2] or 0 for r in rows]
    capped = sum(1 for r, g in zip(rows, gen, strict=True)
                 if g and g >= json.loads(r[0])["sampling"]["max_tokens"] - 2)
    return {"calls": calls, "prompt_tokens": sum(r[1] or 0 for r in rows),
            "generated_tokens": sum(gen),
            "generated_per_call": round(sum(gen) / calls, 1) if calls else 0.0,
            "max_generated": max(gen, default=0), "calls_near_cap": capped,
            "model_seconds": round(sum(r[3] or 0 for r in rows), 1)}


def lrb_bundle(qid: str, filler_qid: str, work: Path) -> dict[str, Any]:
    """Freeze the LRB report ``qid`` into ``work/bundle`` offline: each cited URL served by
    a loopback fake page (:func:`fake_site`), its task (checklist, baseline) imported to
    ``work/tasks.json``. -> ``{"bundle", "tasks", "words", "claims", "cited_urls"}``.
    ``scripts/bench_replay.py`` builds its bundle with this too."""
    amber = [sys.executable, "-m", "ambereval.cli"]
    work.mkdir(parents=True, exist_ok=True)
    name = f"qid_{qid}_report.md"
    text = (LRB / "reference_reports" / name).read_text(encoding="utf-8")
    filler = (LRB / "reference_reports" / f"qid_{filler_qid}_report.md").read_text(
        encoding="utf-8")
    pages, _ = fake_site(text, filler)
    words = len(text.split())
    with FakeWeb(pages={}) as web:
        local = {url: web.url(f"/src/{i}.html") for i, url in enumerate(sorted(pages))}
        for url, path in local.items():
            web.pages[path[len(web.origin_url):]] = html_page(f"Source {url}", *pages[url])
        for url in sorted(local, key=len, reverse=True):
            text = text.replace(url, local[url])
        report = work / name
        report.write_text(text, encoding="utf-8")
        tasks = [t for t in import_lrb(LRB / "coverage_checklist.csv",
                                       baselines=LRB / "reference_reports") if t.id == qid]
        task_file = dump_tasks(tasks, work / "tasks.json")
        bundle = work / "bundle"
        # the fake site listens on a new port each time, so the report's URLs differ from
        # an earlier run's: the bundle is made anew, never added to
        shutil.rmtree(bundle, ignore_errors=True)
        subprocess.run([*amber, "snapshot", "report", str(report), "--out", str(bundle),
                        "--task", str(task_file), "--extractor", "sentences", "--top-k", "0",
                        "--reader", "direct", "--allow-private-addresses", "--json"],
                       env={k: v for k, v in {**os.environ, **web.env()}.items()
                            if k != "PYTHONPATH"},  # the bundle: always today's snapshotter
                       check=True, capture_output=True)
    claims = sqlite3.connect(bundle / "evidence" / "amber.sqlite").execute(
        "SELECT count(*) FROM claims").fetchone()[0]
    return {"bundle": bundle, "tasks": task_file, "words": words, "claims": claims,
            "cited_urls": len(pages)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--qid", default="policyfX8vyl8vSaEC7Jue")
    ap.add_argument("--filler-qid", default="marketDEJL1uDRvx5UqKKm")
    ap.add_argument("--protocols", default="deepeval,dr3,verify")
    ap.add_argument("--judge-model", default=None)
    ap.add_argument("--judge-ctx", default="4096")
    ap.add_argument("--label", default="run")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "report-cost")
    args = ap.parse_args()
    amber = [sys.executable, "-m", "ambereval.cli"]  # PYTHONPATH may point at other code
    work = args.out / f"{args.qid}-{args.label}"
    shutil.rmtree(work, ignore_errors=True)
    judge_args = ["--judge-ctx", args.judge_ctx] + \
        (["--judge-model", args.judge_model] if args.judge_model else [])
    made = lrb_bundle(args.qid, args.filler_qid, work)
    bundle, task_file = made["bundle"], made["tasks"]
    words, claims, cited = made["words"], made["claims"], made["cited_urls"]
    result: dict[str, Any] = {"qid": args.qid, "words": words, "claims": claims,
                              "cited_urls": cited, "label": args.label, "protocols": {}}
    print(f"{args.qid}: {words} words, {claims} claims, {cited} cited URLs", flush=True)
    for protocol in args.protocols.split(","):
        out = work / f"run-{protocol}"
        if protocol == "verify":
            cmd = [*amber, "verify", str(bundle), "--out", str(out), *judge_args, "--json"]
        else:
            cmd = [*amber, "evaluate", str(bundle), "--task", str(task_file), "--protocol",
                   protocol, "--out", str(out), *judge_args, "--json"]
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{protocol}: {done.stderr.strip()[-400:]}")
        figures = ledger_figures(out / "ledger.sqlite")
        figures["wall_seconds"] = round(wall, 1)
        figures["generated_per_claim"] = round(figures["generated_tokens"] / claims, 1) \
            if claims else None
        result["protocols"][protocol] = figures
        print(f"{args.label:>7} {protocol:>9}: {figures['calls']:4d} calls, "
              f"{figures['generated_per_call']:6.1f} generated tokens/call "
              f"(max {figures['max_generated']}, {figures['calls_near_cap']} at the cap), "
              f"{figures['generated_per_claim']} generated/claim, "
              f"{figures['prompt_tokens']} prompt tokens, wall {wall:.0f} s", flush=True)
    (work / "cost.json").write_text(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
