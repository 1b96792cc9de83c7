"""Split page text into passages by structure, with a token budget and overlap.

Units are paragraphs (blank-line separated) under their Markdown heading path; a
paragraph over budget is split into sentences, and a sentence over budget into word
windows. Units are packed greedily into chunks of at most ``max_tokens``; consecutive
chunks share up to ``overlap`` tokens of trailing units. Every chunk is an exact slice
``text[start:end]`` of the page text and keeps its source capture id, so a verdict can
point at the span. Tokens are counted as whitespace-separated words (deterministic, no
tokenizer needed; about 0.75 of a WordPiece count).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

_BREAK = re.compile(r"\n[ \t]*\n")
_SENT = re.compile(r"\S.*?(?:[.!?。！？](?=\s)|\Z)", re.S)
_WORD = re.compile(r"\S+")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class ChunkParams:
    max_tokens: int = 160
    overlap: int = 32

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "unit": "words", "rule": "paragraph-sentence-v1"}


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    capture_id: str
    start: int
    end: int
    text: str
    heading: str


def _tokens(text: str) -> int:
    return len(_WORD.findall(text))


def _paragraphs(text: str) -> list[tuple[int, int]]:
    """(start, end) of each blank-line separated block, whitespace trimmed."""
    spans, pos = [], 0
    for cut in [*_BREAK.finditer(text), None]:
        stop = cut.start() if cut else len(text)
        block = text[pos:stop]
        if block.strip():
            lead = len(block) - len(block.lstrip())
            spans.append((pos + lead, pos + len(block.rstrip())))
        if cut:
            pos = cut.end()
    return spans


def _units(text: str, max_tokens: int) -> list[tuple[int, int, str]]:
    """(start, end, heading path) units in order."""
    units: list[tuple[int, int, str]] = []
    path: list[str] = []
    for start, end in _paragraphs(text):
        para = text[start:end]
        heading = _HEADING.match(para.split("\n", 1)[0])
        if heading:
            level = len(heading.group(1))
            path = path[: level - 1] + [heading.group(2)]
        label = " > ".join(path)
        if _tokens(para) <= max_tokens:
            units.append((start, end, label))
            continue
        for sent in _SENT.finditer(text, start, end):
            s_start, s_end = sent.start(), min(sent.end(), end)
            if _tokens(text[s_start:s_end]) <= max_tokens:
                units.append((s_start, s_end, label))
                continue
            words = list(_WORD.finditer(text, s_start, s_end))
            for i in range(0, len(words), max_tokens):
                window = words[i : i + max_tokens]
                units.append((window[0].start(), window[-1].end(), label))
    return units


def chunk_text(text: str, capture_id: str, params: ChunkParams | None = None) -> list[Chunk]:
    params = params or ChunkParams()
    units = _units(text, params.max_tokens)
    sizes = [_tokens(text[s:e]) for s, e, _ in units]
    chunks: list[Chunk] = []
    i = 0
    while i < len(units):
        total, j = 0, i
        while j < len(units) and (j == i or total + sizes[j] <= params.max_tokens):
            total += sizes[j]
            j += 1
        start, end = units[i][0], units[j - 1][1]
        cid = f"{capture_id}:{len(chunks):05d}"
        chunks.append(Chunk(cid, capture_id, start, end, text[start:end], units[i][2]))
        if j >= len(units):
            break
        back, k = 0, j
        while k - 1 > i and back + sizes[k - 1] <= params.overlap:
            back += sizes[k - 1]
            k -= 1
        i = k
    return chunks
