"""What ``amber serve`` prints: export lines on stdout (for ``eval``), notes on stderr."""

from __future__ import annotations

import sys


def emit(line: str) -> None:
    sys.stdout.write(line)
    sys.stdout.flush()


def note(line: str) -> None:
    sys.stderr.write(f"amber serve: {line}\n")
    sys.stderr.flush()
