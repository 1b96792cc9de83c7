"""The scanners behind :func:`~ambereval.engine.report.parse_report`: lines, headings and
the reference list, body blocks and table cells, citation marks and sentences. Each
returns offsets into the text; the patterns are tuned against the shared reports (see
scripts/bench_parse.py for the hostile layouts they must stay linear on)."""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from ambereval.engine.report_model import (
    Block,
    Problem,
    Section,
)

REF_HEADINGS = re.compile(
    r"^(references?|sources?|bibliography|works cited|citations?|reference list|"
    r"sources and references|references and sources|参考文献|参考资料|参考来源|引用|来源|资料来源)"
    r"\s*[:：]?\s*$", re.I)
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST = re.compile(r"^(\s*)([-*+]|\d{1,3}[.)])\s+")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
# a URL runs to whitespace or a closing mark; a ")" belongs to it only when it closes a
# "(" inside it (Wikipedia's ``Circumstance_(2011_film)``, DOIs like ``S0749-8063(21)``)
_URL_CHAR = r"[^\s<>\"'()\]）】，。`]"
_URL = re.compile(rf"https?://(?:{_URL_CHAR}|\({_URL_CHAR}*\)|\()+")
# a link's target: balanced "(...)" kept; no lone "(", which would let an unclosed
# target run on to the next space and back (quadratic on ``[1](https://`` repeated)
_LINK_URL = r"https?://(?:[^\s()]|\([^\s()]*\))+"
_REF_NUM = re.compile(r"^\s*(?:[-*+]\s+)?(?:\[\^?(\d{1,4})\]:?|(\d{1,4})[.)]|【(\d{1,4})】)\s*")
_MD_LINK = re.compile(r"\[([^\[\]\n]{0,400})\]\((" + _LINK_URL + r")(?:\s+\"[^\"]*\")?\)")
_NUMS = r"\d{1,4}(?:\s*[-–—‑]\s*\d{1,4})?(?:\s*[,，;]\s*\d{1,4}(?:\s*[-–—‑]\s*\d{1,4})?)*"
_CITATION_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("link_number", re.compile(r"\[\[?\(?(\d{1,4})\)?\]?\]\((" + _LINK_URL + r")\)")),
    ("citation_tag", re.compile(r"\[citation:\s*(" + _NUMS + r")\]", re.I)),
    ("dagger", re.compile(r"[\[【](\d{1,4})†[^\]】\n]{0,40}[\]】]")),
    ("footnote", re.compile(r"\[\^(\d{1,4})\](?!:)")),
    ("doc_tag", re.compile(r"\[(?:long_context|Doc|Document|File|Source)\s*:\s*[^\]\n]{1,200}\]",
                           re.I)),
    ("numeric", re.compile(r"[\[【]\s*(" + _NUMS + r")\s*[\]】](?!\()")),
    ("link", _MD_LINK),
    ("url", _URL),
]
# ends at the same offsets as (?<=[.!?])[\"”’)\]]*(?=\s) — a lookbehind tried at every
# character is three times slower than a leading character class
_SENT_END = re.compile(r"[.!?][\"”’)\]]*(?=\s)|[。！？；]")
_ABBREV = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|al|Fig|No|Inc|Ltd|Co|Corp|Dr|Mr|Mrs|Ms|St|"
                     r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|approx|est)"
                     r"|\b[A-Z])\.$")
MAX_RANGE = 200
FOOTNOTE_DEF = re.compile(r"\s*\[\^\d{1,4}\]:")
_NUM_SEP = re.compile(r"[,，;]")
_DASH = re.compile(r"\s*[-–—‑]\s*")
_SPACES = re.compile(r"\s+")
_BULLET = re.compile(r"^\s*[-*+]\s+")
_PLAIN_URL = re.compile(r"https?://[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?:[/?#][^\s()\[\]]*)?")
_ABBREV_WINDOW = 16  # longer than any abbreviation _ABBREV matches, with its \b


def expand_numbers(spec: str) -> list[int]:
    """``"1, 3-5"`` -> ``[1, 3, 4, 5]`` (any dash; ranges capped at MAX_RANGE)."""
    if spec.isdecimal():
        return [int(spec)]  # the common case, "[12]"
    out: list[int] = []
    for part in _NUM_SEP.split(spec):
        part = part.strip()
        if not part:
            continue
        bounds = _DASH.split(part)
        if len(bounds) == 2 and bounds[0].isdigit() and bounds[1].isdigit():
            lo, hi = int(bounds[0]), int(bounds[1])
            if lo <= hi and hi - lo <= MAX_RANGE:
                out.extend(range(lo, hi + 1))
                continue
        if bounds[0].isdigit():
            out.append(int(bounds[0]))
    return list(dict.fromkeys(out))


