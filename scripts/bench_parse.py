"""Growth of parsing and of the per-claim steps with report size (issue 11: linear time).

For N = 1,000 … 16,000 (doubling) it builds synthetic reports with N cited sentences and
N references in four layouts — short paragraphs under sections, one giant paragraph,
footnotes (``[^n]`` marks with ``[^n]:`` definitions), and one heading per sentence —
and prints, per step, the seconds and the ratio to the previous N: about 2 is linear,
about 4 quadratic.

Steps: ``parse_report`` (what ``amber report inspect`` runs), the sentence claim
extractor, and — on a bundle holding N claims that cite a few loopback pages — loading
the claims (``engine.evidence.load_claims``) and planning their verification
(``verify_claims`` with a constant judge and a hashing embedder, so that the figure is
Amber's own bookkeeping, not model time).

    .venv/bin/python scripts/bench_parse.py            # parse + extractor, up to 16,000
    .venv/bin/python scripts/bench_parse.py --bundle   # also bundle loading and planning
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from ambereval.engine.claims import sentence_claims  # noqa: E402
from ambereval.engine.report import parse_report  # noqa: E402

WORDS = ("river", "tower", "museum", "harbour", "railway", "census", "bridge", "festival",
         "market", "school", "airport", "canal", "cathedral", "library", "stadium")


MAX_NUMBER = 9999  # citation numbers have at most four digits


def sentence(i: int) -> str:
    w = WORDS[i % len(WORDS)]
    return f"The {w} of district {i} had {i * 7 % 9973} visitors in {1900 + i % 120}"


def number(i: int) -> int:
    return (i - 1) % MAX_NUMBER + 1


def synthetic(n: int, layout: str) -> str:
    """A report with ``n`` cited sentences and ``min(n, 9999)`` references (about 100
    bytes per citation: 10,000 citations make a 1 MB report)."""
    refs = range(1, min(n, MAX_NUMBER) + 1)
    if layout == "footnotes":
        body = " ".join(f"{sentence(i)}[^{number(i)}]." for i in range(1, n + 1))
        defs = "\n".join(f"[^{i}]: Source {i} https://example.org/s/{i}" for i in refs)
        return f"# Report\n\n{body}\n\n{defs}\n"
    cites = [f"{sentence(i)} [{number(i)}]." for i in range(1, n + 1)]
    if layout == "paragraph":
        body = " ".join(cites)
    elif layout == "headings":  # one heading per cited sentence, levels 2 to 4 in turn
        body = "\n\n".join(f"{'#' * (2 + i % 3)} Part {i + 1}\n\n{c}"
                             for i, c in enumerate(cites))
    else:  # sections of 50 sentences, paragraphs of 5
        parts = []
        for s in range(0, n, 50):
            parts.append(f"## Part {s // 50 + 1}")
            for p in range(s, min(s + 50, n), 5):
                parts.append(" ".join(cites[p : p + 5]))
        body = "\n\n".join(parts)
    listing = "\n".join(f"[{i}] Source {i}: https://example.org/s/{i}" for i in refs)
    return f"# Report\n\n{body}\n\n## References\n{listing}\n"


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Best of ``repeat`` runs, in CPU seconds of this process (the 2 cores are shared,
    so wall time would measure the neighbours; parsing is single-threaded)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def row(label: str, n: int, seconds: float, previous: float | None) -> None:
    ratio = f"x{seconds / previous:5.2f}" if previous else "      "
    print(f"{label:<34} N={n:>6,}: {seconds:8.3f} s CPU  {ratio}", flush=True)


def bench_parse(sizes: list[int]) -> None:
    for layout in ("sections", "paragraph", "footnotes", "headings"):
        prev_parse = prev_claims = None
        for n in sizes:
            text = synthetic(n, layout)
            t_parse, report = timed(lambda text=text: parse_report(text), repeat=2)
            assert len(report.citations) == n, (layout, n, len(report.citations))
            row(f"parse ({layout}, {len(text) / 1e6:.2f} MB)", n, t_parse, prev_parse)
            t_claims, claims = timed(lambda report=report: sentence_claims(report))
            assert len(claims) == n, (layout, n, len(claims))
            row(f"sentence claims ({layout})", n, t_claims, prev_claims)
            prev_parse, prev_claims = t_parse, t_claims
        print()
    prev = None  # hostile input: link targets that never close, no whitespace to stop at
    for n in sizes:
        text = "[1](https://" * n
        t_parse, _ = timed(lambda text=text: parse_report(text))
        row(f"parse (unclosed links, {len(text) / 1e6:.2f} MB)", n, t_parse, prev)
        prev = t_parse
    print()
    text = synthetic(10_000, "sections")
    seconds, report = timed(lambda: parse_report(text), repeat=2)
    print(f"1 MB check: {len(text.encode()):,} bytes, {len(report.citations):,} citations "
          f"parsed in {seconds:.3f} s CPU (target < 1 s)\n")


class HashEmbedder:
    """A constant-cost stand-in for the embedder: hashed bag of words, 64 dimensions."""

    dim = 64

    def identity(self) -> dict[str, str]:
        return {"name": "hash-64", "sha256": "0" * 64}

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row_i, text in enumerate(texts):
            for word in text.lower().split():
                out[row_i, hashlib.blake2b(word.encode(), digest_size=2).digest()[0] % 64] += 1
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        return out


class ConstantBackend:
    """Answers every verification question at once: the bench measures Amber, not a model."""

    name = "constant"

    def identity(self) -> dict[str, Any]:
        return {"model": {"name": "constant"}}

    def complete(self, messages, schema, max_tokens, seed):  # type: ignore[no-untyped-def]
        from ambereval.models.judge import Completion
        return Completion(json.dumps({"answer": "true", "passage": 1, "evidence": "x"}),
                          {"prompt_tokens": 1, "completion_tokens": 1})


def bench_bundle(sizes: list[int]) -> None:
    from ambereval.engine.evidence import load_claims
    from ambereval.engine.verification import verify_claims
    from ambereval.models import Judge
    from ambereval.snapshots import Bundle, CaptureOptions, ClaimInput, RetryPolicy, capture_claims

    from fakeweb import FakeWeb

    prev_load = prev_plan = None
    with FakeWeb() as web, tempfile.TemporaryDirectory() as tmp:
        pages = [web.url(p) for p in ("/pages/eiffel.html", "/pages/louvre.html",
                                      "/pages/rhine.html", "/pages/tea.html")]
        options = CaptureOptions.from_env(web.env(), reader="direct", serper_rate=None,
                                          reader_rate=None, allow_private_addresses=True,
                                          policy=RetryPolicy(attempts=1, timeout=5.0))
        for n in sizes:
            out = Path(tmp) / f"b{n}"
            claims = [ClaimInput(f"c{i}", sentence(i), (pages[i % len(pages)],), (),
                                 {"questions": [f"Is it true that {sentence(i)}?"]})
                      for i in range(1, n + 1)]
            t_cap, _ = timed(lambda out=out, claims=claims: capture_claims(out, claims, options))
            print(f"{'(capture of the bundle)':<34} N={n:>6,}: {t_cap:8.3f} s")

            def load(out: Path = out) -> list[Any]:
                with Bundle.open(out) as bundle:
                    return load_claims(bundle)

            t_load, loaded = timed(load, repeat=2)
            assert len(loaded) == n
            row("load_claims", n, t_load, prev_load)
            t_plan, result = timed(lambda out=out: verify_claims(
                out, Judge(ConstantBackend()), HashEmbedder()))  # type: ignore[arg-type]
            assert result["summary"]["claims"] == n
            row("verify (constant judge)", n, t_plan, prev_plan)
            prev_load, prev_plan = t_load, t_plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=16_000, help="largest N")
    parser.add_argument("--bundle", action="store_true",
                        help="also time bundle loading and verification planning")
    parser.add_argument("--bundle-max", type=int, default=10_000)
    parser.add_argument("--bundle-only", action="store_true", help="skip the parse timings")
    args = parser.parse_args()
    sizes = [n for n in (1_000, 2_000, 4_000, 8_000, 16_000, 32_000) if n <= args.max]
    if not args.bundle_only:
        bench_parse(sizes)
    if args.bundle or args.bundle_only:
        bench_bundle([n for n in (1_250, 2_500, 5_000, 10_000, 20_000) if n <= args.bundle_max])


if __name__ == "__main__":
    main()
