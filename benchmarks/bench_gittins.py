"""Gittins index tables: build time vs horizon, sweeps, and decisions per second.

Run from the repository root: ``python benchmarks/bench_gittins.py [--quick] [--json out.json]``.
Uses private, empty cache directories (cold start: nothing computed before).

Measured:

1. *Reward lattice* — ``kg_reward`` on the packed (a, b) triangle of depth T (SciPy
   ``betainc``; the cold-start cost of every table).
2. *Finite-horizon index table for horizon T* — the indices ``λ*(x, n = T)`` of every state x
   at depth <= 5 below Beta(1, 1) (21 states; what the first decisions of a campaign with T
   labels need), Dinkelbach, compiled sweep; and the NumPy reference sweep's time per sweep.
3. *Gittins-Inf* — α = 1 − 1/T, L = 4T + 200: the same 21 states.
4. *Decisions/s* — one campaign K = 50, T = 10K (Fig. 2(a) setting), reference engine
   (gittins) or auto engine (gittins-inf), cold and warm index tables.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="T = 100, 500 only")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    from crowdbudget.bounds import gittins_index as gittins
    from crowdbudget.experiments.runner import run_campaign
    from crowdbudget.registry import make_policy
    from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment

    gittins.finite_horizon_gittins_index(1.0, 1.0, 3)  # compile / load the kernels
    horizons = [100, 500] if args.quick else [100, 500, 1000, 5000]
    states = [(i, j) for k in range(6) for i, j in ((u, k - u) for u in range(k + 1))]
    rows: list[dict[str, float]] = []
    warm = [np.zeros(4) for _ in range(3)]
    gittins._sweep(
        gittins.reward_lattice(1.0, 1.0, 0.5).ensure(8), 1.0, 1.0, 0, 0, 3, 0.1, 1.0, *warm
    )
    for horizon in horizons:
        os.environ["CROWDBUDGET_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-gittins-")
        gittins._LATTICES.clear()
        gittins._TABLES.clear()
        start = time.perf_counter()
        lattice = gittins.reward_lattice(1.0, 1.0, 0.5)
        lattice.ensure(horizon + 6)
        lattice_s = time.perf_counter() - start
        table = gittins.index_table(1.0, 1.0, 0.5, 1.0, None, "dinkelbach")
        start = time.perf_counter()
        for i, j in states:
            table.index(i, j, horizon)
        finite_s = time.perf_counter() - start
        sweeps = table.sweeps
        rewards = lattice.values
        start = time.perf_counter()
        gittins.calibration_sweep_numpy(rewards, 1.0, 1.0, 0, 0, horizon, 0.1)
        numpy_sweep_s = time.perf_counter() - start
        work = [np.zeros(horizon + 1) for _ in range(3)]
        start = time.perf_counter()
        gittins._sweep(rewards, 1.0, 1.0, 0, 0, horizon, 0.1, 1.0, *work)
        numba_sweep_s = time.perf_counter() - start
        row = {
            "T": horizon,
            "lattice_cells": rewards.size,
            "lattice_s": lattice_s,
            "finite_table_21_states_s": finite_s,
            "finite_sweeps": sweeps,
            "numpy_sweep_s": numpy_sweep_s,
            "numba_sweep_s": numba_sweep_s,
        }
        if horizon <= 1000:
            levels = gittins.truncation_levels(horizon)
            lattice.ensure(levels + 6)
            inf = gittins.index_table(
                1.0, 1.0, 0.5, gittins.discount_for_budget(horizon), levels, "dinkelbach"
            )
            start = time.perf_counter()
            for i, j in states:
                inf.index(i, j, levels)
            row["inf_table_21_states_s"] = time.perf_counter() - start
            row["inf_sweeps"] = inf.sweeps
        rows.append(row)
        print(row, flush=True)

    env = SyntheticBernoulliEnvironment(50, prior=(1.0, 1.0))
    for policy_id in ("gittins", "gittins-inf"):
        for label in ("cold", "warm"):
            if label == "cold":
                gittins._TABLES.clear()
                gittins._LATTICES.clear()
                os.environ["CROWDBUDGET_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-gittins-")
            policy = make_policy(policy_id)
            start = time.perf_counter()
            run_campaign(
                policy,
                env,
                [500],
                world_seed=2013,
                policy_rng=np.random.default_rng(0),
            )
            seconds = time.perf_counter() - start
            row = {"policy": policy_id, "cache": label, "decisions": 500, "seconds": seconds}
            row["decisions_per_s"] = 500 / seconds
            rows.append(row)  # type: ignore[arg-type]
            print(row, flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=2)


if __name__ == "__main__":
    main()
