"""Workers with a price and a capacity under a money budget (Rangi, Franceschetti 2018, §2, §6).

*Multi-Armed Bandit Algorithms for Crowdsourcing Systems with Online Estimation of Workers'
Ability* (AAMAS 2018) models K workers; worker k answers an L-class task correctly with
probability ``p_k`` and otherwise picks one of the L - 1 wrong labels uniformly (§2), charges
``c_k`` per evaluation and performs at most ``M_k`` evaluations; the task master has a money
budget ``B``. A worker may be asked about the same task repeatedly and answers independently
each time (§2, "a worker k can be assigned a task multiple times").

§6 draws ``p_k ~ U[0.5, 1]``, ``v_k = 2 p_k - 1`` (Theorem 5.1 for binary majority vote) and
``c_k ~ U[v_k, 1 + v_k]``; set B replaces five workers of set A by spammers (``p_k = 0.5``).
Which five is not said; we replace the last five of the 20 drawn (the draw is i.i.d., so this
is a uniformly random choice), and a spammer keeps the price drawn for the worker it replaces
(the paper does not say how spammers are priced; keeping the price makes them look like good,
expensive workers, the hard case the text describes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from crowdbudget.exceptions import IneligibleAssignmentError, InvalidParameterError
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.types import Assignment, LabelEvent, Problem, StepResult, WorkerSpec

if TYPE_CHECKING:  # runtime import is local: policies.bandits imports this module
    from crowdbudget.policies.bandits.value import OnlineValueEstimator


@dataclass(frozen=True)
class PricedWorkerPool:
    """K priced, capacity-limited workers.

    Attributes:
        accuracy: shape (K,), probability ``p_k`` of the correct label, in [0, 1].
        price: shape (K,), cost ``c_k`` > 0 of one evaluation.
        capacity: shape (K,), integer limit ``M_k`` >= 0 on evaluations.
        n_classes: L >= 2.
    """

    accuracy: np.ndarray
    price: np.ndarray
    capacity: np.ndarray
    n_classes: int = 2

    def __post_init__(self) -> None:
        accuracy = np.asarray(self.accuracy, dtype=float)
        price = np.asarray(self.price, dtype=float)
        capacity = np.asarray(self.capacity)
        if accuracy.ndim != 1 or accuracy.size == 0:
            raise InvalidParameterError("accuracy must be a non-empty 1-D array of p_k")
        if price.shape != accuracy.shape or capacity.shape != accuracy.shape:
            raise InvalidParameterError(
                f"accuracy, price and capacity must have the same shape; got "
                f"{accuracy.shape}, {price.shape}, {capacity.shape}"
            )
        if np.any(~np.isfinite(accuracy)) or np.any((accuracy < 0) | (accuracy > 1)):
            raise InvalidParameterError("accuracy p_k must lie in [0, 1]")
        if np.any(~np.isfinite(price)) or np.any(price <= 0):
            raise InvalidParameterError("price c_k must be finite and > 0")
        if np.any(capacity < 0) or np.any(capacity != np.floor(capacity)):
            raise InvalidParameterError("capacity M_k must be a non-negative integer")
        if int(self.n_classes) < 2:
            raise InvalidParameterError(f"n_classes must be >= 2, got {self.n_classes}")
        object.__setattr__(self, "accuracy", accuracy)
        object.__setattr__(self, "price", price)
        object.__setattr__(self, "capacity", capacity.astype(np.int64))
        object.__setattr__(self, "n_classes", int(self.n_classes))

    @property
    def n_workers(self) -> int:
        return int(self.accuracy.size)

    @property
    def value(self) -> np.ndarray:
        """Value contributions ``v_k = 2 p_k - 1`` of majority vote with L = 2 (Theorem 5.1).

        For L > 2 classes and majority vote, eq. (11) gives ``p_k - (1 - p_k)/(L - 1)``
        (the vote for the true label minus that for one fixed wrong label).
        """
        return value_from_accuracy(self.accuracy, self.n_classes)

    def answer(self, worker: int, true_label: int, rng: np.random.Generator) -> int:
        """One independent answer of ``worker`` on a task whose true label is ``true_label``."""
        if rng.random() < self.accuracy[worker]:
            return true_label
        # a wrong label uniformly among the other L - 1 (§2)
        wrong = int(rng.integers(self.n_classes - 1))
        return wrong + (wrong >= true_label)


def value_from_accuracy(accuracy: np.ndarray, n_classes: int = 2) -> np.ndarray:
    """Theorem 5.1, eq. (11), for majority vote (``f_k(l, y) = 1{y = l}``).

    ``E[f(l*, Y) - f(l, Y)] = p_k - (1 - p_k)/(L - 1)`` for every wrong l, so the minimum over
    l is that value; with L = 2 it is ``2 p_k - 1``. Shape follows ``accuracy``.
    """
    accuracy = np.asarray(accuracy, dtype=float)
    return accuracy - (1.0 - accuracy) / (n_classes - 1)


def rangi_worker_sets(
    n_tasks: int, rng: np.random.Generator, *, n_workers: int = 20, n_spammers: int = 5
) -> tuple[PricedWorkerPool, PricedWorkerPool]:
    """Set A and set B of §6: ``p_k ~ U[0.5, 1]``, ``c_k ~ U[v_k, 1 + v_k]``, ``M_k = 0.6 T``.

    Set B is set A with the last ``n_spammers`` workers turned into spammers (``p_k = 0.5``).
    ``M_k = floor(0.6 T)`` (30 for T = 50, 60 for T = 100).
    """
    if n_tasks < 1:
        raise InvalidParameterError(f"n_tasks must be >= 1, got {n_tasks}")
    if not 0 <= n_spammers <= n_workers:
        raise InvalidParameterError(
            f"n_spammers must be between 0 and n_workers={n_workers}, got {n_spammers}"
        )
    accuracy = rng.uniform(0.5, 1.0, size=n_workers)
    value = 2.0 * accuracy - 1.0
    price = rng.uniform(value, 1.0 + value)
    # a price of exactly 0 has probability 0, but keep it strictly positive for the checks
    price = np.maximum(price, 1e-6)
    capacity = np.full(n_workers, int(np.floor(0.6 * n_tasks)), dtype=np.int64)
    set_a = PricedWorkerPool(accuracy, price, capacity, 2)
    accuracy_b = accuracy.copy()
    accuracy_b[n_workers - n_spammers :] = 0.5
    set_b = PricedWorkerPool(accuracy_b, price.copy(), capacity.copy(), 2)
    return set_a, set_b


# ---------------------------------------------------------------------------------------------
# The per-task loop of §6
# ---------------------------------------------------------------------------------------------


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


@dataclass
class LabelingOutcome:
    """What a run of a policy produced.

    Attributes:
        true_labels: shape (T,), the hidden labels.
        predicted: shape (T,), eq. (10) per task, -1 for tasks never labeled.
        labels_per_task: shape (T,), evaluations per task.
        selections: shape (n_evaluations,), the worker of every evaluation in order.
        spent: money used.
        remaining_capacity: shape (K,), ``m_k`` at the end.
    """

    true_labels: np.ndarray
    predicted: np.ndarray
    labels_per_task: np.ndarray
    selections: np.ndarray
    spent: float
    remaining_capacity: np.ndarray

    @property
    def tasks_completed(self) -> int:
        """§6's "number of tasks performed": tasks that received at least one evaluation (and
        hence a label). For B-KUBE these are the tasks the per-task loop moved past (stop rule
        met) plus the task it was on when the budget ran out; for the benchmarks every task of
        the single step (and of exploration)."""
        return int(np.count_nonzero(self.labels_per_task))

    @property
    def error(self) -> float:
        """Classification error (eq. 1) over the completed tasks; 0 if none was completed."""
        done = self.labels_per_task > 0
        if not np.any(done):
            return 0.0
        return float(np.mean(self.predicted[done] != self.true_labels[done]))


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
    from crowdbudget.policies.bandits.value import weighted_vote

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


class PricedWorkerWorld(LabelingEnvironment):
    """The world of §6 as an environment for the engine (:func:`crowdbudget.engine.loop.drive`):
    ``n_tasks`` tasks with true labels drawn uniformly, answered by ``pool``'s workers (each
    answer independent, §2), every label costing its worker's price.

    ``rng`` is the world's generator, used from construction: the true labels are drawn at
    once (as :class:`_LoopState` does) and every answer draws from it. Giving the policy the
    same generator reproduces the per-task simulation's single stream exactly
    (:func:`run_bkube` and ``b-kube`` through the engine make the same decisions: tested).

    Push mode only: the policy picks the worker.
    """

    def __init__(self, pool: PricedWorkerPool, n_tasks: int, rng: np.random.Generator) -> None:
        if n_tasks < 1:
            raise InvalidParameterError(f"n_tasks must be >= 1, got {n_tasks}")
        self.pool = pool
        self.n_items = int(n_tasks)
        self.n_classes = pool.n_classes
        self._rng = rng
        self.true_labels = rng.integers(pool.n_classes, size=n_tasks)

    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> dict[str, Any]:
        return {}  # the world is drawn at construction, from the shared generator

    def step(self, assignment: Assignment) -> StepResult:
        worker = assignment.worker
        if worker is None:
            raise InvalidParameterError("priced workers answer only assignments naming a worker")
        label = self.pool.answer(worker, int(self.true_labels[assignment.item]), self._rng)
        cost = float(self.pool.price[worker])
        return StepResult(LabelEvent(item=assignment.item, worker=worker, label=label, cost=cost))

    def arriving_worker(self) -> int:
        raise InvalidParameterError("priced workers are chosen by the policy (push mode)")

    def problem(self, budget: float) -> Problem:
        workers = WorkerSpec(
            self.pool.n_workers, prices=self.pool.price, capacities=self.pool.capacity
        )
        return Problem(
            n_items=self.n_items, budget=budget, n_classes=self.n_classes, workers=workers
        )


# at the end: the policies.bandits package imports this module while it initialises
from crowdbudget.policies.bandits.value import (  # noqa: E402
    confident as confident,
)
from crowdbudget.policies.bandits.value import (  # noqa: E402
    rescore_leave_one_out as _rescore_leave_one_out,
)
