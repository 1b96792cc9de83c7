"""The example behind ``scripts/run.sh``: a real capture against loopback fakes.

Starts the fake Serper, Jina Reader and origin web servers from ``tests/fakeweb.py`` on
127.0.0.1, writes a small claims file, and runs the installed ``amber`` CLI on it exactly
as a user would with real services (only the base URLs and the key differ).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakeweb import FakeWeb  # noqa: E402


def amber(*args: str, env: dict[str, str]) -> None:
    exe = Path(sys.executable).with_name("amber")
    print(f"$ amber {' '.join(args)}", flush=True)
    subprocess.run([str(exe), *args], env=env, check=True)


def main() -> None:
    work = ROOT / "out" / "example"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with FakeWeb() as web:
        claims = [
            {"id": "c1", "text": "The Eiffel Tower was completed in 1889.",
             "urls": [web.url("/pages/eiffel.html")],
             "queries": ["When was the Eiffel Tower completed?"]},
            {"id": "c2", "text": "The Rhine flows about 1,230 km into the North Sea.",
             "urls": [web.url("/pages/rhine.html"), web.url("/missing")],
             "queries": ["Rhine length North Sea"]},
            {"id": "c3", "text": "China is the largest producer of tea.",
             "queries": ["largest tea producer"]},
        ]
        claims_file = work / "claims.jsonl"
        claims_file.write_text("".join(json.dumps(c) + "\n" for c in claims))
        env = {**os.environ, **web.env()}
        bundle = work / "bundle"
        amber("snapshot", "claims", str(claims_file), "--out", str(bundle), "--reader", "jina",
              env=env)
    offline = {k: v for k, v in os.environ.items() if not k.startswith(("SERPER_", "JINA_"))}
    amber("bundle", "verify", str(bundle), env=offline)
    amber("bundle", "stats", str(bundle), env=offline)
    amber("bundle", "show", str(bundle), claims[0]["urls"][0], env=offline)
    print(f"\nbundle written to {bundle}")


if __name__ == "__main__":
    main()
