#!/usr/bin/env bash
# Set everything up from scratch (if needed) and run the whole test suite, slow tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_browser.sh
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
