"""Hostile files (issue 11): the report parser, claims JSONL and task files answer any
input with a result or a clean domain error, never a traceback.

Case counts (derandomized, so the same cases every run): report parser 6,000 structured
+ 2,500 arbitrary-text + 1,000 raw-bytes cases; claims JSONL 1,000; task files 1,000 —
11,500 in all.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ambereval.engine.report import Report, load_report, parse_report
from ambereval.engine.tasks import load_tasks
from ambereval.errors import InputError
from ambereval.snapshots import load_claims

FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                  HealthCheck.data_too_large])

TOKENS = [*"ab Z1234-–,，;[]()#|*_`>\n\t.!?:^†【】。！？；\"'”)", "\r\n", "\n\n", " e.g. ",
          " Dr. ", " U.S. ", "https://x.org/p", "https://[bad", "http://x.org/a(b",
          "ftp://x.org", "[1]", "[12]", "[1, 3-5]", "[2-9999]", "【3】", "[^4]", "[^4]: note ",
          "[citation:2]", "[7†L1-L2]", "[(5)](https://f.org/5)", "[5](https://f.org/5)",
          "[x](https://y.org)", "[x](http://[::1)", "[Doc: a.pdf, Page 2]",
          "[long_context: \"T\", chunk 3]", "## Sources\n", "# References\n", "### 参考文献\n",
          "## Part\n", "| a | b |\n", "|---|---|\n", "| 1 | 2 | 3 |\n", "1. ", "2) ", "- ",
          "  ", "```\n", "~~~\n", "[1] Title: https://t.org/1\n", "3. T - https://t.org/3\n",
          "4) https://t.org/4 - T\n", "[9] no url\n", "\u200b", "\ufeff", "é", "中文句子"]


@st.composite
def markdownish(draw: st.DrawFn) -> str:
    return "".join(draw(st.lists(st.sampled_from(TOKENS), max_size=80)))


def check_report(text: str, report: Report) -> None:
    n = len(text)
    for c in report.citations:
        assert text[c.start : c.end] == c.raw
    starts = [(c.start, c.end) for c in report.citations]
    assert starts == sorted(starts)
    assert all(a[1] <= b[0] for a, b in zip(starts, starts[1:], strict=False))  # no overlap
    for item in [*report.blocks, *report.sentences, *report.references, *report.sections]:
        assert 0 <= item.start <= item.end <= n
    for s in report.sentences:
        piece = text[s.start : s.end]
        assert piece and piece.strip() == piece
        block = report.blocks[s.block]
        assert block.start <= s.start and s.end <= block.end
    json.dumps(report.as_dict())  # everything it reports is plain data


@settings(max_examples=6000, **FAST)
@given(markdownish())
def test_report_parser_on_markdownish_text(text: str) -> None:
    check_report(text, parse_report(text))


@settings(max_examples=2500, **FAST)
@given(st.text(max_size=400))
def test_report_parser_on_any_text(text: str) -> None:
    check_report(text, parse_report(text))


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


@settings(max_examples=1000, **FAST)
@given(st.one_of(st.binary(max_size=300), markdownish().map(lambda t: t.encode("utf-8"))))
def test_report_files_of_any_bytes(scratch: Path, data: bytes) -> None:
    path = scratch / "report.md"
    path.write_bytes(data)
    try:
        report = load_report(path)
    except InputError as err:
        assert "not UTF-8" in str(err)
        return
    check_report(report.text, report)


JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**20),
                      st.floats(allow_nan=True), st.text(max_size=12),
                      st.sampled_from(["https://a.org/x", "http://[::1", "ftp://a", " ",
                                       "https://a.org/ b", "http://", "c1"]))
JSON = st.recursive(JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=6)


@st.composite
def claim_line(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.text(max_size=40))  # not JSON, or JSON that is not an object
    if kind == 1:
        return json.dumps(draw(JSON))
    obj: dict[str, Any] = {}
    for key in ("id", "text", "urls", "queries", "extra"):
        if draw(st.booleans()):
            obj[key] = draw(st.one_of(
                JSON, st.lists(st.sampled_from(["https://a.org/x", "http://[::1",
                                                "https://a.org/ b", "mailto:x", "q"]),
                               max_size=3)))
    if draw(st.booleans()):
        obj["id"] = draw(st.one_of(st.text(max_size=6), st.integers(0, 5)))
        obj["text"] = draw(st.text(max_size=30))
    return json.dumps(obj, allow_nan=True)


@settings(max_examples=1000, **FAST)
@given(st.lists(claim_line(), max_size=6).map("\n".join))
def test_claims_jsonl_result_or_clean_error(scratch: Path, text: str) -> None:
    path = scratch / "claims.jsonl"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        claims = load_claims(path)
    except InputError as err:
        assert str(err).startswith(str(path))
        return
    assert claims and len({c.id for c in claims}) == len(claims)
    assert all(c.text == c.text.strip() and c.text for c in claims)


SUBTASK = st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=4), JSON),
     "instruction": st.one_of(st.text(max_size=20), JSON)},
    optional={"importance": st.sampled_from(["P0", "P1", "P2", "P2(a)", "P9", ""]),
              "group": st.one_of(st.text(max_size=4), JSON),
              "factuality": st.one_of(st.lists(st.text(max_size=10), max_size=2), JSON),
              "rationality": st.one_of(st.text(max_size=10), JSON)})
TASK = st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=6), JSON), "query": st.one_of(st.text(max_size=20), JSON)},
    optional={"evaluation_date": st.one_of(st.sampled_from(["2025-01-01", "2025-13-40", ""]),
                                           JSON),
              "report": st.one_of(st.text(max_size=8), JSON),
              "subtasks": st.one_of(st.lists(SUBTASK, max_size=3), JSON),
              "checklist": st.one_of(st.lists(st.fixed_dictionaries(
                  {"id": st.text(max_size=3), "text": st.text(max_size=8)}), max_size=2), JSON),
              "gold_insights": JSON, "required_documents": JSON, "baseline_report": JSON,
              "meta": JSON, "format": st.sampled_from(["amber-task/1", "amber-task/9"])})


@st.composite
def task_file(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.text(max_size=60))
    if kind == 1:
        return json.dumps(draw(JSON))
    if kind == 2:  # JSONL
        return "\n".join(json.dumps(t) for t in draw(st.lists(TASK, max_size=3)))
    doc: Any = {"format": draw(st.sampled_from(["amber-task/1", "other"])),
                "tasks": draw(st.one_of(st.lists(TASK, max_size=3), JSON))}
    return json.dumps(doc if kind < 5 else draw(TASK))


@settings(max_examples=1000, **FAST)
@given(task_file())
def test_task_files_result_or_clean_error(scratch: Path, text: str) -> None:
    path = scratch / "tasks.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        tasks = load_tasks(path)
    except InputError as err:
        assert str(path) in str(err)
        return
    assert tasks and len({t.id for t in tasks}) == len(tasks)
