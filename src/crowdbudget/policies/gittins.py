"""Gittins-index baselines of Chen, Lin, Zhou (2013), §3.1 and §7: ``gittins`` and ``gittins-inf``.

The indices — the bandit view of the budget-allocation MDP, their calibration (Dinkelbach or
bisection), the compiled backward induction, the on-disk index tables, cost and precision —
are computed by :mod:`crowdbudget.bounds.gittins_index`, beside the other solvers; this
module holds the two policies.

**Finite-horizon Gittins (``gittins``).** The index of item i at stage t is
``λ*((a_i, b_i), T − t)``: the horizon of every arm is the number of labels the *campaign*
can still buy, ``T − t`` (in label units: ``floor(remaining budget / price)``), not a share of
it — each item could receive all remaining labels. This is the classic finite-horizon index
rule (Gittins 1989 §... ; Niño-Mora 2011 §1) that Chen et al. use as an "approximate
finite-horizon Gittins index rule" (§3.1, §7 item 2). Pending assignments reduce the horizon
(their budget is reserved). The index depends on T − t, so the policy is budget-aware.

*Keeping decisions cheap.* All items' indices change at every step (the horizon shrinks), so a
per-item score structure would cost O(n_items) per step. Instead (1) items are grouped by
state — items in one state have one index — and (2) the argmax is **lazy**: the index is
non-decreasing in the horizon (a larger horizon allows more stopping times), so an index
computed at a larger horizon is an *upper bound* of the current one. The states sit in a
max-heap keyed by their last computed index; a decision pops the top state, recomputes its
index at the current horizon if it is stale, pushes it back, and stops when the top is
fresh. Typically one or two states are recomputed per decision; a state's index at horizon n
is computed once and kept in the index table (memory and disk), so replications and budgets
share them. Cost per decision: O(log n_states) heap work + the stale recomputations
(each O(n²·sweeps) the first time it is met, a dictionary look-up afterwards). If the
horizon grows (a cancelled assignment gives budget back) every occupied state is refreshed.

**Gittins-Inf (``gittins-inf``, Xie & Frazier 2013).** The infinite-horizon discounted Gittins
index with discount ``α = 1 − 1/T`` (§7: "choosing α such that T = 1/(1 − α)"), by the same
calibration with β = α on the lattice **truncated** L levels below the state
(a + b ≤ a_x + b_x + L; beyond it the arm is retired, so the truncated index is a lower bound
that increases with L). Default ``L = ceil(truncation × T) + 200`` with ``truncation = 4``:
measured (``tests/test_gittins.py``; T = 10–500, states up to depth ~25) to be within
``1e-7`` (absolute; typically ≤ 1e-8) of the index with L doubled or quadrupled — the stated
tolerance. Level k weighs α^k = e^{−k/T}, and deep states earn little; the 200 extra levels
cover small T, where the slow decay of the rewards with depth, not the discount, limits.
The index does not depend on the stage, so ``gittins-inf`` is a plain
:class:`~crowdbudget.policies.index_policy.BetaIndexPolicy` (score per state memoised,
``ScoreBuckets`` argmax, compiled fast engine applicable); it is budget-aware only because α
is.

Paper reference: Chen, Lin, Zhou (2013), §3.1 (the finite-horizon MAB view, calibration
method O(T³)), §7 items 2–3, Fig. 2(a).

Example:
    >>> round(finite_horizon_gittins_index(1.0, 1.0, horizon=10), 6)  # one pull is best
    0.25
    >>> import numpy as np
    >>> from crowdbudget.types import Problem, CampaignState
    >>> policy = FiniteHorizonGittins()
    >>> problem = Problem(n_items=3, budget=6)
    >>> policy.reset(problem, np.random.default_rng(0))
    >>> policy.select(CampaignState.initial(problem)).item
    0
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection
from typing import ClassVar

import numpy as np

from crowdbudget.bounds.gittins_index import (
    ADAPTIVE_MAX_LEVELS,
    ADAPTIVE_START_LEVELS,
    IndexTable,
    Solver,
    _check_solver,
    adaptive_gittins_inf_index,
    discount_for_budget,
    index_table,
    lattice_base,
    truncation_levels,
)
from crowdbudget.bounds.gittins_index import SOLVERS as SOLVERS  # the registry's choices
from crowdbudget.bounds.gittins_index import (
    finite_horizon_gittins_index as finite_horizon_gittins_index,
)
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies._index import (
    DEFAULT_TIE_BREAK,
    PAPER_TIE_BREAK,
    TieBreak,
    canonical_scores,
    check_tie_break,
)
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.policies.index_policy import BetaIndexPolicy
from crowdbudget.posteriors.beta_bernoulli import BetaBernoulliPosterior
from crowdbudget.types import Assignment, CampaignState, FloatArray, IntArray, LabelEvent, Problem


# ---- Gittins-Inf ---------------------------------------------------------------------------
class GittinsInf(BetaIndexPolicy):
    """Gittins-Inf (Xie & Frazier 2013 as used by Chen et al. §7): label the item of largest
    infinite-horizon discounted Gittins index, discount ``α = 1 − 1/T`` (T = budget in labels).

    Args:
        truncation: lattice truncation below each state, in multiples of T
            (L = ceil(truncation · T) + 200 levels; default 4 — module docstring for the
            measured accuracy). With ``truncation_rule="adaptive"`` this is the largest depth.
        truncation_rule: ``"adaptive"`` (default: double L from 100 until two depths agree,
            at most ``max_levels``, :func:`adaptive_gittins_inf_index` — seconds instead of
            hours at T = 8,000) or ``"fixed"`` (always the full L, the reference).
        max_levels: the adaptive rule's largest depth (default 1,600).
        solver: ``"dinkelbach"`` or ``"bisection"``.
        tie_break: ``"random"`` (default: a result does not depend on the item order) or
            ``"first"`` (smallest index, the papers' rule, ``tie-break=first``)
            among equal indices.
    """

    budget_aware: ClassVar[bool] = True

    def __init__(
        self,
        truncation: float = 4.0,
        solver: Solver = "dinkelbach",
        tie_break: TieBreak = DEFAULT_TIE_BREAK,
        truncation_rule: str = "adaptive",
        max_levels: int = ADAPTIVE_MAX_LEVELS,
    ) -> None:
        super().__init__(tie_break=tie_break)
        self.truncation = truncation
        self.solver = solver
        self.truncation_rule = truncation_rule
        self.max_levels = max_levels

    def validate_params(self) -> None:
        super().validate_params()
        _check_solver(self.solver)
        if self.truncation_rule not in ("adaptive", "fixed"):
            raise InvalidParameterError(
                f"truncation-rule must be 'adaptive' or 'fixed', got {self.truncation_rule!r}"
            )
        if not (isinstance(self.max_levels, int) and self.max_levels >= ADAPTIVE_START_LEVELS):
            raise InvalidParameterError(
                f"max-levels must be an integer >= {ADAPTIVE_START_LEVELS}, got {self.max_levels!r}"
            )
        if not (isinstance(self.truncation, int | float) and 0 < self.truncation <= 1000):
            raise InvalidParameterError(
                f"truncation must be a number in (0, 1000], got {self.truncation!r}"
            )

    def score_states(self, a: FloatArray, b: FloatArray, threshold: FloatArray) -> FloatArray:
        budget = float(self.problem_.budget)
        discount = discount_for_budget(budget)
        levels = truncation_levels(budget, self.truncation)
        a, b, d = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float), threshold)
        out = np.empty(a.shape)
        flat_a, flat_b, flat_d, flat_out = a.ravel(), b.ravel(), d.ravel(), out.reshape(-1)
        for k in range(flat_a.shape[0]):
            if self.truncation_rule == "adaptive":
                flat_out[k], _ = adaptive_gittins_inf_index(
                    float(flat_a[k]),
                    float(flat_b[k]),
                    discount,
                    min(levels, self.max_levels),
                    float(flat_d[k]),
                    solver=self.solver,
                )
                continue
            base_a, base_b, i, j = lattice_base(float(flat_a[k]), float(flat_b[k]))
            table = index_table(base_a, base_b, float(flat_d[k]), discount, levels, self.solver)
            flat_out[k] = table.index(i, j, levels)
        return out


# ---- finite-horizon Gittins -----------------------------------------------------------------
class FiniteHorizonGittins(AllocationPolicy):
    """Finite-horizon Gittins index rule (Chen et al. §3.1, §7 item 2): label the item of
    largest ``λ*((a_i, b_i), n)`` with n = labels the remaining budget can buy (module
    docstring: calibration, remaining horizon, lazy argmax).

    Args:
        solver: ``"dinkelbach"`` (default) or ``"bisection"``.
        tie_break: ``"random"`` (default: with a shared prior every unlabeled item
            ties, and the smallest index would make a result depend on the item order) or
            ``"first"`` (smallest item index among equal indices: the papers' rule, which the
            reproductions pin, ``tie-break=first``).

    Fitted attributes:
        posterior_: the :class:`BetaBernoulliPosterior` of the items.
        recomputed_: index look-ups made by the lazy argmax (cache hits included).
    """

    budget_aware: ClassVar[bool] = True
    #: the papers' rule among tied items (:func:`crowdbudget.registry.pin_paper_ties`)
    paper_tie_break: ClassVar[TieBreak] = PAPER_TIE_BREAK

    def __init__(
        self, solver: Solver = "dinkelbach", tie_break: TieBreak = DEFAULT_TIE_BREAK
    ) -> None:
        self.solver = solver
        self.tie_break = tie_break

    def validate_params(self) -> None:
        _check_solver(self.solver)
        check_tie_break(self.tie_break)

    # -- state groups --------------------------------------------------------------------
    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        self.posterior_ = BetaBernoulliPosterior.from_problem(problem)
        self.recomputed_ = 0
        # state id by (a, b, d); per state: lattice, offsets, members, bound and its horizon
        self._state_of_key: dict[tuple[float, float, float], int] = {}
        self._table: list[IndexTable] = []
        self._offsets: list[tuple[int, int]] = []
        self._members: list[list[int]] = []  # "first": min-heap (lazy); "random": exact list
        self._position = np.zeros(problem.n_items, dtype=np.int64)
        self._count: list[int] = []
        self._bound: list[float] = []  # canonical index at horizon _horizon[s] (inf: unknown)
        self._horizon: list[int] = []
        self._heap: list[tuple[float, int, int]] = []  # (−bound, version, state)
        self._version: list[int] = []
        self._item_state = np.empty(problem.n_items, dtype=np.int64)
        self._present = np.ones(problem.n_items, dtype=bool)
        self._last_horizon = math.inf
        post = self.posterior_
        keys = np.stack([post.a, post.b, post.thresholds], axis=1)
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(unique.shape[0] + 1))
        for k in range(unique.shape[0]):
            sid = self._state_id(tuple(unique[k].tolist()))
            group = order[bounds[k] : bounds[k + 1]]
            self._members[sid] = group.tolist()  # ascending: a valid min-heap
            self._count[sid] = int(group.shape[0])
            self._position[group] = np.arange(group.shape[0])
            self._item_state[group] = sid
            self._push(sid, math.inf, 0)

    def _state_id(self, key: tuple[float, float, float]) -> int:
        sid = self._state_of_key.get(key)
        if sid is None:
            sid = len(self._offsets)
            self._state_of_key[key] = sid
            base_a, base_b, i, j = lattice_base(key[0], key[1])
            self._table.append(index_table(base_a, base_b, key[2], 1.0, None, self.solver))
            self._offsets.append((i, j))
            self._members.append([])
            self._count.append(0)
            self._bound.append(math.inf)
            self._horizon.append(0)
            self._version.append(0)
        return sid

    def _push(self, sid: int, bound: float, horizon: int) -> None:
        self._version[sid] += 1
        self._bound[sid] = bound
        self._horizon[sid] = horizon
        heapq.heappush(self._heap, (-bound, self._version[sid], sid))

    def _add_item(self, item: int, sid: int) -> None:
        self._item_state[item] = sid
        members = self._members[sid]
        if self.tie_break == "random":
            self._position[item] = len(members)
            members.append(item)
        else:
            heapq.heappush(members, item)
        self._count[sid] += 1
        if self._count[sid] == 1:  # newly occupied: unknown index, evaluated lazily
            self._push(sid, math.inf, 0)

    def _discard_item(self, item: int) -> None:
        sid = int(self._item_state[item])
        self._count[sid] -= 1
        if self.tie_break == "random":
            members = self._members[sid]
            pos = int(self._position[item])
            last = members.pop()
            if last != item:
                members[pos] = last
                self._position[last] = pos
        # "first": the heap entry goes stale; dropped lazily

    def _live_first(self, sid: int) -> int | None:
        members = self._members[sid]
        while members:
            item = members[0]
            if self._present[item] and self._item_state[item] == sid:
                return item
            heapq.heappop(members)
        return None

    # -- the index ------------------------------------------------------------------------
    def index_of_state(self, sid: int, horizon: int) -> float:
        """Canonical index of state ``sid`` with ``horizon`` labels left."""
        i, j = self._offsets[sid]
        hint = self._bound[sid] if math.isfinite(self._bound[sid]) else None
        self.recomputed_ += 1
        value = self._table[sid].index(i, j, horizon, hint)
        return float(canonical_scores(np.array([value]))[0])

    def _refresh_all(self, horizon: int) -> None:
        for sid in range(len(self._count)):
            if self._count[sid] > 0:
                self._push(sid, self.index_of_state(sid, horizon), horizon)

    def _best_states(self, horizon: int) -> list[int]:
        """The occupied states of largest index at ``horizon`` (lazy: stale bounds are upper
        bounds; they are refreshed only while they could beat the best fresh one)."""
        heap = self._heap
        best: list[int] = []
        best_value = -math.inf
        while heap:
            negative, version, sid = heap[0]
            if version != self._version[sid] or self._count[sid] <= 0:
                heapq.heappop(heap)  # stale entry or empty state
                continue
            if -negative < best_value:
                break
            heapq.heappop(heap)
            if self._horizon[sid] != horizon:
                self._push(sid, self.index_of_state(sid, horizon), horizon)
                continue
            best.append(sid)  # fresh and >= best_value (heap order): best_value = -negative
            best_value = -negative
        for sid in best:  # put the winners back
            heapq.heappush(heap, (-self._bound[sid], self._version[sid], sid))
        return best

    def _choose(self, state: CampaignState, excluded: Collection[int], horizon: int) -> int | None:
        if horizon > self._last_horizon:  # budget came back: bounds no longer upper bounds
            self._refresh_all(horizon)
        self._last_horizon = horizon
        set_aside: list[int] = []  # states whose every item is excluded now
        try:
            while True:
                best = self._best_states(horizon)
                if not best:
                    return None
                candidates: list[tuple[int, int]] = []  # (item, items in its state)
                for sid in best:
                    item = self._pick_in_state(sid, state, excluded)
                    if item is not None:
                        candidates.append((item, self._count[sid]))
                if candidates:
                    if self.tie_break == "first" or len(candidates) == 1:
                        return min(item for item, _ in candidates)
                    # uniform over the tied items: a state with probability ∝ its size
                    weights = np.array([count for _, count in candidates], dtype=float)
                    pick = int(self.rng_.choice(len(candidates), p=weights / weights.sum()))
                    return candidates[pick][0]
                for sid in best:  # nothing usable in these states: look further down
                    if self._count[sid] > 0:
                        set_aside.append(sid)
                        self._version[sid] += 1  # hide its heap entry for this call
        finally:
            for sid in set_aside:
                if self._count[sid] > 0:
                    self._push(sid, self._bound[sid], self._horizon[sid])

    def _pick_in_state(
        self, sid: int, state: CampaignState, excluded: Collection[int]
    ) -> int | None:
        """An eligible, non-excluded item of state ``sid`` (ineligible ones leave for good)."""
        if self.tie_break == "first":
            while True:
                item = self._live_first(sid)
                if item is None:
                    return None
                if not state.eligible[item]:
                    self._remove(item)
                    continue
                if item not in excluded:
                    return item
                # excluded (small set): walk the group in order without modifying it
                live = sorted(
                    m
                    for m in set(self._members[sid])
                    if self._present[m] and self._item_state[m] == sid
                )
                for m in live:
                    if not state.eligible[m]:
                        continue
                    if m not in excluded:
                        return m
                return None
        members = self._members[sid]
        while members:
            item = members[int(self.rng_.integers(len(members)))]
            if not state.eligible[item]:
                self._remove(item)
                continue
            if item not in excluded:
                return item
            usable = [m for m in sorted(members) if state.eligible[m] and m not in excluded]
            return None if not usable else usable[int(self.rng_.integers(len(usable)))]
        return None

    def _remove(self, item: int) -> None:
        if self._present[item]:
            self._discard_item(item)
            self._present[item] = False

    # -- the contract ---------------------------------------------------------------------
    def _horizon_left(self, state: CampaignState, price: float) -> int:
        return math.floor(state.remaining / price + 1e-9)

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        price = self._price(state, worker)
        horizon = self._horizon_left(state, price)
        if horizon < 1 or not state.can_afford(price):
            return None
        availability = state.availability
        item = availability.search(lambda: self._choose(state, availability.closed, horizon))
        return None if item is None else Assignment(item=item, worker=worker, price=price)

    def observe(self, event: LabelEvent) -> None:
        self.posterior_.update(event)
        item = event.item
        if not self._present[item]:
            return
        self._discard_item(item)
        post = self.posterior_
        key = (float(post.a[item]), float(post.b[item]), float(post.thresholds[item]))
        self._add_item(item, self._state_id(key))

    def final_labels(self, state: CampaignState) -> IntArray:
        return self.posterior_.predict()
