"""``amber evaluate --plan``: the judge work a run will ask, counted before any call, equals
what the run then asks and records (run.json's judge_work, stats.json's spent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from replay_fixtures import landmarks_bundle
from scripted_judge import ScriptedBackend

from ambereval.engine.judging_rules import BEFORE_RULE
from ambereval.engine.runs.evaluate import evaluate_bundles
from ambereval.engine.runs.plan import placeholder, plan_bundles
from ambereval.models import Embedder, Judge
from ambereval.models.ledger import Ledger

from conftest import run_amber

REPORT = ("# Landmarks\n\nThe Eiffel Tower in Paris was completed in 1889 [1]. The city's "
          "bakeries are described at length [1]. The Louvre opened as a public museum in "
          "1793 [2].\n\n## Sources\n[1] Eiffel: {ORIGIN}/pages/eiffel.html\n"
          "[2] Louvre: {ORIGIN}/pages/louvre.html\n")
PROTOCOLS = ["dailyreport", "dr3", "deepeval"]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def _judge(run: Path, mode: str = "reuse") -> tuple[Judge, ScriptedBackend]:
    backend = ScriptedBackend({"Claim: The Eiffel": {"question": 1, "answer": "true"}})
    return Judge(backend, Ledger(run / "ledger.sqlite", mode)), backend


@pytest.mark.parametrize("mode", ["reuse", "record"])
def test_plan_counts_the_calls_the_run_makes(tmp_path: Path, embedder: Embedder,
                                             mode: str) -> None:
    bundle, tasks = landmarks_bundle(tmp_path, REPORT)
    run = tmp_path / "run"
    judge, backend = _judge(run, mode)
    plan = plan_bundles([bundle], tasks, PROTOCOLS, [("s", judge)], embedder)
    assert backend.calls == []  # the plan calls no judge
    assert plan["exact"] and plan["tokens"] == "estimate"  # a served-style test judge
    [report] = plan["reports"]
    assert set(report["protocols"]) == set(PROTOCOLS)
    # DeepEval's E3 checks are DR3's FA questions: the run asks them once
    assert report["protocols"]["deepeval"]["ledger"] >= 3
    result = evaluate_bundles([bundle], tasks, PROTOCOLS, [("s", judge)], run, embedder)
    assert plan["total"]["calls"] == len(backend.calls) > 0
    spent = result["stats"]["spent"]
    assert spent["total"]["calls"] == len(backend.calls)
    for protocol, row in report["protocols"].items():
        assert spent["protocols"][protocol]["calls"] == row["calls"], protocol
        assert spent["protocols"][protocol]["ledger"] == row["ledger"], protocol
    table = json.loads((run / "run.json").read_text())
    work = table["judge_work"]
    assert work["total"]["requests"] == plan["total"]["requests"]
    # distinct per protocol: the support questions count for DR3 and for DeepEval
    assert work["total"]["distinct"] > plan["total"]["calls"]
    assert work["dr3"]["distinct"] == report["protocols"]["dr3"]["calls"]
    stats = json.loads((run / "stats.json").read_text())
    assert stats["spent"]["total"]["calls"] == len(backend.calls)

    # planned again against the run's ledger: nothing left to ask
    judge2, backend2 = _judge(run, "reuse")
    again = plan_bundles([bundle], tasks, PROTOCOLS, [("s", judge2)], embedder)
    assert again["total"]["calls"] == 0 and backend2.calls == []
    assert again["total"]["ledger"] == again["total"]["requests"] == plan["total"]["requests"]


def test_a_deepeval_plan_without_answers_is_an_upper_bound(tmp_path: Path,
                                                           embedder: Embedder) -> None:
    """Alone, DeepEval's E3 checks wait on E2 relevance answers the plan cannot know."""
    bundle, tasks = landmarks_bundle(tmp_path, REPORT)
    judge, _ = _judge(tmp_path / "run")
    plan = plan_bundles([bundle], tasks, ["deepeval"], [("s", judge)], embedder)
    assert not plan["exact"] and "E2 relevance" in plan["reports"][0]["upper_bound"]
    with_dr3 = plan_bundles([bundle], tasks, ["dr3", "deepeval"], [("s", judge)], embedder)
    assert with_dr3["protocols"]["deepeval"]["calls"] < plan["protocols"]["deepeval"]["calls"]


