#!/usr/bin/env bash
# Set everything up from scratch (if needed) and run Amber's main job on a small example:
# capture claims against loopback fake Serper/Jina services, verify the bundle, summarise it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/example.py "$@"
