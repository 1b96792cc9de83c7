"""``bundle verify``: clean bundles pass; every kind of damage is named precisely."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from ambereval.snapshots import Bundle, BundleError, capture_urls, verify_bundle

from conftest import fast_options, run_amber
from fakeweb import FakeWeb


@pytest.fixture(scope="module")
def clean_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("verify") / "bundle"
    with FakeWeb() as web:
        urls = [web.url(p) for p in ("/pages/eiffel.html", "/pages/rhine.html",
                                     "/pages/tea.html", "/missing")]
        capture_urls(out, urls, fast_options(web, reader="direct"))
    return out


def copy(bundle: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(bundle, dst)
    return dst


def warc_of(root: Path) -> Path:
    return next((root / "archive").glob("*.warc.gz"))


def test_clean_bundle_verifies(clean_bundle: Path) -> None:
    report = verify_bundle(clean_bundle)
    assert report.ok, report.mismatch
    assert report.records > 10 and report.files == 5


def test_flipped_byte_names_file_offset_and_record(clean_bundle: Path, tmp_path: Path) -> None:
    root = copy(clean_bundle, tmp_path)
    with Bundle.open(root) as b:
        rec = b.index.one("SELECT * FROM records WHERE type = 'response' ORDER BY offset LIMIT 1")
    warc = warc_of(root)
    data = bytearray(warc.read_bytes())
    data[rec["offset"] + rec["length"] // 2] ^= 0xFF
    warc.write_bytes(bytes(data))
    report = verify_bundle(root)
    assert not report.ok
    # the manifest catches it first: the file's sha256 changed
    assert report.mismatch.file == f"archive/{warc.name}"
    # with the manifest rebuilt, the record itself is named
    (root / "datapackage.json").unlink()
    with Bundle.create(root) as b:
        from ambereval.snapshots.bundle import manifest
        manifest.write_datapackage(b.root, "t", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")
    report = verify_bundle(root)
    assert report.mismatch.offset == rec["offset"]
    assert report.mismatch.record_id == rec["record_id"]


def _rebuild_manifest(root: Path) -> None:
    from ambereval.snapshots.bundle import manifest
    manifest.write_datapackage(root, "t", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")


def test_truncated_warc_is_named(clean_bundle: Path, tmp_path: Path) -> None:
    root = copy(clean_bundle, tmp_path)
    warc = warc_of(root)
    size = warc.stat().st_size
    with open(warc, "r+b") as fh:
        fh.truncate(size - 40)
    _rebuild_manifest(root)
    report = verify_bundle(root)
    assert report.mismatch.file == f"archive/{warc.name}"
    assert "past end of file" in report.mismatch.problem
    assert report.mismatch.record_id is not None and report.mismatch.offset is not None


def test_index_pointing_past_end_of_file(clean_bundle: Path, tmp_path: Path) -> None:
    root = copy(clean_bundle, tmp_path)
    db = sqlite3.connect(root / "evidence" / "amber.sqlite")
    rid = db.execute("SELECT record_id FROM records ORDER BY offset DESC LIMIT 1").fetchone()[0]
    db.execute("UPDATE records SET offset = offset + 100000 WHERE record_id = ?", [rid])
    db.commit()
    db.close()
    _rebuild_manifest(root)
    report = verify_bundle(root)
    assert report.mismatch.record_id == rid
    assert "past end of file" in report.mismatch.problem
    # and a writer refuses to append to it
    with pytest.raises(BundleError, match="index points past end of file"):
        Bundle.create(root)


def test_unlisted_and_missing_files(clean_bundle: Path, tmp_path: Path) -> None:
    root = copy(clean_bundle, tmp_path)
    (root / "pages" / "extra.txt").write_text("x")
    assert verify_bundle(root).mismatch.problem == "not listed in datapackage.json"
    (root / "pages" / "extra.txt").unlink()
    (root / "pages" / "pages.jsonl").unlink()
    assert verify_bundle(root).mismatch.problem == "listed in datapackage.json but missing"


def test_cli_exit_code_three_and_one_line(clean_bundle: Path, tmp_path: Path) -> None:
    ok = run_amber("bundle", "verify", str(clean_bundle))
    assert ok.returncode == 0 and ok.stdout.startswith("ok:")
    root = copy(clean_bundle, tmp_path)
    warc = warc_of(root)
    with open(warc, "r+b") as fh:
        fh.seek(10)
        fh.write(b"garbage!")
    bad = run_amber("bundle", "verify", str(root))
    assert bad.returncode == 3
    assert bad.stderr.count("\n") == 1 and f"archive/{warc.name}" in bad.stderr
    as_json = run_amber("bundle", "verify", str(root), "--json")
    assert as_json.returncode == 3 and '"ok": false' in as_json.stdout


def test_corrupt_index_is_a_mismatch_not_a_traceback(clean_bundle: Path, tmp_path: Path) -> None:
    root = copy(clean_bundle, tmp_path)
    db = root / "evidence" / "amber.sqlite"
    data = bytearray(db.read_bytes())
    data[0:200] = b"\0" * 200
    db.write_bytes(bytes(data))
    report = verify_bundle(root)
    assert report.mismatch.file == "evidence/amber.sqlite"
    assert "sha256 differs" in report.mismatch.problem
    done = run_amber("bundle", "stats", str(root))
    assert done.returncode == 1 and "evidence index unreadable" in done.stderr
    assert "Traceback" not in done.stderr


def eiffel_claim_bundle(root: Path, claim_id: str = "c1") -> Path:
    """A bundle of one claim citing the Eiffel page, captured with the direct reader."""
    from ambereval.snapshots import capture_claims
    from ambereval.snapshots.capture.claims_input import ClaimInput

    with FakeWeb() as web:
        capture_claims(root, [ClaimInput(claim_id, "The Eiffel Tower was completed in 1889.",
                                         (web.url("/pages/eiffel.html"),))],
                       fast_options(web, reader="direct"))
    return root


def test_an_edited_claim_is_caught_even_after_a_forced_reseal(tmp_path: Path) -> None:
    from ambereval.snapshots import finish_bundle

    root = eiffel_claim_bundle(tmp_path / "b")
    assert verify_bundle(root).ok
    db = sqlite3.connect(root / "evidence" / "amber.sqlite")
    db.execute("UPDATE claims SET text = 'The Eiffel Tower was completed in 1999.'")
    db.commit()
    db.close()
    finish_bundle(root, force=True)  # the manifest now describes the edited index
    report = verify_bundle(root)
    assert not report.ok
    assert "claim c1: the index differs from its WARC record" in str(report.mismatch)


def test_a_report_whose_text_does_not_match_its_id_is_caught(tmp_path: Path) -> None:
    from ambereval.snapshots import finish_bundle

    root = tmp_path / "b"
    with Bundle.create(root) as b:
        b.store_report("r.md", "# A report\n")
        b.finalize()
    assert verify_bundle(root).ok
    db = sqlite3.connect(root / "evidence" / "amber.sqlite")
    db.execute("UPDATE reports SET id = ?", ["0" * 64])
    db.commit()
    db.close()
    finish_bundle(root, force=True)
    report = verify_bundle(root)
    assert not report.ok and "its text differs from its id" in str(report.mismatch)


def _edit_then_reseal(root: Path, *statements: tuple[str, list[object]]) -> None:
    from ambereval.snapshots import finish_bundle

    db = sqlite3.connect(root / "evidence" / "amber.sqlite")
    for sql, params in statements:
        assert db.execute(sql, params).rowcount >= 1, sql
    db.commit()
    db.close()
    finish_bundle(root, force=True)  # the manifest now describes the edited index


def _two_pages(root: Path) -> tuple[dict[str, object], dict[str, object]]:
    db = sqlite3.connect(root / "evidence" / "amber.sqlite")
    db.row_factory = sqlite3.Row
    rows = db.execute("SELECT c.*, t.record_id AS text_record, t.sha256 AS text_sha256, "
                      "t.chars AS text_chars FROM captures c JOIN texts t "
                      "ON t.capture_id = c.id ORDER BY c.url LIMIT 2").fetchall()
    db.close()
    return dict(rows[0]), dict(rows[1])


@pytest.mark.parametrize("edit", ["url", "payload", "no payload", "text", "swapped text",
                                  "request"])
def test_index_edits_to_captures_and_texts_are_caught_after_a_forced_reseal(
        clean_bundle: Path, tmp_path: Path, edit: str) -> None:
    """Evaluation reads a page's text through the captures and texts rows: an index edited
    to give one URL another page's text (and re-sealed) must not verify."""
    root = copy(clean_bundle, tmp_path)
    a, b = _two_pages(root)
    statements = {
        "url": [("UPDATE captures SET url = ?, fetch_url = ?, final_url = ? WHERE id = ?",
                 [b["url"], b["fetch_url"], b["final_url"], a["id"]])],
        "payload": [("UPDATE captures SET payload_sha256 = ? WHERE id = ?",
                     [b["payload_sha256"], a["id"]])],
        "no payload": [("UPDATE captures SET payload_sha256 = NULL WHERE id = ?", [a["id"]]),
                       ("UPDATE texts SET record_id = ?, sha256 = ?, chars = ? "
                        "WHERE capture_id = ?",
                        [b["text_record"], b["text_sha256"], b["text_chars"], a["id"]])],
        "text": [("UPDATE texts SET chars = chars + 1 WHERE capture_id = ?", [a["id"]])],
        "swapped text": [("UPDATE texts SET record_id = ?, sha256 = ?, chars = ? "
                          "WHERE capture_id = ?",
                          [b["text_record"], b["text_sha256"], b["text_chars"], a["id"]])],
        "request": [("UPDATE captures SET request_record = ? WHERE id = ?",
                     [b["request_record"], a["id"]])],
    }[edit]
    _edit_then_reseal(root, *statements)
    report = verify_bundle(root)
    assert not report.ok
    expected = {"url": f"its response was fetched from {a['fetch_url']}, not {b['fetch_url']}",
                "payload": "the index's payload sha256 differs from its WARC response",
                "no payload": "the index's payload sha256 differs from its WARC response",
                "text": "the index's text differs from its WARC conversion record",
                "swapped text": "its text was extracted from another page",
                "request": "its request record belongs to another response"}[edit]
    assert f"capture {a['id']}: {expected}" in str(report.mismatch)
    done = run_amber("bundle", "verify", str(root))
    assert done.returncode == 3 and "Traceback" not in done.stderr


