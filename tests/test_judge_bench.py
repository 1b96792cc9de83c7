"""``amber judge-bench``: metrics by hand, bad input, and real runs with the default judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ambereval.engine.judge_bench import BINARY, TERNARY, load_pairs, metrics
from ambereval.errors import InputError

from conftest import run_amber, shared

FIXTURE = Path(__file__).parent / "fixtures" / "pairs.jsonl"


def test_metrics_by_hand() -> None:
    gold = ["supported", "supported", "supported", "contradicted", "unknown", "unknown"]
    pred = ["supported", "supported", "unknown", "contradicted", "supported", "unknown"]
    m = metrics(gold, pred, TERNARY)
    assert m["accuracy"] == pytest.approx(4 / 6, abs=1e-6)
    # recalls: supported 2/3, contradicted 1/1, unknown 1/2
    assert m["balanced_accuracy"] == pytest.approx((2 / 3 + 1 + 0.5) / 3, abs=1e-6)
    # expected agreement: (3*3 + 1*1 + 2*2) / 36 = 14/36
    assert m["kappa"] == pytest.approx((4 / 6 - 14 / 36) / (1 - 14 / 36), abs=1e-6)
    assert m["confusion"]["supported"] == {"contradicted": 0, "supported": 2, "unknown": 1}
    perfect = metrics(["supported", "unsupported"], ["supported", "unsupported"], BINARY)
    assert perfect["kappa"] == 1.0 and perfect["balanced_accuracy"] == 1.0
    constant = metrics(["supported"] * 3, ["supported"] * 3, BINARY)
    assert constant["kappa"] == 1.0 and constant["accuracy"] == 1.0


@pytest.mark.parametrize(("content", "message"), [
    ('{"id": 1, "claim": "c", "evidence": "e", "label": "maybe"}\n', "unknown label 'maybe'"),
    ('{"id": 1, "claim": "c", "label": "supported"}\n', ":1: missing evidence"),
    ('{"id": 1, "claim": "c", "evidence": "e", "label": "supported"}\nnope\n', ":2: invalid JSON"),
    ('{"id": 1, "claim": "c", "evidence": "e", "label": "unsupported"}\n'
     '{"id": 2, "claim": "c", "evidence": "e", "label": "contradicted"}\n', "mixes"),
])
def test_bad_pairs(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        load_pairs(path)
    done = run_amber("judge-bench", str(path))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_bad_judge_options(tmp_path: Path) -> None:
    done = run_amber("judge-bench", str(FIXTURE), "--judge-model", str(tmp_path / "x.gguf"))
    assert done.returncode == 1 and "model file not found" in done.stderr
    done = run_amber("judge-bench", str(FIXTURE), "--ledger-mode", "replay")
    assert done.returncode == 2 and "needs --ledger" in done.stderr
    done = run_amber("judge-bench", str(FIXTURE), "--judge-url", "http://127.0.0.1:9")
    assert done.returncode == 2 and "--judge-name" in done.stderr
    done = run_amber("judge-bench", str(FIXTURE), "--judge-url", "http://127.0.0.1:9",
                     "--judge-name", "m")
    assert done.returncode == 1 and "failed after" in done.stderr


@pytest.mark.slow
def test_two_runs_and_a_replay_print_identical_output(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    args = ["judge-bench", str(FIXTURE), "--json", "--judge-ctx", "1024", "--threads", "2"]
    first = run_amber(*args, "--ledger", str(ledger), "--ledger-mode", "record")
    assert first.returncode == 0, first.stderr
    second = run_amber(*args)
    replay = run_amber(*args, "--ledger", str(ledger), "--ledger-mode", "replay")
    assert first.stdout == second.stdout == replay.stdout
    result = json.loads(first.stdout)
    assert result["n"] == 8 and result["labels"] == list(TERNARY)
    assert {"accuracy", "balanced_accuracy", "kappa", "confusion"} <= set(result)
    assert sum(sum(row.values()) for row in result["confusion"].values()) == 8
    human = run_amber("judge-bench", str(FIXTURE), "--ledger", str(ledger),
                      "--ledger-mode", "replay", "--judge-ctx", "1024")
    assert human.returncode == 0 and "kappa" in human.stdout and "confusion" in human.stdout


@pytest.mark.slow
def test_real_labeled_data(tmp_path: Path) -> None:
    source = shared("entailment", "factcheck_gpt", "subtask3_claim_evidence_stance.shared.jsonl")
    mapping = {"completely-support": "supported", "refute": "contradicted",
               "irrelevant": "unknown"}
    rows = []
    for i, line in enumerate(source.read_text().splitlines()):
        row = json.loads(line)
        if row["stance"] in mapping and len(rows) < 6:
            rows.append({"id": f"fcg-{i}", "claim": row["claim"],
                         "evidence": row["evidence"], "label": mapping[row["stance"]]})
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    preds = tmp_path / "preds.jsonl"
    done = run_amber("judge-bench", str(data), "--json", "--judge-ctx", "2048",
                     "--predictions", str(preds))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["n"] == 6
    lines = [json.loads(x) for x in preds.read_text().splitlines()]
    assert [x["id"] for x in lines] == [r["id"] for r in rows]
    assert all(len(x["ledger_key"]) == 64 for x in lines)


@pytest.mark.slow
def test_retrieval_step_measures_recall_and_end_to_end(tmp_path: Path) -> None:
    data = Path(__file__).parent / "fixtures" / "page_pairs.jsonl"
    done = run_amber("judge-bench", str(data), "--retrieve", "1", "--chunk-tokens", "12",
                     "--json", "--judge-ctx", "1024")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["retrieval"]["k"] == 1 and result["retrieval"]["items_with_gold"] == 3
    # measured: MiniLM puts 2 of the 3 gold sentences first ("ends in the Black Sea" pulls
    # "rises in the Swiss Alps" above "flows into the North Sea")
    assert result["retrieval"]["recall_at_k"] == pytest.approx(2 / 3, abs=1e-5)
    assert result["n"] == 3 and result["labels"] == list(BINARY)
    wide = json.loads(run_amber("judge-bench", str(data), "--retrieve", "4", "--chunk-tokens",
                                "12", "--json", "--judge-ctx", "1024").stdout)
    assert wide["retrieval"]["recall_at_k"] == 1.0  # every chunk retrieved
    no_k = run_amber("judge-bench", str(data))
    assert no_k.returncode == 2 and "need --retrieve" in no_k.stderr
