"""Model side of Amber: the judge (llama.cpp or an OpenAI-compatible server), the judge
ledger, sentence embeddings, chunking and FAISS retrieval.

Public nouns: :class:`Judge`, :class:`JudgeResponse`, :class:`Ledger`, :func:`open_judge`,
:class:`Embedder`, :class:`Chunk`, :func:`chunk_text`, :class:`VectorIndex`,
:class:`Retriever`.

The nouns are exported lazily (PEP 562 module ``__getattr__``): importing
``ambereval.models`` loads none of numpy, jsonschema, faiss, torch or llama.cpp, so
commands that never touch a model start fast; ``from ambereval.models import Judge``
loads the judge's module on first use.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ambereval.models.chunker import Chunk, ChunkParams, chunk_text
    from ambereval.models.embedder import Embedder
    from ambereval.models.judge import Judge, JudgeResponse
    from ambereval.models.ledger import MODES as LEDGER_MODES
    from ambereval.models.ledger import Ledger
    from ambereval.models.registry import default_embedder_dir, default_judge_path, known_models
    from ambereval.models.retriever import Retriever, RetrieverSpec
    from ambereval.models.vector_index import Hit, VectorIndex

_LAZY: dict[str, tuple[str, str]] = {
    "Chunk": ("chunker", "Chunk"), "ChunkParams": ("chunker", "ChunkParams"),
    "chunk_text": ("chunker", "chunk_text"), "Embedder": ("embedder", "Embedder"),
    "Judge": ("judge", "Judge"), "JudgeResponse": ("judge", "JudgeResponse"),
    "LEDGER_MODES": ("ledger", "MODES"), "Ledger": ("ledger", "Ledger"),
    "default_embedder_dir": ("registry", "default_embedder_dir"),
    "default_judge_path": ("registry", "default_judge_path"),
    "known_models": ("registry", "known_models"),
    "Retriever": ("retriever", "Retriever"), "RetrieverSpec": ("retriever", "RetrieverSpec"),
    "Hit": ("vector_index", "Hit"), "VectorIndex": ("vector_index", "VectorIndex"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'ambereval.models' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(f"ambereval.models.{module}"), attr)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def open_judge(
    model_path: str | Path | None = None,
    url: str | None = None,
    name: str | None = None,
    ledger: str | Path | None = None,
    ledger_mode: str = "reuse",
    n_ctx: int = 4096,
    threads: int | None = None,
    seed: int = 0,
    api_key: str | None = None,
    concurrency: int | None = None,
    judge: str | None = None,
) -> Judge:
    """A judge from CLI-style options: a GGUF path, or a judge by name (``judge``,
    resolved through the model registry to a verified file), or a server URL and model
    name, or the default SmolLM2-135M. With ``ledger``, every call goes through that
    ledger file.
    ``concurrency``: requests in flight to a served judge (default 8); the in-process
    judge always runs one call at a time."""
    from ambereval.errors import ConfigError
    from ambereval.models.judge import Judge
    from ambereval.models.ledger import Ledger
    from ambereval.models.registry import default_judge_path

    if url and model_path:
        raise ConfigError("give either --judge-model or --judge-url, not both")
    if judge:
        if url or model_path:
            raise ConfigError("give one of --judge, --judge-model and --judge-url")
        from ambereval.models.registry import resolve_judge

        model_path = resolve_judge(judge)
    if url:
        from ambereval.models.openai_backend import OpenAIBackend

        if not name:
            raise ConfigError("--judge-url needs --judge-name (the server's model name)")
        backend = OpenAIBackend(url, name, api_key=api_key)
    else:
        from ambereval.models.llamacpp_backend import LlamaCppBackend

        backend = LlamaCppBackend(model_path or default_judge_path(), n_ctx=n_ctx,
                                  n_threads=threads)
    book = Ledger(ledger, ledger_mode) if ledger else None
    recipe = {"model_path": str(model_path) if model_path else None, "url": url, "name": name,
              "n_ctx": n_ctx, "threads": threads, "seed": seed, "api_key": api_key,
              "concurrency": concurrency}
    width = (concurrency or 8) if url else 1
    return Judge(backend, book, seed=seed, n_ctx=n_ctx, concurrency=width, recipe=recipe)


__all__ = [
    "LEDGER_MODES", "Chunk", "ChunkParams", "Embedder", "Hit", "Judge", "JudgeResponse",
    "Ledger", "Retriever", "RetrieverSpec", "VectorIndex", "chunk_text",
    "default_embedder_dir", "default_judge_path",
    "known_models", "open_judge",
]
