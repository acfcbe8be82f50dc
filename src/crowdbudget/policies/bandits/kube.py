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

:class:`BKubePolicy` is the registered policy ``b-kube`` (the §6 reproduction, offline runs,
live push campaigns); it makes the decisions of the per-task simulation of §6 (the reference
``run_bkube`` of tests/reference/priced.py) on the same generator (tested).
"""

from __future__ import annotations

import numpy as np

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.bandits.knapsack import greedy_counts, ucb_values
from crowdbudget.policies.bandits.per_task import PerTaskWorkerPolicy
from crowdbudget.types import Assignment, CampaignState, IntArray, LabelEvent, Problem

#: ``pace=``: the paper's loop, or our budget-paced variant
PACES = ("none", "budget")


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
        if iteration <= self.price.size and untried.any():
            return int(np.flatnonzero(untried)[0])
        optimistic = ucb_values(value_estimate, self.capacity, remaining_capacity, iteration)
        # the arrays were checked when the problem was (prices > 0, integer capacities)
        counts = greedy_counts(
            optimistic,
            self.price,
            np.asarray(remaining_capacity, dtype=np.int64),
            remaining_budget + 1e-9,
        )
        total = counts.sum()
        if total == 0:  # pragma: no cover - cannot happen while a worker is feasible
            return int(np.flatnonzero(feasible)[0])
        return draw_proportional(counts / total, rng)


def draw_proportional(p: np.ndarray, rng: np.random.Generator) -> int:
    """One index drawn with probabilities ``p`` (shape (K,), summing to 1): the draw of
    ``rng.choice(K, p=p)`` — the same uniform and the same inverse-CDF search, so the same
    index and the same generator state — without its argument checks (about 20 µs, a third
    of a B-KUBE decision). tests/test_bkube.py checks it against ``rng.choice``."""
    cdf = p.cumsum()
    cdf /= cdf[-1]
    return int(cdf.searchsorted(rng.random(), side="right"))


class BKubePolicy(PerTaskWorkerPolicy):
    """B-KUBE through the policy contract (Rangi, Franceschetti 2018, Algorithm 1 and §6).

    The same decisions as the per-task simulation (``run_bkube`` of tests/reference/priced.py;
    tested: with the world and the policy sharing one generator, as the simulation does, the
    registered policy driven by :func:`crowdbudget.engine.loop.drive` on a
    :class:`~crowdbudget.simulation.priced_workers.PricedWorkerWorld` gives the same workers,
    labels and estimates): one task at a time in index order; each decision picks the worker by
    :class:`BKubeSelector` (initialisation, then the UCB knapsack on the money left ``B_n`` and
    the capacities left ``m_k``); each label adds to the task's majority vote (eq. 9–10, ties
    at random), updates ``p_hat`` of the worker against the current estimate (§5), and the
    task is left once :func:`~crowdbudget.policies.bandits.value.confident` holds or
    ``max_labels`` labels were given.

    The problem gives the workers (``Problem.workers``): prices (default ``default_price``
    each) and capacities (default: unlimited). Push mode only: B-KUBE picks the worker. On a
    replay (``state.pairs``) only workers with an unused recorded label for the current task
    are feasible, and a task no such worker is left for is passed.

    Args:
        stop_constant: C of the move-to-next-task rule (paper: not given; 1 by default, 0.5
            for the looser variant of the reproduction).
        max_labels: a cap on labels per task (None: the stop rule alone; the reproduction's
            ``max_labels_per_task``).
        pace: ``"none"`` (the paper) or ``"budget"``, our budget-paced variant
            (``b-kube:pace=budget``): a task also ends once it has
            spent its share of the money left, or once the money left would not pay one more
            label for it and one for every task not started; after the last task, one label
            at a time to the least-decided unsettled task (the order of :meth:`select`).
        feedback: ``"estimate"`` (the paper) or ``"leave-one-out"`` (our variant).

    Fitted attributes: those of :class:`PerTaskWorkerPolicy` (``predicted_``,
    ``labels_per_task_``, ``estimator_``, ``selections_``).
    """

    policy_name = "b-kube"

    def __init__(
        self,
        stop_constant: float = 1.0,
        max_labels: int | None = None,
        pace: str = "none",
        feedback: str = "estimate",
    ) -> None:
        self.stop_constant = stop_constant
        self.max_labels = max_labels
        self.pace = pace
        self.feedback = feedback

    def validate_params(self) -> None:
        super().validate_params()
        cap = self.max_labels
        if cap is not None and (not isinstance(cap, int) or cap < 1):
            raise InvalidParameterError(f"max-labels must be an integer >= 1, got {cap!r}")
        if self.pace not in PACES:
            raise InvalidParameterError(
                f"pace must be one of {', '.join(PACES)}, got {self.pace!r}"
            )

    @property
    def _paced(self) -> bool:
        return self.pace == "budget"

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        super()._reset(problem, rng)
        self._selector = BKubeSelector(self._prices, self._capacities)
        # pace=budget: the money left as Algorithm 1 keeps it (B_{n+1} = B_n − c), the
        # current task's share and what it spent, the labels bought
        self._budget = float(problem.budget)
        self._money_left = float(problem.budget)
        self._share = np.inf
        self._spent_on_task = 0.0
        self._made = 0
        self._second_pass = False

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        if worker is not None:
            return None  # B-KUBE picks the worker (push mode only)
        remaining = state.remaining
        fits = self._fits(state, remaining)
        if not self._second_pass:
            current = self._current_task(state, fits)
            if current is None and self._paced and self._task >= state.n_items:
                self._second_pass = True  # every task reached: the least decided, one by one
            elif current is None:
                return None
            else:
                task, capacity = current
                if self._paced and self.labels_per_task_[task] == 0:
                    # this task's share of the money left, fixed when the task starts
                    # (Algorithm 1's B_n, as the simulation keeps it)
                    self._share = self._money_left / (state.n_items - task)
                    self._spent_on_task = 0.0
                return self._pick(task, capacity, remaining)
        # pace=budget, second pass: the unsettled task whose vote is least decided (smallest
        # gap between its two leading contributions; ties by fewer labels, then index)
        capacity = self._capacity_left(state)
        open_tasks = np.flatnonzero(~self.settled_ & state.eligible)
        if not (fits & (capacity > 0)).any() or open_tasks.size == 0:
            return None
        ordered = np.sort(self._votes[open_tasks], axis=1)
        gap = ordered[:, -1] - ordered[:, -2]
        pick = np.lexsort((open_tasks, self.labels_per_task_[open_tasks], gap))[0]
        task = int(open_tasks[pick])
        available = self._available_workers(state, task)
        if available is not None:
            capacity = np.where(available, capacity, 0)
            if not (fits & (capacity > 0)).any():
                return None
        return self._pick(task, capacity, remaining)

    def _pick(self, task: int, capacity: IntArray, remaining: float) -> Assignment:
        self._iteration += 1
        chosen = self._selector.select(
            remaining, capacity, self._iteration, self.estimator_.value_, self._rng
        )
        before = self._money_left
        self._money_left -= float(self._prices[chosen])
        self._spent_on_task += before - self._money_left
        self._made += 1
        return self._choose(task, chosen)

    def observe(self, event: LabelEvent) -> None:
        votes = self._vote(event)
        done = self._learn(event, votes)
        if self._second_pass or event.item != self._task:
            return
        cap = self.max_labels
        move_on = done or (cap is not None and int(self.labels_per_task_[event.item]) >= cap)
        if self._paced and not move_on:
            left = self.problem_.n_items - self._task
            mean_price = (self._budget - self._money_left) / max(self._made, 1)
            move_on = (
                # the share is compared with a tolerance: it is a quotient of sums of prices
                self._spent_on_task >= self._share - 1e-9 or self._money_left < left * mean_price
            )
        if move_on:
            self._task += 1
