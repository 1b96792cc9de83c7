"""What ``amber serve``'s judge APIs cost, side by side in one run.

1. The in-process judge (SmolLM2, llama.cpp) asked the same prompts two ways: directly
   (``Judge.ask``) and through ``amber serve``'s OpenAI API with the openai SDK. The judge
   runs one call at a time either way, so the ratio of the two times is the HTTP, SDK and
   JSON overhead (target: within 10%). The order alternates per prompt, after a warm-up.
2. A loopback fake served judge (tests/fakejudge.py, ``--latency`` s per request) behind
   ``amber serve --judge-url``, asked by 1, 16 and 64 concurrent clients through the
   OpenAI API: requests per second against the ideal ``clients / latency``
   (target: at least 80% of ideal). The clients, the server and the fake share this
   machine's cores: at short latencies the ratio shows where the CPU saturates (about
   320 requests/s through the openai SDK on 2 cores), not the server's scheduling.

    .venv/bin/python scripts/bench_judge_api.py [--prompts 12] [--latency 0.2] [--json]
    .venv/bin/python scripts/bench_judge_api.py --served-only --latency 1.0
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import openai  # noqa: E402
from fakejudge import FakeJudgeServer  # noqa: E402

from ambereval.engine.serve.index import FrozenWeb  # noqa: E402
from ambereval.engine.serve.judges import JudgeService, open_service  # noqa: E402
from ambereval.engine.serve.log import ServeLog  # noqa: E402
from ambereval.engine.serve.server import BaseUrlServer  # noqa: E402
from ambereval.models import open_judge  # noqa: E402

MAX_TOKENS = 24


def prompts(n: int, tag: str) -> list[list[dict[str, str]]]:
    return [[{"role": "system", "content": "Answer in one short sentence."},
             {"role": "user", "content": f"{tag}: what is {i} plus {i + 1}?"}]
            for i in range(n)]


def in_process_overhead(n: int) -> dict[str, float]:
    judge = open_judge(n_ctx=2048)  # no ledger: every call runs the model
    service = JudgeService(open_judge(n_ctx=2048), "smollm2-135m", default_max_tokens=MAX_TOKENS)
    direct = served = 0.0
    with BaseUrlServer(FrozenWeb([]), log=ServeLog(notify=lambda line: None),
                       judges=service) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="k")
        for warm in prompts(1, "warm"):
            judge.ask(warm, None, MAX_TOKENS, fit="refuse")
            client.chat.completions.create(model="m", messages=warm, max_tokens=MAX_TOKENS)
        for i, messages in enumerate(prompts(n, "bench")):
            order = ("direct", "served") if i % 2 == 0 else ("served", "direct")
            for how in order:
                start = time.perf_counter()
                if how == "direct":
                    judge.ask(messages, None, MAX_TOKENS, fit="refuse")
                    direct += time.perf_counter() - start
                else:
                    client.chat.completions.create(model="m", messages=messages,
                                                   max_tokens=MAX_TOKENS)
                    served += time.perf_counter() - start
    return {"prompts": n, "direct_calls_per_s": n / direct, "served_calls_per_s": n / served,
            "overhead": served / direct - 1}


def served_concurrency(latency: float, clients: list[int], per_client: int) -> list[dict]:
    rows = []
    with FakeJudgeServer(latency=latency, capacity=256) as fake:
        for width in clients:
            service = open_service(None, None, fake.url, "fake", 4096, width, None, 0, None,
                                   "reuse", False, MAX_TOKENS, lambda line: None)
            with BaseUrlServer(FrozenWeb([]), log=ServeLog(notify=lambda line: None),
                               judges=service) as server:
                client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="k",
                                       max_retries=0)
                total = width * per_client
                work = prompts(total, f"c{width}")
                start = time.perf_counter()
                ask = client.chat.completions.create
                with ThreadPoolExecutor(width) as pool:
                    list(pool.map(lambda m, ask=ask: ask(model="m", messages=m), work))
                seconds = time.perf_counter() - start
            rate = total / seconds
            ideal = width / latency
            rows.append({"clients": width, "requests": total, "per_s": rate,
                         "ideal_per_s": ideal, "of_ideal": rate / ideal})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--per-client", type=int, default=5)
    parser.add_argument("--served-only", action="store_true",
                        help="skip the in-process judge (no model is loaded)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    local = None if args.served_only else in_process_overhead(args.prompts)
    served = served_concurrency(args.latency, [1, 16, 64], args.per_client)
    if args.json:
        print(json.dumps({"in_process": local, "served": served}, indent=2))
        return
    if local is not None:
        print(f"in-process judge, {local['prompts']} prompts, {MAX_TOKENS} tokens each: "
              f"direct {local['direct_calls_per_s']:.2f} calls/s, through amber serve "
              f"{local['served_calls_per_s']:.2f} calls/s (overhead {local['overhead']:+.1%})")
    for row in served:
        print(f"served judge ({args.latency:g} s/request), {row['clients']:>2} clients: "
              f"{row['per_s']:7.1f} req/s of ideal {row['ideal_per_s']:7.1f} "
              f"({row['of_ideal']:.0%})")


if __name__ == "__main__":
    main()
