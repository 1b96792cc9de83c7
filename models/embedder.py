"""Sentence embeddings through sentence-transformers, fully offline, on the CPU."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ambereval.errors import ModelError
from ambereval.models.registry import EMBEDDER_NAME, default_embedder_dir, dir_sha256


class Embedder:
    """Encodes texts into L2-normalised float32 vectors (cosine = inner product).

    ``model_dir`` is any local sentence-transformers directory; the default is
    all-MiniLM-L6-v2 from its PyPI wheel. Nothing is downloaded: the hub is switched off
    before sentence-transformers is imported.
    """

    def __init__(self, model_dir: str | Path | None = None, batch_size: int = 32) -> None:
        self.model_dir = Path(model_dir) if model_dir else default_embedder_dir()
        if self.model_dir.is_file():
            raise ModelError(f"{self.model_dir}: is a file; the embedder is a directory",
                             hint="pass a sentence-transformers model directory")
        if not self.model_dir.is_dir():
            raise ModelError(f"{self.model_dir}: embedder directory not found")
        if not (self.model_dir / "modules.json").is_file():
            raise ModelError(
                f"{self.model_dir}: not a sentence-transformers model (no modules.json)",
                hint="pass a directory saved with SentenceTransformer.save()")
        self.batch_size = batch_size
        self.name = EMBEDDER_NAME if model_dir is None else self.model_dir.name
        self._model: Any = None
        self._sha: str | None = None

    @property
    def sha256(self) -> str:
        if self._sha is None:
            self._sha = dir_sha256(self.model_dir)
        return self._sha

    def identity(self) -> dict[str, str]:
        return {"name": self.name, "sha256": self.sha256}

    def model(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()

            try:
                self._model = SentenceTransformer(str(self.model_dir), device="cpu",
                                                  local_files_only=True)
            except Exception as err:  # loader errors vary by model type
                raise ModelError(f"{self.model_dir}: could not load the embedder ({err})",
                                 hint="expected a sentence-transformers directory") from None
        return self._model

    @property
    def dim(self) -> int:
        model = self.model()
        getter = getattr(model, "get_embedding_dimension", None) or \
            model.get_sentence_embedding_dimension
        return int(getter())

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model().encode(texts, batch_size=self.batch_size,
                                      normalize_embeddings=True, convert_to_numpy=True,
                                      show_progress_bar=False)
        return np.ascontiguousarray(vectors, dtype=np.float32)
