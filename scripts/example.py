"""The example behind ``scripts/run.sh``: Amber's whole loop on a small example.

Starts the fake Serper, Jina Reader and origin web servers from ``tests/fakeweb.py`` on
127.0.0.1 and runs the installed ``amber`` CLI exactly as a user would with real
services (only the base URLs and the key differ):

1. ``snapshot claims`` on a small claims file, then ``bundle verify/stats/show``;
2. ``snapshot report`` on a small Markdown report (tests/fixtures/report.md);
3. with the fakes stopped, ``verify`` judges the report's claims offline with the default
   local judge and prints the verdicts with the pages behind them;
4. ``audit --html`` writes ``out/example/verify/audit.html`` (the report, each claim
   coloured by verdict, the captured passage behind it) and prints the score table.
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
        report = work / "report.md"
        template = (ROOT / "tests" / "fixtures" / "report.md").read_text(encoding="utf-8")
        report.write_text(template.replace("{ORIGIN}", web.origin_url), encoding="utf-8")
        report_bundle = work / "report-bundle"
        amber("snapshot", "report", str(report), "--out", str(report_bundle), "--extractor",
              "sentences", "--top-k", "2", "--reader", "direct",
              "--allow-private-addresses", env=env)  # the fake site is on 127.0.0.1
    offline = {k: v for k, v in os.environ.items() if not k.startswith(("SERPER_", "JINA_"))}
    amber("bundle", "verify", str(bundle), env=offline)
    amber("bundle", "stats", str(bundle), env=offline)
    amber("bundle", "show", str(bundle), claims[0]["urls"][0], env=offline)
    amber("verify", str(report_bundle), "--out", str(work / "verify"), "--judge-ctx", "2048",
          env=offline)
    print(f"\nbundles written to {bundle} and {report_bundle}; verdicts in {work / 'verify'}")
    # what Amber is for: every verdict with the captured bytes behind it, on one page
    amber("audit", str(work / "verify"), "--html", env=offline)
    print(f"\nopen {(work / 'verify' / 'audit.html').resolve().as_uri()} in a browser: the "
          "report with each claim coloured by verdict; click one for its evidence")


if __name__ == "__main__":
    main()
