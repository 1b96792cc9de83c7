"""The judge ledger: modes, misses that name the request, many writers at once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from ambereval.errors import InputError, LedgerMiss, ModelError
from ambereval.models.judge import Completion, Judge, check_schema
from ambereval.models.ledger import Ledger

SCHEMA = {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]}


class CountingBackend:
    """A deterministic stand-in at the model edge: answers len(last message)."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def identity(self) -> dict[str, object]:
        return {"model": {"name": "counting-v1"}}

    def complete(self, messages, schema, max_tokens, seed):  # type: ignore[no-untyped-def]
        self.calls += 1
        return Completion(f'{{"v": {len(messages[-1]["content"])}}}',
                          {"prompt_tokens": 3, "completion_tokens": 2})


def ask(judge: Judge, text: str) -> int:
    return judge.ask([{"role": "user", "content": text}], SCHEMA).obj["v"]


def test_modes(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    backend = CountingBackend()
    record = Judge(backend, Ledger(path, "record"))
    assert ask(record, "abc") == 3 and ask(record, "abc") == 3
    assert backend.calls == 1  # record calls afresh, once per judge (run)
    again = Judge(backend, Ledger(path, "record"))
    assert ask(again, "abc") == 3 and backend.calls == 2  # not from an earlier run
    reuse = Judge(backend, Ledger(path, "reuse"))
    assert ask(reuse, "abc") == 3 and backend.calls == 2
    assert ask(reuse, "abcd") == 4 and backend.calls == 3
    replay = Judge(backend, Ledger(path, "replay"))
    assert ask(replay, "abcd") == 4 and backend.calls == 3
    with pytest.raises(LedgerMiss, match=r"judge request [0-9a-f]{16} is not in the ledger"):
        ask(replay, "never asked")
    assert Ledger(path, "reuse").count() == 2


def test_key_covers_what_changes_the_answer(tmp_path: Path) -> None:
    judge = Judge(CountingBackend())
    base = judge.key([{"role": "user", "content": "x"}], SCHEMA, 10)
    assert base == judge.key([{"role": "user", "content": "x"}], SCHEMA, 10)
    assert base != judge.key([{"role": "user", "content": "y"}], SCHEMA, 10)
    assert base != judge.key([{"role": "user", "content": "x"}], SCHEMA, 11)
    assert base != Judge(CountingBackend(), seed=1).key([{"role": "user", "content": "x"}],
                                                        SCHEMA, 10)


def test_replay_needs_an_existing_ledger(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such ledger"):
        Ledger(tmp_path / "missing.sqlite", "replay")
    with pytest.raises(ValueError, match="unknown ledger mode"):
        Ledger(tmp_path / "x.sqlite", "sometimes")


def test_bad_schemas_are_refused() -> None:
    with pytest.raises(ModelError, match="must describe a JSON object"):
        check_schema({"type": "string"})
    with pytest.raises(ModelError, match="invalid JSON schema"):
        check_schema({"type": "object", "properties": {"a": {"type": "nonsense"}}})


def _writer(args: tuple[str, int]) -> int:
    path, worker = args
    judge = Judge(CountingBackend(), Ledger(path, "reuse"))
    for i in range(40):
        ask(judge, f"w{worker}-{i}" + "x" * i)
        ask(judge, f"shared-{i}")
    return worker


def test_concurrent_writers_do_not_corrupt(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite")
    Ledger(path, "reuse")
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        assert sorted(pool.map(_writer, [(path, w) for w in range(4)])) == [0, 1, 2, 3]
    ledger = Ledger(path, "replay")
    assert ledger.count() == 4 * 40 + 40
    conn = ledger._conn()
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    judge = Judge(CountingBackend(), ledger)
    assert ask(judge, "w3-39" + "x" * 39) == len("w3-39") + 39


class GarbleBackend(CountingBackend):
    def complete(self, messages, schema, max_tokens, seed):  # type: ignore[no-untyped-def]
        self.calls += 1
        return Completion('{"v": "not a number"}', {"prompt_tokens": 1, "completion_tokens": 1})


def test_unusable_answers_are_recorded_and_replayed_as_the_same_error(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    backend = GarbleBackend()
    with pytest.raises(ModelError, match="does not match the schema") as first:
        ask(Judge(backend, Ledger(path, "reuse")), "abc")
    with pytest.raises(ModelError) as replayed:
        ask(Judge(backend, Ledger(path, "replay")), "abc")
    assert str(replayed.value) == str(first.value) and backend.calls == 1


class TooLong(CountingBackend):
    def complete(self, messages, schema, max_tokens, seed):  # type: ignore[no-untyped-def]
        from ambereval.errors import PromptError

        self.calls += 1
        raise PromptError("prompt does not fit the context of 8 tokens")


def test_prompt_errors_are_replayed_but_not_network_errors(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    backend = TooLong()
    with pytest.raises(ModelError, match="does not fit"):
        ask(Judge(backend, Ledger(path, "reuse")), "abc")
    with pytest.raises(ModelError, match="does not fit"):
        ask(Judge(backend, Ledger(path, "replay")), "abc")
    assert backend.calls == 1
    # A real network failure (a served judge on a loopback port nobody listens on) is not
    # an answer: nothing is recorded, a replay misses, and a later run asks again.
    import socket

    from ambereval.errors import JudgeUnavailable
    from ambereval.models.openai_backend import OpenAIBackend

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    served = OpenAIBackend(f"http://127.0.0.1:{port}", "m", attempts=1, timeout=2)
    rows_before = Ledger(path, "reuse").count()
    with pytest.raises(JudgeUnavailable, match="unreachable"):
        ask(Judge(served, Ledger(path, "reuse")), "abc")
    assert Ledger(path, "reuse").count() == rows_before
    with pytest.raises(LedgerMiss):
        ask(Judge(served, Ledger(path, "replay")), "abc")


class CuttingBackend(CountingBackend):
    """Cuts every prompt longer than 5 characters, as a small context would."""

    def complete(self, messages, schema, max_tokens, seed):  # type: ignore[no-untyped-def]
        done = super().complete(messages, schema, max_tokens, seed)
        cut = len(messages[-1]["content"]) > 5
        return Completion(done.raw, done.usage, {"cut_chars": 1} if cut else None)


def test_prompts_cut_to_fit_are_counted_from_the_model_and_the_ledger(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    live = Judge(CuttingBackend(), Ledger(path, "record"))
    ask(live, "short")
    ask(live, "much longer text")
    assert live.stats()["truncated"] == 1
    replay = Judge(CuttingBackend(), Ledger(path, "replay"))
    ask(replay, "short")
    ask(replay, "much longer text")
    assert replay.stats()["truncated"] == 1 and replay.stats()["ledger_hits"] == 2
