"""The per-task simulation of Rangi & Franceschetti (2018) §6, kept as the reference the
registered policies are checked against (issue #16: it left ``src/``).

``b-kube`` (:class:`~crowdbudget.policies.bandits.kube.BKubePolicy`) and the ε-first family
(:class:`~crowdbudget.policies.bandits.epsilon_first.EpsilonFirstPolicy`: ``bounded-eps-first``,
``eps-first``, ``trailsourcing``) driven by the engine on a
:class:`~crowdbudget.simulation.priced_workers.PricedWorkerWorld` make the decisions of these
functions exactly when the world and the policy share one generator
(tests/test_bkube_policy.py); the reproduction (``bkube-fig1``, ``bkube-fig2``) runs the
registered policies. ``feedback="truth"`` (an oracle scoring answers against the true label)
is :class:`~crowdbudget.experiments.papers.rangi2018.TruthFeedbackBKube` there.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from crowdbudget.exceptions import IneligibleAssignmentError, InvalidParameterError
from crowdbudget.policies.bandits.epsilon_first import (
    LAYOUTS,
    RoundRobinSelector,
    _check_epsilon,
    best_worker_counts,
    knapsack_counts,
    single_step_layout,
)
from crowdbudget.policies.bandits.kube import BKubeSelector
from crowdbudget.policies.bandits.value import (
    OnlineValueEstimator,
    confident,
    weighted_vote,
)
from crowdbudget.policies.bandits.value import (
    rescore_leave_one_out as _rescore_leave_one_out,
)
from crowdbudget.simulation.priced_workers import LabelingOutcome, PricedWorkerPool


class WorkerSelector(Protocol):
    """Chooses the next worker; ``select`` must return a feasible worker (price fits, capacity
    left). ``value_estimate`` is the current ``v_hat`` (shape (K,))."""

    def select(
        self,
        remaining_budget: float,
        remaining_capacity: np.ndarray,
        iteration: int,
        value_estimate: np.ndarray,
        rng: np.random.Generator,
    ) -> int: ...


class _LoopState:
    """Mutable state shared by the per-task loop and single-step assignment (arrays (K,), (T,))."""

    def __init__(
        self, pool: PricedWorkerPool, budget: float, n_tasks: int, rng: np.random.Generator
    ) -> None:
        if not np.isfinite(budget) or budget < 0:
            raise InvalidParameterError(f"budget must be finite and >= 0, got {budget}")
        if n_tasks < 1:
            raise InvalidParameterError(f"n_tasks must be >= 1, got {n_tasks}")
        self.pool = pool
        self.remaining_budget = float(budget)
        self.budget = float(budget)
        self.remaining_capacity = pool.capacity.copy()
        self.true_labels = rng.integers(pool.n_classes, size=n_tasks)
        self.predicted = np.full(n_tasks, -1, dtype=np.int64)
        self.labels_per_task = np.zeros(n_tasks, dtype=np.int64)
        self.selections: list[int] = []
        self.next_task = 0

    def feasible(self) -> np.ndarray:
        """Algorithm 1's check: workers with ``c_k <= B_n`` and ``m_k > 0`` (bool, shape (K,))."""
        # a relative tolerance keeps a worker whose price equals the remaining budget up to
        # rounding of the running subtraction
        fits = self.pool.price <= self.remaining_budget + 1e-9 * max(1.0, self.budget)
        return fits & (self.remaining_capacity > 0)

    def pay(self, worker: int) -> None:
        if not self.feasible()[worker]:
            raise IneligibleAssignmentError(
                f"worker {worker} is not feasible (price {self.pool.price[worker]:.4g}, "
                f"remaining budget {self.remaining_budget:.4g}, capacity left "
                f"{self.remaining_capacity[worker]})"
            )
        self.remaining_budget -= float(self.pool.price[worker])
        self.remaining_capacity[worker] -= 1
        self.selections.append(worker)

    def outcome(self) -> LabelingOutcome:
        return LabelingOutcome(
            true_labels=self.true_labels,
            predicted=self.predicted,
            labels_per_task=self.labels_per_task,
            selections=np.asarray(self.selections, dtype=np.int64),
            spent=self.budget - max(self.remaining_budget, 0.0),
            remaining_capacity=self.remaining_capacity.copy(),
        )


FEEDBACKS = ("estimate", "leave-one-out", "truth")


