"""The single-task dynamic program of Hu & Frazier, "Bayes-Optimal Effort Allocation in
Crowdsourcing: Bounds and Index Policies" (§4–§6): the piece the Lagrangian bound
(:mod:`crowdbudget.bounds.lagrangian`) sums over prior groups and the index tables
(:mod:`crowdbudget.bounds.index_tables`) solve on a grid of λ.

Single-task DP (the T = ∞ case the paper computes in §7; its recursion is "in the
supplement", which we do not have, so it is derived here). The embedded chain of one task has
state (n⁺, n⁻, w, m): labels received, workers in flight on this task, arrivals still to come
m = U − ℓ. With q = r + μw the next event is an arrival with probability r/q, a completion
with probability μw/q, and a completion is positive with probability p = α/(α + β):

    V_0(n⁺, n⁻, 0)   = R(α_0 + n⁺, β_0 + n⁻)
    V_0(n⁺, n⁻, w)   = p V_0(n⁺+1, n⁻, w−1) + (1−p) V_0(n⁺, n⁻+1, w−1)
    V_m(n⁺, n⁻, w)   = (r/q) max{ V_{m−1}(n⁺, n⁻, w),  V_{m−1}(n⁺, n⁻, w+1) − λ_{U−m+1} }
                       + (μw/q) [p V_m(n⁺+1, n⁻, w−1) + (1−p) V_m(n⁺, n⁻+1, w−1)].

With m = 0 no arrival matters, so only the completions are left. Time is not part of the state
when T = ∞. For a finite horizon this bound (T = ∞) is still a valid, looser, upper bound: an
infinite-horizon policy can stop assigning at T, and labels that arrive after T never lower
the expected final reward (R is convex in the posterior).

Label cap (§6). The state space is finite only with a cap C on the workers a task may get:
n⁺ + n⁻ + w <= C, so there are S = C(C+3, 3)/... = (C+1)(C+2)(C+3)/6 states per level. Two
treatments of a state at the cap (n⁺ + n⁻ + w = C):

- ``"forbid"`` (the paper's): no more hiring. This bounds the best *capped* policy; it is a
  bound on the unrestricted optimum only if the cap does not bind.
- ``"optimistic"`` (default for the bound): hiring is allowed and worth at most 1 − λ (a task's
  reward never exceeds 1 and penalties are >= 0), so by induction the capped value is >= the
  uncapped value at every state and the bound is valid whatever the cap.

The bound reports both, and the probability that the optimal relaxed policy ever reaches the
cap (``cap_reach_probability``): when it is ~0 and the two agree, the cap does not bind.

Arrays: a state s of one level has (n⁺[s], n⁻[s], w[s]), states sorted by w ascending so
that completions (w → w − 1) point to smaller s; ``hire[s]`` is the state with one more worker
in flight (−1 at the cap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numba import njit
from numpy.typing import ArrayLike

from crowdbudget._validation import check_positive_int
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.types import FloatArray, IntArray

CapMode = Literal["forbid", "optimistic"]
#: g = D − λ within this of 0 counts as "hiring is optimal" (ties are common: with T = ∞,
#: hiring now or at the next arrival is often worth exactly the same).
TIE = 1e-12


def default_label_cap(n_items: int, budget: int) -> int:
    """A cap that does not bind in practice: 3× the mean workers per task plus 12, at most U."""
    return int(min(budget, 3 * math.ceil(budget / max(n_items, 1)) + 12))


# ---- state space --------------------------------------------------------------------------
@dataclass(frozen=True)
class StateSpace:
    """States (n⁺, n⁻, w) of one task with n⁺ + n⁻ + w <= cap, sorted by w then n⁺ then n⁻.

    Attributes (all shape (S,)): ``n_pos``, ``n_neg``, ``in_flight``; ``pos_next`` /
    ``neg_next`` (state after a positive / negative completion, −1 when w = 0); ``hire`` (one
    more worker in flight, −1 at the cap); ``p_pos`` (α/(α+β)); ``reward`` (R(α, β) of eq. 2).
    ``lookup`` maps (n⁺, n⁻, w) to s, shape (cap+1, cap+1, cap+2), −1 where undefined.
    """

    prior_a: float
    prior_b: float
    threshold: float
    cap: int
    n_pos: IntArray
    n_neg: IntArray
    in_flight: IntArray
    pos_next: IntArray
    neg_next: IntArray
    hire: IntArray
    p_pos: FloatArray
    reward: FloatArray
    lookup: IntArray

    @property
    def n_states(self) -> int:
        return int(self.n_pos.shape[0])

    @property
    def start(self) -> int:
        return int(self.lookup[0, 0, 0])

    @classmethod
    def build(cls, prior_a: float, prior_b: float, threshold: float, cap: int) -> StateSpace:
        cap = check_positive_int(cap, "label_cap")
        w, n_pos, n_neg = np.meshgrid(
            np.arange(cap + 1), np.arange(cap + 1), np.arange(cap + 1), indexing="ij"
        )
        keep = (n_pos + n_neg + w) <= cap
        w, n_pos, n_neg = w[keep], n_pos[keep], n_neg[keep]  # C order: sorted by w, n⁺, n⁻
        n = w.shape[0]
        lookup = np.full((cap + 2, cap + 2, cap + 2), -1, dtype=np.int64)
        lookup[n_pos, n_neg, w] = np.arange(n)
        has_w = w > 0
        pos_next = np.where(has_w, lookup[n_pos + 1, n_neg, np.maximum(w - 1, 0)], -1)
        neg_next = np.where(has_w, lookup[n_pos, n_neg + 1, np.maximum(w - 1, 0)], -1)
        hire = lookup[n_pos, n_neg, w + 1]  # −1 beyond the cap
        a = prior_a + n_pos
        b = prior_b + n_neg
        reward = 1.0 - error_probability(a, b, threshold)
        return cls(
            prior_a=float(prior_a),
            prior_b=float(prior_b),
            threshold=float(threshold),
            cap=cap,
            n_pos=n_pos.astype(np.int64),
            n_neg=n_neg.astype(np.int64),
            in_flight=w.astype(np.int64),
            pos_next=pos_next.astype(np.int64),
            neg_next=neg_next.astype(np.int64),
            hire=hire.astype(np.int64),
            p_pos=(a / (a + b)).astype(float),
            reward=np.asarray(reward, dtype=float),
            lookup=lookup[: cap + 1, : cap + 1, :],
        )


# ---- the single-task DP: NumPy reference and compiled kernel -------------------------------
def solve_single_task_reference(
    space: StateSpace,
    penalties: FloatArray,
    arrival_rate: float,
    completion_rate: float,
    cap_mode: CapMode = "optimistic",
) -> tuple[FloatArray, np.ndarray]:
    """Backward induction of the single-task DP, vectorised over the states of one w-level.

    Args:
        penalties: λ_ℓ for arrivals ℓ = 1..U, shape (U,).

    Returns:
        ``values`` shape (U+1, S) (row m = arrivals to go) and ``hire_decisions`` shape
        (U+1, S) (row 0 unused; at the cap under ``"optimistic"``, True means the virtual
        hire worth 1 − λ).
    """
    penalties = np.asarray(penalties, dtype=float)
    budget = penalties.shape[0]
    r, mu = float(arrival_rate), float(completion_rate)
    w = space.in_flight
    levels = [np.flatnonzero(w == k) for k in range(space.cap + 1)]
    values = np.empty((budget + 1, space.n_states))
    decisions = np.zeros((budget + 1, space.n_states), dtype=bool)
    p = space.p_pos
    at_cap = space.hire < 0
    hire_idx = np.where(at_cap, 0, space.hire)
    for m in range(budget + 1):
        v = values[m]
        if m > 0:
            lam = penalties[budget - m]
            prev = values[m - 1]
            hired = prev[hire_idx] - lam
            if cap_mode == "optimistic":
                hired = np.where(at_cap, 1.0 - lam, hired)
            else:
                hired = np.where(at_cap, -np.inf, hired)
            decisions[m] = hired >= prev
            arrival = np.maximum(prev, hired)
        for k, idx in enumerate(levels):
            if k == 0:
                v[idx] = arrival[idx] if m > 0 else space.reward[idx]
                continue
            completion = p[idx] * v[space.pos_next[idx]] + (1 - p[idx]) * v[space.neg_next[idx]]
            if m == 0:
                v[idx] = completion
            else:
                q = r + mu * k
                v[idx] = (r / q) * arrival[idx] + (mu * k / q) * completion
    return values, decisions


@njit(cache=True)
def backward_induction(
    penalties: np.ndarray,
    r: float,
    mu: float,
    p: np.ndarray,
    reward: np.ndarray,
    w: np.ndarray,
    pos_next: np.ndarray,
    neg_next: np.ndarray,
    hire: np.ndarray,
    optimistic: bool,
    keep_decisions: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Compiled backward induction; returns V_U (shape (S,)) and the decisions
    (shape (U+1, S) when ``keep_decisions``, else (1, 1))."""
    budget = penalties.shape[0]
    n = p.shape[0]
    prev = np.empty(n)
    cur = np.empty(n)
    if keep_decisions:
        decisions = np.zeros((budget + 1, n), dtype=np.bool_)
    else:
        decisions = np.zeros((1, 1), dtype=np.bool_)
    for s in range(n):
        if w[s] == 0:
            prev[s] = reward[s]
        else:
            prev[s] = p[s] * prev[pos_next[s]] + (1.0 - p[s]) * prev[neg_next[s]]
    for m in range(1, budget + 1):
        lam = penalties[budget - m]
        for s in range(n):
            h = hire[s]
            if h >= 0:
                hired = prev[h] - lam
            elif optimistic:
                hired = 1.0 - lam
            else:
                hired = -np.inf
            stay = prev[s]
            if hired >= stay:
                arrival = hired
                if keep_decisions:
                    decisions[m, s] = True
            else:
                arrival = stay
            if w[s] == 0:
                cur[s] = arrival
            else:
                q = r + mu * w[s]
                completion = p[s] * cur[pos_next[s]] + (1.0 - p[s]) * cur[neg_next[s]]
                cur[s] = (r / q) * arrival + (mu * w[s] / q) * completion
        prev, cur = cur, prev
    return prev.copy(), decisions