def test_an_index_whose_record_headers_were_edited_is_refused_a_reseal(
        clean_bundle: Path, tmp_path: Path) -> None:
    from ambereval.errors import VerificationError
    from ambereval.snapshots import finish_bundle
    from ambereval.snapshots.bundle.verify import records_mismatch

    root = copy(clean_bundle, tmp_path)
    a, b = _two_pages(root)
    db = sqlite3.connect(root / "evidence" / "amber.sqlite")
    db.execute("UPDATE records SET target_uri = ? WHERE record_id = ?",
               [b["url"], a["response_record"]])
    db.commit()
    db.close()
    with Bundle.open(root) as bundle:
        problem = records_mismatch(bundle)
    assert problem is not None and problem.record_id == a["response_record"]
    assert f"index says target_uri {b['url']!r}, the record's warc-target-uri is " \
           f"{a['url']!r}" in problem.problem
    with pytest.raises(VerificationError, match="not re-sealed"):
        finish_bundle(root, force=True)
    assert not verify_bundle(root).ok


def test_an_imported_page_handed_another_pages_text_is_caught(tmp_path: Path) -> None:
    from rundirs import dr3_bundles

    [root], _ = dr3_bundles(tmp_path, systems=1)
    assert verify_bundle(root).ok, verify_bundle(root).mismatch
    db = sqlite3.connect(root / "evidence" / "amber.sqlite")
    (a, _), (_, b_record) = db.execute(
        "SELECT capture_id, record_id FROM texts ORDER BY capture_id LIMIT 2").fetchall()
    db.close()
    _edit_then_reseal(root, ("UPDATE texts SET (record_id, sha256, chars) = (SELECT "
                             "record_id, sha256, chars FROM texts WHERE record_id = ?) "
                             "WHERE capture_id = ?", [b_record, a]))
    report = verify_bundle(root)
    assert f"capture {a}: its text was extracted from another page" in str(report.mismatch)


