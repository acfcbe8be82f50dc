"""The index policy of Hu & Frazier, "Bayes-Optimal Effort Allocation in Crowdsourcing: Bounds
and Index Policies", §6 (Algorithm 1), registered as ``lagrangian-index``.

Each task's state is (n⁺, n⁻, w): labels received and workers in flight; the arriving worker
(the (ℓ+1)-th) goes to the task of largest index λ*(n⁺, n⁻, w; U − ℓ), the largest penalty at
which hiring for that task is optimal in the single-task relaxation (15) with scalar λ
(:mod:`crowdbudget.bounds.lagrangian`). Ties between tasks: uniformly at random among the tasks
in the best state; between different states of equal index: the state listed first
(Algorithm 1: "break tie arbitrarily").

The tables are computed once per (prior, threshold, U, r, μ, cap) and cached (memory; disk with
``cache_dir``). A decision looks at the current row of the table restricted to the occupied
states (state buckets, :class:`StateBuckets`): O(S) vectorised over the S = (C+1)(C+2)(C+3)/6
states of one task, independent of the number of tasks; moving a task between buckets is O(1).

The policy models the arrival and completion rates r and μ: ``arrival_rate`` /
``completion_rate`` default to None, which means "the continuous-time simulator's rates"
(:func:`~crowdbudget.experiments.continuous.run_continuous_campaign` calls
:meth:`for_rates`) and, elsewhere, the paper's r = 0.1, μ = 0.4. In the instantaneous model of
the other simulators (labels come back at once) w is always 0 when a decision is made.

Tasks at the label cap C get no more workers; the number of tasks that reached it is
``n_capped_`` (the paper's §6 check that the cap does not bind). Unit prices only (a worker is
one unit of U); a problem with worker prices is refused.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from crowdbudget.bounds.lagrangian import IndexTable, default_label_cap, index_table, prior_groups
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.types import Assignment, CampaignState, IntArray, LabelEvent, Problem

PAPER_ARRIVAL_RATE = 0.1
PAPER_COMPLETION_RATE = 0.4
#: Without ``max_lookahead``, tables keep at most this many (row, state) cells: rows beyond
#: it (many arrivals to go) reuse the last row (``tables_[g].lookahead_change`` says how much
#: the last row still moved). Fig. 1's largest case (1200 × 1330) is exact.
MAX_TABLE_CELLS = 4_000_000


class StateBuckets:
    """Tasks grouped by state id: O(1) move, uniform member, occupied-state mask.

    Args:
        n_states: number of state ids.
        states: initial state id per task, shape (n_tasks,); −1 = in no bucket.
    """

    def __init__(self, n_states: int, states: IntArray) -> None:
        self.state = np.asarray(states, dtype=np.int64).copy()
        self.count = np.zeros(n_states, dtype=np.int64)
        self.members: list[list[int]] = [[] for _ in range(n_states)]
        self.position = np.zeros(self.state.shape[0], dtype=np.int64)
        valid = self.state >= 0
        order = np.argsort(self.state, kind="stable")
        order = order[valid[order]]
        for s in np.unique(self.state[valid]).tolist():
            group = order[self.state[order] == s]
            self.members[s] = group.tolist()
            self.position[group] = np.arange(group.shape[0])
            self.count[s] = group.shape[0]

    def move(self, task: int, new_state: int) -> None:
        old = int(self.state[task])
        if old == new_state:
            return
        if old >= 0:
            members = self.members[old]
            pos = int(self.position[task])
            last = members.pop()
            if last != task:
                members[pos] = last
                self.position[last] = pos
            self.count[old] -= 1
        if new_state >= 0:
            self.position[task] = len(self.members[new_state])
            self.members[new_state].append(task)
            self.count[new_state] += 1
        self.state[task] = new_state


class LagrangianIndexPolicy(AllocationPolicy):
    """Hu & Frazier's index policy (Algorithm 1).

    Args:
        arrival_rate, completion_rate: r and μ of the model (None: the simulator's, else the
            paper's 0.1 and 0.4).
        label_cap: C, workers per task in the DP (None: 3·ceil(U/K) + 12, at most U).
        max_lookahead: rows of the tables (arrivals to go) kept; more arrivals to go reuse the
            last row (None: all U rows — exact — unless U × S exceeds ``MAX_TABLE_CELLS``).
        grid_points: λ grid of the index computation.
        cache_dir: directory for the tables on disk (None: memory only).

    Fitted attributes: ``tables_`` (one :class:`IndexTable` per prior group), ``n_capped_``.

    Example:
        >>> policy = LagrangianIndexPolicy()
        >>> problem = Problem(n_items=4, budget=5)
        >>> policy.reset(problem, np.random.default_rng(0))
        >>> policy.select(CampaignState.initial(problem)).item in range(4)
        True
    """

    budget_aware = True
    binary_only = True
    chooses_workers = False

    def __init__(
        self,
        arrival_rate: float | None = None,
        completion_rate: float | None = None,
        label_cap: int | None = None,
        max_lookahead: int | None = None,
        grid_points: int = 256,
        cache_dir: str | None = None,
    ) -> None:
        self.arrival_rate = arrival_rate
        self.completion_rate = completion_rate
        self.label_cap = label_cap
        self.max_lookahead = max_lookahead
        self.grid_points = grid_points
        self.cache_dir = cache_dir

    def validate_params(self) -> None:
        for name in ("arrival_rate", "completion_rate"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InvalidParameterError(f"{name} must be a number > 0, got {value!r}")
        if self.label_cap is not None and int(self.label_cap) < 1:
            raise InvalidParameterError(f"label_cap must be >= 1, got {self.label_cap!r}")
        if self.max_lookahead is not None and int(self.max_lookahead) < 1:
            raise InvalidParameterError(f"max_lookahead must be >= 1, got {self.max_lookahead!r}")
        if int(self.grid_points) < 8:
            raise InvalidParameterError(f"grid_points must be >= 8, got {self.grid_points!r}")

    def for_rates(self, arrival_rate: float, completion_rate: float) -> LagrangianIndexPolicy:
        """This policy with the simulator's rates filled in where it left them None."""
        params: dict[str, Any] = self.get_params()
        if params["arrival_rate"] is None:
            params["arrival_rate"] = arrival_rate
        if params["completion_rate"] is None:
            params["completion_rate"] = completion_rate
        return type(self)(**params)

    # ---- reset ---------------------------------------------------------------------------------
    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        if problem.worker_prices is not None:
            raise InvalidParameterError(
                "lagrangian-index counts workers (unit prices); problems with worker prices "
                "are not supported"
            )
        n = problem.n_items
        self.budget_ = max(1, math.floor(problem.budget + 1e-9))
        r = self.arrival_rate if self.arrival_rate is not None else PAPER_ARRIVAL_RATE
        mu = self.completion_rate if self.completion_rate is not None else PAPER_COMPLETION_RATE
        cap = default_label_cap(n, self.budget_) if self.label_cap is None else int(self.label_cap)
        self.label_cap_ = cap
        groups, _, group_of = prior_groups(problem.prior_array, problem.threshold_array, n)
        n_states = (cap + 1) * (cap + 2) * (cap + 3) // 6
        lookahead = self.max_lookahead
        if lookahead is None and self.budget_ * n_states > MAX_TABLE_CELLS:
            lookahead = max(32, MAX_TABLE_CELLS // n_states)
        self.lookahead_ = lookahead
        self.tables_: list[IndexTable] = [
            index_table(
                prior_a=a,
                prior_b=b,
                threshold=d,
                budget=self.budget_,
                arrival_rate=r,
                completion_rate=mu,
                label_cap=cap,
                max_lookahead=lookahead,
                grid_points=self.grid_points,
                cache_dir=self.cache_dir,
            )
            for a, b, d in groups
        ]
        sizes = [t.space.n_states for t in self.tables_]
        self._offset = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        # lookups (n⁺, n⁻, w) -> global state id, per group, shape (G, C+1, C+1, C+2)
        self._lookup = np.stack(
            [
                t.space.lookup + np.where(t.space.lookup >= 0, off, 0)
                for t, off in zip(self.tables_, self._offset[:-1], strict=True)
            ]
        )
        self._group = group_of
        self._n_pos = np.zeros(n, dtype=np.int64)
        self._n_neg = np.zeros(n, dtype=np.int64)
        self._w = np.zeros(n, dtype=np.int64)
        self._removed = np.zeros(n, dtype=bool)
        start = self._lookup[group_of, 0, 0, 0]
        self._buckets = StateBuckets(int(self._offset[-1]), start)
        self._row_m = -1
        self._row: np.ndarray = np.empty(0)
        self._dirty: set[int] = set()
        self._total_pending = 0
        self._total_labels = 0
        self.n_capped_ = 0

    # ---- keeping the view of the state in sync --------------------------------------------------
    def _state_id(self, task: int) -> int:
        c = self.label_cap_
        npos, nneg, w = int(self._n_pos[task]), int(self._n_neg[task]), int(self._w[task])
        if npos + nneg + w > c or self._removed[task]:
            return -1
        return int(self._lookup[self._group[task], npos, nneg, w])

    def _sync_task(self, state: CampaignState, task: int) -> None:
        counts = state.label_counts[task]
        self._total_labels += int(counts[0] + counts[1]) - int(
            self._n_pos[task] + self._n_neg[task]
        )
        self._total_pending += int(state.pending[task]) - int(self._w[task])
        self._n_neg[task] = counts[0]
        self._n_pos[task] = counts[1]
        self._w[task] = state.pending[task]
        before = int(self._buckets.state[task])
        new = self._state_id(task)
        if new < 0 and before >= 0 and not self._removed[task]:
            self.n_capped_ += 1
        self._buckets.move(task, new)

    def _sync(self, state: CampaignState) -> None:
        for task in self._dirty:
            self._sync_task(state, task)
        self._dirty.clear()
        labels = state.n_events
        if self._total_pending != round(state.committed) or self._total_labels != labels:
            # something happened that the policy was not told about (a cancelled assignment,
            # imported labels): re-read every task, O(n_items), rare
            for task in range(state.n_items):
                self._sync_task(state, task)

    def _current_row(self, arrivals: int) -> np.ndarray:
        m = self.budget_ - arrivals
        if m != self._row_m:
            self._row = np.concatenate([t.row(arrivals) for t in self.tables_])
            self._row_m = m
        return self._row

    # ---- the contract ---------------------------------------------------------------------------
    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        price = self._price(state, worker)
        if not state.can_afford(price):
            return None
        self._sync(state)
        arrivals = round(state.spent + state.committed)
        if arrivals >= self.budget_:
            return None
        row = self._current_row(arrivals)
        buckets = self._buckets
        while True:
            scores = np.where(buckets.count > 0, row, -np.inf)
            best = int(np.argmax(scores))
            if not scores[best] > -np.inf:
                return None  # every task left is at the cap (or none is eligible)
            members = buckets.members[best]
            task = (
                members[int(self.rng_.integers(len(members)))] if len(members) > 1 else members[0]
            )
            if state.eligible[task]:
                self._dirty.add(task)
                return Assignment(item=task, worker=worker, price=price)
            self._removed[task] = True  # items never become eligible again
            buckets.move(task, -1)

    def observe(self, event: LabelEvent) -> None:
        self._dirty.add(event.item)

    def index_of(self, state: CampaignState, task: int) -> float:
        """λ* of ``task`` in ``state`` (for inspection and tests)."""
        self._sync(state)
        sid = self._state_id(task)
        if sid < 0:
            return -math.inf
        return float(self._current_row(round(state.spent + state.committed))[sid])