def run_per_task(
    state: _LoopState,
    selector: WorkerSelector,
    estimator: OnlineValueEstimator,
    rng: np.random.Generator,
    *,
    budget_limit: float | None = None,
    max_evaluations: int | None = None,
    stop_constant: float = 1.0,
    max_labels_per_task: int | None = None,
    feedback: str = "estimate",
    pace: bool = False,
) -> None:
    """One task at a time (§6): ask the selector for a worker, add the answer to the task's
    weighted vote, update ``p_hat`` against the current estimate (§5), move to the next task
    once :func:`confident` holds (or ``max_labels_per_task`` is reached). Stops when no worker
    is feasible, all tasks are done, ``budget_limit`` money has been spent in this call, or
    ``max_evaluations`` were made. A task left unfinished keeps its current estimate.

    ``pace=True`` is our budget-paced variant (``b-kube:pace=budget``, not in the paper). The
    paper's loop spends what the stop rule asks on each task in turn, so with a small budget it
    reaches only the first tasks (≈ 8–10 labels per task with the cheap p ≈ 0.67 workers the
    knapsack prefers). Paced, a task also ends once the money spent on it reaches its share of
    what is left, ``B_start / (tasks not yet started + 1)`` with ``B_start`` the budget left
    when the task starts, or once the money left would no longer pay one more label for the
    current task and one for each task not yet started at the mean price paid so far
    (``B_n < (tasks not yet started + 1) · mean price``: a label can cost up to twice the
    share, so the share alone let early tasks starve the last ones — 92–96 of 100 tasks
    reached at B = 100). Every task is then reached whenever the budget allows about one label
    per task. If money and capacity remain after the last task, a second pass spends it one label
    at a time on the task whose vote is least decided (smallest gap between its two leading
    contributions; ties by fewer labels, then smallest index) among the tasks where
    :func:`confident` does not hold yet, until every task is confident or nothing is feasible.
    Worker choice and ``p_hat`` are unchanged.

    ``feedback="leave-one-out"`` (our variant, ``…:feedback=leave-one-out``) scores every
    label of a task against the weighted vote of the task's *other* labels, re-scored each time
    the task gets a label (agreement 1 if the label is the unique leading answer of the others,
    1/m if it is one of m tied leaders, 0 otherwise; a label alone on its task is not scored).
    The paper's rule judges a label against a vote that includes it, so the first label of a
    task always "agrees" and a worker's ``p_hat`` is pulled towards 1 when tasks get few labels
    (the budget-paced variant gives 2–3 per task): spammers then look like good workers.

    ``feedback="truth"`` scores answers against the true label instead of the current
    estimate (an oracle used only to isolate the bandit part for the regret curve: the
    reward of an evaluation then has mean ``p_k``, as in the MAB analysis of §4).
    """
    if feedback not in FEEDBACKS:
        raise InvalidParameterError(
            f"feedback must be one of {', '.join(FEEDBACKS)}, got {feedback!r}"
        )
    start_budget = state.remaining_budget
    n_tasks = state.true_labels.size
    weights = estimator.weights
    task_votes = np.zeros((n_tasks, state.pool.n_classes))
    settled = np.zeros(n_tasks, dtype=bool)
    # leave-one-out feedback: every task's labels (worker, answer) and their current scores
    task_labels: list[list[tuple[int, int]]] = [[] for _ in range(n_tasks)]
    task_scores: list[list[float | None]] = [[] for _ in range(n_tasks)]
    made = 0
    iteration = len(state.selections)
    share = np.inf
    spent_on_task = 0.0

    def available_money() -> tuple[float, np.ndarray]:
        feasible = state.feasible()
        available = state.remaining_budget
        if budget_limit is not None:
            # the selector sees only the money this phase may still spend
            available = min(available, budget_limit - (start_budget - state.remaining_budget))
            feasible &= state.pool.price <= available + 1e-9
        return available, feasible

    def evaluate(task: int, available: float, feasible: np.ndarray) -> bool:
        """One evaluation of ``task``; returns whether the task is now confident."""
        nonlocal iteration, made
        iteration += 1
        worker = selector.select(
            available, state.remaining_capacity, iteration, estimator.value_, rng
        )
        if not feasible[worker]:
            raise IneligibleAssignmentError(f"selector chose infeasible worker {worker}")
        state.pay(worker)
        made += 1
        votes = task_votes[task]
        answer = state.pool.answer(worker, int(state.true_labels[task]), rng)
        votes[answer] += weights[worker]
        state.labels_per_task[task] += 1
        estimate = weighted_vote(votes, rng)
        state.predicted[task] = estimate
        if feedback == "leave-one-out":
            task_labels[task].append((worker, answer))
            task_scores[task].append(None)
            _rescore_leave_one_out(estimator, votes, weights, task_labels[task], task_scores[task])
        else:
            reference = estimate if feedback == "estimate" else int(state.true_labels[task])
            estimator.update(worker, answer == reference)
        settled[task] = confident(votes, int(state.labels_per_task[task]), stop_constant)
        return bool(settled[task])

    while state.next_task < n_tasks:
        if max_evaluations is not None and made >= max_evaluations:
            break
        available, feasible = available_money()
        if not np.any(feasible):
            break
        task = state.next_task
        if pace and state.labels_per_task[task] == 0:
            # this task's share of the money left, fixed when the task starts
            share = available / (n_tasks - task)
            spent_on_task = 0.0
        before = state.remaining_budget
        done = evaluate(task, available, feasible)
        spent_on_task += before - state.remaining_budget
        n_labels = int(state.labels_per_task[task])
        # made >= 1 here, so the mean price paid in this call is well defined
        mean_price = (start_budget - state.remaining_budget) / made
        if (
            done
            or (max_labels_per_task is not None and n_labels >= max_labels_per_task)
            # the share is compared with a tolerance: it is a quotient of sums of prices
            or (pace and spent_on_task >= share - 1e-9)
            or (pace and state.remaining_budget < (n_tasks - task) * mean_price)
        ):
            state.next_task += 1
    if state.next_task < n_tasks and state.labels_per_task[state.next_task] > 0:
        # close the partial task: later phases start on a fresh task
        state.next_task += 1
    if not pace or state.next_task < n_tasks:
        return
    # second pass (pace=True): the least-decided unsettled task, one label at a time
    while max_evaluations is None or made < max_evaluations:
        available, feasible = available_money()
        open_tasks = np.flatnonzero(~settled)
        if not np.any(feasible) or open_tasks.size == 0:
            break
        ordered = np.sort(task_votes[open_tasks], axis=1)
        gap = ordered[:, -1] - ordered[:, -2]
        pick = np.lexsort((open_tasks, state.labels_per_task[open_tasks], gap))[0]
        evaluate(int(open_tasks[pick]), available, feasible)


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
    votes = np.zeros((left, state.pool.n_classes))
    load = np.zeros(left, dtype=np.int64)  # labels per free task, shape (T',)
    for offset, worker in single_step_layout(counts, left, layout):
        state.pay(worker)
        task = first + offset
        answer = state.pool.answer(worker, int(state.true_labels[task]), rng)
        votes[offset, answer] += estimator.weights[worker]
        load[offset] += 1
        state.labels_per_task[task] += 1
    labeled = np.flatnonzero(load > 0)
    for task_offset in labeled:
        state.predicted[first + task_offset] = weighted_vote(votes[task_offset], rng)
    state.next_task = first + (int(labeled.max()) + 1 if labeled.size else 0)


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
    counts = knapsack_counts(
        estimator.value_, state.pool.price, state.remaining_capacity, state.remaining_budget
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
    counts = best_worker_counts(
        estimator.value_, pool.price, state.remaining_capacity, state.remaining_budget
    )
    assign_single_step(state, counts, estimator, rng, layout=layout)
    return state.outcome()


def run_trailsourcing(
    pool: PricedWorkerPool,
    budget: float,
    n_tasks: int,
    rng: np.random.Generator,
    *,
    stop_constant: float = 1.0,
    layout: str = "spread",
    feedback: str = "estimate",
) -> LabelingOutcome:
    """One evaluation per worker, then greedy-BKP exploitation in one step."""
    state = _LoopState(pool, budget, n_tasks, rng)
    estimator = OnlineValueEstimator(pool.n_workers, pool.n_classes)
    explore(
        state,
        estimator,
        rng,
        budget_limit=None,
        max_evaluations=pool.n_workers,
        stop_constant=stop_constant,
        feedback=feedback,
    )
    exploit_bounded(state, estimator, rng, layout=layout)
    return state.outcome()
