"""The policy-contract side of Rangi & Franceschetti's (2018) §6 loop, shared by B-KUBE and the
ε-first family: one task at a time in index order, a majority vote per task, the §5 online
estimate of every worker's accuracy, and the move-to-next-task rule.

:class:`PerTaskWorkerPolicy` holds what the per-task simulation
(``run_per_task`` of tests/reference/priced.py) keeps in its loop: the prices and
capacities of the problem's workers (``Problem.workers``), the votes (eq. 9), the estimates
(eq. 10, ties at random with the policy's generator), ``p_hat`` (§5) and the current task. A
subclass decides the worker (:meth:`select`). With the world and the policy sharing one
generator — the simulation's single stream — a subclass driven by the engine makes the
simulation's decisions exactly (tests/test_bkube_policy.py).
"""

from __future__ import annotations

import numpy as np

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.bandits.value import (
    OnlineValueEstimator,
    confident,
    rescore_leave_one_out,
    weighted_vote,
)
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.types import Assignment, BoolArray, CampaignState, IntArray, LabelEvent, Problem

#: how a label moves p_hat (the regret curve's oracle, scoring against the true label, is a
#: subclass of the reproduction: rangi2018.TruthFeedbackBKube)
FEEDBACKS = ("estimate", "leave-one-out")

#: capacity of a worker the problem gives none: more labels than any budget can buy
UNLIMITED = 2**40


