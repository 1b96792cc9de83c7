"""``amber evaluate --plan``: the judge work a run will ask, before any judge call.

The plan runs the protocols themselves, report by report, with a planning judge
(:class:`PlanJudge`) in place of each real one: it books every request exactly as the
run will make it (same prompts, same ledger keys, same order), answers from the run's
ledger what the ledger already holds, and answers everything else with a schema-valid
placeholder instead of calling the model. A request is a **call** when the run will send
it to the model: not in the ledger (``reuse``; ``record`` ignores the ledger) and not
asked earlier in the run (the run reads a repeated request back from its ledger, e.g.
DeepEval E3 after DR3 FA asked the same support question). Its **prompt tokens** are
counted with the judge's own tokenizer where the judge is local (llama.cpp loads the
vocabulary only, and applies the context rule as the call will), and estimated (4
characters a token) for a served judge, marked ``"tokens": "estimate"``. Of them,
**cached tokens** are the start each call shares with the model call before it, in the
run's order: what the in-process judge does not read again (llama.cpp keeps the last
prompt in its KV cache), and what a server's prefix cache can serve. For the in-process
judge this is what the run then reports; for a served judge it is an estimate (the run
records what the server reports, and calls sent at once arrive in another order).

One answer can change what is asked next: DeepEval asks a page's E3 checks only when
its E2 relevance answer says the page is relevant. When that answer is not in the ledger
the plan counts the page as relevant (an upper bound) and says so (``upper_bound``);
with DR3 also in the run, the shared support question makes the count exact anyway.
Worker processes (``--executor processes`` or ``ray``) may each ask a request another
worker asks (README, Limits); the plan counts it once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from ambereval.engine import support_question as sq
from ambereval.engine.protocols.deepeval import RELEVANCE_SCHEMA, SUPPORT_SCHEMA
from ambereval.engine.runs.report_job import ReportJob, RunSetup, evaluate_report
from ambereval.errors import ModelError
from ambereval.models import Judge
from ambereval.models.canonical import content_key
from ambereval.models.judge import Call, JudgeResponse, Message
from ambereval.models.llamacpp_backend import shared_start

CHARS_PER_TOKEN = 4  # the estimate for a judge whose tokenizer is not here
PLAN_KEYS = ("requests", "calls", "ledger", "prompt_tokens", "cached_tokens")


def placeholder(schema: dict[str, Any]) -> Any:
    """A schema-valid answer: true, the first choice, 0, empty."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: placeholder(props[k]) for k in schema.get("required", props)}
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return max(0, schema.get("minimum", 0))
    if kind == "array":
        return []
    return ""


class PlanJudge(Judge):
    """A judge that books requests instead of asking them (see the module doc)."""

    def __init__(self, real: Judge, reads_ledger: bool) -> None:
        super().__init__(real.backend, None, seed=real.seed, n_ctx=real.n_ctx, concurrency=1)
        self.real = real
        self.reads_ledger = reads_ledger and real.ledger is not None
        self.seen: set[str] = set()
        self.uncertain = 0  # new E3 calls asked after a relevance answer was assumed
        self._assumed = False  # the last E2 relevance answer was assumed
        self.estimated = not hasattr(real.backend, "prompt_ids")
        self._book = threading.Lock()
        self._last: Sequence[Any] = ()  # the prompt of the model call before

    def tokens(self, messages: list[Message], schema: dict[str, Any],
               max_tokens: int) -> tuple[int, int]:
        """(prompt tokens, of them the start shared with the model call before)."""
        if self.estimated:
            text = "\n".join(m["content"] for m in messages)
            common, self._last = shared_start(self._last, text), text
            return len(text) // CHARS_PER_TOKEN + 8, common // CHARS_PER_TOKEN
        ids = self.backend.prompt_ids(messages, schema, max_tokens)  # type: ignore[attr-defined]
        common, self._last = shared_start(self._last, ids), ids
        return len(ids), common

    def ask(self, messages: list[Message], schema: dict[str, Any],
            max_tokens: int = 256) -> JudgeResponse:
        request = self.request(messages, schema, max_tokens)
        key = content_key(request)
        hit = self.real.ledger.get(key) if self.reads_ledger else None  # type: ignore[union-attr]
        with self._book:
            repeat = key in self.seen
            self.seen.add(key)
        if hit is not None and hit.get("error"):
            err = ModelError(hit["error"])
            err.from_ledger = True  # type: ignore[attr-defined]
            raise err
        if hit is not None:
            if schema == RELEVANCE_SCHEMA:
                self._assumed = False
            usage = {"prompt_tokens": hit["prompt_tokens"] or 0, "completion_tokens": 0}
            return JudgeResponse(json.loads(hit["parsed"]), hit["response"], usage, key,
                                 "ledger")
        if schema == RELEVANCE_SCHEMA:
            self._assumed = True
        obj = placeholder(schema)
        if repeat:  # the run reads it back from its ledger
            return JudgeResponse(obj, "", {"prompt_tokens": 0}, key, "ledger")
        if self._assumed and (schema == SUPPORT_SCHEMA or sq.is_support_schema(schema)):
            self.uncertain += 1
        prompt, cached = self.tokens(messages, schema, max_tokens)
        usage = {"prompt_tokens": prompt, "cached_tokens": cached, "completion_tokens": 0}
        return JudgeResponse(obj, "", usage, key, "model")

    def map(self, calls: list[Call], on_done: Any = None) -> list[JudgeResponse | ModelError]:
        out: list[JudgeResponse | ModelError] = []
        for call in calls:
            try:
                out.append(self.ask(*call))
            except ModelError as err:
                out.append(err)
            if on_done is not None:
                on_done()
        return out