def test_placeholder_answers_fit_their_schemas() -> None:
    from ambereval.engine import support_question as sq
    from ambereval.models.judge import parse_against

    for schema in (sq.SCHEMA, {"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "string"}},
            "score": {"type": "integer", "enum": [3, 4]}, "ok": {"type": "boolean"}},
            "required": ["items", "score", "ok"], "additionalProperties": False}):
        assert parse_against(json.dumps(placeholder(schema)), schema) is not None


def test_replay_of_a_run_made_with_the_old_prompts_names_its_amber(
        tmp_path: Path, embedder: Embedder) -> None:
    """A run made before the report-first prompts and the shared support question cannot
    be answered from its ledger: one line naming the amber that made it, not a miss."""
    from ambereval.engine.runs.replay import replay_run
    from ambereval.errors import InputError

    bundle, tasks = landmarks_bundle(tmp_path, REPORT)
    run = tmp_path / "run"
    judge, _ = _judge(run)
    evaluate_bundles([bundle], tasks, ["dr3"], [("s", judge)], run, embedder)
    path = run / "manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest["judging"] == {"support_question": "shared", "support_batch": "1",
                                   "passages": "merged", "citation_marks": "dropped",
                                   "checklists": "together",
                                   "relevance_opening": "300-tokens",
                                   "prompt_layout": "report-first-v1"}
    assert manifest["rules"]["dr3"]["support_question"] == "shared"
    del manifest["judging"]
    path.write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="made by amber-eval .* with other judge prompts") \
            as err:
        replay_run(run)
    assert "amber-eval" in str(err.value.hint)


@pytest.mark.parametrize("unrecorded", [
    ("passages", "support_batch", "citation_marks", "checklists", "relevance_opening"),
    ("citation_marks", "checklists", "relevance_opening")],
    ids=["amber-0.2.0", "amber-0.2.1"])
def test_a_run_made_by_an_earlier_amber_replays(tmp_path: Path, embedder: Embedder,
                                                unrecorded: tuple[str, ...]) -> None:
    """amber 0.2.0 sent a page's chosen chunks as they are, one statement a prompt;
    0.2.1 showed statements with their citation marks, asked a checklist one item a
    prompt and showed E2 1,500 characters of a page. Neither recorded the rules that came
    after it: its runs replay as they were made (today's defaults send other prompts,
    which would miss the ledger)."""
    from ambereval.engine.runs.replay import replay_run

    bundle, tasks = landmarks_bundle(tmp_path, REPORT)
    run = tmp_path / "run"
    judge, backend = _judge(run)
    evaluate_bundles([bundle], tasks, ["dr3", "deepeval"], [("s", judge)], run, embedder,
                     judging={rule: BEFORE_RULE[rule] for rule in unrecorded})
    path = run / "manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest["rules"]["dr3"] == {**manifest["rules"]["dr3"],
                                        "support_question": "shared"}
    assert not set(unrecorded) & set(manifest["rules"]["dr3"])  # as that amber recorded
    for rule in unrecorded:
        del manifest["judging"][rule]  # as that amber wrote it
    path.write_text(json.dumps(manifest))
    assert replay_run(run)["identical"]
    # the same run asked with today's default would have sent other prompts
    fresh = tmp_path / "fresh"
    judge2, backend2 = _judge(fresh)
    evaluate_bundles([bundle], tasks, ["dr3", "deepeval"], [("s", judge2)], fresh, embedder)
    assert any(c not in backend.calls for c in backend2.calls)


def test_a_served_judge_reports_what_its_prefix_cache_served(tmp_path: Path,
                                                             embedder: Embedder) -> None:
    """A server's ``usage.prompt_tokens_details.cached_tokens`` (OpenAI, vLLM) is what the
    run's ``spent`` records as cached; the plan estimates the same from the prompts'
    shared starts, and a server that reports nothing records 0."""
    from fakejudge import FakeJudgeServer

    from ambereval.models import open_judge

    bundle, tasks = landmarks_bundle(tmp_path, REPORT)
    with FakeJudgeServer() as server:
        judge = open_judge(url=server.url, name="fake",
                           ledger=tmp_path / "run" / "ledger.sqlite", concurrency=1)
        plan = plan_bundles([bundle], tasks, ["dr3"], [("s", judge)], embedder)
        result = evaluate_bundles([bundle], tasks, ["dr3"], [("s", judge)],
                                  tmp_path / "run", embedder)
    spent = result["stats"]["spent"]["total"]
    assert spent["calls"] == server.served == plan["total"]["calls"]
    assert 0 < spent["cached_tokens"] == server.cached_reported < spent["prompt_tokens"]
    assert plan["tokens"] == "estimate" and 0 < plan["total"]["cached_tokens"] \
        < plan["total"]["prompt_tokens"]
    stats = json.loads((tmp_path / "run" / "stats.json").read_text())
    assert stats["spent"]["total"]["cached_tokens"] == spent["cached_tokens"]


