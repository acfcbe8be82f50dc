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

Trailsourcing (§6; Tran-Thanh et al. 2014) is bounded ε-first with a single round of
exploration: every worker is selected exactly once (in order, through the per-task loop,
skipping a worker whose price does not fit), then the same knapsack exploitation.

Registered through :class:`EpsilonFirstPolicy` (``bounded-eps-first``, ``eps-first``,
``trailsourcing``), which makes the same decisions as the per-task simulation of §6 (the
reference ``run_bounded_epsilon_first``, ``run_epsilon_first`` and ``run_trailsourcing`` of
tests/reference/priced.py).
"""

from __future__ import annotations

import numpy as np

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.bandits.knapsack import greedy_bounded_knapsack
from crowdbudget.policies.bandits.per_task import PerTaskWorkerPolicy
from crowdbudget.policies.bandits.value import weighted_vote
from crowdbudget.types import Assignment, CampaignState, IntArray, LabelEvent, Problem


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


LAYOUTS = ("spread", "queue")


def best_worker_counts(
    value: np.ndarray, price: np.ndarray, capacity: np.ndarray, remaining: float
) -> IntArray:
    """ε-first's exploitation: every evaluation the money and capacity allow to the worker of
    largest ``v_hat / c`` among those with capacity whose price fits; shape (K,)."""
    counts = np.zeros(price.shape[0], dtype=np.int64)
    usable = (capacity > 0) & (price <= remaining + 1e-9)
    if np.any(usable):
        efficiency = value / price
        best = int(np.flatnonzero(usable)[np.argmax(efficiency[usable])])
        counts[best] = min(int(capacity[best]), int(np.floor(remaining / price[best] + 1e-12)))
    return counts


def knapsack_counts(
    value: np.ndarray, price: np.ndarray, capacity: np.ndarray, remaining: float
) -> IntArray:
    """Bounded ε-first's (and trailsourcing's) exploitation: the greedy BKP on ``v_hat`` for
    the money and capacities left; shape (K,)."""
    return greedy_bounded_knapsack(value, price, capacity, max(remaining, 0.0) + 1e-9)


def single_step_layout(
    counts: np.ndarray,
    left: int,
    layout: str,
    allowed: dict[int, IntArray] | None = None,
) -> list[tuple[int, int]]:
    """The single-step assignment (§6) as ``(task offset, worker)`` in order: workers in
    decreasing ``x_k``; ``"spread"`` puts a worker's labels on the least-labeled of the
    ``left`` free tasks (a stable sort keeps queue order among ties), ``"queue"`` on the first
    ones. ``allowed`` (a replay): per worker, the offsets they can label."""
    counts = np.minimum(np.asarray(counts, dtype=np.int64), left)
    load = np.zeros(left, dtype=np.int64)  # labels per free task, shape (T',)
    plan: list[tuple[int, int]] = []
    spread = layout == "spread"
    for worker in np.argsort(-counts, kind="stable"):
        take = int(counts[worker])
        if take == 0:
            continue
        if allowed is None:
            offsets = np.argsort(load, kind="stable")[:take] if spread else np.arange(take)
        else:
            mine = allowed.get(int(worker), np.zeros(0, dtype=np.int64))
            order = np.argsort(load[mine], kind="stable") if spread else np.arange(mine.size)
            offsets = mine[order[:take]]
        for offset in offsets:
            plan.append((int(offset), int(worker)))
            load[offset] += 1
    return plan


def _check_epsilon(epsilon: float) -> None:
    if not 0.0 <= epsilon <= 1.0:
        raise InvalidParameterError(f"epsilon must lie in [0, 1], got {epsilon}")


EXPLOITATIONS = ("knapsack", "best")
EXPLORATIONS = ("budget", "one-round")


class EpsilonFirstPolicy(PerTaskWorkerPolicy):
    """The §6 benchmarks through the policy contract: bounded ε-first (``eps-first``'s
    knapsack exploitation), budget-limited ε-first (all to the best ``v_hat / c``) and
    trailsourcing (one exploration round, then the knapsack). Registered as
    ``bounded-eps-first``, ``eps-first`` and ``trailsourcing``.

    The same decisions as the per-task simulation (the reference functions of
    tests/reference/priced.py) when the world and the policy share one generator
    (tests/test_bkube_policy.py): exploration takes workers in
    cyclic order (:class:`RoundRobinSelector`) through the per-task loop — while the money it
    spent stays within ``epsilon · B`` (``exploration="budget"``) or for one evaluation per
    worker (``"one-round"``) — and closes its last task; the exploitation is then planned in
    one step (:func:`single_step_layout`: the counts of the knapsack, or of the best
    worker, spread over the tasks not explored) and handed out one assignment per decision.
    Exploitation labels do not move ``p_hat`` (as in the simulation); their tasks' estimates
    are formed when the plan is done (eq. 10, ties at random, in task order).

    On a replay or a live push campaign (``state.pairs``) a worker's planned labels go to the
    least-labeled tasks *they can label*; a planned assignment the state no longer allows (a
    used-up pair, no capacity, no money) is skipped. ε-first puts every exploitation label on
    one worker, who labels a task at most once, so it may leave budget unspent.

    Args:
        epsilon: share of the budget for exploration (``exploration="budget"``).
        exploitation: ``"knapsack"`` (bounded ε-first, trailsourcing) or ``"best"``
            (ε-first: every evaluation to the worker of largest ``v_hat / c``).
        exploration: ``"budget"`` (ε·B) or ``"one-round"`` (trailsourcing).
        stop_constant: C of the move-to-next-task rule during exploration.
        layout: ``"spread"`` (faithful) or ``"queue"`` (see :func:`single_step_layout`).
        feedback: ``p_hat`` during exploration: ``"estimate"`` or ``"leave-one-out"``.
    """

    policy_name = "the ε-first family"

    def __init__(
        self,
        epsilon: float = 0.1,
        exploitation: str = "knapsack",
        exploration: str = "budget",
        stop_constant: float = 1.0,
        layout: str = "spread",
        feedback: str = "estimate",
    ) -> None:
        self.epsilon = epsilon
        self.exploitation = exploitation
        self.exploration = exploration
        self.stop_constant = stop_constant
        self.layout = layout
        self.feedback = feedback

    def validate_params(self) -> None:
        super().validate_params()
        _check_epsilon(self.epsilon)
        for name, value, allowed in (
            ("exploitation", self.exploitation, EXPLOITATIONS),
            ("exploration", self.exploration, EXPLORATIONS),
            ("layout", self.layout, LAYOUTS),
        ):
            if value not in allowed:
                raise InvalidParameterError(
                    f"{name} must be one of {', '.join(allowed)}, got {value!r}"
                )

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        super()._reset(problem, rng)
        self._selector = RoundRobinSelector(self._prices)
        self._explore_limit = (
            None if self.exploration == "one-round" else self.epsilon * problem.budget
        )
        self._explore_spent = 0.0
        self._explored = 0
        self._plan: list[tuple[int, int]] | None = None  # (task, worker), in order
        self._next = 0
        self._first_exploited = problem.n_items
        self._finalized = False

    # ---- exploration ----------------------------------------------------------------------
    def _explore(self, state: CampaignState) -> Assignment | None:
        if self.exploration == "one-round" and self._explored >= self._prices.shape[0]:
            return None
        available = state.remaining
        if self._explore_limit is not None:
            # the selector sees only the money exploration may still spend
            available = min(available, self._explore_limit - self._explore_spent)
        fits = self._fits(state, state.remaining)
        if self._explore_limit is not None:
            fits &= self._prices <= available + 1e-9
        current = self._current_task(state, fits)
        if current is None:
            return None
        task, capacity = current
        self._iteration += 1
        chosen = self._selector.select(
            available, capacity, self._iteration, self.estimator_.value_, self._rng
        )
        self._explored += 1
        self._explore_spent += float(self._prices[chosen])
        return self._choose(task, chosen)

    # ---- exploitation ---------------------------------------------------------------------
    def _make_plan(self, state: CampaignState) -> None:
        """Close the explored task; plan the single-step exploitation
        (:func:`single_step_layout`, the simulation's order)."""
        n_tasks = state.n_items
        if self._task < n_tasks and self.labels_per_task_[self._task] > 0:
            self._task += 1  # close the partial task
        first = self._task
        self._first_exploited = first
        self._plan = []
        left = n_tasks - first
        if left <= 0:
            return
        capacity = self._capacity_left(state)
        remaining = state.remaining
        value = self.estimator_.value_
        exploit = knapsack_counts if self.exploitation == "knapsack" else best_worker_counts
        counts = exploit(value, self._prices, capacity, remaining)
        allowed = self._askable_tasks(state, first)
        self._plan = [
            (first + offset, worker)
            for offset, worker in single_step_layout(counts, left, self.layout, allowed)
        ]

    def _askable_tasks(self, state: CampaignState, first: int) -> dict[int, IntArray] | None:
        """With ``state.pairs``: per worker, the offsets (task − first) of the tasks from
        ``first`` on that they have an unused pair for, ascending; None: every task."""
        pairs = state.pairs
        if pairs is None:
            return None
        usable = (pairs.remaining > 0) & (pairs.items >= first)
        items, workers = pairs.items[usable], pairs.workers[usable]
        order = np.lexsort((items, workers))
        items, workers = items[order] - first, workers[order]
        bounds = np.flatnonzero(np.diff(workers)) + 1
        return {
            int(group[0]): offsets
            for group, offsets in zip(
                np.split(workers, bounds), np.split(items, bounds), strict=True
            )
            if group.size
        }

    def _exploit(self, state: CampaignState) -> Assignment | None:
        assert self._plan is not None
        while self._next < len(self._plan):
            task, worker = self._plan[self._next]
            self._next += 1
            allowed = state.eligible[task] and self._capacity_left(state)[worker] > 0
            available = self._available_workers(state, task)
            if available is not None:
                allowed = allowed and bool(available[worker])
            if allowed and state.can_afford(float(self._prices[worker])):
                return self._choose(task, worker)
        return None

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        if worker is not None:
            return None  # the policy picks the worker (push mode only)
        if self._plan is None:
            assignment = self._explore(state)
            if assignment is not None:
                return assignment
            self._make_plan(state)
        return self._exploit(state)

    def observe(self, event: LabelEvent) -> None:
        if event.item >= self._first_exploited:
            self._vote(event)  # exploitation: the vote only (p_hat is not updated)
            return
        super().observe(event)

    def final_labels(self, state: CampaignState) -> IntArray:
        """As :class:`PerTaskWorkerPolicy`; once the plan is done, the exploited tasks'
        estimates are formed (eq. 10, ties at random, in task order), once."""
        if self._plan is not None and self._next >= len(self._plan) and not self._finalized:
            self._finalized = True
            first = self._first_exploited
            for task in range(first, state.n_items):
                if self.labels_per_task_[task] > 0:
                    self.predicted_[task] = weighted_vote(self._votes[task], self._rng)
        return super().final_labels(state)
