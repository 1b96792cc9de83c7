"""The CLI as a user meets it: help, version, JSON output, one-line errors, exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ambereval import __version__

from conftest import example_claims, no_traceback, run_amber, write_claims
from fakeweb import FakeWeb


def test_version_and_help() -> None:
    assert run_amber("--version").stdout.strip() == f"amber {__version__}"
    for args in ([], ["--help"], ["snapshot", "--help"], ["bundle", "--help"],
                 ["snapshot", "claims", "--help"], ["bundle", "verify", "--help"]):
        done = run_amber(*args)
        assert "Usage" in done.stdout, args
    assert "Example:" in run_amber("snapshot", "claims", "--help").stdout


def test_snapshot_claims_json_summary(web: FakeWeb, tmp_path: Path) -> None:
    claims = write_claims(tmp_path / "claims.jsonl", example_claims(web))
    out = tmp_path / "b"
    done = run_amber("snapshot", "claims", str(claims), "--out", str(out), "--json",
                     "--backoff", "0.01", "--attempts", "2", "--rate", "0", env=web.env())
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    summary = json.loads(done.stdout)
    assert summary["claims"] == 3 and summary["failed"] == 1 and summary["captured"] == 4
    stats = json.loads(run_amber("bundle", "stats", str(out), "--json").stdout)
    assert stats["claims"] == 3 and stats["searches"] == 2 and stats["failed"] == 1
    shown = json.loads(run_amber("bundle", "show", str(out), web.url("/pages/eiffel.html"),
                                 "--json").stdout)
    assert shown["status"] == 200 and "1889" in shown["text"]
    assert shown["warc_file"].endswith(".warc.gz") and shown["offset"] > 0
    human = run_amber("bundle", "stats", str(out))
    assert human.returncode == 0 and "claims" in human.stdout


def test_snapshot_urls_direct(web: FakeWeb, tmp_path: Path) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_text(f"# a comment\n{web.url('/pages/tea.html')}\n\n{web.url('/pages/tea.html')}\n")
    done = run_amber("snapshot", "urls", str(urls), "--out", str(tmp_path / "b"),
                     "--reader", "direct", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    # the URL listed twice is one page, fetched and captured once
    assert (summary["pages"], summary["captured"], summary["failed"]) == (1, 1, 0)
    stats = json.loads(run_amber("bundle", "stats", str(tmp_path / "b"), "--json").stdout)
    assert (stats["pages"], stats["pages_ok"]) == (1, 1)
    human = run_amber("snapshot", "urls", str(urls), "--out", str(tmp_path / "c"),
                      "--reader", "direct")
    assert human.returncode == 0, human.stderr
    assert re.search(r"captured\D*1\b", human.stdout), human.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "c1", "text": "ok"}\n{"id": "c2", "text": \n', ":2: invalid JSON"),
        ('{"id": "c1"}\n', ":1: missing or empty 'text'"),
        ('[1, 2]\n', ":1: expected a JSON object"),
        ('{"id": "c1", "text": "t", "urls": ["ftp://x"]}\n', "must start with http"),
        ('{"id": "c1", "text": "t"}\n{"id": "c1", "text": "u"}\n', "duplicate claim id"),
        ("", "no claims found"),
    ],
)
def test_bad_claims_file_names_the_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "claims.jsonl"
    path.write_text(content)
    done = run_amber("snapshot", "claims", str(path), "--out", str(tmp_path / "b"))
    assert done.returncode == 2
    assert message in done.stderr and no_traceback(done.stderr)
    assert not (tmp_path / "b").exists()


def test_user_mistakes_are_one_line_errors(web: FakeWeb, tmp_path: Path) -> None:
    claims = write_claims(tmp_path / "c.jsonl", example_claims(web))
    cases = [
        (["snapshot", "claims", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "b")],
         {}, 2, "no such file"),
        (["snapshot", "claims", str(claims), "--out", str(tmp_path / "b")],
         {}, 2, "SERPER_API_KEY is not set"),
        (["snapshot", "claims", str(claims), "--out", str(tmp_path / "b2"), "--retries", "1"],
         {"SERPER_API_KEY": "k", "SERPER_BASE_URL": "http://127.0.0.1:9"}, 1,
         "search service at http://127.0.0.1:9 is unreachable"),
        (["snapshot", "claims", str(claims), "--out", str(tmp_path / "b3"), "--retries", "1"],
         {**web.env(), "SERPER_API_KEY": "wrong"}, 1, "rejected the API key"),
        (["snapshot", "urls", str(claims), "--out", str(tmp_path / "b4")], {}, 2,
         "must start with http"),
        (["bundle", "stats", str(tmp_path)], {}, 1, "not an Amber bundle"),
        (["bundle", "verify", str(tmp_path / "none")], {}, 1, "no such bundle directory"),
        (["snapshot", "urls", str(claims), "--out", str(tmp_path), "--reader", "magic"], {}, 2,
         "unknown reader"),
    ]
    for args, env, code, message in cases:
        done = run_amber(*args, env=env)
        assert done.returncode == code, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
        assert no_traceback(done.stderr), done.stderr


def test_unreachable_reader_keeps_what_was_captured(web: FakeWeb, tmp_path: Path) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_text(web.url("/pages/tea.html") + "\n")
    out = tmp_path / "b"
    ok = run_amber("snapshot", "urls", str(urls), "--out", str(out), "--reader", "direct")
    assert ok.returncode == 0
    urls.write_text(web.url("/pages/rhine.html") + "\n")
    done = run_amber("snapshot", "urls", str(urls), "--out", str(out), "--retries", "1",
                     env={"JINA_BASE_URL": "http://127.0.0.1:9"})
    assert done.returncode == 1 and "reader service" in done.stderr
    assert no_traceback(done.stderr)
    assert run_amber("bundle", "verify", str(out)).returncode == 0
    stats = json.loads(run_amber("bundle", "stats", str(out), "--json").stdout)
    assert stats["pages_ok"] == 1


def test_out_directory_that_is_not_a_bundle_is_refused(web: FakeWeb, tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("precious")
    urls = tmp_path / "urls.txt"
    urls.write_text(web.url("/pages/tea.html") + "\n")
    done = run_amber("snapshot", "urls", str(urls), "--out", str(tmp_path), "--reader", "direct")
    assert done.returncode == 1 and "not empty" in done.stderr
    assert (tmp_path / "mine.txt").read_text() == "precious"


def test_score_table_turns_when_it_does_not_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from ambereval.cli import output

    columns = [f"deepeval.dimension_{i}" for i in range(12)]
    systems = [{"system": "modelA", "reports": 3, **{c: 50.0 + i for i, c in
                                                      enumerate(columns)}},
               {"system": "modelB\x1b[2J", "reports": 3, **{c: None for c in columns}}]

    def shown(width: int, cols: list[str]) -> list[str]:
        buffer = io.StringIO()
        monkeypatch.setattr(output.stdout, "_console", Console(file=buffer, width=width))
        output.print_scores("Run x", cols, systems)
        return buffer.getvalue().splitlines()

    tall = shown(80, columns)  # 12 dimensions cannot be columns in 80 characters
    assert all(len(line) <= 80 for line in tall)
    assert any("dimension" in line and "modelA (3)" in line for line in tall)
    rows = [line for line in tall if "deepeval.dimension_" in line]
    assert len(rows) == 12 and "61" in rows[11] and "-" in rows[11]
    wide = shown(80, columns[:2])  # two fit: one row per system, every header whole
    assert any("system" in line and "deepeval.dimension_1" in line for line in wide)
    assert sum("modelA" in line for line in wide) == 1
    assert len(shown(400, columns)) < len(tall)
    assert not any("\x1b[2J" in line for line in tall + wide)  # a name cannot clear the screen
