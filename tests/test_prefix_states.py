"""Saved prefix states: a page read for one question is restored, not re-read, for a later
question about it after other calls, and every answer is bit-identical to a judge that
reads everything afresh (the real default judge, both decision paths)."""

from __future__ import annotations

import pytest

from ambereval.models.decision import boolean_logprob_schema
from ambereval.models.llamacpp_backend import LlamaCppBackend
from ambereval.models.prefix_states import PrefixStates, common_prefix, limit_from_env
from ambereval.models.registry import default_judge_path

GENERATED = {"type": "object", "properties": {"supported": {"type": "boolean"}},
             "required": ["supported"], "additionalProperties": False}
PAGE = "\n\n".join(
    f"Paragraph {i}: the river port of Hallen shipped {1000 + 37 * i} tonnes of grain in "
    f"{1900 + i}, carried by {3 + i % 5} barges under the harbour master of that year."
    for i in range(30))


def ask(statement: str, page: str = PAGE) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Decide whether the passages support the "
             "statement. Use only the passages."},
            {"role": "user", "content": f"Passages:\n{page}\n\nStatement: {statement}"}]


def test_small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix([], [1]) == 0
    monkeypatch.setenv("AMBER_PREFIX_CACHE_MB", "0")
    assert limit_from_env() == 0 and not PrefixStates().enabled
    monkeypatch.setenv("AMBER_PREFIX_CACHE_MB", "12")
    assert limit_from_env() == 12 << 20
    monkeypatch.setenv("AMBER_PREFIX_CACHE_MB", "lots")
    assert limit_from_env() == 4096 << 20


@pytest.mark.slow
def test_a_page_is_restored_not_reread_and_answers_do_not_change() -> None:
    cached = LlamaCppBackend(default_judge_path(), n_ctx=2048, n_threads=2)
    fresh = LlamaCppBackend(default_judge_path(), n_ctx=2048, n_threads=2)
    fresh.prefix_states = PrefixStates(max_bytes=0)
    scored = boolean_logprob_schema("supported")
    cached.complete(ask("Hallen shipped 1037 tonnes in 1901."), scored, 24, 0)
    cached.complete(ask("Hallen shipped grain by barge."), scored, 24, 0)
    states = cached.prefix_states
    assert states.saved == 1 and states.restored == 0  # two questions shared the page
    [(length, path, _)] = states._states.values()
    assert path.is_file() and length >= 256
    other = "\n\n".join(f"Note {i}: the orchard near Vell grew {i} kinds of apple."
                        for i in range(60))
    for statement, schema in (("Hallen had 7 barges in 1904.", scored),
                              ("The harbour master kept a diary.", GENERATED)):
        cached.complete(ask("Vell grew apples.", other), scored, 24, 0)  # the page leaves
        before = states.restored
        got = cached.complete(ask(statement), schema, 24, 0)
        assert states.restored == before + 1 and states.tokens_restored >= length
        want = fresh.complete(ask(statement), schema, 24, 0)
        assert got.raw == want.raw  # bit-identical: logprobs to 6 decimals, same JSON
    directory = path.parent
    states.close()
    assert not directory.exists()
