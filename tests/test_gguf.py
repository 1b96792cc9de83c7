"""GGUF identification without loading weights; clear errors for bad model files."""

from __future__ import annotations

from pathlib import Path

import pytest

from ambereval.errors import ModelError
from ambereval.models import default_judge_path
from ambereval.models.gguf import read_metadata
from ambereval.models.llamacpp_backend import LlamaCppBackend


def test_default_judge_metadata() -> None:
    meta = read_metadata(default_judge_path())
    assert meta["general.architecture"] == "llama"
    assert "<|im_start|>" in meta["tokenizer.chat_template"]
    assert meta["tokenizer.ggml.tokens"].startswith("<array of")


def test_missing_not_gguf_and_truncated(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="model file not found"):
        LlamaCppBackend(tmp_path / "nope.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"PK\x03\x04 definitely a zip")
    with pytest.raises(ModelError, match=r"not a GGUF model .* expected b'GGUF'"):
        LlamaCppBackend(junk)
    cut = tmp_path / "cut.gguf"
    with open(default_judge_path(), "rb") as fh:
        cut.write_bytes(fh.read(4096))
    with pytest.raises(ModelError, match="corrupt or truncated GGUF header"):
        LlamaCppBackend(cut)


def test_identity_needs_no_weights() -> None:
    backend = LlamaCppBackend(default_judge_path(), n_ctx=1024)
    ident = backend.identity()
    assert len(ident["model"]["sha256"]) == 64 and len(ident["chat_template_sha256"]) == 64
    assert backend._llm is None  # nothing loaded


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}},
    {"type": "object", "properties": {"a": {"not": {"type": "string"}}}},
])
def test_schema_the_backend_cannot_enforce(schema: dict) -> None:
    backend = LlamaCppBackend(default_judge_path(), n_ctx=512)
    with pytest.raises(ModelError, match="cannot be enforced by llama.cpp"):
        backend.grammar(schema)
    assert backend._llm is None
