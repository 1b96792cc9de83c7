"""Start-up cost of the commands that never touch a model.

For each command, in a fresh interpreter: the import time (sum of the top-level imports
reported by ``python -X importtime``, interpreter start-up excluded), the CPU time (user +
sys, less sensitive than wall time to other load on a shared machine) and the wall time
of the whole command, and whether any of the model stack (torch, transformers,
sentence-transformers, llama.cpp, FAISS) was imported. Medians of 3 runs. With
``--before DIR`` the same for an older copy of the code side by side (DIR on PYTHONPATH,
laid out as the package ``ambereval``). Then the cost of the model stack itself.

    .venv/bin/python scripts/bench_startup.py [--before /tmp/old]
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

RUNS = 3
STACK = ("torch", "transformers", "sentence_transformers", "llama_cpp", "faiss")
PROBE = """
import json, runpy, sys
sys.argv = ["amber", *json.loads(sys.argv[1])]
try:
    runpy.run_module("ambereval.cli", run_name="__main__")
except SystemExit:
    pass
sys.stderr.write("\\nLOADED " + json.dumps(sorted(m for m in STACK if m in sys.modules)))
""".replace("STACK", repr(STACK))
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


def measure(args: list[str], env: dict[str, str] | None = None,
            ) -> tuple[float, float, float, list[str]]:
    """Medians of (import s, CPU s, wall s) and the model-stack modules imported."""
    imports, cpus, walls, loaded = [], [], [], []
    for _ in range(RUNS):
        wall, cpu, err = run_once([sys.executable, "-X", "importtime", "-c", PROBE,
                                   json.dumps(args)], env)
        walls.append(wall)
        cpus.append(cpu)
        imports.append(import_seconds(err))
        loaded = json.loads(err.rsplit("LOADED ", 1)[1])
    return (statistics.median(imports), statistics.median(cpus), statistics.median(walls),
            loaded)


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
            imp, cpu, wall, loaded = measure(cmd)
            line = (f"{name:<30} import {imp:.3f} s, CPU {cpu:.3f} s, wall {wall:.3f} s, "
                    f"model stack: {', '.join(loaded) or 'none'}")
            if args.before:
                env = {**os.environ, "PYTHONPATH": str(args.before)}
                b_imp, b_cpu, b_wall, b_loaded = measure(cmd, env)
                line += (f"  | before: import {b_imp:.3f} s, CPU {b_cpu:.3f} s, wall "
                         f"{b_wall:.3f} s, model stack: {', '.join(b_loaded) or 'none'}")
            print(line, flush=True)
    stack = [run_once([sys.executable, "-c",
                       "import torch, sentence_transformers, llama_cpp, faiss"], None)
             for _ in range(3)]
    print(f"the model stack alone (torch, sentence-transformers, llama_cpp, faiss): "
          f"CPU {statistics.median(s[1] for s in stack):.2f} s, "
          f"wall {statistics.median(s[0] for s in stack):.2f} s")


if __name__ == "__main__":
    main()
