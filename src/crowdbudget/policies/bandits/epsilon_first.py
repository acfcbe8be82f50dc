"""Bounded ε-first and budget-limited ε-first (Tran-Thanh et al. 2014 / 2010), the baselines
of Rangi, Franceschetti 2018 §6.

Both spend ``epsilon * B`` on exploration, then assign the rest in a single step (§6:
"Assignment of the labeling tasks to the workers is a single step process in all the three
benchmark algorithms").

Exploration (decisions of ours; the paper only says "the same value contribution estimation
strategy"): workers are taken in cyclic order (skipping infeasible ones) and their labels go
to tasks one at a time through the same per-task loop as B-KUBE (move on when the stopping
rule holds), so ``p_hat_k`` is estimated exactly as for B-KUBE (§5).

Exploitation, bounded ε-first: the density-ordered greedy for BKP on the estimates ``v_hat_k``
(no UCB term) with the budget and capacities left gives counts ``x_k``; worker k then labels
the next ``x_k`` tasks of the queue (distinct tasks, starting with the first unlabeled one;
at most the number of tasks left), and each task's label is the MV of its labels. ε-first:
the single worker of largest ``v_hat_k / c_k`` gets ``min(m_k, floor(B_left / c_k))``
evaluations, one per task, in the same way. Tasks left with no label are not completed. The
paper does not give ε; we use 0.1 by default (``epsilon``).

Not registered in ``policies/builtin.py`` for the reason given in
:mod:`crowdbudget.policies.bandits.kube`.
"""

from __future__ import annotations

import numpy as np

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.bandits.knapsack import greedy_bounded_knapsack
from crowdbudget.policies.bandits.value import OnlineValueEstimator, weighted_vote
from crowdbudget.simulation.priced_workers import (
    LabelingOutcome,
    PricedWorkerPool,
    _LoopState,
    run_per_task,
)


class RoundRobinSelector:
    """The next feasible worker in cyclic order 0, 1, ..., K - 1, 0, ..."""

    def __init__(self, price: np.ndarray) -> None:
        self.price = np.asarray(price, dtype=float)
        self.position = 0

    def select(
        self,
        remaining_budget: float,
        remaining_capacity: np.ndarray,
        iteration: int,
        value_estimate: np.ndarray,
        rng: np.random.Generator,
    ) -> int:
        n_workers = self.price.size
        for step in range(n_workers):
            worker = (self.position + step) % n_workers
            if self.price[worker] <= remaining_budget + 1e-9 and remaining_capacity[worker] > 0:
                self.position = worker + 1
                return worker
        raise InvalidParameterError("no feasible worker to explore")  # pragma: no cover


def explore(
    state: _LoopState,
    estimator: OnlineValueEstimator,
    rng: np.random.Generator,
    *,
    budget_limit: float | None,
    max_evaluations: int | None = None,
    stop_constant: float = 1.0,
) -> None:
    """Round-robin exploration through the per-task loop."""
    run_per_task(
        state,
        RoundRobinSelector(state.pool.price),
        estimator,
        rng,
        budget_limit=budget_limit,
        max_evaluations=max_evaluations,
        stop_constant=stop_constant,
    )


def assign_single_step(
    state: _LoopState, counts: np.ndarray, estimator: OnlineValueEstimator, rng: np.random.Generator
) -> None:
    """Worker k labels the next ``counts[k]`` tasks of the queue; labels are eq. (10) per task."""
    n_tasks = state.true_labels.size
    first = state.next_task
    left = n_tasks - first
    if left <= 0:
        return
    counts = np.minimum(np.asarray(counts, dtype=np.int64), left)
    votes = np.zeros((left, state.pool.n_classes))
    for worker in np.flatnonzero(counts):
        for offset in range(int(counts[worker])):
            state.pay(int(worker))
            task = first + offset
            answer = state.pool.answer(int(worker), int(state.true_labels[task]), rng)
            votes[offset, answer] += estimator.weights[worker]
            state.labels_per_task[task] += 1
    labeled = np.flatnonzero(state.labels_per_task[first:] > 0)
    for task_offset in labeled:
        state.predicted[first + task_offset] = weighted_vote(votes[task_offset], rng)
    state.next_task = first + (int(labeled.max()) + 1 if labeled.size else 0)


def _check_epsilon(epsilon: float) -> None:
    if not 0.0 <= epsilon <= 1.0:
        raise InvalidParameterError(f"epsilon must lie in [0, 1], got {epsilon}")


def run_bounded_epsilon_first(
    pool: PricedWorkerPool,
    budget: float,
    n_tasks: int,
    rng: np.random.Generator,
    *,
    epsilon: float = 0.1,
    stop_constant: float = 1.0,
) -> LabelingOutcome:
    """Bounded ε-first: ε·B exploration, then greedy-BKP single-step exploitation."""
    _check_epsilon(epsilon)
    state = _LoopState(pool, budget, n_tasks, rng)
    estimator = OnlineValueEstimator(pool.n_workers, pool.n_classes)
    explore(state, estimator, rng, budget_limit=epsilon * budget, stop_constant=stop_constant)
    exploit_bounded(state, estimator, rng)
    return state.outcome()


def exploit_bounded(
    state: _LoopState, estimator: OnlineValueEstimator, rng: np.random.Generator
) -> None:
    """Greedy BKP on ``v_hat`` for the budget and capacities left, assigned in one step."""
    counts = greedy_bounded_knapsack(
        estimator.value_,
        state.pool.price,
        state.remaining_capacity,
        max(state.remaining_budget, 0.0) + 1e-9,
    )
    assign_single_step(state, counts, estimator, rng)


def run_epsilon_first(
    pool: PricedWorkerPool,
    budget: float,
    n_tasks: int,
    rng: np.random.Generator,
    *,
    epsilon: float = 0.1,
    stop_constant: float = 1.0,
) -> LabelingOutcome:
    """Budget-limited ε-first: ε·B exploration, then everything to the best ``v_hat/c``."""
    _check_epsilon(epsilon)
    state = _LoopState(pool, budget, n_tasks, rng)
    estimator = OnlineValueEstimator(pool.n_workers, pool.n_classes)
    explore(state, estimator, rng, budget_limit=epsilon * budget, stop_constant=stop_constant)
    efficiency = estimator.value_ / pool.price
    usable = (state.remaining_capacity > 0) & (pool.price <= state.remaining_budget + 1e-9)
    counts = np.zeros(pool.n_workers, dtype=np.int64)
    if np.any(usable):
        best = int(np.flatnonzero(usable)[np.argmax(efficiency[usable])])
        counts[best] = min(
            int(state.remaining_capacity[best]),
            int(np.floor(state.remaining_budget / pool.price[best] + 1e-12)),
        )
    assign_single_step(state, counts, estimator, rng)
    return state.outcome()
