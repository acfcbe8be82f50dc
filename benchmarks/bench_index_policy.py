"""Hu & Frazier index policy: DP cost (bound, index tables) and decisions per second.

Run from the repository root:

    python benchmarks/bench_index_policy.py [--quick] [--json out.json]

Measures
1. the Lagrangian bound (golden section over scalar λ) and the index tables for K = 1000,
   U = 1200, r = 0.1, μ = 0.4 (Fig. 1's largest case): compiled (Numba) kernel, and one DP
   solve with the NumPy reference for comparison;
2. one continuous-time campaign at K = 1000, U = 1200 (index policy and Opt-KG);
3. index-policy decisions per second in one campaign at K = 10^3 … 10^6 tasks (instantaneous
   labels, pull mode, U = 1.2 K, the first min(U, 200,000) decisions timed, tables cut at 512
   arrivals to go for K > 10^4 — ``max_lookahead``, whose convergence is reported): the
   decision cost does not grow with K.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from typing import Any

import numpy as np

from crowdbudget.bounds import lagrangian
from crowdbudget.bounds.lagrangian import (
    StateSpace,
    default_label_cap,
    index_table,
    lagrangian_bound,
    solve_single_task_reference,
)
from crowdbudget.experiments.continuous import run_continuous_campaign
from crowdbudget.policies.lagrangian_index import LagrangianIndexPolicy
from crowdbudget.registry import make_policy
from crowdbudget.simulation.continuous_time import ContinuousTimeEnvironment
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.types import CampaignState, LabelEvent, Problem

R, MU = 0.1, 0.4


def dp_costs() -> dict[str, Any]:
    n_items, budget = 1000, 1200
    cap = default_label_cap(n_items, budget)
    lagrangian_bound(n_items=10, budget=12, arrival_rate=R, completion_rate=MU)  # compile
    index_table(
        prior_a=1,
        prior_b=1,
        threshold=0.5,
        budget=3,
        arrival_rate=R,
        completion_rate=MU,
        label_cap=3,
    )
    t = time.perf_counter()
    bound = lagrangian_bound(n_items=n_items, budget=budget, arrival_rate=R, completion_rate=MU)
    bound_s = time.perf_counter() - t
    lagrangian._TABLES.clear()
    t = time.perf_counter()
    table = index_table(
        prior_a=1.0,
        prior_b=1.0,
        threshold=0.5,
        budget=budget,
        arrival_rate=R,
        completion_rate=MU,
        label_cap=cap,
    )
    table_s = time.perf_counter() - t
    space = StateSpace.build(1.0, 1.0, 0.5, cap)
    pen = np.full(budget, bound.lambda_scalar)
    t = time.perf_counter()
    solve_single_task_reference(space, pen, R, MU)
    numpy_solve_s = time.perf_counter() - t
    t = time.perf_counter()
    lagrangian._backward(
        pen,
        R,
        MU,
        space.p_pos,
        space.reward,
        space.in_flight,
        space.pos_next,
        space.neg_next,
        space.hire,
        True,
        False,
    )
    numba_solve_s = time.perf_counter() - t
    return {
        "n_items": n_items,
        "budget": budget,
        "label_cap": cap,
        "states_per_level": space.n_states,
        "bound": bound.bound,
        "bound_seconds": bound_s,
        "bound_dp_solves": bound.evaluations,
        "index_table_seconds": table_s,
        "index_grid_points": 256,
        "index_table_shape": list(table.index.shape),
        "one_dp_solve_numpy_seconds": numpy_solve_s,
        "one_dp_solve_numba_seconds": numba_solve_s,
    }


def campaign_costs(reps: int) -> dict[str, Any]:
    env = ContinuousTimeEnvironment(
        SyntheticBernoulliEnvironment(1000), arrival_rate=R, completion_rate=MU
    )
    out = {}
    for pid in ("lagrangian-index", "opt-kg"):
        run_continuous_campaign(
            make_policy(pid), env, 1200, world_seed=0, policy_rng=np.random.default_rng(0)
        )  # warm-up, tables
        t = time.perf_counter()
        for rep in range(reps):
            run_continuous_campaign(
                make_policy(pid),
                env,
                1200,
                world_seed=rep + 1,
                policy_rng=np.random.default_rng(rep),
            )
        out[pid] = (time.perf_counter() - t) / reps
    return {"seconds_per_replication_K1000_U1200": out, "reps": reps}


def decisions_per_second(n_items: int) -> dict[str, Any]:
    budget = round(1.2 * n_items)
    lookahead = None if n_items <= 10_000 else 512
    problem = Problem(n_items=n_items, budget=budget)
    policy = LagrangianIndexPolicy(
        arrival_rate=R, completion_rate=MU, label_cap=8, max_lookahead=lookahead
    )
    t = time.perf_counter()
    policy.reset(problem, np.random.default_rng(0))
    reset_s = time.perf_counter() - t
    state = CampaignState.initial(problem)
    labels = np.random.default_rng(1).integers(0, 2, size=budget)
    t = time.perf_counter()
    n = 0
    while n < 200_000:  # the first 200,000 decisions of the campaign at most
        assignment = policy.select(state, worker=0)
        if assignment is None:
            break
        state.record_assignment(assignment)
        event = LabelEvent(assignment.item, 0, int(labels[n]))
        state.record_label(event, assignment)
        policy.observe(event)
        n += 1
    loop_s = time.perf_counter() - t
    return {
        "n_items": n_items,
        "decisions": n,
        "reset_seconds_incl_tables": reset_s,
        "loop_seconds": loop_s,
        "decisions_per_second": n / loop_s,
        "us_per_decision": 1e6 * loop_s / n,
        "max_lookahead": lookahead,
        "lookahead_change": policy.tables_[0].lookahead_change,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    sizes = [1_000, 10_000, 100_000] if args.quick else [1_000, 10_000, 100_000, 1_000_000]
    report: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "processor": platform.machine(),
        },
        "dp": dp_costs(),
        "campaign": campaign_costs(5 if args.quick else 20),
        "decisions": [decisions_per_second(k) for k in sizes],
    }
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)


if __name__ == "__main__":
    main()