def test_cached_tokens_are_read_only_when_the_server_reports_them() -> None:
    from ambereval.models.openai_backend import usage_of

    assert usage_of({"usage": {"prompt_tokens": 9, "completion_tokens": 2}}) == {
        "prompt_tokens": 9, "completion_tokens": 2}
    assert usage_of({"usage": {"prompt_tokens": 9, "completion_tokens": 2,
                               "prompt_tokens_details": {"cached_tokens": 7}}}
                    )["cached_tokens"] == 7
    assert usage_of({}) == {"prompt_tokens": 0, "completion_tokens": 0}


@pytest.mark.slow
def test_plan_of_the_default_judge_is_the_run_exactly(tmp_path: Path) -> None:
    """With the in-process judge the plan's calls, prompt tokens (llama.cpp's own
    tokenizer, the weights not loaded) and cached tokens are what the run then spends;
    the plan writes nothing; the run replays."""
    bundle, tasks = landmarks_bundle(tmp_path, REPORT)
    run = tmp_path / "run"
    args = ["evaluate", str(bundle), "--task", str(tasks), "--out", str(run),
            "--judge-ctx", "2048", "--protocol", "dr3"]
    done = run_amber(*args, "--plan", "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["tokens"] == "exact" and plan["exact"] and not run.exists()
    text = run_amber(*args, "--plan")
    assert text.returncode == 0 and "prompt tokens" in text.stdout
    done = run_amber(*args, "--json")
    assert done.returncode == 0, done.stderr
    spent = json.loads((run / "stats.json").read_text())["spent"]
    assert spent["total"]["calls"] == plan["total"]["calls"] > 0
    assert spent["total"]["prompt_tokens"] == plan["total"]["prompt_tokens"]
    # the prompt starts the KV cache already held, as the plan foresaw them
    assert 0 < spent["total"]["cached_tokens"] == plan["total"]["cached_tokens"] \
        < plan["total"]["prompt_tokens"]
    for protocol, row in plan["protocols"].items():
        assert spent["protocols"][protocol]["calls"] == row["calls"], protocol
        assert spent["protocols"][protocol]["cached_tokens"] == row["cached_tokens"], protocol
    again = json.loads(run_amber(*args, "--plan", "--json").stdout)
    assert again["total"]["calls"] == 0
    assert run_amber("replay", str(run)).returncode == 0


@pytest.mark.slow
def test_report_level_prompts_share_the_report_as_a_token_prefix() -> None:
    """Consecutive report-level calls about one report (two criteria, two protocols) have
    the whole report in common as a token prefix, which llama.cpp's KV cache reuses."""
    from ambereval.engine.judging import CHECK_SCHEMA, _messages, clip
    from ambereval.engine.protocols.dr3 import DEPTH_SYSTEM
    from ambereval.models.llamacpp_backend import LlamaCppBackend
    from ambereval.models.registry import default_judge_path

    backend = LlamaCppBackend(default_judge_path(), n_ctx=4096)
    report = clip("# Title\n\n" + "A paragraph of the report with figures 12.5 and 1889. " * 60)
    first = _messages("Check the requirement.", report, "Requirement: gives a year.")
    second = _messages(DEPTH_SYSTEM, report, "Request: q\nScore the depth.")
    vocab = backend.tokenizer()
    a, b = (vocab.tokenize(backend.render(m)[0].encode(), special=True)
            for m in (first, second))
    common = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    alone = len(vocab.tokenize(report.text.encode(), add_bos=False, special=True))
    assert common >= alone > 500  # everything up to the criterion is shared
    assert backend._llm is None  # counted without loading the weights
    assert backend.prompt_tokens(first, CHECK_SCHEMA, 24) == len(a)
