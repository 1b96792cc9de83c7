"""Regenerate the documentation's generated parts, or check they are current.

    .venv/bin/python scripts/gen_docs.py            # CLI reference + every example
    .venv/bin/python scripts/gen_docs.py --check    # exit 1 naming what is stale
    .venv/bin/python scripts/gen_docs.py --fast     # skip examples that load the judge
    .venv/bin/python scripts/gen_docs.py --screenshot   # also retake docs/img/audit.png

The CLI reference (docs/reference/cli.md) is read from the CLI itself (scripts/docs_cli.py),
the module map of docs/architecture.md from the tree (scripts/docs_layout.py), and the
examples are the marked console blocks of README.md and docs/, run for real
(scripts/docs_examples.py). The screenshot is taken by the browser test
(tests/test_audit_browser.py with AMBER_DOCS_SCREENSHOT set).
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs_cli import cli_reference  # noqa: E402
from docs_examples import ROOT, all_sessions, regenerate  # noqa: E402
from docs_layout import render as render_layout  # noqa: E402

CLI_PAGE = ROOT / "docs" / "reference" / "cli.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
SCREENSHOT = ROOT / "docs" / "img" / "audit.png"


def _diff(path: Path, old: str, new: str) -> str:
    name = str(path.relative_to(ROOT))
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        f"{name} (in the tree)", f"{name} (generated)"))


def outputs(fast: bool = False, session: str | None = None) -> list[tuple[Path, str, str]]:
    """(path, text now, text generated) for every generated file."""
    found = [(CLI_PAGE, CLI_PAGE.read_text(encoding="utf-8") if CLI_PAGE.exists() else "",
              cli_reference())]
    layout = ARCHITECTURE.read_text(encoding="utf-8")
    found.append((ARCHITECTURE, layout, render_layout(layout)))
    sessions = [s for s in all_sessions() if not (fast and s.slow)
                and (session is None or session in (s.name, s.id))]
    found += list(regenerate(sessions))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    parser.add_argument("--fast", action="store_true", help="skip the examples marked slow")
    parser.add_argument("--session", help="only this example session (NAME or FILE:NAME)")
    parser.add_argument("--screenshot", action="store_true",
                        help="also retake docs/img/audit.png with the browser test")
    args = parser.parse_args()
    stale = []
    for path, old, new in outputs(args.fast, args.session):
        if old == new:
            continue
        stale.append(path)
        if args.check:
            print(_diff(path, old, new), end="")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(new, encoding="utf-8")
            print(f"gen_docs: rewrote {path.relative_to(ROOT)}")
    if args.screenshot:
        env = {**os.environ, "AMBER_DOCS_SCREENSHOT": str(SCREENSHOT)}
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/test_audit_browser.py::test_audit_page_in_chromium"],
                       cwd=ROOT, env=env, check=True)
        print(f"gen_docs: wrote {SCREENSHOT.relative_to(ROOT)}")
    if args.check and stale:
        print("gen_docs: stale: " + ", ".join(str(p.relative_to(ROOT)) for p in stale)
              + " (regenerate: .venv/bin/python scripts/gen_docs.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
