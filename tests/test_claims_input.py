from __future__ import annotations

from pathlib import Path

import pytest

from ambereval.snapshots import InputError, load_claims, load_urls


def test_claims_optional_fields_and_extras(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "c1", "text": " A fact. ", "rubric": "q1"}\n\n'
                    '{"id": 7, "text": "B", "urls": ["https://e.org/x"], "queries": ["b", " "]}\n')
    a, b = load_claims(path)
    assert (a.id, a.text, a.urls, a.queries, a.extra) == ("c1", "A fact.", (), (), {"rubric": "q1"})
    assert (b.id, b.urls, b.queries) == ("7", ("https://e.org/x",), ("b",))


def test_non_utf8_claims(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"id": "c1", "text": "caf\xe9"}\n')
    with pytest.raises(InputError, match="not UTF-8"):
        load_claims(path)


def test_urls_file(tmp_path: Path) -> None:
    path = tmp_path / "u.txt"
    path.write_text("https://a.org/\n# x\nhttps://a.org/\nhttp://b.org/p?q=1\n")
    assert load_urls(path) == ["https://a.org/", "http://b.org/p?q=1"]
    path.write_text("https://a.org/\nnot a url\n")
    with pytest.raises(InputError, match=r"u.txt:2: URL 'not a url'"):
        load_urls(path)
