"""Start-up: commands that never touch a model do not import the model stack.

Each command runs in a fresh interpreter (the real CLI entry point, in-process there) and
reports which heavy modules ended up in ``sys.modules``. A deterministic check, not a
timing: scripts/bench_startup.py measures the time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ambereval.snapshots import capture_urls

from conftest import fast_options
from fakeweb import FakeWeb

MODEL_STACK = ("torch", "transformers", "sentence_transformers", "llama_cpp", "faiss",
               "bm25s")
# Not needed to print help or read a bundle either (capture clients, schema checks).
ALSO_LAZY = ("numpy", "httpx", "trafilatura", "jsonschema", "cdxj_indexer")

PROBE = """
import json, runpy, sys
watch = json.loads(sys.argv[2])
sys.argv = ["amber", *json.loads(sys.argv[1])]
code = 0
try:
    runpy.run_module("ambereval.cli", run_name="__main__")
except SystemExit as stop:
    code = stop.code or 0
print(json.dumps({"exit": code, "loaded": sorted(m for m in watch if m in sys.modules)}),
      file=sys.stderr)
"""


def loaded_by(*args: str, watch: tuple[str, ...] = MODEL_STACK + ALSO_LAZY) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args), json.dumps(watch)],
                          capture_output=True, text=True, timeout=120)
    return json.loads(proc.stderr.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("startup") / "bundle"
    with FakeWeb() as web:
        capture_urls(out, [web.url("/pages/eiffel.html")], fast_options(web, reader="direct"))
    return out


@pytest.mark.parametrize("args", [["--help"], ["bundle", "--help"], ["evaluate", "--help"],
                                  ["verify", "--help"], ["snapshot", "--help"]])
def test_help_imports_no_model_and_no_numpy(args: list[str]) -> None:
    result = loaded_by(*args)
    assert result == {"exit": 0, "loaded": []}


def test_bundle_commands_import_no_model(bundle: Path) -> None:
    for args in (["bundle", "stats", str(bundle), "--json"],
                 ["bundle", "verify", str(bundle)],
                 ["bundle", "show", str(bundle), "cap-does-not-exist"]):
        result = loaded_by(*args, watch=MODEL_STACK + ("httpx", "trafilatura", "jsonschema",
                                                      "numpy", "sqlite_utils"))
        assert result["loaded"] == [], args
    assert loaded_by("bundle", "stats", str(bundle))["exit"] == 0


def test_report_inspect_imports_no_model() -> None:
    report = Path(__file__).parent / "fixtures" / "report.md"
    assert loaded_by("report", "inspect", str(report), "--json") == {"exit": 0, "loaded": []}


def test_the_probe_sees_a_model_import() -> None:
    """The check can fail: importing the retriever's index loads FAISS."""
    code = "import sys, ambereval.models as m; m.VectorIndex; print('faiss' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120).stdout.strip()
    assert out == "False"  # FAISS itself is imported on the first search or build
    code = ("import sys, numpy as np, ambereval.models as m; "
            "m.VectorIndex([], np.zeros((0, 4), 'float32'), {'dim': 4}); "
            "print('faiss' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120).stdout.strip()
    assert out == "True"
