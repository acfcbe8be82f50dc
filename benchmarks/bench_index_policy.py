"""Hu & Frazier index policy: DP cost (bound, index tables) and decisions per second.

Run from the repository root:

    python benchmarks/bench_index_policy.py [--quick] [--json out.json]

Measures
1. the Lagrangian bound (golden section over scalar λ) and the index tables for K = 1000,
   U = 1200, r = 0.1, μ = 0.4 (Fig. 1's largest case): compiled (Numba) kernel, and one DP
   solve with the NumPy reference for comparison;
2. one continuous-time campaign at K = 1000, U = 1200 (index policy and Opt-KG);
3. index-policy decisions per second in one campaign at K = 10^3 … 10^6 tasks (instantaneous
   labels, pull mode, U = 1.2 K, the first min(U, ``--decisions``) decisions timed, tables
   cut at 512 arrivals to go for K > 10^4 — ``max_lookahead``, whose convergence is
   reported): the decision cost does not grow with K. Wall and CPU (``thread_time``: less
   sensitive to a shared machine) µs per decision, and the policy's own CPU share (the loop
   minus the same assignments replayed without the policy); ``reset`` with and without
   building the tables; a digest of the decisions (to compare code versions).
   ``--sizes 100000,1000000,10000000 --only-decisions --repeat 3`` measures just this part;
   ``--profile`` prints each loop's cProfile.
4. the continuous-time campaign of Fig. 1 (``ContinuousTimeEnvironment`` around a synthetic
   world, r = 0.1, μ = 0.4, U = 1.2 K) on the reference loop (``drive``) and compiled
   (``engine.index_loop``): CPU µs per hired worker of the whole campaign — arrivals,
   completions, the policy — without ``reset`` (tables built before), best of ``--repeat``,
   and whether both gave the same run (label counts, log, outcome).
   ``--continuous-sizes 1000,100000,1000000`` (default by ``--quick``); ``--only-continuous``
   measures just this part.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import math
import os
import platform
import pstats
import sys
import time
from typing import Any

import numpy as np

from crowdbudget.bounds import index_tables, single_task
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
from crowdbudget.types import Assignment, CampaignState, LabelEvent, Problem

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
    index_tables._TABLES.clear()
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
    single_task.backward_induction(
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


def _loop(policy: LagrangianIndexPolicy, problem: Problem, labels: Any, n_max: int) -> list[int]:
    state = CampaignState.initial(problem)
    items: list[int] = []
    for n in range(n_max):
        assignment = policy.select(state, worker=0)
        if assignment is None:
            break
        state.record_assignment(assignment)
        event = LabelEvent(assignment.item, 0, int(labels[n]))
        state.record_label(event, assignment)
        policy.observe(event)
        items.append(assignment.item)
    return items


def _harness(problem: Problem, labels: Any, items: list[int]) -> None:
    """The same loop without the policy: the assignments it made, replayed."""
    state = CampaignState.initial(problem)
    for n, item in enumerate(items):
        assignment = Assignment(item=item, worker=0, price=1.0)
        state.record_assignment(assignment)
        event = LabelEvent(assignment.item, 0, int(labels[n]))
        state.record_label(event, assignment)


def decisions_per_second(
    n_items: int, max_decisions: int = 200_000, repeat: int = 1, profile: bool = False
) -> dict[str, Any]:
    """One campaign's first ``max_decisions`` decisions (best of ``repeat``): wall and CPU µs
    per decision of the whole loop, and the loop's CPU minus the same loop replayed without
    the policy (the harness: ``CampaignState`` bookkeeping, ``Assignment``/``LabelEvent``) —
    the policy's own share. ``reset`` is timed twice: the first builds the index tables."""
    budget = round(1.2 * n_items)
    lookahead = None if n_items <= 10_000 else 512
    problem = Problem(n_items=n_items, budget=budget)
    labels = np.random.default_rng(1).integers(0, 2, size=min(budget, max_decisions))

    def fresh() -> LagrangianIndexPolicy:
        return LagrangianIndexPolicy(
            arrival_rate=R, completion_rate=MU, label_cap=8, max_lookahead=lookahead
        )

    policy = fresh()
    t = time.perf_counter()
    policy.reset(problem, np.random.default_rng(0))
    reset_tables_s = time.perf_counter() - t
    best: dict[str, float] = {}
    digest = ""
    n = 0
    for _ in range(repeat):
        policy = fresh()
        t = time.perf_counter()
        policy.reset(problem, np.random.default_rng(0))
        reset_s = time.perf_counter() - t
        wall, cpu = time.perf_counter(), time.thread_time()
        items = _loop(policy, problem, labels, labels.shape[0])
        loop_cpu, loop_wall = time.thread_time() - cpu, time.perf_counter() - wall
        cpu = time.thread_time()
        _harness(problem, labels, items)
        harness_cpu = time.thread_time() - cpu
        n = len(items)
        digest = hashlib.sha256(np.asarray(items, dtype=np.int64).tobytes()).hexdigest()[:16]
        for key, value in (
            ("reset", reset_s),
            ("loop_wall", loop_wall),
            ("loop_cpu", loop_cpu),
            ("harness_cpu", harness_cpu),
            ("policy_cpu", loop_cpu - harness_cpu),
        ):
            best[key] = min(best.get(key, math.inf), value)
    if profile:
        policy = fresh()
        policy.reset(problem, np.random.default_rng(0))
        profiler = cProfile.Profile()
        profiler.enable()
        _loop(policy, problem, labels, labels.shape[0])
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(12)
    return {
        "n_items": n_items,
        "decisions": n,
        "decisions_sha256": digest,
        "reset_seconds_incl_tables": reset_tables_s,
        "reset_seconds": best["reset"],
        "loop_seconds": best["loop_wall"],
        "decisions_per_second": n / best["loop_wall"],
        "us_per_decision": 1e6 * best["loop_wall"] / n,
        "us_per_decision_cpu": 1e6 * best["loop_cpu"] / n,
        "us_per_decision_harness_cpu": 1e6 * best["harness_cpu"] / n,
        "us_per_decision_policy_cpu": 1e6 * best["policy_cpu"] / n,
        "max_lookahead": lookahead,
        "lookahead_change": policy.tables_[0].lookahead_change,
    }


