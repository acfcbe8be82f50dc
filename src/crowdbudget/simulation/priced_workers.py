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
from typing import Any

import numpy as np

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.types import Assignment, LabelEvent, Problem, StepResult, WorkerSpec


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


class PricedWorkerWorld(LabelingEnvironment):
    """The world of §6 as an environment for the engine (:func:`crowdbudget.engine.loop.drive`):
    ``n_tasks`` tasks with true labels drawn uniformly, answered by ``pool``'s workers (each
    answer independent, §2), every label costing its worker's price.

    ``rng`` is the world's generator, used from construction: the true labels are drawn at
    once and every answer draws from it. Giving the policy the same generator reproduces the
    per-task simulation's single stream exactly (the reference ``run_bkube`` of
    tests/reference/priced.py and ``b-kube`` through the engine make the same decisions:
    tested).

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