URL_VARIANTS = [
    "http://127.0.0.1:8000/pages/eiffel.html?token=abc", "HTTP://127.0.0.1/louvre.html",
    "http://example.org/a?", "https://www.Reuters.com/World/", "https://bücher.de/straße",
    "https://example.org:443/a", "http://example.org:80/a", "https://example.org/a#",
    "https://example.org/a?x=1&", "https://example.org/a?x=1&&y=2",
    "https://example.org/b/./c/../d", "https://user:pw@example.org/private",
    "https://example.org/s?sig=1&signature=2&auth=3&key=4", "https://example.org",
    "https://example.org/%7Euser/caf%C3%A9", "https://example.org/café dé",
    "https://[2001:db8::1]:8443/x", "https://example.org./trailing-dot",
]


@pytest.mark.parametrize("url", URL_VARIANTS)
def test_a_capture_matches_the_url_its_client_archived(url: str) -> None:
    """bundle verify binds a capture to its response by URL; the response holds the URL
    as the HTTP client sent it (normalised, secrets removed): a good bundle must pass."""
    import httpx

    from ambereval.snapshots.bundle.verify import _same_url
    from ambereval.snapshots.capture.transport import archived_url

    sent = archived_url(str(httpx.URL(url)))
    assert _same_url(sent, url), (sent, url)
    reader = "https://r.jina.ai/" + url  # the reader's fetch URL embeds the page's
    assert _same_url(archived_url(str(httpx.URL(reader))), reader)
    assert not _same_url(sent, "https://example.org/another-page")


def test_a_claim_id_with_spaces_verifies(tmp_path: Path) -> None:
    """Header values are read back trimmed; the index keeps them as written."""
    report = verify_bundle(eiffel_claim_bundle(tmp_path / "b", "c1 "))
    assert report.ok, report.mismatch
