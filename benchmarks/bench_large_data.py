"""Large data: replay and aggregation on the big real sets, and synthetic campaigns of
10^6–10^7 items — wall time and memory.

Real sets (bundled in the package): millionaire (~214k labels),
fact_eval (~215k), trec (~88k), adult. For each: load time; one replay per policy at half the
recorded labels (seed 0, one replication, reference engine — replays are not on the compiled
path); every aggregator on all labels. Synthetic: ``opt-kg`` (compiled engine) and ``uniform`` on
``SyntheticBernoulliEnvironment(n)`` with one label per item, n = 10^6 and 10^7.

Time is one untraced run; memory is the peak of Python-tracked allocations (``tracemalloc``;
NumPy reports its buffers to it) during a second, traced run of the same step, divided by the
number of items for the per-item figure. Run from the
repository root:

    python benchmarks/bench_large_data.py [--sizes 1000000,10000000] [--sets millionaire,...]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from crowdbudget.aggregation.registry import make_aggregator
from crowdbudget.datasets import load_dataset
from crowdbudget.exceptions import CrowdBudgetError
from crowdbudget.experiments.runner import run_experiment
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment

AGGREGATORS = ["mv", "wmv", "ds", "one-coin-em", "bp", "kos-mean"]


def measured(step: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, seconds, peak MB of traced allocations) of ``step()``: timed once without
    tracing (tracemalloc slows allocation-heavy Python loops several-fold), then run again
    under tracemalloc for the memory peak."""
    start = time.perf_counter()
    result = step()
    seconds = time.perf_counter() - start
    tracemalloc.start()
    try:
        step()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, seconds, peak / 1e6


def real_sets(names: list[str], policies: list[str]) -> None:
    print("| data | labels | items | workers | classes | load s | step | s | peak MB | result |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---|")
    for name in names:
        data, load_s, _ = measured(lambda name=name: load_dataset(name))
        head = (
            f"| {name} | {data.items.size:,} | {data.n_items:,} | {data.worker_ids.size:,} | "
            f"{len(data.classes)} | {load_s:.2f} |"
        )
        env = ReplayEnvironment.from_label_data(data)
        budget = data.items.size // 2
        for policy in policies:
            try:
                result, seconds, peak = measured(
                    lambda policy=policy, env=env, budget=budget: run_experiment(
                        [policy], env, [budget], 1, seed=0, n_jobs=1, progress=False
                    )
                )
                accuracy = float(result.summary["accuracy_mean"].iloc[0])
                outcome = f"accuracy {accuracy:.4f} at {budget:,} labels"
            except CrowdBudgetError as error:
                seconds, peak, outcome = float("nan"), float("nan"), f"n/a: {error}"
            print(f"{head} replay {policy} | {seconds:.2f} | {peak:.0f} | {outcome} |")
        gold = data.gold
        for method in AGGREGATORS:
            try:
                labels, seconds, peak = measured(
                    lambda method=method, data=data: make_aggregator(method).fit_predict(data)
                )
                if gold is not None and (gold >= 0).any():
                    known = gold >= 0
                    outcome = f"accuracy {float((labels[known] == gold[known]).mean()):.4f}"
                else:
                    outcome = "no gold"
            except CrowdBudgetError as error:
                seconds, peak, outcome = float("nan"), float("nan"), f"n/a: {error}"
            print(f"{head} aggregate {method} | {seconds:.2f} | {peak:.0f} | {outcome} |")


def synthetic(sizes: list[int]) -> None:
    print()
    print("| policy | n_items | labels | wall s | peak MB | bytes / item | accuracy |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    run_experiment(["opt-kg"], SyntheticBernoulliEnvironment(1000), [1000], 1, n_jobs=1)  # JIT
    for n in sizes:
        for policy in ["opt-kg", "uniform"]:
            env = SyntheticBernoulliEnvironment(n)
            result, seconds, peak = measured(
                lambda policy=policy, env=env, n=n: run_experiment(
                    [policy], env, [n], 1, seed=0, n_jobs=1, progress=False
                )
            )
            accuracy = float(result.summary["accuracy_mean"].iloc[0])
            print(
                f"| {policy} | {n:,} | {n:,} | {seconds:.2f} | {peak:.0f} | "
                f"{peak * 1e6 / n:.0f} | {accuracy:.4f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="millionaire,fact_eval,trec,adult")
    parser.add_argument("--policies", default="uniform,opt-kg")
    parser.add_argument("--sizes", default="1000000,10000000")
    args = parser.parse_args()
    real_sets([s for s in args.sets.split(",") if s], args.policies.split(","))
    synthetic([int(s) for s in args.sizes.split(",") if s])


if __name__ == "__main__":
    main()
