"""Experiment sweeps: wall time in one process vs the process pool vs a Dask local cluster.

The sweep is Fig. 2(a) of Chen et al. (2013) scaled up: K = 50 items, T = 2K..10K
(checkpoints of one campaign), policies uniform, kg-random and opt-kg, ``--reps`` worlds each
(3 × reps campaigns). Every engine must return identical results (checked). Run from the
repository root:

    python benchmarks/bench_sweep.py [--reps 3334]   # 10,002 campaigns
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from crowdbudget.experiments.runner import dask_scheduler, run_experiment
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment

POLICIES = ["uniform", "kg-random", "opt-kg"]


def sweep(reps: int, **kwargs: object) -> tuple[float, pd.DataFrame]:
    env = SyntheticBernoulliEnvironment(50)
    start = time.perf_counter()
    result = run_experiment(
        POLICIES, env, [r * 50 for r in range(2, 11)], reps, seed=0, progress=True, **kwargs
    )
    return time.perf_counter() - start, result.runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3334)
    args = parser.parse_args()
    n = len(POLICIES) * args.reps
    cols = ["policy", "budget", "replication", "accuracy", "labels_used"]
    serial_s, serial = sweep(args.reps, n_jobs=1)
    pool_s, pooled = sweep(args.reps, n_jobs=2)
    with dask_scheduler("local", n_workers=2):
        sweep(2)  # start the cluster and warm the workers (imports, Numba compilation)
        dask_s, on_dask = sweep(args.reps)
    pd.testing.assert_frame_equal(serial[cols], pooled[cols])
    pd.testing.assert_frame_equal(serial[cols], on_dask[cols])
    print(f"{n:,} campaigns (K=50, budgets 2K..10K as checkpoints), identical results")
    print("| engine | wall s | campaigns/s | ratio to 1 process | overhead per task ms |")
    print("|---|---:|---:|---:|---:|")
    for name, seconds in [
        ("1 process", serial_s),
        ("process pool, 2", pool_s),
        ("Dask local cluster, 2 workers", dask_s),
    ]:
        overhead = max(seconds - serial_s / 2, 0.0) / n * 1000 if name != "1 process" else 0.0
        print(
            f"| {name} | {seconds:.2f} | {n / seconds:,.0f} | {serial_s / seconds:.2f} | "
            f"{overhead:.2f} |"
        )


if __name__ == "__main__":
    main()