def normalize_url(url: str) -> str:
    """For matching a link to a listed source: no fragment, no trailing slash, lower host."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:  # e.g. an unclosed IPv6 bracket: compare it as written
        return url.strip().lower()
    path = parts.path.rstrip("/")
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.netloc.lower().removeprefix('www.')}{path}{query}"


def url_problem(url: str) -> str | None:
    if _PLAIN_URL.fullmatch(url):
        return None  # the common case, without urlsplit: scheme, dotted host, no brackets
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError as err:  # urlsplit refuses some hosts outright
        return f"is not a valid URL ({err})"
    if parts.scheme not in ("http", "https"):
        return "not an http(s) URL"
    if not host or ("." not in host and host != "localhost"):
        return "has no valid host"
    if url.count("(") != url.count(")") or url.count("[") != url.count("]"):
        return "has unbalanced brackets"
    return None


def line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line, end excluding the newline."""
    spans, pos = [], 0
    for line in text.split("\n"):
        spans.append((pos, pos + len(line.rstrip("\r"))))
        pos += len(line) + 1
    return spans


_INLINE_CODE = re.compile(r"(`+)[^`]+?\1")


def inline_code_spans(text: str, lines: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inline code spans (```x[0]```) on lines outside fenced blocks. Fenced blocks are not
    included: real reports cite inside them (``// cached [9][10]`` in a code comment, a
    text diagram with ``[6]`` marks: 3 of the 140 LRB and DRB reports in ../shared)."""
    if "`" not in text:
        return []
    spans: list[tuple[int, int]] = []
    fenced = False
    for s, e in lines:
        if _FENCE.match(text[s:e]):  # (a pattern's "^" never matches at a pos > 0)
            fenced = not fenced
        elif not fenced and "`" in text[s:e]:
            spans.extend(m.span() for m in _INLINE_CODE.finditer(text, s, e))
    return spans


def find_headings(text: str, lines: list[tuple[int, int]]) -> list[tuple[int, int, int, str]]:
    """(line index, level, start offset, title) for every heading outside code fences."""
    found, fenced = [], False
    for i, (s, e) in enumerate(lines):
        line = text[s:e]
        if _FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(line)
        if m:
            found.append((i, len(m.group(1)), s, m.group(2).strip()))
    return found


def clean_heading(title: str) -> str:
    return re.sub(r"[*_`]+", "", re.sub(r"^\d+(\.\d+)*[.)]?\s+", "", title)).strip()


def parse_reference_line(text: str, start: int, end: int) -> tuple[int | None, str, str | None]:
    line = text[start:end]
    m = _REF_NUM.match(line)
    number = int(next(g for g in m.groups() if g)) if m else None
    rest = line[m.end():] if m else _BULLET.sub("", line)
    link = _MD_LINK.search(rest)
    if link:
        url = link.group(2)
        title = (rest[: link.start()] + link.group(1) + rest[link.end():]).strip()
    else:
        found = _URL.search(rest)
        url = found.group(0).rstrip(".,;") if found else None
        title = (rest[: found.start()] + rest[found.end():]) if found else rest
    title = _SPACES.sub(" ", title).strip(" -–—:|,;*_\t")
    return number, title, url


def section_ends(heads: list[tuple[int, int, int, str]], text_end: int) -> list[int]:
    """Where each heading's section ends: the start of the next heading of the same or a
    higher level (``text_end`` if none). One backward pass, so linear in the headings."""
    nearest = [text_end] * 7  # nearest later heading's start, per level 1..6
    ends = [text_end] * len(heads)
    for n in range(len(heads) - 1, -1, -1):
        _line, level, start, _title = heads[n]
        ends[n] = min(nearest[1 : level + 1])
        nearest[level] = start
    return ends


def find_references(text: str, lines: list[tuple[int, int]],
                     heads: list[tuple[int, int, int, str]]) -> tuple[int, int, int] | None:
    """(start offset, first body line, end line) of the reference section, if any."""
    for idx in range(len(heads) - 1, -1, -1):
        line_i, level, start, title = heads[idx]
        if REF_HEADINGS.match(clean_heading(title)):
            end_line = next((later[0] for later in itertools.islice(heads, idx + 1, None)
                             if later[1] <= level), len(lines))
            return start, line_i + 1, end_line
    # no heading: a trailing run of numbered lines carrying URLs
    run: list[int] = []
    for i in range(len(lines) - 1, -1, -1):
        s, e = lines[i]
        line = text[s:e]
        if not line.strip():
            if run:
                continue
            continue
        if _REF_NUM.match(line) and _URL.search(line):
            run.append(i)
        else:
            break
    if len(run) >= 2:
        first = min(run)
        return lines[first][0], first, len(lines)
    return None


def scan_blocks(text: str, lines: list[tuple[int, int]], head_lines: set[int], skip: set[int],
            sections: list[Section], problems: list[Problem]) -> list[Block]:
    starts = [sec.start for sec in sections]

    def section_at(offset: int) -> str:
        """The innermost section containing ``offset`` (sections nest by level)."""
        i = bisect.bisect_right(starts, offset) - 1
        while i >= 0:
            if sections[i].end > offset:
                return sections[i].id
            i -= 1
        return ""

    blocks: list[Block] = []
    fenced = False
    para: list[tuple[int, int]] = []
    table: list[tuple[int, int]] = []
    item: list[tuple[int, int]] = []

    def flush() -> None:
        for group, kind in ((para, "paragraph"), (item, "list_item")):
            if group:
                s, e = group[0][0], group[-1][1]
                seg = text[s:e]
                lead = len(seg) - len(seg.lstrip())
                if kind == "list_item":
                    m = _LIST.match(seg)
                    lead = m.end() if m else lead
                stop = s + len(seg.rstrip())
                if stop > s + lead:
                    blocks.append(Block(kind, s + lead, stop, section_at(s)))
                group.clear()
        if table:
            blocks.extend(_table_cells(text, table, section_at(table[0][0]), problems))
            table.clear()

    for i, (s, e) in enumerate(lines):
        line = text[s:e]
        if _FENCE.match(line):
            flush()
            fenced = not fenced
            continue
        if fenced or i in skip or i in head_lines or not line.strip():
            flush()
            continue
        stripped = line.strip()
        if stripped.startswith("|") or (table and stripped.count("|") >= 1):
            if para or item:
                flush()
            table.append((s, e))
            continue
        if table:
            flush()
        if _LIST.match(line):
            flush()
            item.append((s, e))
            continue
        if item and (line.startswith((" ", "\t"))):
            item.append((s, e))
            continue
        if item:
            flush()
        para.append((s, e))
    flush()
    return blocks


def _split_row(text: str, s: int, e: int) -> list[tuple[int, int]]:
    cells, start, i = [], s, s
    line = text[s:e]
    lead = len(line) - len(line.lstrip())
    i = start = s + lead
    if text[i : i + 1] == "|":
        i += 1
        start = i
    while i < e:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "|":
            cells.append((start, i))
            start = i + 1
        i += 1
    if text[start:e].strip():
        cells.append((start, e))
    return cells


def _table_cells(text: str, rows: list[tuple[int, int]], section: str,
                 problems: list[Problem]) -> list[Block]:
    out: list[Block] = []
    width = None
    has_sep = len(rows) > 1 and _TABLE_SEP.match(text[rows[1][0] : rows[1][1]]) is not None
    if not has_sep:
        problems.append(Problem("broken_table", "table without a |---| separator row",
                                rows[0][0], rows[-1][1]))
    for r, (s, e) in enumerate(rows):
        if _TABLE_SEP.match(text[s:e]):
            continue
        cells = _split_row(text, s, e)
        if width is None:
            width = len(cells)
        elif len(cells) != width:
            problems.append(Problem("broken_table", f"table row has {len(cells)} cells, "
                                    f"header has {width}", s, e))
        for c, (cs, ce) in enumerate(cells):
            seg = text[cs:ce]
            lead = len(seg) - len(seg.lstrip())
            stop = cs + len(seg.rstrip())
            if stop > cs + lead:
                out.append(Block("table_cell", cs + lead, stop, section, r, c))
    return out


@dataclass(frozen=True)
class _Found:
    kind: str
    start: int
    end: int
    raw: str
    numbers: list[int]
    url: str | None
    label: str | None


def scan_citations(text: str, ref_span: tuple[int, int] | None,
                    footnote_defs: list[tuple[int, int]],
                    code: list[tuple[int, int]]) -> list[_Found]:
    """Every citation mark in the body outside ``ref_span`` and the footnote definitions,
    earlier patterns winning overlaps; in inline ``code`` only URLs and links count
    (``a[1]`` there is an index, a URL still names a source). Linear in the text: ``taken`` marks
    the characters already claimed by a citation, and each pattern's matches do not
    overlap one another, so every character is tested at most once per pattern."""
    outside = _SpanSet(([ref_span] if ref_span else []) + footnote_defs)
    in_code = _SpanSet(code)
    taken = bytearray(len(text))
    found: list[_Found] = []
    for kind, pattern in _CITATION_PATTERNS:
        for m in pattern.finditer(text):
            s, e = m.start(), m.end()
            if outside.holds(s) or (kind not in ("url", "link") and in_code.holds(s)):
                continue
            if taken.find(1, s, e) >= 0:
                continue
            numbers: list[int] = []
            url = label = None
            if kind in ("link_number",):
                numbers, url = [int(m.group(1))], m.group(2)
            elif kind in ("citation_tag", "numeric"):
                numbers = expand_numbers(m.group(1))
            elif kind in ("dagger", "footnote"):
                numbers = [int(m.group(1))]
            elif kind == "doc_tag":
                label = m.group(0)[1:-1].strip()
            elif kind == "link":
                url, label = m.group(2), m.group(1)
            elif kind == "url":
                url = m.group(0).rstrip(".,;:")
                e = s + len(url)
            if kind in ("numeric", "citation_tag") and not numbers:
                continue
            taken[s:e] = b"\x01" * (e - s)
            found.append(_Found(kind, s, e, text[s:e], numbers, url, label))
    found.sort(key=lambda f: (f.start, f.end))
    return found


#: citation kinds that only point at a source: dropped from a statement shown to a judge
_POINTERS = frozenset({"link_number", "citation_tag", "dagger", "footnote", "doc_tag",
                       "numeric"})


def without_marks(text: str) -> str:
    """``text`` with its citation marks taken out, for a judge that is told the source
    apart: ``[3]``, ``[1, 2]``, ``【4】``, ``[^5]``, ``[Doc: x]`` and ``[1](url)`` are
    dropped with the spaces before them, a Markdown link keeps its words, a bare URL
    stays (it can be part of what a sentence says). Example: ``"Sales rose 4% [2][5]."``
    -> ``"Sales rose 4%."``."""
    out: list[str] = []
    at = 0
    for found in scan_citations(text, None, [], []):
        if found.kind not in _POINTERS and found.kind != "link":
            continue
        piece = text[at : found.start]
        if found.kind == "link":
            out += [piece, found.label or ""]
        else:
            kept = piece.rstrip(" \t")
            joins = found.end < len(text) and text[found.end].isalnum()
            out.append(kept + " " if joins and kept != piece else kept)
        at = found.end
    out.append(text[at:])
    return "".join(out).strip()


class _SpanSet:
    """Character spans (overlapping ones merged) and a bisect lookup of an offset."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self.spans: list[tuple[int, int]] = []
        for a, b in sorted(spans):
            if self.spans and a < self.spans[-1][1]:
                self.spans[-1] = (self.spans[-1][0], max(self.spans[-1][1], b))
            else:
                self.spans.append((a, b))
        self.starts = [a for a, _ in self.spans]

    def holds(self, offset: int) -> bool:
        i = bisect.bisect_right(self.starts, offset) - 1
        return i >= 0 and offset < self.spans[i][1]


def split_sentences(text: str, start: int, end: int, cites: list[_Found],
               cite_starts: list[int]) -> list[tuple[int, int]]:
    """Split [start, end) into sentences; citation marks after a full stop stay with the
    sentence before them. Linear in the block: citations are found by bisection and by
    their start offset, and the abbreviation test looks only at the last few characters."""
    lo = bisect.bisect_left(cite_starts, start)
    hi = bisect.bisect_left(cite_starts, end)
    inside = cites[lo:hi]
    inside_starts = cite_starts[lo:hi]
    first_at: dict[int, _Found] = {}  # the first non-URL citation starting at an offset
    for c in inside:
        if c.kind != "url":
            first_at.setdefault(c.start, c)

    def within_citation(cut: int) -> bool:
        i = bisect.bisect_left(inside_starts, cut) - 1  # the last citation starting before
        return i >= 0 and cut < inside[i].end  # citations never overlap

    spans: list[tuple[int, int]] = []
    pos = start
    for m in _SENT_END.finditer(text, start, end):
        cut = m.end()
        # the match never ends in whitespace, so text[pos:cut] is already right-stripped
        if cut > pos and text[cut - 1] == "." and \
                _ABBREV.search(text[max(pos, cut - _ABBREV_WINDOW) : cut]):
            continue
        if within_citation(cut):
            continue
        # absorb following citation marks (and spaces) into this sentence
        while True:
            j = cut
            while j < end and text[j] in " \t":
                j += 1
            nxt = first_at.get(j)
            if nxt is None or nxt.kind == "link":
                break
            cut = nxt.end
        if text[pos:cut].strip():
            s = pos + len(text[pos:cut]) - len(text[pos:cut].lstrip())
            spans.append((s, pos + len(text[pos:cut].rstrip())))
        pos = cut
    if text[pos:end].strip():
        s = pos + len(text[pos:end]) - len(text[pos:end].lstrip())
        spans.append((s, pos + len(text[pos:end].rstrip())))
    return spans