@njit(cache=True)
def forward_hires(
    decisions: np.ndarray,
    r: float,
    mu: float,
    p: np.ndarray,
    w: np.ndarray,
    pos_next: np.ndarray,
    neg_next: np.ndarray,
    hire: np.ndarray,
    start: int,
) -> tuple[np.ndarray, float]:
    """Expected hires at each arrival ℓ = 1..U under the decisions (shape (U,)), and the
    probability of ever hiring at a state at the cap (the optimistic virtual hire)."""
    budget = decisions.shape[0] - 1
    n = p.shape[0]
    mass = np.zeros(n)
    nxt = np.zeros(n)
    mass[start] = 1.0
    hires = np.zeros(budget)
    cap_mass = 0.0
    for m in range(budget, 0, -1):
        for k in range(n):
            nxt[k] = 0.0
        for s in range(n - 1, -1, -1):
            pm = mass[s]
            if pm == 0.0:
                continue
            q = r + mu * w[s]
            pa = pm * r / q
            if decisions[m, s]:
                hires[budget - m] += pa
                if hire[s] >= 0:
                    nxt[hire[s]] += pa
                else:
                    cap_mass += pa  # virtual hire at the cap: absorbed
            else:
                nxt[s] += pa
            if w[s] > 0:
                pc = pm - pa
                mass[pos_next[s]] += pc * p[s]
                mass[neg_next[s]] += pc * (1.0 - p[s])
            mass[s] = 0.0
        for k in range(n):
            mass[k] = nxt[k]
    return hires, cap_mass


