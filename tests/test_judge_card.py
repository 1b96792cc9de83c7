"""Judge cards (issue 8): ``judge-bench --suite`` measures a judge on every labeled set and
stores a card by the judge's sha256; ``verify`` and ``evaluate`` record the card of the
judge they used and warn when its mean kappa is below 0.2 or unmeasured."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from fakejudge import FakeJudgeServer
from scripted_judge import ScriptedBackend, scripted_judge

from ambereval.engine.judge_card import (
    CARD_FORMAT,
    card_entry,
    card_markdown,
    judge_sha256,
    run_suite,
    suite_files,
    write_card,
)
from ambereval.errors import InputError
from ambereval.models import Judge, open_judge
from ambereval.models.canonical import content_key
from ambereval.models.judge import Completion

from conftest import run_amber
from fakeweb import FakeWeb

FIXTURES = Path(__file__).parent / "fixtures"


def binary_rows() -> list[dict[str, str]]:
    return [{"id": f"b{i}", "claim": f"Claim {i}.", "evidence": f"Evidence {i}.",
             "label": "supported" if i % 2 else "unsupported"} for i in range(6)]


def make_suite(root: Path, pages: bool = False) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "pairs.jsonl", root / "ternary.jsonl")
    (root / "binary.jsonl").write_text("".join(json.dumps(r) + "\n" for r in binary_rows()))
    (root / "binary.test.jsonl").write_text(json.dumps(binary_rows()[0]) + "\n")
    (root / "notes.txt").write_text("not a set")
    if pages:
        shutil.copy(FIXTURES / "page_pairs.jsonl", root / "pages.jsonl")
    return root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "amber-home"
    monkeypatch.setenv("AMBER_HOME", str(path))
    return path


def test_suite_files_and_splits(tmp_path: Path) -> None:
    root = make_suite(tmp_path / "sets")
    assert list(suite_files(root)) == ["binary", "ternary"]
    assert suite_files(root, "test") == {"binary": root / "binary.test.jsonl"}
    with pytest.raises(InputError, match="no dev labeled sets"):
        suite_files(root, "dev")
    with pytest.raises(InputError, match="unknown split"):
        suite_files(root, "train")
    with pytest.raises(InputError, match="no such suite directory"):
        suite_files(tmp_path / "missing")


def test_run_suite_card_and_markdown(tmp_path: Path, home: Path) -> None:
    judge = scripted_judge()  # always answers the last enum value: "unknown"
    card = run_suite(make_suite(tmp_path / "sets"), judge)
    assert card["format"] == CARD_FORMAT and card["split"] == "full"
    assert card["judge"]["name"] == "scripted-v1"
    assert card["judge"]["sha256"] == content_key({"served_model": "scripted-v1"})
    ternary, binary = card["sets"]["ternary"], card["sets"]["binary"]
    gold = [json.loads(line)["label"] for line in (FIXTURES / "pairs.jsonl").open()]
    assert ternary["n"] == len(gold)
    assert ternary["accuracy"] == pytest.approx(gold.count("unknown") / len(gold), abs=1e-6)
    assert ternary["kappa"] == 0.0  # one constant answer agrees only by chance
    assert binary["n"] == 6 and binary["accuracy"] == 0.5  # "unknown" counts as unsupported
    assert binary["confusion"]["unsupported"] == {"supported": 0, "unsupported": 3}
    assert card["mean_kappa"] == 0.0 and len(card["prompt_sha256"]) == 64
    md = card_markdown(card)
    assert f"| ternary | {len(gold)} |" in md
    assert "| set | n | accuracy | balanced accuracy | kappa |" in md
    paths = write_card(card, tmp_path / "out" / "card")
    stored = home / "cards" / f"{card['judge']['sha256']}.json"
    assert paths == [stored, tmp_path / "out" / "card.json"]
    assert json.loads(stored.read_text()) == card
    assert (tmp_path / "out" / "card.md").read_text() == md


class HalfBroken(ScriptedBackend):
    """Answers one pair with text that is not JSON (a small judge's bad day)."""

    def complete(self, messages, schema, max_tokens, seed):  # type: ignore[no-untyped-def]
        if "Claim 1." in messages[-1]["content"]:
            return Completion("not json", {"prompt_tokens": 1, "completion_tokens": 1})
        return super().complete(messages, schema, max_tokens, seed)


def test_an_unusable_answer_counts_as_unknown_not_a_crash(tmp_path: Path, home: Path) -> None:
    card = run_suite(make_suite(tmp_path / "sets"), Judge(HalfBroken()))
    binary = card["sets"]["binary"]
    assert binary["n"] == 6 and binary["unusable_answers"] == 1
    assert card["sets"]["ternary"]["unusable_answers"] == 0


def test_card_entry_warns_when_unmeasured_or_poor(tmp_path: Path, home: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    from ambereval.engine import judge_card

    judge_card._WARNED.clear()  # other tests in this process may have warned already
    judge = scripted_judge()
    caplog.set_level(logging.WARNING, "ambereval.judge_card")
    entry = card_entry(judge)
    assert entry["card"] is None and "has no judge card" in entry["warning"]
    assert "has no judge card" in caplog.text
    small = run_suite(make_suite(tmp_path / "sets"), judge)  # a handful of pairs
    write_card(small)
    caplog.clear()
    entry = card_entry(judge)
    assert entry["card"] == small and entry["mean_kappa"] == 0.0
    assert "labeled pairs (fewer than 50)" in entry["warning"] and "not a measurement" \
        in caplog.text
    assert "on labeled sets of 50 pairs or more in all" in entry["warning"]  # no --limit cut
    judge_card._WARNED.clear()
    write_card({**small, "limit": 2})  # cut short by --limit
    assert "without a small --limit" in card_entry(judge)["warning"]
    judge_card._WARNED.clear()
    write_card({**small, "limit": 1000})  # a --limit that cut nothing
    assert "on labeled sets of 50 pairs or more" in card_entry(judge)["warning"]
    card = {**small, "sets": {name: {**s, "n": 50} for name, s in small["sets"].items()}}
    write_card(card)  # as measured on enough pairs
    caplog.clear()
    entry = card_entry(judge)
    assert "mean kappa 0.000 < 0.2" in entry["warning"] and "< 0.2" in caplog.text
    good = {**card, "mean_kappa": 0.61}
    write_card(good)
    caplog.clear()
    entry = card_entry(judge)
    assert entry["warning"] is None and entry["mean_kappa"] == 0.61 and not caplog.text


def test_judge_bench_suite_cli_then_verify_and_evaluate_carry_the_card(
        tmp_path: Path, web: FakeWeb) -> None:
    from ambereval.engine.importers import import_dr3
    from ambereval.engine.snapshot_report import snapshot_report
    from ambereval.engine.tasks import dump_tasks

    from conftest import fast_options

    env = {"AMBER_HOME": str(tmp_path / "home")}
    suite = make_suite(tmp_path / "sets", pages=True)
    with FakeJudgeServer() as server:
        judge_args = ["--judge-url", server.url, "--judge-name", "fake"]
        done = run_amber("judge-bench", "--suite", str(suite), *judge_args, "--json",
                         "--out", str(tmp_path / "card.json"), env=env)
        assert done.returncode == 0, done.stderr
        card = json.loads(done.stdout)
        sha = judge_sha256(open_judge(None, server.url, "fake"))
        stored = tmp_path / "home" / "cards" / f"{sha}.json"
        assert done.stdout and card.pop("written") == [str(stored), str(tmp_path / "card.json")]
        assert json.loads(stored.read_text()) == card
        assert list(card["sets"]) == ["binary", "pages", "ternary"]
        assert card["sets"]["pages"]["retrieval"]["k"] == 3  # pages are retrieved over
        assert (tmp_path / "card.md").read_text().startswith("# Judge card: fake")
        human = run_amber("judge-bench", "--suite", str(suite), *judge_args, env=env)
        assert human.returncode == 0 and "mean kappa" in human.stdout

        report = tmp_path / "landmarks.md"
        report.write_text((FIXTURES / "report.md").read_text().replace("{ORIGIN}",
                                                                        web.origin_url))
        bundle = tmp_path / "bundle"
        snapshot_report(report, bundle, scripted_judge(),
                        fast_options(web, reader="direct", top_k=0), extractor="sentences")
        verify = run_amber("verify", str(bundle), "--out", str(tmp_path / "v"), *judge_args,
                           "--json", env=env)
        assert verify.returncode == 0, verify.stderr
        summary = json.loads((tmp_path / "v" / "summary.json").read_text())
        card = json.loads(stored.read_text())  # as the second run rewrote it (timings)
        assert summary["judge_card"]["card"] == card
        pairs = sum(s["n"] for s in card["sets"].values())
        assert pairs < 50  # a small suite: its card is no measurement, and says so
        assert f"amber: warning: judge fake's card rests on {pairs} labeled pairs" \
            in verify.stderr
        assert all(len(line) < 200 for line in verify.stderr.splitlines())  # one line

        tasks = import_dr3(FIXTURES / "dr3", tmp_path / "dr3",
                           reports=FIXTURES / "dr3" / "reports" / "32k" / "model-a")
        task_file = dump_tasks(tasks, tmp_path / "tasks.json")
        evaluate = run_amber("evaluate", str(tmp_path / "dr3" / "bundles" / "001"), "--task",
                             str(task_file), "--protocol", "dr3", *judge_args, "--out",
                             str(tmp_path / "run"), env={"AMBER_HOME": str(tmp_path / "none")})
        assert evaluate.returncode == 0, evaluate.stderr
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        [entry] = manifest["judge_cards"].values()
        assert entry["card"] is None and entry["sha256"] == sha
        assert "amber: warning: judge" in evaluate.stderr and "no judge card" in evaluate.stderr


def test_judge_bench_cli_usage_errors(tmp_path: Path) -> None:
    done = run_amber("judge-bench")
    assert done.returncode == 2 and "--suite DIR" in done.stderr
    done = run_amber("judge-bench", str(FIXTURES / "pairs.jsonl"), "--suite", str(tmp_path))
    assert done.returncode == 2
    done = run_amber("judge-bench", "--suite", str(tmp_path / "nope"),
                     env={"AMBER_HOME": str(tmp_path / "h")})
    assert done.returncode == 2 and "no such suite directory" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_judge_is_warned_about_once_whatever_it_is_called(
        home: Path, caplog: pytest.LogCaptureFixture) -> None:
    from ambereval.engine import judge_card

    judge_card._WARNED.clear()  # earlier tests warned about this judge in this process
    judge = scripted_judge()
    caplog.set_level(logging.WARNING, "ambereval.judge_card")
    first = card_entry(judge, "default")
    again = card_entry(judge, "model.gguf")  # DailyReport's verification, each report
    assert first["warning"] and again["warning"]  # both records keep it
    assert caplog.text.count("has no judge card") == 1
