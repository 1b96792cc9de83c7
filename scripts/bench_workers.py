"""Is `--executor processes` worth it on this machine? The default judge's prompt reading
(the cost that dominates a report) measured side by side in one run:

1. one process, llama.cpp with 1 thread, then with every core;
2. N processes of one thread each, all reading at once (what N workers do);
3. two judges of every core each, side by side (a judge sharing its cores with other
   work), with llama.cpp's OpenMP threads spinning while they wait (the default) and
   sleeping (``OMP_WAIT_POLICY=PASSIVE``), and one such judge alone with each policy.

Each reads the same ~1,500-token prompt from a cold KV cache for ``--seconds``; the
aggregate tokens/s of (2) over the best of (1) is the speed-up workers can give. On a
machine whose vCPUs share one core's matrix units it is below 1.

    .venv/bin/python scripts/bench_workers.py [--seconds 20] [--workers 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time

EVIDENCE = ("The Eiffel Tower in Paris was completed in 1889 for the World's Fair. It is 330 "
            "metres tall and was designed by the company of Gustave Eiffel. ") * 60


def read_rate(threads: int, seconds: float, start: float = 0.0) -> float:
    """Prompt tokens/s of the default judge reading one prompt again and again."""
    from llama_cpp import Llama

    from ambereval.models import default_judge_path

    llm = Llama(model_path=str(default_judge_path()), n_ctx=4096, n_threads=threads,
                n_threads_batch=threads, seed=0, n_gpu_layers=0, verbose=False)
    tokens = llm.tokenize(EVIDENCE.encode())[:1500]
    while time.time() < start:  # processes start reading together
        time.sleep(0.01)
    began, done = time.perf_counter(), 0
    while time.perf_counter() - began < seconds:
        llm.reset()
        llm.eval(tokens)
        done += len(tokens)
    return done / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    one = read_rate(1, args.seconds)
    print(f"1 process x 1 thread:  {one:7.0f} prompt tok/s")
    every = read_rate(cores, args.seconds)
    print(f"1 process x {cores} threads: {every:7.0f} prompt tok/s")
    start = time.time() + 15  # time for every worker to load the model
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        rates = pool.starmap(read_rate, [(1, args.seconds, start)] * args.workers)
    total = sum(rates)
    print(f"{args.workers} processes x 1 thread: {total:7.0f} prompt tok/s in all "
          f"({', '.join(f'{r:.0f}' for r in rates)})")
    print(f"workers vs the best single process: {total / max(one, every):.2f}x")
    for policy in ("", "PASSIVE"):
        name = f"OMP_WAIT_POLICY={policy}" if policy else "OMP_WAIT_POLICY unset"
        alone = side_by_side(1, cores, args.seconds, policy)
        pair = side_by_side(2, cores, args.seconds, policy)
        print(f"{name:>24}: alone {alone[0]:4.0f} prompt tok/s; two side by side "
              f"{sum(pair):4.0f} in all ({', '.join(f'{r:.0f}' for r in pair)})")


def side_by_side(n: int, threads: int, seconds: float, policy: str) -> list[float]:
    """Rates of ``n`` judges of ``threads`` threads reading at once, in processes started
    with ``OMP_WAIT_POLICY=policy`` (unset when empty): libgomp reads it as it loads."""
    saved = os.environ.pop("OMP_WAIT_POLICY", None)
    if policy:
        os.environ["OMP_WAIT_POLICY"] = policy
    try:
        start = time.time() + 15
        with multiprocessing.get_context("spawn").Pool(n) as pool:
            return pool.starmap(read_rate, [(threads, seconds, start)] * n)
    finally:
        os.environ.pop("OMP_WAIT_POLICY", None)
        if saved is not None:
            os.environ["OMP_WAIT_POLICY"] = saved


if __name__ == "__main__":
    main()
