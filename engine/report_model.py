"""A parsed report's data: sections, blocks, sentences, citations, references and
problems, each with character offsets into the original text (:mod:`.report` parses)."""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Section:
    id: str
    heading: str
    level: int
    path: list[str]
    start: int
    end: int


@dataclass(frozen=True)
class Block:
    kind: str  # paragraph | list_item | table_cell
    start: int
    end: int
    section: str
    row: int | None = None
    column: int | None = None


@dataclass(frozen=True)
class Sentence:
    start: int
    end: int
    block: int


@dataclass(frozen=True)
class Citation:
    kind: str
    start: int
    end: int
    raw: str
    numbers: list[int]
    url: str | None = None
    label: str | None = None
    urls: list[str] = field(default_factory=list)  # resolved reference URLs


@dataclass(frozen=True)
class Reference:
    number: int
    title: str
    url: str | None
    start: int
    end: int


@dataclass(frozen=True)
class Problem:
    kind: str
    message: str
    start: int | None = None
    end: int | None = None


@dataclass
class Report:
    text: str
    sections: list[Section]
    blocks: list[Block]
    sentences: list[Sentence]
    citations: list[Citation]
    references: list[Reference]
    problems: list[Problem]
    references_span: tuple[int, int] | None

    def as_dict(self, with_text: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "chars": len(self.text),
            "sections": [asdict(s) for s in self.sections],
            "blocks": [asdict(b) for b in self.blocks],
            "sentences": [asdict(s) for s in self.sentences],
            "citations": [asdict(c) for c in self.citations],
            "references": [asdict(r) for r in self.references],
            "problems": [asdict(p) for p in self.problems],
            "references_span": list(self.references_span) if self.references_span else None,
        }
        if with_text:
            out["text"] = self.text
        return out

    def citations_in(self, start: int, end: int) -> list[Citation]:
        """Citations lying inside [start, end) (citations are sorted by start)."""
        if not hasattr(self, "_starts"):
            self._starts = [c.start for c in self.citations]
        lo = bisect.bisect_left(self._starts, start)
        hi = bisect.bisect_left(self._starts, end)
        return [c for c in self.citations[lo:hi] if c.end <= end]
