"""Saved KV states of prompt prefixes, so a prefix read once is not read again.

llama.cpp holds one KV cache, so a call reuses only what its prompt shares with the call
just before it. A run asks about the same page from two protocols (DR3's factual accuracy,
DeepEval's citation accuracy) and about the same report from many report-level checks,
with other calls in between. :class:`PrefixStates` keeps, on disk, the KV state of every
prefix two consecutive prompts shared (cut back to the last line break inside it, so all
the questions about one page or report share one state), and when a new prompt shares
less with the live cache than with a saved state, it restores that state first.

A restored state is the bytes the model computed, so every answer is bit-identical to
reading the prefix again (tests/test_prefix_states.py); only the time changes. States are
files in a private temporary directory (about 23 KB per token for SmolLM2-135M), bounded
by ``max_bytes`` (least recently used first out) and deleted when the backend is closed or
the process exits. ``AMBER_PREFIX_CACHE_MB`` sets the bound; 0 turns the cache off.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import tempfile
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any

DEFAULT_MB = 4096
MIN_TOKENS = 256  # shorter shared prefixes are cheaper to read again than to save
MIN_GAIN = 64  # restore only when it saves at least this many tokens
BREAK_SCAN = 512  # how far back a shared prefix is cut to its last line break


def _digest(tokens: Any) -> str:
    import numpy as np

    return hashlib.sha256(np.asarray(tokens, dtype="<i4").tobytes()).hexdigest()


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def limit_from_env() -> int:
    """The cache bound in bytes from ``AMBER_PREFIX_CACHE_MB`` (0: no cache)."""
    raw = os.environ.get("AMBER_PREFIX_CACHE_MB", "").strip()
    try:
        mb = int(raw) if raw else DEFAULT_MB
    except ValueError:
        mb = DEFAULT_MB
    return max(0, mb) << 20


class PrefixStates:
    """Disk-backed KV states of shared prompt prefixes for one llama.cpp context."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = limit_from_env() if max_bytes is None else max_bytes
        self._dir: Path | None = None
        self._finalizer: Any = None
        # digest -> (length, path, bytes), least recently used first
        self._states: OrderedDict[str, tuple[int, Path, int]] = OrderedDict()
        self._breaks: dict[int, bool] = {}
        self.saved = self.restored = self.tokens_restored = 0

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    def stats(self) -> dict[str, int]:
        return {"states_saved": self.saved, "states_restored": self.restored,
                "tokens_restored": self.tokens_restored}

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._states.clear()
        self._dir = None

    # -- the hook ----------------------------------------------------------------------
    def before_eval(self, llm: Any, tokens: list[int]) -> None:
        """Call with a prompt's tokens before evaluating it: saves the prefix the live
        cache shares with it (when long and new), or restores a longer saved one."""
        if not self.enabled or len(tokens) < MIN_TOKENS:
            return
        live = llm.input_ids[: llm.n_tokens].tolist()
        common = min(common_prefix(live, tokens), len(tokens) - 1)
        if common >= MIN_TOKENS:
            cut = self._last_break(llm, tokens, common)
            if cut >= MIN_TOKENS and self._find(tokens, cut - MIN_GAIN, cut) is None:
                self._save(llm, tokens[:cut])
        best = self._find(tokens, common + MIN_GAIN, len(tokens) - 1)
        if best is not None:
            self._restore(llm, tokens, *best)

    # -- internals ---------------------------------------------------------------------
    def _last_break(self, llm: Any, tokens: list[int], end: int) -> int:
        for i in range(end - 1, max(0, end - BREAK_SCAN) - 1, -1):
            token = tokens[i]
            if token not in self._breaks:
                text = llm.detokenize([token], special=True)
                self._breaks[token] = b"\n" in text
            if self._breaks[token]:
                return i + 1
        return end

    def _find(self, tokens: list[int], low: int, high: int) -> tuple[str, int] | None:
        """The longest saved prefix of ``tokens`` whose length is in [low, high]."""
        import numpy as np

        lengths = sorted({n for n, _, _ in self._states.values() if low <= n <= high},
                         reverse=True)
        array = np.asarray(tokens, dtype="<i4")
        for n in lengths:
            digest = _digest(array[:n])
            if digest in self._states:
                return digest, n
        return None

    def _directory(self) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="amber-prefix-states-"))
            self._finalizer = weakref.finalize(self, shutil.rmtree, str(self._dir), True)
        return self._dir

    def _save(self, llm: Any, prefix: list[int]) -> None:
        import llama_cpp

        llm.n_tokens = len(prefix)  # the prompt diverges here: drop the rest of the cache
        llm._ctx.kv_cache_seq_rm(0, len(prefix), -1)
        ctx = llm._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0)
        if written <= 0:
            return
        digest = _digest(prefix)
        path = self._directory() / f"{digest}.kv"
        with open(path, "wb") as fh:
            fh.write(memoryview(buf)[:written])
        self._states[digest] = (len(prefix), path, written)
        self.saved += 1
        self._evict()

    def _restore(self, llm: Any, tokens: list[int], digest: str, length: int) -> None:
        import llama_cpp

        _, path, size = self._states[digest]
        data = path.read_bytes()
        src = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        llm._ctx.kv_cache_clear()
        llm.n_tokens = 0
        if llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, src, len(data), 0) != size:
            llm._ctx.kv_cache_clear()  # unusable: read the prompt from scratch
            return
        llm.input_ids[:length] = tokens[:length]
        llm.n_tokens = length
        self._states.move_to_end(digest)
        self.restored += 1
        self.tokens_restored += length

    def _evict(self) -> None:
        total = sum(size for _, _, size in self._states.values())
        while self._states and total > self.max_bytes:
            _, (_, path, size) = self._states.popitem(last=False)
            path.unlink(missing_ok=True)
            total -= size
