"""BBTA decisions per second for 10^3..10^5 tasks and 10..100 workers.

One decision = select + observe (label from a pre-drawn answer matrix, 5 contexts, N' = 1).
Each configuration runs ``--steps`` decisions after the exploration phase; the cost per step
is O(labels + tasks of one context) (module docstring of policies/bandits/bbta.py).

    .venv/bin/python benchmarks/bench_bbta.py [--steps 2000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from crowdbudget.policies.bandits.bbta import BanditTaskAssignment
from crowdbudget.types import CampaignState, LabelEvent, Problem


def bench(n_tasks: int, n_workers: int, steps: int, n_contexts: int = 5) -> float:
    rng = np.random.default_rng(0)
    contexts = rng.integers(0, n_contexts, n_tasks)
    answers = rng.integers(0, 2, (n_tasks, n_workers))
    budget = n_contexts * n_workers + steps
    problem = Problem(n_items=n_tasks, budget=budget, n_workers=n_workers, contexts=contexts)
    policy = BanditTaskAssignment(n_explore=1)
    policy.reset(problem, np.random.default_rng(1))
    state = CampaignState.initial(problem)

    def one() -> None:
        a = policy.select(state)
        assert a is not None and a.worker is not None
        state.record_assignment(a)
        event = LabelEvent(item=a.item, worker=a.worker, label=int(answers[a.item, a.worker]))
        state.record_label(event, a)
        policy.observe(event)

    for _ in range(n_contexts * n_workers):  # exploration phase
        one()
    start = time.perf_counter()
    for _ in range(steps):
        one()
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    print(f"{'tasks':>8} {'workers':>8} {'decisions/s':>12}")
    for n_tasks in (1_000, 10_000, 100_000):
        for n_workers in (10, 100):
            rate = bench(n_tasks, n_workers, args.steps)
            print(f"{n_tasks:>8} {n_workers:>8} {rate:>12,.0f}")


if __name__ == "__main__":
    main()
