"""Judge benchmarks, every figure measured in this one run (2-core CPU, default model):

1. prompt and generated tokens/s through Amber's Judge vs llama-cpp-python called
   directly with the same rendered prompts, grammar and sampling (Amber's overhead);
2. speed-up from prefix reuse when many calls share a long prefix (llama.cpp keeps the
   previous call's KV cache; "cold" clears it before every call);
3. calls/s answered from the judge ledger (replay) vs live calls.

    .venv/bin/python scripts/bench_judge.py [--calls 12]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import llama_cpp

from ambereval.models import Judge, Ledger, default_judge_path
from ambereval.models.llamacpp_backend import LlamaCppBackend

SCHEMA = {"type": "object",
          "properties": {"verdict": {"type": "string",
                                     "enum": ["supported", "contradicted", "unknown"]}},
          "required": ["verdict"], "additionalProperties": False}
EVIDENCE = ("The Eiffel Tower in Paris was completed in 1889 for the World's Fair. It is 330 "
            "metres tall and was designed by the company of Gustave Eiffel. ") * 12


def prompts(n: int, shared_prefix: bool) -> list[list[dict[str, str]]]:
    out = []
    for i in range(n):
        evidence = EVIDENCE if shared_prefix else f"Document {i}. " + EVIDENCE
        out.append([{"role": "system", "content": "Judge the claim against the evidence."},
                    {"role": "user", "content": f"Evidence:\n{evidence}\n\nClaim {i}: the "
                                                f"tower was finished in {1880 + i}."}])
    return out


def perf(backend: LlamaCppBackend) -> tuple[float, int, float, int]:
    data = llama_cpp.llama_perf_context(backend.llm()._ctx.ctx)
    return data.t_p_eval_ms, data.n_p_eval, data.t_eval_ms, data.n_eval


def reset_perf(backend: LlamaCppBackend) -> None:
    llama_cpp.llama_perf_context_reset(backend.llm()._ctx.ctx)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    backend = LlamaCppBackend(default_judge_path(), n_ctx=2048, n_threads=args.threads)
    judge = Judge(backend)
    batch = prompts(args.calls, shared_prefix=False)
    llm = backend.llm()
    grammar = backend.grammar(SCHEMA)
    judge.ask(batch[0], SCHEMA, max_tokens=32)  # warm-up: page in weights, build grammar

    # 1. Amber vs direct, no prefix reuse for either (cache cleared before each call)
    timings = {}
    for name in ("direct", "amber"):
        reset_perf(backend)
        start = time.perf_counter()
        for messages in batch:
            llm.reset()
            if name == "amber":
                judge.ask(messages, SCHEMA, max_tokens=32)
            else:
                prompt, stops = backend.render(messages)
                llm.create_completion(prompt, max_tokens=32, temperature=0.0, top_k=1,
                                      top_p=1.0, min_p=0.0, repeat_penalty=1.0, seed=0,
                                      grammar=grammar, stop=stops)
        wall = time.perf_counter() - start
        p_ms, p_n, g_ms, g_n = perf(backend)
        timings[name] = wall
        print(f"{name:>6}: prompt {p_n / (p_ms / 1000):7.1f} tok/s, generated "
              f"{g_n / (g_ms / 1000):6.1f} tok/s, wall {wall:.2f} s for {len(batch)} calls")
    overhead = timings["amber"] / timings["direct"] - 1
    print(f"Amber overhead vs direct llama-cpp-python: {overhead * 100:+.1f}% wall time")

    # 2. prefix reuse: same long prefix, different claims
    shared = prompts(args.calls, shared_prefix=True)
    for name, clear in (("cold", True), ("reuse", False)):
        start = time.perf_counter()
        for messages in shared:
            if clear:
                llm.reset()
            judge.ask(messages, SCHEMA, max_tokens=32)
        timings[name] = time.perf_counter() - start
    print(f"prefix reuse: {timings['cold']:.2f} s cold vs {timings['reuse']:.2f} s reusing "
          f"({timings['cold'] / timings['reuse']:.2f}x speed-up, {len(shared)} calls)")

    # 3. ledger replay vs live
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.sqlite"
        live = Judge(backend, Ledger(path, "record"))
        start = time.perf_counter()
        for messages in batch:
            live.ask(messages, SCHEMA, max_tokens=32)
        live_rate = len(batch) / (time.perf_counter() - start)
        replay = Judge(LlamaCppBackend(default_judge_path(), n_ctx=2048),
                       Ledger(path, "replay"))
        rounds = 50
        start = time.perf_counter()
        for _ in range(rounds):
            for messages in batch:
                replay.ask(messages, SCHEMA, max_tokens=32)
        replay_rate = rounds * len(batch) / (time.perf_counter() - start)
    print(f"ledger replay: {replay_rate:,.0f} calls/s vs live {live_rate:.2f} calls/s "
          f"({replay_rate / live_rate:,.0f}x)")


if __name__ == "__main__":
    main()
