#!/usr/bin/env bash
# Set up everything Amber needs in .venv/ at the project root, from nothing but Python 3.11.
# Idempotent: a second run only checks. See DESIGN.md ("Models") for why llama.cpp is
# built here: a portable build, once, into a project-local wheelhouse.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' || {
  echo "amber setup: Python 3.11 is required (found $("$PYTHON" --version 2>&1))" >&2; exit 2; }

LLAMA_VERSION="0.3.36"
WHEELHOUSE=".wheelhouse"
STAMP=".venv/.amber-setup"
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -x .venv/bin/amber ]; then
  exit 0
fi

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip --disable-pip-version-check)

# llama-cpp-python: portable build (a native build crashes on these CPUs), cached by us,
# because pip caches wheels by source and ignores CMAKE_ARGS.
mkdir -p "$WHEELHOUSE"
if ! ls "$WHEELHOUSE"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
  echo "amber setup: building llama-cpp-python $LLAMA_VERSION (portable, ~4 min)..." >&2
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" \
    "${PIP[@]}" wheel --no-deps --no-cache-dir --no-binary llama-cpp-python \
      -w "$WHEELHOUSE" "llama-cpp-python==$LLAMA_VERSION" >&2
fi

# torch: the CPU build first, so nothing later pulls a CUDA build.
"${PIP[@]}" install -q "torch==2.13.0" >&2
"${PIP[@]}" install -q --find-links "$WHEELHOUSE" "llama-cpp-python==$LLAMA_VERSION" >&2
"${PIP[@]}" install -q --find-links "$WHEELHOUSE" -e ".[dev,ray]" >&2

# `amber serve --proxy`: mitmproxy 11.0 cannot share .venv (h11 pins, see pyproject.toml's
# "serve" extra), so it gets an environment of its own, with Amber installed without deps.
if [ ! -x .venv-serve/bin/mitmdump ]; then
  "$PYTHON" -m venv .venv-serve
fi
.venv-serve/bin/python -m pip --disable-pip-version-check install -q "mitmproxy>=11.0.2,<11.1" \
  "warcio>=1.7.4,<2" >&2
.venv-serve/bin/python -m pip --disable-pip-version-check install -q --no-deps -e . >&2

echo "$want" > "$STAMP"