def continuous_campaign_costs(n_items: int, repeat: int = 1) -> dict[str, Any]:
    """One Fig. 1 campaign at K = ``n_items``, U = 1.2 K: CPU µs per hired worker of the
    reference loop and of the compiled one (best of ``repeat``; the first, compiling or
    loading the kernel and building the tables, is not timed), and whether they agree."""
    from crowdbudget.engine import index_loop
    from crowdbudget.engine.loop import ArrivalClock, StopAtSpend, drive

    budget = round(1.2 * n_items)
    env = ContinuousTimeEnvironment(
        SyntheticBernoulliEnvironment(n_items), arrival_rate=R, completion_rate=MU
    )
    params: dict[str, Any] = {"arrival_rate": R, "completion_rate": MU}
    if n_items > 10_000:
        params.update(label_cap=8, max_lookahead=512)
    results: dict[str, Any] = {}
    digests = {}
    for engine in ("reference", "compiled"):
        best = math.inf
        for attempt in range(repeat + 1):
            env.reset(seed=1)
            problem = env.problem(float(budget))
            state = CampaignState.initial(problem)
            policy = LagrangianIndexPolicy(**params)
            policy.reset(problem, np.random.default_rng(0))
            cpu = time.thread_time()
            if engine == "compiled":
                outcome = index_loop.run_compiled(policy, env, state, budget)
            else:
                outcome = drive(policy, env, state, ArrivalClock(env, budget), StopAtSpend())
            seconds = time.thread_time() - cpu
            if attempt > 0:
                best = min(best, seconds)
        digests[engine] = hashlib.sha256(
            state.label_counts.tobytes() + state.label_log.items.tobytes() + repr(outcome).encode()
        ).hexdigest()[:16]
        results[f"{engine}_us_per_worker_cpu"] = 1e6 * best / outcome.assignments
    results.update(
        n_items=n_items,
        workers_hired=budget,
        same_run=digests["reference"] == digests["compiled"],
        digest=digests["compiled"],
    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--sizes", default=None, help="comma-separated K (default by --quick)")
    parser.add_argument("--decisions", type=int, default=200_000, help="decisions timed")
    parser.add_argument("--repeat", type=int, default=1, help="best of N campaigns per size")
    parser.add_argument("--only-decisions", action="store_true", help="skip parts 1 and 2")
    parser.add_argument("--profile", action="store_true", help="cProfile of each loop (stderr)")
    parser.add_argument("--continuous-sizes", default=None, help="comma-separated K, part 4")
    parser.add_argument("--only-continuous", action="store_true", help="run part 4 only")
    args = parser.parse_args()
    if args.sizes:
        sizes = [int(k) for k in args.sizes.split(",")]
    else:
        sizes = [1_000, 10_000, 100_000] if args.quick else [1_000, 10_000, 100_000, 1_000_000]
    report: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "processor": platform.machine(),
            "load_average": os.getloadavg(),
        },
    }
    if not args.only_decisions and not args.only_continuous:
        report["dp"] = dp_costs()
        report["campaign"] = campaign_costs(5 if args.quick else 20)
    if not args.only_continuous:
        report["decisions"] = [
            decisions_per_second(k, args.decisions, args.repeat, args.profile) for k in sizes
        ]
    if not args.only_decisions:
        if args.continuous_sizes:
            continuous = [int(k) for k in args.continuous_sizes.split(",")]
        else:
            continuous = [1_000, 100_000] if args.quick else [1_000, 100_000, 1_000_000]
        report["continuous"] = [continuous_campaign_costs(k, args.repeat) for k in continuous]
    report["machine"]["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)


if __name__ == "__main__":
    main()
