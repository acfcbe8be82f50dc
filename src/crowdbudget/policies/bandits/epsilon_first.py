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
(no UCB term) with the budget and capacities left gives counts ``x_k``. ε-first: the single
worker of largest ``v_hat_k / c_k`` gets ``min(m_k, floor(B_left / c_k))`` evaluations. The
paper does not give ε; we use 0.1 by default (``epsilon``).

The single-step layout (§6; derived, since the paper gives no pseudo-code). §6 says the
benchmarks assign "the labeling tasks" to the workers in a single step, and that this is why
they are evaluated on a fixed set of T tasks with ``M_k = 0.6 T`` ("the number of tasks a
worker can perform"). It also explains why ε-F performs *fewer tasks* than bounded ε-F:
"the tasks are only assigned to the most efficient worker ... this limits the number of tasks
performed by ε-F". Both statements point to this layout (the order and the tie-breaking are
ours; a random choice of distinct tasks would also fit them):

* a worker performs *distinct* tasks of the set (``M_k`` counts tasks), so worker k's ``x_k``
  labels go to ``x_k`` different tasks (``x_k <= M_k < T``);
* the evaluations are spread over the tasks still unlabeled after exploration, so that the
  number of tasks performed grows with the number of workers used: workers are taken in
  decreasing ``x_k`` and each puts its labels on the ``x_k`` tasks with the fewest labels so
  far (ties in queue order). ε-F then performs ``x_best <= M_k`` tasks, bounded ε-F up to all
  T - as the paper says.

(The layout used before, worker k on the *first* ``x_k`` tasks of the queue, piles every
worker onto the same tasks; it makes bounded ε-F perform exactly as many tasks as ε-F,
``max_k x_k``, which contradicts the sentence above. It is kept as ``layout="queue"`` for the
side-by-side measurement in docs/reproductions.md.) A task's label is eq. (10) over its labels
(MV; a tie between two classes is broken at random); tasks with no label are not performed.
Under this layout the benchmarks perform all T tasks from small budgets on, so the paper's
claim that B-KUBE performs *more* tasks cannot hold in our runs (docs/reproductions.md).

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
    feedback: str = "estimate",
) -> None:
    """Round-robin exploration through the per-task loop (``feedback`` as in
    :func:`~crowdbudget.simulation.priced_workers.run_per_task`)."""
    run_per_task(
        state,
        RoundRobinSelector(state.pool.price),
        estimator,
        rng,
        budget_limit=budget_limit,
        max_evaluations=max_evaluations,
        stop_constant=stop_constant,
        feedback=feedback,
    )


LAYOUTS = ("spread", "queue")


def assign_single_step(
    state: _LoopState,
    counts: np.ndarray,
    estimator: OnlineValueEstimator,
    rng: np.random.Generator,
    *,
    layout: str = "spread",
) -> None:
    """The single-step exploitation of the benchmarks (§6); see the module docstring.

    Args:
        state: the loop state; tasks ``state.next_task ..`` (T' = T - next_task) are free.
        counts: shape (K,), evaluations ``x_k`` per worker (capped at T' each).
        estimator: supplies the vote weights (shape (K,)).
        rng: answers and tie-breaks.
        layout: ``"spread"`` (faithful: each worker on its ``x_k`` least-labeled free tasks,
            workers in decreasing ``x_k``) or ``"queue"`` (worker k on the first ``x_k``
            free tasks).
    """
    if layout not in LAYOUTS:
        raise InvalidParameterError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    n_tasks = state.true_labels.size
    first = state.next_task
    left = n_tasks - first
    if left <= 0:
        return
    counts = np.minimum(np.asarray(counts, dtype=np.int64), left)
    votes = np.zeros((left, state.pool.n_classes))
    load = np.zeros(left, dtype=np.int64)  # labels per free task, shape (T',)
    for worker in np.argsort(-counts, kind="stable"):
        take = int(counts[worker])
        if take == 0:
            continue
        # spread: the take least-labeled free tasks (a stable sort keeps queue order among
        # ties); queue: the first take free tasks
        spread = layout == "spread"
        offsets = np.argsort(load, kind="stable")[:take] if spread else np.arange(take)
        for offset in offsets:
            state.pay(int(worker))
            task = first + int(offset)
            answer = state.pool.answer(int(worker), int(state.true_labels[task]), rng)
            votes[offset, answer] += estimator.weights[worker]
            load[offset] += 1
            state.labels_per_task[task] += 1
    labeled = np.flatnonzero(load > 0)
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
    layout: str = "spread",
    feedback: str = "estimate",
) -> LabelingOutcome:
    """Bounded ε-first: ε·B exploration, then greedy-BKP single-step exploitation."""
    _check_epsilon(epsilon)
    state = _LoopState(pool, budget, n_tasks, rng)
    estimator = OnlineValueEstimator(pool.n_workers, pool.n_classes)
    explore(
        state,
        estimator,
        rng,
        budget_limit=epsilon * budget,
        stop_constant=stop_constant,
        feedback=feedback,
    )
    exploit_bounded(state, estimator, rng, layout=layout)
    return state.outcome()


def exploit_bounded(
    state: _LoopState,
    estimator: OnlineValueEstimator,
    rng: np.random.Generator,
    *,
    layout: str = "spread",
) -> None:
    """Greedy BKP on ``v_hat`` for the budget and capacities left, assigned in one step."""
    counts = greedy_bounded_knapsack(
        estimator.value_,
        state.pool.price,
        state.remaining_capacity,
        max(state.remaining_budget, 0.0) + 1e-9,
    )
    assign_single_step(state, counts, estimator, rng, layout=layout)


def run_epsilon_first(
    pool: PricedWorkerPool,
    budget: float,
    n_tasks: int,
    rng: np.random.Generator,
    *,
    epsilon: float = 0.1,
    stop_constant: float = 1.0,
    layout: str = "spread",
    feedback: str = "estimate",
) -> LabelingOutcome:
    """Budget-limited ε-first: ε·B exploration, then everything to the best ``v_hat/c``."""
    _check_epsilon(epsilon)
    state = _LoopState(pool, budget, n_tasks, rng)
    estimator = OnlineValueEstimator(pool.n_workers, pool.n_classes)
    explore(
        state,
        estimator,
        rng,
        budget_limit=epsilon * budget,
        stop_constant=stop_constant,
        feedback=feedback,
    )
    efficiency = estimator.value_ / pool.price
    usable = (state.remaining_capacity > 0) & (pool.price <= state.remaining_budget + 1e-9)
    counts = np.zeros(pool.n_workers, dtype=np.int64)
    if np.any(usable):
        best = int(np.flatnonzero(usable)[np.argmax(efficiency[usable])])
        counts[best] = min(
            int(state.remaining_capacity[best]),
            int(np.floor(state.remaining_budget / pool.price[best] + 1e-12)),
        )
    assign_single_step(state, counts, estimator, rng, layout=layout)
    return state.outcome()
