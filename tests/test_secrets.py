"""API keys and cookies never reach the bundle: every byte is scanned, compressed or not."""

from __future__ import annotations

import gzip
from pathlib import Path

from ambereval.snapshots import ClaimInput, capture_claims, pack_bundle

from conftest import example_claims, fast_options
from fakeweb import FakeWeb


def _all_bytes(root: Path) -> list[tuple[Path, bytes]]:
    """Every file raw, plus every gzip member of it decompressed."""
    out = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        out.append((path, data))
        if data[:2] == b"\x1f\x8b":
            out.append((path, gzip.decompress(data)))
    return out


def test_no_key_or_cookie_anywhere_in_the_bundle(tmp_path: Path) -> None:
    serper_key = "sk-serper-SECRET-4f9a1c"
    jina_key = "jina_SECRET_7d2e90b1"
    with FakeWeb(serper_key=serper_key, jina_key=jina_key) as web:
        claims = [ClaimInput(c["id"], c["text"], tuple(c.get("urls", ())),  # type: ignore[arg-type]
                             tuple(c.get("queries", ())))  # type: ignore[arg-type]
                  for c in example_claims(web)]
        out = tmp_path / "bundle"
        summary = capture_claims(out, claims, fast_options(web, reader="jina"))
        assert summary.captured > 0
        # the keys were really sent
        assert any(s.headers.get("X-API-KEY") == serper_key for s in web.seen)
        assert any(s.headers.get("Authorization") == f"Bearer {jina_key}" for s in web.seen)
    wacz = pack_bundle(out, tmp_path / "b.wacz")
    scanned = _all_bytes(out) + [(wacz, wacz.read_bytes())]
    assert len(scanned) > 5
    for path, data in scanned:
        for secret in (serper_key, jina_key, "fake-session-secret"):
            assert secret.encode() not in data, f"{secret} found in {path}"
    warcs = b"".join(d for p, d in scanned if p.name.endswith(".warc.gz") and b"WARC/1.1" in d)
    assert b"X-API-KEY: [redacted]" in warcs
    assert b"Authorization: [redacted]" in warcs
