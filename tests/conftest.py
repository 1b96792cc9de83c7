from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests explore a fixed set of examples: the suite is deterministic run to run.
settings.register_profile("amber", derandomize=True, database=None)
settings.load_profile("amber")

sys.path.insert(0, str(Path(__file__).parent))

from ambereval.snapshots import CaptureOptions, RetryPolicy  # noqa: E402

from fakeweb import FakeWeb  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def shared(*parts: str) -> Path:
    """A path under ../shared/data; the test is skipped when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not available: {path}")
    return path


@pytest.fixture
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake


def fast_options(web: FakeWeb, **kw: object) -> CaptureOptions:
    policy = kw.pop("policy", None) or RetryPolicy(attempts=3, backoff=0.01, timeout=1.0)
    kw.setdefault("allow_private_addresses", True)  # the fakes live on 127.0.0.1
    return CaptureOptions.from_env(web.env(), policy=policy, serper_rate=None,
                                   reader_rate=None, **kw)  # type: ignore[arg-type]


def write_claims(path: Path, claims: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in claims), encoding="utf-8")
    return path


def example_claims(web: FakeWeb) -> list[dict[str, object]]:
    return [
        {"id": "c1", "text": "The Eiffel Tower was completed in 1889.",
         "urls": [web.url("/pages/eiffel.html")], "queries": ["Eiffel Tower completed 1889"]},
        {"id": "c2", "text": "The Louvre opened as a public museum in 1793.",
         "urls": [web.url("/pages/louvre.html"), web.url("/missing")],
         "queries": ["Louvre public museum 1793"]},
        {"id": "c3", "text": "Python was first released in 1991.",
         "urls": [web.url("/pages/eiffel.html")]},
    ]


def one_page_bundle(out: Path, page: str) -> Path:
    """A finished bundle at ``out`` holding one page of the fake web, read directly."""
    from ambereval.snapshots import capture_urls

    with FakeWeb() as web:
        capture_urls(out, [web.url(page)], fast_options(web, reader="direct"))
    return out


def no_traceback(stderr: str) -> bool:
    """A user's mistake reads as one line, never as a traceback."""
    return "Traceback" not in stderr and stderr.count("\n") <= 1


def run_amber(*args: str, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess: exit code, stdout and stderr as a user sees them."""
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("SERPER_", "JINA_"))}
    full_env["AMBER_ALLOW_PRIVATE_ADDRESSES"] = "1"  # the fakes live on 127.0.0.1
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "ambereval.cli", *args],
        capture_output=True, text=True, env=full_env, cwd=cwd, timeout=300,
    )
