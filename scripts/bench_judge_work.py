"""Judge work of one report, this code against an older copy, side by side in one run.

    git worktree add /tmp/old <commit>   # laid out as the package: see below
    .venv/bin/python scripts/bench_judge_work.py --before /tmp/old-pkg
        [--qid policyfX8vyl8vSaEC7Jue] [--wall-qid marketDEJL1uDRvx5UqKKm] [--threads 2]

``--before`` is the PYTHONPATH of the older code laid out as the package ``ambereval``
(a directory holding ``ambereval/`` whose subpackages are the old worktree's
``engine``, ``models``, ...; as for scripts/bench_capture.py --before).

**Counted** (exact, no model call): the LRB report ``--qid`` is frozen as
scripts/bench_report_cost.py does (each cited URL a loopback page); then each version,
in a child process of its own, runs ``--protocol all``'s protocols on it (dailyreport,
dr3, deepeval, in the run's order) with a counting judge: every request is keyed as the
judge would key it, and each distinct request's prompt tokens are counted with the
default judge's tokenizer after its context rule, as llama.cpp reports them. A repeated
request is counted once (a run reads it back from its ledger). Answers are placeholders
(true, the first choice): DeepEval asks E3 on every page (E2 "relevant"), the same
assumption for both versions.

**Timed** (``--wall-qid``, by default the counted report; ``--skip-wall`` to leave out):
``amber evaluate --protocol all`` with the default judge, old and new one after the
other on the same bundle, each with a fresh ledger; wall seconds and the ledger's
figures.
Each call's **cached tokens** are the tokens it shares with the start of the model call
before it (at most all but one), which llama.cpp does not read again: the prompt
tokens minus these are what the judge reads, in the run's order.
On a shared machine, wall times are upper bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_report_cost  # noqa: E402
from bench_report_cost import ledger_figures, lrb_bundle  # noqa: E402

if not bench_report_cost.LRB.is_dir():  # a git worktree one level deeper than the project
    bench_report_cost.LRB = ROOT.parents[1] / "shared" / "data" / "lrb"

CHILD = r'''
import json, sys
from ambereval.engine.runs.evaluate import plan_reports
from ambereval.engine.runs.report_job import RunSetup, evaluate_report
from ambereval.errors import ModelError
from ambereval.models import Embedder, open_judge
from ambereval.models.canonical import content_key
from ambereval.models.decision import decision_spec
from ambereval.models.judge import Judge, JudgeResponse

bundle, tasks, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])

def placeholder(schema):
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: placeholder(props[k]) for k in schema.get("required", props)}
    return {"boolean": True, "integer": 0, "number": 0, "array": []}.get(kind, "")

class Counting(Judge):
    def __init__(self, real):
        super().__init__(real.backend, None, seed=real.seed, n_ctx=real.n_ctx)
        self.tokens, self.asks, self.cached, self.last = {}, 0, {}, []
    def ask(self, messages, schema, max_tokens=256):
        key = content_key(self.request(messages, schema, max_tokens))
        self.asks += 1
        if key not in self.tokens:
            b = self.backend
            spec = decision_spec(schema)
            sent, _ = b.fit(messages, 16 if spec is not None else max_tokens)
            prompt, _ = b.render(sent)
            if spec is not None:
                prompt += '{"' + spec.field + ('":' if spec.literal else '": "')
            ids = b.llm().tokenize(prompt.encode("utf-8"), special=True)
            self.tokens[key] = len(ids)
            # what llama.cpp reuses of the call before, at most all but one token: the
            # rule of models/llamacpp_backend.py shared_start, written out here because
            # --before code predates it
            common = 0
            for x, y in zip(self.last, ids[:-1]):
                if x != y:
                    break
                common += 1
            self.cached[key], self.last = common, ids
        return JudgeResponse(placeholder(schema), "", {}, key, "model")
    def map(self, calls, on_done=None):
        out = []
        for call in calls:
            try:
                out.append(self.ask(*call))
            except ModelError as err:
                out.append(err)
        return out

judge = Counting(open_judge(threads=threads))
[job] = plan_reports([bundle], tasks)
embedder = Embedder()
out = {"code": __import__("ambereval").__file__, "protocols": {}}
for protocol in ("dailyreport", "dr3", "deepeval"):
    seen, asks = len(judge.tokens), judge.asks
    before = dict(judge.tokens)
    evaluate_report(job, RunSetup([protocol], [("j", judge)], embedder, 12_000, None))
    new = {k: v for k, v in judge.tokens.items() if k not in before}
    out["protocols"][protocol] = {"requests": judge.asks - asks, "calls": len(new),
                                  "prompt_tokens": sum(new.values()),
                                  "cached_tokens": sum(judge.cached[k] for k in new)}
out["total"] = {k: sum(p[k] for p in out["protocols"].values())
                for k in ("requests", "calls", "prompt_tokens", "cached_tokens")}
print(json.dumps(out))
'''


def ratio(new: int, old: int) -> str:
    return f" ({new / old:.3f}x)" if old else ""


def env_for(before: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if before is not None:
        env["PYTHONPATH"] = str(before.resolve())
    return env


def count(bundle: Path, tasks: Path, before: Path | None, threads: int) -> dict[str, Any]:
    # run from the bundle's folder: the project root's ambereval/ must not shadow --before
    done = subprocess.run([sys.executable, "-c", CHILD, str(bundle), str(tasks), str(threads)],
                          env=env_for(before), capture_output=True, text=True,
                          cwd=bundle.parent)
    if done.returncode != 0:
        raise SystemExit(done.stderr.strip()[-800:])
    got = json.loads(done.stdout.strip().splitlines()[-1])
    if before is not None and str(before.resolve()) not in got["code"]:
        raise SystemExit(f"--before did not load: the child ran {got['code']}")
    return got


def timed(bundle: Path, tasks: Path, before: Path | None, out: Path,
          threads: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "ambereval.cli", "evaluate", str(bundle), "--task",
           str(tasks), "--protocol", "all", "--out", str(out), "--threads", str(threads),
           "--json"]
    plan = None
    if before is None:  # this code's --plan, made first, against the calls the run makes
        done = subprocess.run([*cmd, "--plan"], env=env_for(before), capture_output=True,
                              text=True, cwd=bundle.parent)
        if done.returncode != 0:
            raise SystemExit(done.stderr.strip()[-800:])
        plan = json.loads(done.stdout)["total"]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env_for(before), capture_output=True, text=True,
                          cwd=bundle.parent)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stderr.strip()[-800:])
    got = {**ledger_figures(out / "ledger.sqlite"), "wall_seconds": round(wall, 1)}
    if plan is not None:
        got["planned"] = {"calls": plan["calls"], "prompt_tokens": plan["prompt_tokens"]}
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True,
                    help="PYTHONPATH of an older copy of the code")
    ap.add_argument("--qid", default="policyfX8vyl8vSaEC7Jue")
    ap.add_argument("--filler-qid", default="marketDEJL1uDRvx5UqKKm")
    ap.add_argument("--wall-qid", default="policyfX8vyl8vSaEC7Jue",
                    help="the report timed (default: the counted one)")
    ap.add_argument("--wall-filler-qid", default="marketDEJL1uDRvx5UqKKm")
    ap.add_argument("--skip-wall", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "judge-work")
    args = ap.parse_args()
    result: dict[str, Any] = {}
    made = lrb_bundle(args.qid, args.filler_qid, args.out / args.qid)
    print(f"{args.qid}: {made['words']} words, {made['claims']} claims, "
          f"{made['cited_urls']} cited URLs", flush=True)
    counted = {name: count(made["bundle"], made["tasks"], before, args.threads)
               for name, before in (("before", args.before), ("now", None))}
    result["counted"] = {"qid": args.qid, **counted}
    for protocol in ("dailyreport", "dr3", "deepeval", "all"):
        old, new = (counted["before"]["total"], counted["now"]["total"]) if protocol == "all" \
            else (counted["before"]["protocols"][protocol], counted["now"]["protocols"][protocol])
        read = [row["prompt_tokens"] - row["cached_tokens"] for row in (old, new)]
        print(f"{protocol:>11}: calls {old['calls']} -> {new['calls']}, prompt tokens "
              f"{old['prompt_tokens']:,} -> {new['prompt_tokens']:,}"
              f"{ratio(new['prompt_tokens'], old['prompt_tokens'])}, not repeating the "
              f"previous call's start {read[0]:,} -> {read[1]:,}{ratio(read[1], read[0])}",
              flush=True)
    if not args.skip_wall:
        small = made if (args.wall_qid, args.wall_filler_qid) == (args.qid, args.filler_qid) \
            else lrb_bundle(args.wall_qid, args.wall_filler_qid, args.out / args.wall_qid)
        print(f"{args.wall_qid}: {small['words']} words, {small['claims']} claims, "
              f"{small['cited_urls']} cited URLs (timed)", flush=True)
        walls = {}
        for name, before in (("before", args.before), ("now", None)):
            walls[name] = timed(small["bundle"], small["tasks"], before,
                                args.out / args.wall_qid / f"run-{name}", args.threads)
            print(f"{name:>7}: {walls[name]['calls']} calls, "
                  f"{walls[name]['prompt_tokens']:,} prompt tokens, "
                  f"wall {walls[name]['wall_seconds']} s", flush=True)
            if "planned" in walls[name]:
                print(f"{'':>7}  --plan said {walls[name]['planned']['calls']} calls, "
                      f"{walls[name]['planned']['prompt_tokens']:,} prompt tokens",
                      flush=True)
        now, old = walls["now"], walls["before"]
        print(f"wall {now['wall_seconds'] / old['wall_seconds']:.3f}x, prompt tokens "
              f"{now['prompt_tokens'] / old['prompt_tokens']:.3f}x", flush=True)
        result["timed"] = {"qid": args.wall_qid, **walls}
    (args.out / "judge-work.json").write_text(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
