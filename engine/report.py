"""Parsing a Markdown research report: structure, citations, the reference list, problems.

Every element carries character offsets (Python ``str`` indices, i.e. code points) into
the original text, so ``text[start:end]`` gives back exactly what was parsed.

Citation forms recognised in the body: ``[1]``, ``[1][2]``, ``[1, 3-5]`` (any dash),
``【1】``, ``[(15)](url)`` and ``[15](url)``, ``[citation:53]``, ``[15†L10]``/``【15†L10】``,
footnote marks ``[^3]``, inline Markdown links, bare URLs, and DR3-style bracket tags
(``[long_context: "Title", chunk 3]``, ``[Doc: x.pdf, Page 5]``). The reference list is
the section headed References / Sources / Bibliography / Works cited / 参考文献 … (the
last such heading), or footnote definitions, with lines like ``[n] Title: URL``,
``n. Title - URL``, ``n) URL - Title`` or Markdown links.
"""

from __future__ import annotations

from pathlib import Path

from ambereval.engine.report_model import (
    Block,
    Citation,
    Problem,
    Reference,
    Report,
    Section,
    Sentence,
)
from ambereval.engine.report_scan import (
    FOOTNOTE_DEF,
    REF_HEADINGS,
    clean_heading,
    expand_numbers,
    find_headings,
    find_references,
    inline_code_spans,
    line_spans,
    normalize_url,
    parse_reference_line,
    scan_blocks,
    scan_citations,
    section_ends,
    split_sentences,
    url_problem,
)
from ambereval.errors import InputError

__all__ = ["REF_HEADINGS", "Block", "Citation", "Problem", "Reference", "Report", "Section",
           "Sentence", "clean_heading", "expand_numbers", "load_report", "normalize_url",
           "parse_report", "url_problem"]


def parse_report(text: str) -> Report:
    """Parse a Markdown report. Never raises on any input text."""
    lines = line_spans(text)
    heads = find_headings(text, lines)
    problems: list[Problem] = []
    refs_at = find_references(text, lines, heads)
    ref_span = (refs_at[0], len(text) if refs_at[2] >= len(lines) else lines[refs_at[2]][0]) \
        if refs_at else None

    # -- references ------------------------------------------------------------------
    references: list[Reference] = []
    footnote_defs: list[tuple[int, int]] = []
    ref_lines = range(refs_at[1], refs_at[2]) if refs_at else range(0)
    def_lines: list[int] = []
    for i, (s, e) in enumerate(lines if "[^" in text else ()):
        if FOOTNOTE_DEF.match(text, s, e) and i not in ref_lines:
            footnote_defs.append((s, e))
            def_lines.append(i)
    unnumbered = 0
    for s, e in [lines[i] for i in ref_lines] + footnote_defs:
        if not text[s:e].strip():
            continue
        number, title, url = parse_reference_line(text, s, e)
        if number is None:
            if url is None:
                continue
            unnumbered += 1
            number = unnumbered
        lead = len(text[s:e]) - len(text[s:e].lstrip())
        stop = s + len(text[s:e].rstrip())
        references.append(Reference(number, title, url, s + lead, stop))
    seen: dict[int, Reference] = {}
    for ref in references:
        if ref.number in seen:
            problems.append(Problem("duplicate_reference_number",
                                    f"reference [{ref.number}] is listed more than once",
                                    ref.start, ref.end))
            if seen[ref.number].url is None and ref.url:
                seen[ref.number] = ref  # the entry that carries a URL wins
        else:
            seen[ref.number] = ref
        if ref.url is None:
            problems.append(Problem("reference_without_url",
                                    f"reference [{ref.number}] has no URL", ref.start, ref.end))
        elif (why := url_problem(ref.url)) is not None:
            problems.append(Problem("broken_url", f"reference [{ref.number}] URL {why}",
                                    ref.start, ref.end))
    if seen:
        missing = sorted(set(range(1, max(seen) + 1)) - set(seen))
        if missing:
            shown = ", ".join(map(str, missing[:10])) + ("…" if len(missing) > 10 else "")
            problems.append(Problem("numbering_gap", f"reference numbers missing: {shown}"))

    # -- sections and blocks -----------------------------------------------------------
    skip = set(ref_lines) | set(def_lines)
    if refs_at:
        skip.add(refs_at[1] - 1)
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    bounds = [h for h in heads if not (refs_at and h[0] == refs_at[1] - 1)]
    ends = section_ends(bounds, len(text))
    for n, (_line, level, start, title) in enumerate(bounds):
        path = [p for p in path if p[0] < level] + [(level, clean_heading(title))]
        end = ends[n]
        if refs_at and refs_at[0] > start:
            end = min(end, refs_at[0])
        sections.append(Section(f"s{n + 1}", clean_heading(title), level,
                                [p[1] for p in path], start, end))
    head_lines = {h[0] for h in heads}
    blocks = scan_blocks(text, lines, head_lines, skip, sections, problems)

    # -- sentences ---------------------------------------------------------------------
    body_citations = scan_citations(text, ref_span, footnote_defs, inline_code_spans(text, lines))
    cite_starts = [c.start for c in body_citations]
    sentences: list[Sentence] = []
    for bi, block in enumerate(blocks):
        for s, e in split_sentences(text, block.start, block.end, body_citations, cite_starts):
            sentences.append(Sentence(s, e, bi))

    # -- resolve citations ---------------------------------------------------------------
    citations: list[Citation] = []
    cited: set[int] = set()
    by_url: dict[str, int] | None = None  # built on first use: urlsplit is not free
    for c in body_citations:
        numbers = c.numbers
        if c.url and not numbers:
            if by_url is None:
                by_url = {normalize_url(ref.url): number
                          for number, ref in sorted(seen.items(), reverse=True) if ref.url}
            if (number := by_url.get(normalize_url(c.url))) is not None:
                numbers = [number]  # a link to a listed source cites it
        urls = [seen[n].url for n in numbers if n in seen and seen[n].url]
        if c.url and not urls:
            urls = [c.url]
        citations.append(Citation(c.kind, c.start, c.end, c.raw, numbers, c.url, c.label,
                                  [u for u in urls if u]))
        c = citations[-1]  # type: ignore[assignment]
        cited.update(c.numbers)
        for n in c.numbers:
            if n not in seen and seen:
                problems.append(Problem("citation_without_reference",
                                        f"[{n}] is cited but not in the reference list",
                                        c.start, c.end))
    if any(c.numbers for c in citations) and not seen:
        problems.append(Problem("no_references", "numbered citations but no reference list"))
    for number, ref in sorted(seen.items()):
        if number not in cited:
            problems.append(Problem("reference_never_cited",
                                    f"reference [{number}] is never cited", ref.start, ref.end))
    return Report(text, sections, blocks, sentences, citations, references, problems, ref_span)


MAX_REPORT_BYTES = 20 * 1024 * 1024


def load_report(path: str | Path) -> Report:
    """Read and parse a report; missing, non-UTF-8 or huge files are clear errors."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a report file",
                         hint="pass the report's Markdown file")
    if not path.is_file():
        raise InputError(f"{path}: no such report file")
    size = path.stat().st_size
    if size > MAX_REPORT_BYTES:
        raise InputError(f"{path}: report is {size} bytes, over the {MAX_REPORT_BYTES} limit")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (invalid byte at offset {exc.start})",
                         hint="convert it with iconv -t UTF-8") from None
    return parse_report(text)
