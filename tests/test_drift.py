"""`amber bundle drift` against the loopback fakes: a page that changes between the
capture and the drift check, one that disappears, one that stays; searches through
Serper, pages through Jina Reader and the direct reader; the new captures kept as a
bundle that verifies and holds the same claims and report."""

from __future__ import annotations

import json
from pathlib import Path

from auditruns import make_bundle

from ambereval.snapshots import Bundle, capture_claims, verify_bundle
from ambereval.snapshots.capture.claims_input import ClaimInput
from ambereval.snapshots.capture.drift import drift_bundle, text_similarity

from conftest import example_claims, fast_options, run_amber
from fakeweb import FakeWeb, Page, html_page


def change_the_web(web: FakeWeb) -> None:
    web.pages["/pages/eiffel.html"] = html_page(
        "Eiffel Tower facts",
        "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
        "The tower is now 330 metres tall including its new antennas.")  # edited
    web.pages["/pages/louvre.html"] = Page(b"<h1>Not here</h1>", status=404)  # gone


def capture(tmp: Path, web: FakeWeb) -> Path:
    bundle = tmp / "bundle"
    claims = [ClaimInput(c["id"], c["text"], tuple(c.get("urls", ())),  # type: ignore[arg-type]
                         tuple(c.get("queries", ()))) for c in example_claims(web)]
    claims.append(ClaimInput("c4", "The Rhine flows into the North Sea.",
                             (web.url("/pages/rhine.html"),)))  # a page that stays
    capture_claims(bundle, claims, fast_options(web, reader="jina", top_k=2))
    return bundle


def test_drift_lists_changed_gone_and_unchanged_captures(tmp_path: Path) -> None:
    with FakeWeb() as web:
        bundle = capture(tmp_path, web)
        same = drift_bundle(bundle, fast_options(web))
        assert same["out"] is None
        assert {e["state"] for e in same["captures"]} <= {"unchanged", "failing"}
        change_the_web(web)
        result = drift_bundle(bundle, fast_options(web), out=tmp_path / "new")
        origin = web.origin_url

    def url(path: str) -> str:
        return origin + path

    assert result["format"] == "amber-drift/1"
    by_url = {(e["kind"], e["url"]): e for e in result["captures"]}
    eiffel = by_url[("page", url("/pages/eiffel.html"))]
    assert eiffel["state"] == "changed" and 0.3 < eiffel["similarity"] < 1
    assert eiffel["old"]["payload_sha256"] != eiffel["new"]["payload_sha256"]
    assert eiffel["reader"] == "jina"
    louvre = by_url[("page", url("/pages/louvre.html"))]
    assert louvre["state"] == "gone" and louvre["new"]["status"] == 404
    assert by_url[("page", url("/missing"))]["state"] == "failing"
    assert result["counts"]["unchanged"] >= 1
    assert any(e["kind"] == "search" for e in result["captures"])
    states = [e["state"] for e in result["captures"]]
    assert states.index("changed") < states.index("gone") < states.index("unchanged")
    # the new captures are a bundle of their own, with the same claims, that verifies
    new = tmp_path / "new"
    assert verify_bundle(new).ok
    with Bundle.open(new) as b, Bundle.open(bundle) as old:
        assert [r["id"] for r in b.index.rows("SELECT id FROM claims ORDER BY id")] == \
            [r["id"] for r in old.index.rows("SELECT id FROM claims ORDER BY id")]
        assert "new antennas" in (b.read_capture(eiffel["url"]).text or "")
        assert "new antennas" not in (old.read_capture(eiffel["url"]).text or "")


def test_drift_of_a_report_bundle_keeps_the_report(tmp_path: Path) -> None:
    with FakeWeb() as web:
        bundle, _ = make_bundle(tmp_path, web)
        web.pages["/pages/rhine.html"] = html_page("The river Rhine", "It is now a canal.")
        result = drift_bundle(bundle, fast_options(web), out=tmp_path / "new")
        rhine = web.url("/pages/rhine.html")
    changed = [e for e in result["captures"] if e["state"] == "changed"]
    assert [e["url"] for e in changed] == [rhine]
    assert changed[0]["reader"] == "direct"
    with Bundle.open(tmp_path / "new") as b, Bundle.open(bundle) as old:
        assert b.report_text() == old.report_text()


def test_text_similarity() -> None:
    assert text_similarity("a b c", "a b c") == 1.0
    assert text_similarity("a b c d", "a b x d") == 0.75
    assert text_similarity(None, "x") is None


def test_cli_drift_json_table_and_errors(tmp_path: Path) -> None:
    with FakeWeb() as web:
        bundle = capture(tmp_path, web)
        change_the_web(web)
        done = run_amber("bundle", "drift", str(bundle), "--json", env=web.env())
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["counts"]["changed"] >= 1 and doc["out"] is None
        done = run_amber("bundle", "drift", str(bundle), env=web.env())
        assert done.returncode == 0 and "changed" in done.stdout
        (tmp_path / "busy").mkdir()
        (tmp_path / "busy" / "x").write_text("x")
        bad = run_amber("bundle", "drift", str(bundle), "--out", str(tmp_path / "busy"),
                        env=web.env())
        assert bad.returncode == 2 and "not empty" in bad.stderr
        assert "Traceback" not in bad.stderr
        bad = run_amber("bundle", "drift", str(tmp_path / "nope"), env=web.env())
        assert bad.returncode == 1 and "no such bundle" in bad.stderr


def test_imported_corpus_pages_are_not_refetched(tmp_path: Path) -> None:
    from ambereval.engine.importers import import_dr3

    fixtures = Path(__file__).parent / "fixtures" / "dr3"
    import_dr3(fixtures, tmp_path / "dr3", reports=fixtures / "reports" / "32k" / "model-a")
    bundle = tmp_path / "dr3" / "bundles" / "001"
    with FakeWeb() as web:  # nothing may be asked of it
        result = drift_bundle(bundle, fast_options(web), out=tmp_path / "new")
        assert web.seen == []
    assert result["captures"] and {e["state"] for e in result["captures"]} == \
        {"not-refetchable"}
    with Bundle.open(tmp_path / "new") as b, Bundle.open(bundle) as old:
        assert b.report_text() == old.report_text()


def test_a_refetch_the_address_policy_refuses_is_refused_not_gone(tmp_path: Path) -> None:
    with FakeWeb() as web:
        bundle = tmp_path / "bundle"
        capture_claims(bundle, [ClaimInput("c1", "Tea.", (web.url("/pages/tea.html"),))],
                       fast_options(web, reader="direct"))  # a local site: allowed then
        strict = run_amber("bundle", "drift", str(bundle), "--json",
                           env={**web.env(), "AMBER_ALLOW_PRIVATE_ADDRESSES": "0"})
        assert strict.returncode == 0, strict.stderr
        doc = json.loads(strict.stdout)
        assert doc["counts"].get("gone", 0) == 0 and doc["counts"]["refused"] == 1
        [entry] = [e for e in doc["captures"] if e["state"] == "refused"]
        assert entry["reason"].startswith("refused to connect: loopback address")
        text = run_amber("bundle", "drift", str(bundle),
                         env={**web.env(), "AMBER_ALLOW_PRIVATE_ADDRESSES": "0"})
        assert "add --allow-private-addresses" in text.stdout
        allowed = run_amber("bundle", "drift", str(bundle), "--json", env=web.env())
        counts = json.loads(allowed.stdout)["counts"]
        assert {k: v for k, v in counts.items() if v} == {"unchanged": 1}