@njit(cache=True)
def reach_cap_probability(
    decisions: np.ndarray,
    r: float,
    mu: float,
    p: np.ndarray,
    w: np.ndarray,
    pos_next: np.ndarray,
    neg_next: np.ndarray,
    hire: np.ndarray,
    start: int,
) -> float:
    """Probability that the policy given by ``decisions`` ever visits a state at the cap."""
    budget = decisions.shape[0] - 1
    n = p.shape[0]
    mass = np.zeros(n)
    nxt = np.zeros(n)
    mass[start] = 1.0
    reached = 0.0
    for m in range(budget, 0, -1):
        for k in range(n):
            nxt[k] = 0.0
        for s in range(n - 1, -1, -1):
            pm = mass[s]
            if pm == 0.0:
                continue
            if hire[s] < 0:  # at the cap: count and stop following
                reached += pm
                mass[s] = 0.0
                continue
            q = r + mu * w[s]
            pa = pm * r / q
            if decisions[m, s]:
                nxt[hire[s]] += pa
            else:
                nxt[s] += pa
            if w[s] > 0:
                pc = pm - pa
                mass[pos_next[s]] += pc * p[s]
                mass[neg_next[s]] += pc * (1.0 - p[s])
            mass[s] = 0.0
        for k in range(n):
            mass[k] = nxt[k]
    for s in range(n):
        if hire[s] < 0:
            reached += mass[s]
    return reached


# ---- prior groups ---------------------------------------------------------------------------
def prior_groups(
    prior: ArrayLike, thresholds: ArrayLike, n_items: int
) -> tuple[FloatArray, IntArray, IntArray]:
    """Distinct (a, b, d) rows and how many tasks share each.

    Args:
        prior: shape (2,) or (n_items, 2), columns (b, a) as in :class:`~crowdbudget.types.Problem`.
        thresholds: scalar or shape (n_items,).

    Returns:
        ``groups`` shape (G, 3) with columns (a, b, d), ``counts`` shape (G,), and the group of
        each task, shape (n_items,).
    """
    prior_arr = np.broadcast_to(np.asarray(prior, dtype=float), (n_items, 2))
    d = np.broadcast_to(np.asarray(thresholds, dtype=float), (n_items,))
    rows = np.column_stack([prior_arr[:, 1], prior_arr[:, 0], d])
    if n_items > 0 and np.all(rows == rows[0]):
        # one shared prior and threshold (the usual case): the same answer as np.unique
        # below without its row sort, which took 5 of the 8.5 s of the index policy's reset
        # at 10^6 tasks
        return rows[:1].copy(), np.array([n_items], dtype=np.int64), np.zeros(n_items, np.int64)
    groups, inverse, counts = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    return groups, counts.astype(np.int64), inverse.reshape(-1).astype(np.int64)


def check_rates(arrival_rate: float, completion_rate: float) -> tuple[float, float]:
    """The arrival rate r and completion rate μ as floats, each a finite number > 0."""
    r, mu = float(arrival_rate), float(completion_rate)
    if not (math.isfinite(r) and r > 0):
        raise InvalidParameterError(f"arrival rate must be a finite number > 0, got {r}")
    if not (math.isfinite(mu) and mu > 0):
        raise InvalidParameterError(f"completion rate must be a finite number > 0, got {mu}")
    return r, mu