def plan_run(jobs: list[ReportJob], setup: RunSetup) -> dict[str, Any]:
    """Per report and protocol: requests, model calls, ledger answers and prompt tokens
    the run will ask (JSON-ready). The judges are not called."""
    ledger = setup.ledger
    reads = ledger is not None and ledger.mode in ("reuse", "replay")
    planners = [(name, PlanJudge(judge, reads)) for name, judge in setup.judges]
    plan_setup = RunSetup(setup.protocols, planners, setup.embedder,  # type: ignore[arg-type]
                          setup.max_chars, setup.rules, setup.context_factory,
                          judging=dict(setup.judging))
    reports = []
    for job in jobs:
        before = sum(p.uncertain for _, p in planners)
        doc = evaluate_report(job, plan_setup)
        by_protocol: dict[str, dict[str, int]] = {}
        for by_p in doc["spent"].values():
            for protocol, row in by_p.items():
                mine = by_protocol.setdefault(protocol, dict.fromkeys(PLAN_KEYS, 0))
                for k in PLAN_KEYS[1:]:
                    mine[k] += row[k]
        for by_p in doc["judge_work"].values():
            for protocol, row in by_p.items():
                by_protocol[protocol]["requests"] += row["requests"]
        assumed = sum(p.uncertain for _, p in planners) - before
        reports.append({"report": job.report_name, "bundle": job.bundle, "file": job.fname,
                        "protocols": by_protocol,
                        **({"upper_bound": f"{assumed} E3 calls wait on E2 relevance "
                            "answers (counted as relevant)"} if assumed else {})})
    totals: dict[str, dict[str, int]] = {}
    for r in reports:
        for protocol, row in r["protocols"].items():
            mine = totals.setdefault(protocol, dict.fromkeys(row, 0))
            for k, v in row.items():
                mine[k] += v
    total = {k: sum(row[k] for row in totals.values()) for k in PLAN_KEYS}
    return {"reports": reports, "protocols": totals, "total": total,
            "tokens": "estimate" if any(p.estimated for _, p in planners) else "exact",
            "ledger_mode": ledger.mode if ledger is not None else None,
            "exact": not any("upper_bound" in r for r in reports)}


def plan_bundles(bundles: list[Any], tasks_path: Any, protocols: list[str],
                 judges: list[tuple[str, Judge]], embedder: Any = None,
                 max_chars: int = 12_000, rules: dict[str, str] | None = None,
                 judging: dict[str, str] | None = None) -> dict[str, Any]:
    """The plan of ``amber evaluate`` with these inputs (see :func:`plan_run`).
    Example: ``plan_bundles(["b/"], "tasks.json", ["dr3"], [("j", judge)])["total"]``"""
    from ambereval.engine.judging_rules import split_rules
    from ambereval.engine.runs.evaluate import plan_reports

    jobs = plan_reports(bundles, tasks_path)
    setup = RunSetup(list(protocols), judges, embedder, max_chars, rules,
                     judging={**split_rules(None)[1], **(judging or {})})
    plan = plan_run(jobs, setup)
    plan["judges"] = {n: j.backend.identity()["model"].get("name") for n, j in judges}
    plan["protocols_asked"] = list(protocols)
    return plan