class PerTaskWorkerPolicy(AllocationPolicy):
    """Base of the priced-worker policies of Rangi & Franceschetti (2018); see the module
    docstring. Push mode only (the policy picks the worker).

    Args:
        stop_constant: C of the move-to-next-task rule
            (:func:`~crowdbudget.policies.bandits.value.confident`).
        feedback: how a label moves its worker's ``p_hat``: ``"estimate"`` (§5: agreement
            with the task's estimate including the label) or ``"leave-one-out"`` (our
            variant: every label of the task re-scored against the vote of the task's other
            labels; :func:`~crowdbudget.policies.bandits.value.rescore_leave_one_out`).

    Fitted attributes:
        predicted_: eq. (10) per item, -1 where no label came, shape (n_items,).
        labels_per_task_: labels per item, shape (n_items,).
        estimator_: the :class:`OnlineValueEstimator` (``p_hat``, ``v_hat``).
        selections_: the worker of every decision, in order.
        settled_: whether each task's vote is confident, shape (n_items,).
    """

    chooses_workers = True
    binary_only = False
    budget_aware = True
    needs_workers = True
    supports_pull = False
    keeps_select_state = True  # the current task, the iteration, choices and phase plans

    #: the id named in refusals
    policy_name = "this policy"

    def __init__(self, stop_constant: float = 1.0, feedback: str = "estimate") -> None:
        self.stop_constant = stop_constant
        self.feedback = feedback

    def validate_params(self) -> None:
        if not (np.isfinite(self.stop_constant) and self.stop_constant >= 0):
            raise InvalidParameterError(
                f"stop-constant must be a number >= 0, got {self.stop_constant!r}"
            )
        if self.feedback not in FEEDBACKS:
            raise InvalidParameterError(
                f"feedback must be one of {', '.join(FEEDBACKS)}, got {self.feedback!r}"
            )

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        workers = problem.workers
        if workers is None:
            raise InvalidParameterError(
                f"{self.policy_name} chooses among named workers; the problem has none "
                "(Problem.workers)"
            )
        n_workers = workers.n_workers
        self._prices = (
            np.full(n_workers, problem.default_price)
            if workers.prices is None
            else np.asarray(workers.prices, dtype=float)
        )
        self._capacities = (
            np.full(n_workers, UNLIMITED, dtype=np.int64)
            if workers.capacities is None
            else np.asarray(workers.capacities, dtype=np.int64)
        )
        self.estimator_ = OnlineValueEstimator(n_workers, problem.n_classes)
        self._votes = np.zeros((problem.n_items, problem.n_classes))
        self.labels_per_task_ = np.zeros(problem.n_items, dtype=np.int64)
        self.predicted_ = np.full(problem.n_items, -1, dtype=np.int64)
        self._chosen = np.zeros(n_workers, dtype=np.int64)
        self.selections_: list[int] = []
        self._task = 0
        self._iteration = 0
        self._rng = rng
        self._pair_index: tuple[IntArray, IntArray] | None = None
        self.settled_ = np.zeros(problem.n_items, dtype=bool)
        # leave-one-out feedback: every task's labels (worker, answer) and their scores
        self._task_labels: dict[int, list[tuple[int, int]]] = {}
        self._task_scores: dict[int, list[float | None]] = {}

    # ---- what the state allows -------------------------------------------------------------
    def _capacity_left(self, state: CampaignState) -> IntArray:
        """``m_k``: the state's when the problem has capacities (it counts pending work and
        releases), else the capacity minus the choices made."""
        if state.remaining_capacity is not None:
            return np.asarray(state.remaining_capacity, dtype=np.int64).copy()
        return self._capacities - self._chosen

    def _fits(self, state: CampaignState, money: float) -> BoolArray:
        """Workers whose price fits ``money`` (the relative tolerance of the simulation's
        loop state's ``feasible``, for running sums of prices)."""
        return np.asarray(self._prices <= money + 1e-9 * max(1.0, state.budget))

    def _available_workers(self, state: CampaignState, task: int) -> BoolArray | None:
        """Replay: the workers with an unused recorded label for ``task`` (None: any)."""
        pairs = state.pairs
        if pairs is None:
            return None
        if self._pair_index is None:
            order = np.argsort(pairs.items, kind="stable")
            ptr = np.zeros(state.n_items + 1, dtype=np.int64)
            np.cumsum(np.bincount(pairs.items, minlength=state.n_items), out=ptr[1:])
            self._pair_index = (order, ptr)
        order, ptr = self._pair_index
        mine = order[ptr[task] : ptr[task + 1]]
        mine = mine[pairs.remaining[mine] > 0]
        out = np.zeros(self._prices.shape[0], dtype=bool)
        out[pairs.workers[mine]] = True
        return out

    @staticmethod
    def _close_pairs(state: CampaignState, task: int, capacity: IntArray) -> bool:
        """Push mode under the live rules: zero the capacity (in place) of the workers who
        may not be named for ``task`` (blocked, or holding it already); whether any was.
        O(blocked workers + workers holding items), nothing offline."""
        availability = state.availability
        closed = [w for w in availability.blocked if w < capacity.shape[0]]
        closed += [
            w
            for w, items in availability.worker_items.items()
            if task in items and w < capacity.shape[0]
        ]
        if closed:
            capacity[closed] = 0
        return bool(closed)

    def _current_task(self, state: CampaignState, fits: BoolArray) -> tuple[int, IntArray] | None:
        """The task to label now and the capacity left per worker (zero for workers who
        cannot label it), passing tasks that left or that no feasible worker can label (a
        replay); None when no task is left or no affordable worker has capacity."""
        while self._task < state.n_items:
            task = self._task
            if not state.availability.is_open(task):
                # the task left (replay: no unused label for it), or it is closed to the
                # policy (push mode under the live rules: a control item)
                self._task += 1
                continue
            capacity = self._capacity_left(state)
            if not (fits & (capacity > 0)).any():
                return None  # no worker is affordable with capacity left
            available = self._available_workers(state, task)
            if available is not None:
                capacity = np.where(available, capacity, 0)
                if not (fits & (capacity > 0)).any():
                    self._task += 1  # replay: nobody feasible has a label for this task
                    continue
            if self._close_pairs(state, task, capacity) and not (fits & (capacity > 0)).any():
                self._task += 1  # live rules: every feasible worker has it or is blocked
                continue
            return task, capacity
        return None

    def _choose(self, task: int, worker: int) -> Assignment:
        self._chosen[worker] += 1
        self.selections_.append(worker)
        return Assignment(item=task, worker=worker, price=float(self._prices[worker]))

    # ---- learning ----------------------------------------------------------------------------
    def _vote(self, event: LabelEvent) -> np.ndarray:
        """Add ``event`` to its task's vote (eq. 9); returns the task's votes, shape (L,)."""
        votes = self._votes[event.item]
        votes[event.label] += self.estimator_.weights[event.worker]
        self.labels_per_task_[event.item] += 1
        return votes

    def _learn(self, event: LabelEvent, votes: np.ndarray) -> bool:
        """eq. (10) and the update of ``p_hat`` (``feedback``); returns whether the task is
        confident (also kept in ``settled_``)."""
        estimate = weighted_vote(votes, self._rng)
        self.predicted_[event.item] = estimate
        if self.feedback == "leave-one-out":
            labels = self._task_labels.setdefault(event.item, [])
            scores = self._task_scores.setdefault(event.item, [])
            labels.append((event.worker, event.label))
            scores.append(None)
            rescore_leave_one_out(self.estimator_, votes, self.estimator_.weights, labels, scores)
        else:
            self.estimator_.update(event.worker, event.label == self._reference(event, estimate))
        done = confident(votes, int(self.labels_per_task_[event.item]), self.stop_constant)
        self.settled_[event.item] = done
        return done

    def _reference(self, event: LabelEvent, estimate: int) -> int:
        """The label ``event`` is scored against for ``p_hat`` (``feedback="estimate"``): the
        task's current estimate (eq. 10, including the label)."""
        return estimate

    def observe(self, event: LabelEvent) -> None:
        votes = self._vote(event)
        if self._learn(event, votes) and event.item == self._task:
            self._task += 1

    def final_labels(self, state: CampaignState) -> IntArray:
        """eq. (10) where a task has labels; the Bayes rule on the (empty) votes elsewhere."""
        labels = super().final_labels(state)
        done = self.predicted_ >= 0
        labels[done] = self.predicted_[done]
        return labels
