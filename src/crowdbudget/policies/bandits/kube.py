"""B-KUBE (Rangi, Franceschetti 2018, Algorithm 1; Tran-Thanh et al. 2014).

Each iteration n: if no worker is feasible (``c_k <= B_n`` and ``m_k > 0``) stop; during the
initialisation phase (the first K iterations) select worker n; afterwards run the
density-ordered greedy algorithm (Algorithm 2, :func:`greedy_bounded_knapsack` on the UCB
values of :func:`ucb_values`) for the remaining budget ``B_n`` and capacities ``m_k``, giving
counts ``m*_{k,n}``, and select worker j with probability ``m*_{j,n} / sum_k m*_{k,n}``. Then
``B_{n+1} = B_n - c_{i(n)}``, ``m_{i(n)} -= 1`` and ``v_hat_{i(n)}`` is updated (§5).

Decision: if worker n of the initialisation phase is infeasible (its price exceeds the budget
left) it is skipped and the next untried feasible worker is taken; when no untried worker is
feasible the greedy phase starts. Untried workers keep an infinite UCB bonus there.

B-KUBE needs prices and capacities per worker and a money budget, which the
:class:`~crowdbudget.policies.base.AllocationPolicy` contract (items, unit costs, one budget in
labels) does not carry, so it is not registered in ``policies/builtin.py``; it runs in the
per-task simulation of :mod:`crowdbudget.simulation.priced_workers` (``run_bkube``).
"""

from __future__ import annotations

import numpy as np

from crowdbudget.policies.bandits.knapsack import greedy_bounded_knapsack, ucb_values
from crowdbudget.policies.bandits.value import OnlineValueEstimator
from crowdbudget.simulation.priced_workers import (
    LabelingOutcome,
    PricedWorkerPool,
    _LoopState,
    run_per_task,
)


class BKubeSelector:
    """Algorithm 1's choice of ``i(n)``; arrays have shape (K,)."""

    def __init__(self, price: np.ndarray, capacity: np.ndarray) -> None:
        self.price = np.asarray(price, dtype=float)
        self.capacity = np.asarray(capacity, dtype=np.int64)

    def select(
        self,
        remaining_budget: float,
        remaining_capacity: np.ndarray,
        iteration: int,
        value_estimate: np.ndarray,
        rng: np.random.Generator,
    ) -> int:
        feasible = (self.price <= remaining_budget + 1e-9) & (remaining_capacity > 0)
        untried = feasible & (remaining_capacity == self.capacity)
        if iteration <= self.price.size and np.any(untried):
            return int(np.flatnonzero(untried)[0])
        optimistic = ucb_values(value_estimate, self.capacity, remaining_capacity, iteration)
        counts = greedy_bounded_knapsack(
            optimistic, self.price, remaining_capacity, remaining_budget + 1e-9
        )
        total = counts.sum()
        if total == 0:  # pragma: no cover - cannot happen while a worker is feasible
            return int(np.flatnonzero(feasible)[0])
        return int(rng.choice(counts.size, p=counts / total))


def run_bkube(
    pool: PricedWorkerPool,
    budget: float,
    n_tasks: int,
    rng: np.random.Generator,
    *,
    stop_constant: float = 1.0,
    max_labels_per_task: int | None = None,
    feedback: str = "estimate",
    pace: bool = False,
) -> LabelingOutcome:
    """B-KUBE with MV and the per-task loop of §6; see :func:`run_per_task` (``pace=True``:
    our budget-paced variant, ``b-kube:pace=budget``)."""
    state = _LoopState(pool, budget, n_tasks, rng)
    estimator = OnlineValueEstimator(pool.n_workers, pool.n_classes)
    run_per_task(
        state,
        BKubeSelector(pool.price, pool.capacity),
        estimator,
        rng,
        stop_constant=stop_constant,
        max_labels_per_task=max_labels_per_task,
        feedback=feedback,
        pace=pace,
    )
    return state.outcome()
