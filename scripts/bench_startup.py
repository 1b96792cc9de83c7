"""Start-up cost of the commands that never touch a model.

For each command, in a fresh interpreter: the import time (sum of the top-level imports
reported by ``python -X importtime``, interpreter start-up excluded), the wall time of
the whole command, and whether any of the model stack (torch, transformers,
sentence-transformers, llama.cpp, FAISS) was imported. Medians of 5 runs. Then the cost
of the model stack itself, for comparison.

    .venv/bin/python scripts/bench_startup.py
"""

from __future__ import annotations

import json
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


def measure(args: list[str]) -> tuple[float, float, list[str]]:
    imports, walls, loaded = [], [], []
    for _ in range(RUNS):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c", PROBE,
                               json.dumps(args)], capture_output=True, text=True, timeout=300)
        walls.append(time.perf_counter() - start)
        imports.append(import_seconds(proc.stderr))
        loaded = json.loads(proc.stderr.rsplit("LOADED ", 1)[1])
    return statistics.median(imports), statistics.median(walls), loaded


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
    with tempfile.TemporaryDirectory() as tmp:
        bundle = str(bundle_for_bench(Path(tmp)))
        report = str(ROOT / "tests" / "fixtures" / "report.md")
        commands = [["--help"], ["bundle", "stats", bundle, "--json"],
                    ["bundle", "verify", bundle], ["report", "inspect", report, "--json"]]
        base = statistics.median(
            _wall([sys.executable, "-c", "pass"]) for _ in range(RUNS))
        print(f"python start-up alone: {base:.3f} s wall")
        for args in commands:
            imp, wall, loaded = measure(args)
            name = "amber " + " ".join(a if not a.startswith("/") else Path(a).name
                                       for a in args)
            print(f"{name:<34} import {imp:.3f} s, wall {wall:.3f} s, "
                  f"model stack imported: {', '.join(loaded) or 'none'}")
    stack = statistics.median(_wall([sys.executable, "-c",
                                     "import torch, sentence_transformers, llama_cpp, faiss"])
                              for _ in range(3))
    print(f"the model stack alone (torch, sentence-transformers, llama_cpp, faiss): "
          f"{stack - base:.3f} s")


def _wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, capture_output=True, timeout=300, check=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
