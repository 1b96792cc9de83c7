"""Report parsing: citation forms, reference lists, problems, offsets (real and generated)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ambereval.engine.report import expand_numbers, parse_report

from conftest import run_amber, shared

SAMPLE = """# Report

## Findings

The tower opened in 1889 [1][2]. Visitors number 7 million [1, 3-4]. See [citation:5] and
[6†L10-L12] and [(7)](https://example.org/seven) and [^8]. A tagged doc
[Doc: plan.pdf, Page 5] and [long_context: "Annual report", chunk 3].
An inline [link text](https://news.example.com/a) and a bare https://bare.example.net/x.

- List item cites [9].
- Another item, uncited.

| Year | Visitors |
|------|----------|
| 2019 | 6.2M [1] |
| 2020 | 1.6M | extra |

## References
[1] Tower facts: https://example.org/tower
[2] https://example.org/second - Second source
3. Third source - https://example.org/third
[3] Duplicate third: https://example.org/third-dup
[5] Fifth: https://example.org/five
[6] Sixth: https://example.org/six
[7] Seventh: https://example.org/seven
[9] Ninth: https://example.org/nine
[10] Never cited: https://example.org/ten
[11] Broken: https://notaurl
[12] No url here

[^8]: Footnote eight https://example.org/eight
"""


def test_citation_forms_and_resolution() -> None:
    r = parse_report(SAMPLE)
    by_raw = {c.raw: c for c in r.citations}
    assert by_raw["[1]"].numbers == [1] and by_raw["[1]"].urls == ["https://example.org/tower"]
    assert by_raw["[1, 3-4]"].numbers == [1, 3, 4]
    assert by_raw["[citation:5]"].numbers == [5]
    assert by_raw["[6†L10-L12]"].numbers == [6]
    assert by_raw["[(7)](https://example.org/seven)"].numbers == [7]
    assert by_raw["[^8]"].numbers == [8]
    assert by_raw["[^8]"].urls == ["https://example.org/eight"]
    assert by_raw["[Doc: plan.pdf, Page 5]"].kind == "doc_tag"
    assert by_raw['[long_context: "Annual report", chunk 3]'].label.startswith("long_context")
    assert by_raw["[link text](https://news.example.com/a)"].kind == "link"
    assert by_raw["https://bare.example.net/x"].kind == "url"
    for c in r.citations:
        assert SAMPLE[c.start : c.end] == c.raw
    # nothing in the reference list is taken for a citation
    assert all(c.start < r.references_span[0] for c in r.citations)


def test_reference_list_and_problems() -> None:
    r = parse_report(SAMPLE)
    refs: dict = {}
    for ref in r.references:
        refs.setdefault(ref.number, ref)
    assert refs[1].title == "Tower facts" and refs[1].url == "https://example.org/tower"
    assert refs[2].title == "Second source" and refs[2].url == "https://example.org/second"
    assert refs[3].url == "https://example.org/third"
    assert refs[12].url is None
    kinds = [(p.kind, p.message) for p in r.problems]
    assert ("duplicate_reference_number", "reference [3] is listed more than once") in kinds
    assert ("citation_without_reference", "[4] is cited but not in the reference list") in kinds
    assert ("reference_never_cited", "reference [10] is never cited") in kinds
    assert ("broken_url", "reference [11] URL has no valid host") in kinds
    assert ("reference_without_url", "reference [12] has no URL") in kinds
    assert ("numbering_gap", "reference numbers missing: 4") in kinds
    assert any(k == "broken_table" and "3 cells" in m for k, m in kinds)


def test_structure_sentences_and_blocks() -> None:
    r = parse_report(SAMPLE)
    assert [s.heading for s in r.sections] == ["Report", "Findings"]
    assert r.sections[1].path == ["Report", "Findings"]
    kinds = {b.kind for b in r.blocks}
    assert kinds == {"paragraph", "list_item", "table_cell"}
    cells = [SAMPLE[b.start : b.end] for b in r.blocks if b.kind == "table_cell"]
    assert "6.2M [1]" in cells and "Year" in cells
    sentences = [SAMPLE[s.start : s.end] for s in r.sentences]
    assert "The tower opened in 1889 [1][2]." in sentences
    assert "Visitors number 7 million [1, 3-4]." in sentences
    assert "List item cites [9]." in sentences


def test_citations_after_the_full_stop_stay_with_their_sentence() -> None:
    text = "第一句话。 [1][2]\n\nFirst claim. [3] Second claim [4].\n\n## Sources\n" \
           "[1] a https://a.org\n[2] b https://b.org\n[3] c https://c.org\n[4] d https://d.org\n"
    r = parse_report(text)
    sentences = [text[s.start : s.end] for s in r.sentences]
    assert sentences == ["第一句话。 [1][2]", "First claim. [3]", "Second claim [4]."]
    assert not r.problems


def test_edge_inputs() -> None:
    assert parse_report("").citations == []
    r = parse_report("Just text [1].")
    assert [p.kind for p in r.problems] == ["no_references"]
    r = parse_report("Body.\r\n\r\n## References\r\n[1] A: https://a.org\r\n")
    assert r.references[0].url == "https://a.org"
    assert expand_numbers("1, 3–5,7") == [1, 3, 4, 5, 7]
    assert expand_numbers("2-1000") == [2]  # absurd ranges are not expanded


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*"ab 1234-,[]()#|\n.:^†【】", "https://x.org/p", "[1]",
                                 "## Sources\n", "[citation:2]", "\n\n", "| a | b |\n",
                                 "[x](https://y.org)", "1. ", "- "]),
                max_size=120).map("".join))
def test_never_crashes_and_offsets_slice_back(text: str) -> None:
    r = parse_report(text)
    for c in r.citations:
        assert text[c.start : c.end] == c.raw
    for item in [*r.blocks, *r.sentences, *r.references, *r.sections]:
        assert 0 <= item.start <= item.end <= len(text)
    for s in r.sentences:
        assert text[s.start : s.end].strip() == text[s.start : s.end]


VERIFIED = {
    # counted by hand and with grep over the body (see tests' docstring):
    "qid_infocoBp2TDUwPt62Iqzak": (19, 20, ["reference_never_cited"]),
    "qid_infocoTspDptS95JzUHtfS": (65, 17, ["reference_never_cited"]),  # 49 [n] + 16 bare URLs
    "qid_topicBSSGEhfWR3DVNsA2": (101, 61, ["citation_without_reference",
                                            "reference_never_cited", "reference_never_cited"]),
}


@pytest.mark.parametrize("qid", sorted(VERIFIED))
def test_real_lrb_reports_verified_counts(qid: str) -> None:
    path = shared("lrb", "reference_reports", f"{qid}_report.md")
    r = parse_report(path.read_text(encoding="utf-8"))
    citations, references, problems = VERIFIED[qid]
    assert len(r.citations) == citations
    assert len(r.references) == references
    assert [p.kind for p in r.problems] == problems


def test_every_real_report_parses() -> None:
    lrb = sorted(shared("lrb", "reference_reports").glob("*.md"))
    drb = shared("drb", "raw_data_claude-3-7-sonnet-latest.jsonl")
    texts = [p.read_text(encoding="utf-8") for p in lrb]
    texts += [json.loads(line)["article"] for line in drb.read_text().splitlines()]
    assert len(texts) >= 140
    with_refs = 0
    for text in texts:
        r = parse_report(text)
        with_refs += bool(r.references)
        for c in r.citations:
            assert text[c.start : c.end] == c.raw
    assert with_refs >= len(texts) - 3  # three LRB reports really have no sources


def test_report_inspect_cli(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "r.md"
    path.write_text(SAMPLE)
    done = run_amber("report", "inspect", str(path), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert {"sections", "citations", "references", "problems"} <= set(doc)
    cite = next(c for c in doc["citations"] if c["raw"] == "[1]")
    assert cite["numbers"] == [1] and cite["urls"] == ["https://example.org/tower"]
    assert {"number", "title", "url"} <= set(doc["references"][0])
    human = run_amber("report", "inspect", str(path))
    assert human.returncode == 0 and "citations" in human.stdout
    gap = tmp_path / "gap.md"
    gap.write_text("# R\n\nOne [1].\n\nTwo [7].\n\n## References\n[1] https://a.example/\n")
    lines = run_amber("report", "inspect", str(gap)).stdout.splitlines()
    assert "line 5: citation_without_reference: [7] is cited but not in the reference list" \
        in lines
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"caf\xe9 [1]")
    done = run_amber("report", "inspect", str(bad))
    assert done.returncode == 2 and "not UTF-8" in done.stderr
    assert run_amber("report", "inspect", str(tmp_path / "none.md")).returncode == 2
    folder = run_amber("report", "inspect", str(tmp_path))
    assert folder.returncode == 2 and "is a directory" in folder.stderr
    assert "Traceback" not in folder.stderr


def test_brackets_in_inline_code_are_not_citations_but_fenced_blocks_cite() -> None:
    text = ("# R\n\nTea grows in China [1]. The index `x[2]` is code, `https://b.example/` a "
            "URL.\n\n```js\ncache(); // hashed assets [1]\n```\n\n"
            "## References\n[1] https://a.example/\n")
    report = parse_report(text)
    assert [(c.numbers, c.url) for c in report.citations] == [
        ([1], None), ([], "https://b.example/"), ([1], None)]
    assert not [p for p in report.problems if "not in the reference list" in p.message]


def test_a_url_keeps_the_parentheses_it_opens_and_closes() -> None:
    text = ("Circumstance won an award [1] (see https://x.org/a), as did a film "
            "([the film](https://en.wikipedia.org/wiki/In_Between_(2016_film))).\n\n"
            "## References\n"
            "[1] https://en.wikipedia.org/wiki/Circumstance_(2011_film) - Circumstance\n"
            "[2] https://doi.org/10.1016/S0749-8063(21)00652-6.\n")
    r = parse_report(text)
    assert [(x.number, x.url) for x in r.references] == [
        (1, "https://en.wikipedia.org/wiki/Circumstance_(2011_film)"),
        (2, "https://doi.org/10.1016/S0749-8063(21)00652-6")]
    assert [ref.title for ref in r.references][0] == "Circumstance"
    urls = [u for c in r.citations for u in c.urls]
    assert "https://x.org/a" in urls  # the ")" after it closes the prose, not the URL
    assert "https://en.wikipedia.org/wiki/In_Between_(2016_film)" in urls
    assert not [p for p in r.problems if "bracket" in p.message]


def test_real_reports_citing_urls_with_parentheses() -> None:
    """11 references in the shared LRB and DRB reports (Wikipedia titles, DOIs) hold a
    "(...)"; they used to be cut at the "(" and flagged as broken."""
    lrb = sorted(shared("lrb", "reference_reports").glob("*.md"))
    drb = shared("drb", "raw_data_claude-3-7-sonnet-latest.jsonl")
    texts = [p.read_text(encoding="utf-8") for p in lrb]
    texts += [json.loads(line)["article"] for line in drb.read_text().splitlines()]
    refs = [x.url for text in texts for x in parse_report(text).references
            if x.url and "(" in x.url]
    assert len(refs) == 11
    assert all(url.count("(") == url.count(")") for url in refs), refs
    assert "https://doi.org/10.1016/S0749-3797(01)00381-6" in refs
