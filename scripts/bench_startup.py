"""Start-up cost of the commands that never touch a model.

For each command, in a fresh interpreter: the import time (sum of the top-level imports
reported by ``python -X importtime``, interpreter start-up excluded), the CPU time (user +
sys, less sensitive than wall time to other load on a shared machine) and the wall time
of the whole command, whether any of the model stack (torch, transformers,
sentence-transformers, llama.cpp, FAISS) was imported, and which of the other slow imports
a command may avoid (typer's pydantic coercion, warcio's fsspec, rich, warcio itself, the
command modules). Medians of 5 runs. With
``--before DIR`` the same for an older copy of the code side by side (DIR on PYTHONPATH,
laid out as the package ``ambereval``). Then the cost of the model stack itself.

    .venv/bin/python scripts/bench_startup.py [--before /tmp/old] [--skip-stack]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from ambereval.snapshots import CaptureOptions, RetryPolicy, capture_urls  # noqa: E402

from fakeweb import FakeWeb  # noqa: E402

RUNS = 5
STACK = ("torch", "transformers", "sentence_transformers", "llama_cpp", "faiss")
AVOIDABLE = ("pydantic", "fsspec", "rich", "warcio")
PROBE = """
import json, runpy, sys
sys.argv = ["amber", *json.loads(sys.argv[1])]
try:
    runpy.run_module("ambereval.cli", run_name="__main__")
except SystemExit:
    pass
commands = sum(m.startswith("ambereval.cli.") and m.endswith(("_cmd", ".snapshot"))
               for m in sys.modules)
sys.stderr.write("\\nLOADED " + json.dumps(sorted(m for m in STACK if m in sys.modules)))
sys.stderr.write("\\nALSO " + json.dumps(
    [m for m in AVOIDABLE if m in sys.modules] + [f"{commands} command modules"]))
""".replace("STACK", repr(STACK)).replace("AVOIDABLE", repr(AVOIDABLE))
START_UP = ("site", "encodings", "_frozen_importlib_external", "zipimport", "codecs", "io",
            "abc", "_signal", "_abc", "stat", "posixpath", "genericpath", "os", "_sitebuiltins",
            "_distutils_hack", "__editable___amber_eval_0_1_0_finder")


def import_seconds(stderr: str) -> float:
    """Sum of the cumulative times of top-level imports after interpreter start-up
    (``import time: self | cumulative | name``; a top-level name has one leading space)."""
    total = 0
    for line in stderr.splitlines():
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3 or "cumulative" in line:
            continue
        name = parts[2]
        if name.startswith(" ") and not name.startswith("  ") and name.strip() not in START_UP:
            total += int(parts[1])
    return total / 1e6


def run_once(cmd: list[str], env: dict[str, str] | None) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds user+sys, stderr) of one process."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env,
                                cwd="/")  # not the repo: it holds an ambereval/ folder
        _, _, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        err.seek(0)
        return wall, usage.ru_utime + usage.ru_stime, err.read().decode()


def measure(args: list[str], envs: list[dict[str, str] | None],
            ) -> list[tuple[float, float, float, list[str], list[str]]]:
    """For each environment: medians of (import s, CPU s, wall s), the model-stack modules
    imported and the avoidable ones. The environments take turns run by run, so on a shared
    machine each sees the same load."""
    runs: list[list[tuple[float, float, str]]] = [[] for _ in envs]
    for _ in range(RUNS):
        for env, done in zip(envs, runs, strict=True):
            done.append(run_once([sys.executable, "-X", "importtime", "-c", PROBE,
                                  json.dumps(args)], env))
    results = []
    for done in runs:
        err = done[-1][2]
        loaded = json.loads(err.rsplit("LOADED ", 1)[1].split("\n", 1)[0])
        also = json.loads(err.rsplit("ALSO ", 1)[1])
        results.append((statistics.median(import_seconds(r[2]) for r in done),
                        statistics.median(r[1] for r in done),
                        statistics.median(r[0] for r in done), loaded, also))
    return results


def bundle_for_bench(where: Path) -> Path:
    out = where / "bundle"
    with FakeWeb() as web:
        options = CaptureOptions.from_env(
            web.env(), reader="direct", serper_rate=None, reader_rate=None,
            policy=RetryPolicy(attempts=2, backoff=0.01, timeout=2.0))
        capture_urls(out, [web.url("/pages/eiffel.html"), web.url("/pages/tea.html")],
                     options)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", type=Path, help="PYTHONPATH of an older copy of the "
                        "code laid out as the package ambereval, measured side by side")
    parser.add_argument("--skip-stack", action="store_true",
                        help="do not time the model stack itself (~10 s of CPU)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bundle = str(bundle_for_bench(Path(tmp)))
        report = str(ROOT / "tests" / "fixtures" / "report.md")
        commands = [["--help"], ["bundle", "stats", bundle, "--json"],
                    ["bundle", "verify", bundle], ["report", "inspect", report, "--json"]]
        base = [run_once([sys.executable, "-c", "pass"], None) for _ in range(RUNS)]
        print(f"python start-up alone: wall {statistics.median(b[0] for b in base):.3f} s, "
              f"CPU {statistics.median(b[1] for b in base):.3f} s (medians of {RUNS} runs)")
        for cmd in commands:
            name = "amber " + " ".join(a if not a.startswith("/") else Path(a).name
                                       for a in cmd)
            envs: list[dict[str, str] | None] = [None]
            if args.before:
                envs.append({**os.environ, "PYTHONPATH": str(args.before)})
            lines = []
            for label, (imp, cpu, wall, loaded, also) in zip(
                    (name, "  before"), measure(cmd, envs), strict=False):
                lines.append(f"{label:<36} import {imp:.3f} s, CPU {cpu:.3f} s, wall "
                             f"{wall:.3f} s, model stack: {', '.join(loaded) or 'none'}; "
                             f"also {', '.join(also)}")
            print("\n".join(lines), flush=True)
    if args.skip_stack:
        return
    stack = [run_once([sys.executable, "-c",
                       "import torch, sentence_transformers, llama_cpp, faiss"], None)
             for _ in range(3)]
    print(f"the model stack alone (torch, sentence-transformers, llama_cpp, faiss): "
          f"CPU {statistics.median(s[1] for s in stack):.2f} s, "
          f"wall {statistics.median(s[0] for s in stack):.2f} s")


if __name__ == "__main__":
    main()
