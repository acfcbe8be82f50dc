"""Lagrangian upper bound and index tables of Hu & Frazier, "Bayes-Optimal Effort Allocation
in Crowdsourcing: Bounds and Index Policies" (§4–§6).

Model (§3–§4). K binary tasks, θ_x ~ Beta(α_{0,x}, β_{0,x}); task x is positive iff
θ_x >= d_x. Workers arrive as a Poisson process of rate r; each arriving worker (at most U of
them) is given one task, works an Exp(μ) time and returns a label ~ Bernoulli(θ_x). The final
reward is Σ_x R(α_x, β_x), R = max(P(θ_x > d_x), P(θ_x < d_x)) (eq. 2), the posterior expected
number of correctly classified tasks.

Relaxation (Theorems 1–2). Relaxing "one task per worker" with multipliers λ_ℓ >= 0 gives

    B(λ) = Σ_x sup_{π^(x)} E[R_x − Σ_ℓ λ_ℓ a_{ℓ,x}] + Σ_ℓ λ_ℓ  >=  optimal value,   (13)

a sum of single-task dynamic programs (15), convex in λ (Lemma 1). Tasks with the same
(α_0, β_0, d) share one DP, so the cost does not grow with K.

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

Minimisation over λ. Scalar λ (λ_ℓ = λ for all ℓ, the paper's choice): golden-section search on
[0, 1/2] (B is convex; the gain of one more worker is at most 1 − 1/2, so the minimiser is in
[0, 1/2]). Vector λ (tighter): projected subgradient descent from the scalar optimum; the
subgradient is ∂B/∂λ_ℓ = 1 − Σ_x P(task x hires at arrival ℓ), the hire probabilities come
from a forward pass through the optimal single-task policy.

Index (§6, Algorithm 1). λ*(s) = sup{λ >= 0 : hiring at s is optimal in (15) with λ = λ1}, i.e.
the largest λ with g(λ) = D_λ(s) − λ >= 0, D_λ(s) = V_{m−1}(n⁺, n⁻, w+1) − V_{m−1}(n⁺, n⁻, w).
(Algorithm 1 writes inf{λ : a = 1}, but the text defines λ* as the greatest λ at which the
worker is hired; we follow the text.) With T = ∞, hiring now or at the next arrival is often
worth exactly the same, so g is 0 on whole intervals and the hire set need not be an interval
of the form [0, λ*]: we take the supremum, with |g| <= 1e-12 counted as a tie (= hire).
Because V_λ is piecewise linear and convex in λ with slope −H (expected future hires under the
optimal policy, envelope theorem), g is piecewise linear with slope H(w) − H(w+1) − 1. We
solve the DP on a grid of λ (quadratically spaced on [0, 0.51]: the gain of one more worker is
at most 1/2), carry g and its slope for every state, and locate the root at the *last*
down-crossing of g by intersecting the two tangent lines at the bracketing grid points (exact
when g has at most one kink in between; otherwise the secant). The tables are indexed by
(m, state); one table per (prior, threshold, U, r, μ, C), computed once and cached in memory
and, optionally, on disk.

Rows of the tables beyond ``max_lookahead`` arrivals to go are taken equal to the last row:
V_m converges as m grows (a task can use at most C workers), and ``lookahead_change``
reports how much the last row still moved; the default keeps every row (exact).

Arrays: a state s of one level has (n⁺[s], n⁻[s], w[s]), states sorted by w ascending so
that completions (w → w − 1) point to smaller s; ``hire[s]`` is the state with one more worker
in flight (−1 at the cap).

Example:
    >>> result = lagrangian_bound(n_items=10, budget=12, arrival_rate=0.1, completion_rate=0.4)
    >>> 0.5 * 10 < result.bound <= 10
    True
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numba import njit
from numpy.typing import ArrayLike

from crowdbudget._validation import check_positive_int
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.types import FloatArray, IntArray

CapMode = Literal["forbid", "optimistic"]
_CAP_CODES = {"forbid": 0, "optimistic": 1}
#: Upper end of the λ range: the value of one more worker is at most 1 − 1/2.
LAMBDA_MAX = 0.5
#: g = D − λ within this of 0 counts as "hiring is optimal" (ties are common: with T = ∞,
#: hiring now or at the next arrival is often worth exactly the same).
_TIE = 1e-12


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
def _backward(
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
def _forward_hires(
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
def _reach_cap_probability(
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


@njit(cache=True)
def _index_kernel(
    grid: np.ndarray,
    n_rows: int,
    r: float,
    mu: float,
    p: np.ndarray,
    reward: np.ndarray,
    w: np.ndarray,
    pos_next: np.ndarray,
    neg_next: np.ndarray,
    hire: np.ndarray,
) -> tuple[np.ndarray, float]:
    """λ*(m, s) for m = 1..n_rows arrivals to go (row m−1 of the result; −inf at the cap).

    For each grid λ: backward induction with scalar λ and the "forbid" cap, keeping V and H
    (expected future hires) of the previous level; at level m, g = D − λ and its slope
    H(s) − H(hire) − 1 are compared with the previous grid point's (module docstring).
    Also returns the largest |λ*(n_rows) − λ*(n_rows − 1)| (convergence in m).
    """
    n = p.shape[0]
    n_grid = grid.shape[0]
    index = np.zeros((n_rows, n))
    ok = np.zeros((n_rows, n), dtype=np.bool_)
    g_prev = np.zeros((n_rows, n))
    slope_prev = np.zeros((n_rows, n))
    v_prev = np.empty(n)
    v_cur = np.empty(n)
    h_prev = np.empty(n)
    h_cur = np.empty(n)
    for k in range(n_grid):
        lam = grid[k]
        for s in range(n):
            h_prev[s] = 0.0
            if w[s] == 0:
                v_prev[s] = reward[s]
            else:
                v_prev[s] = p[s] * v_prev[pos_next[s]] + (1.0 - p[s]) * v_prev[neg_next[s]]
        for m in range(1, n_rows + 1):
            row = m - 1
            for s in range(n):
                hs = hire[s]
                stay_v = v_prev[s]
                stay_h = h_prev[s]
                if hs >= 0:
                    d = v_prev[hs] - stay_v
                    g = d - lam
                    slope = stay_h - h_prev[hs] - 1.0
                    if g >= -_TIE:
                        ok[row, s] = True
                        g_prev[row, s] = g
                        slope_prev[row, s] = slope
                    elif k == 0:
                        index[row, s] = 0.0
                    elif ok[row, s]:
                        # down-crossing between grid[k-1] and grid[k]: the latest one wins
                        ok[row, s] = False
                        x0 = grid[k - 1]
                        g0 = g_prev[row, s]
                        s0 = slope_prev[row, s]
                        x1 = lam
                        root = x0 + g0 * (x1 - x0) / (g0 - g)  # secant
                        if abs(s0 - slope) <= 1e-12:  # one line through both points
                            if slope < 0.0:
                                root = x1 - g / slope
                        else:
                            kink = (g - slope * x1 - g0 + s0 * x0) / (s0 - slope)
                            if x0 <= kink <= x1:
                                if g0 + s0 * (kink - x0) >= -_TIE:
                                    if slope < 0.0:  # root on the right piece
                                        root = x1 - g / slope
                                elif s0 < 0.0:  # root on the left piece
                                    root = x0 - g0 / s0
                        index[row, s] = min(max(root, x0), x1)
                    if g >= 0.0:
                        arrival_v = v_prev[hs] - lam
                        arrival_h = 1.0 + h_prev[hs]
                    else:
                        arrival_v = stay_v
                        arrival_h = stay_h
                else:
                    arrival_v = stay_v
                    arrival_h = stay_h
                if w[s] == 0:
                    v_cur[s] = arrival_v
                    h_cur[s] = arrival_h
                else:
                    q = r + mu * w[s]
                    a = r / q
                    c = mu * w[s] / q
                    ps = p[s]
                    v_cur[s] = a * arrival_v + c * (
                        ps * v_cur[pos_next[s]] + (1.0 - ps) * v_cur[neg_next[s]]
                    )
                    h_cur[s] = a * arrival_h + c * (
                        ps * h_cur[pos_next[s]] + (1.0 - ps) * h_cur[neg_next[s]]
                    )
            for s in range(n):
                v_prev[s] = v_cur[s]
                h_prev[s] = h_cur[s]
    change = 0.0
    for row in range(n_rows):
        for s in range(n):
            if hire[s] < 0:
                index[row, s] = -np.inf
            elif ok[row, s]:
                index[row, s] = grid[n_grid - 1]
    if n_rows >= 2:
        for s in range(n):
            if hire[s] >= 0:
                change = max(change, abs(index[n_rows - 1, s] - index[n_rows - 2, s]))
    return index, change


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


def _check_rates(arrival_rate: float, completion_rate: float) -> tuple[float, float]:
    r, mu = float(arrival_rate), float(completion_rate)
    if not (math.isfinite(r) and r > 0):
        raise InvalidParameterError(f"arrival rate must be a finite number > 0, got {r}")
    if not (math.isfinite(mu) and mu > 0):
        raise InvalidParameterError(f"completion rate must be a finite number > 0, got {mu}")
    return r, mu


# ---- the bound ------------------------------------------------------------------------------
@dataclass
class BoundResult:
    """The Lagrangian upper bound (Theorem 2) and how it was obtained.

    Attributes:
        bound: min over λ of B(λ): an upper bound on the Bayes-optimal expected total reward
            (eq. 2: expected number of correctly classified tasks), total over tasks.
        bound_scalar: the bound with one λ for every arrival (golden-section search).
        lambda_scalar: the minimising scalar λ.
        bound_vector: the bound with λ_ℓ per arrival (subgradient descent), or None.
        penalties: the λ_ℓ of ``bound`` (shape (U,)).
        bound_forbid: B at ``penalties`` with hiring forbidden at the cap (the paper's DP):
            equal to ``bound`` when the cap does not bind.
        cap_reach_probability: per prior group, the probability that the optimal relaxed
            policy reaches the cap (~0: the cap does not bind).
        n_items, budget, arrival_rate, completion_rate, label_cap, horizon: the problem.
        evaluations: number of single-task DP solves.
    """

    bound: float
    bound_scalar: float
    lambda_scalar: float
    bound_vector: float | None
    penalties: FloatArray
    bound_forbid: float
    cap_reach_probability: list[float]
    n_items: int
    budget: int
    arrival_rate: float
    completion_rate: float
    label_cap: int
    horizon: float = math.inf
    evaluations: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def bound_per_item(self) -> float:
        return self.bound / self.n_items

    @property
    def cap_binds(self) -> bool:
        """Whether the cap may change the bound (reached with probability > 1e-9, or the
        forbid/optimistic values differ by more than 1e-9 per task)."""
        return max(self.cap_reach_probability, default=0.0) > 1e-9 or (
            self.bound - self.bound_forbid > 1e-9 * self.n_items
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "bound": self.bound,
            "bound_per_item": self.bound_per_item,
            "bound_scalar": self.bound_scalar,
            "lambda_scalar": self.lambda_scalar,
            "bound_vector": self.bound_vector,
            "bound_forbid_at_cap": self.bound_forbid,
            "label_cap": self.label_cap,
            "cap_reach_probability": max(self.cap_reach_probability, default=0.0),
            "cap_binds": self.cap_binds,
            "n_items": self.n_items,
            "budget": self.budget,
            "arrival_rate": self.arrival_rate,
            "completion_rate": self.completion_rate,
            "horizon": None if math.isinf(self.horizon) else self.horizon,
            "dp_solves": self.evaluations,
        }


class _Relaxation:
    """B(λ) = Σ_g count_g V^g(start; λ) + Σ_ℓ λ_ℓ over the prior groups."""

    def __init__(
        self,
        spaces: list[StateSpace],
        counts: IntArray,
        budget: int,
        r: float,
        mu: float,
    ) -> None:
        self.spaces = spaces
        self.counts = counts
        self.budget = budget
        self.r = r
        self.mu = mu
        self.evaluations = 0

    def _solve(
        self, space: StateSpace, penalties: FloatArray, optimistic: bool, keep: bool
    ) -> tuple[FloatArray, np.ndarray]:
        self.evaluations += 1
        return _backward(
            penalties,
            self.r,
            self.mu,
            space.p_pos,
            space.reward,
            space.in_flight,
            space.pos_next,
            space.neg_next,
            space.hire,
            optimistic,
            keep,
        )

    def value(self, penalties: FloatArray, optimistic: bool = True) -> float:
        total = float(np.sum(penalties))
        for space, count in zip(self.spaces, self.counts, strict=True):
            v, _ = self._solve(space, penalties, optimistic, False)
            total += float(count) * float(v[space.start])
        return total

    def value_and_subgradient(self, penalties: FloatArray) -> tuple[float, FloatArray]:
        total = float(np.sum(penalties))
        grad = np.ones(self.budget)
        for space, count in zip(self.spaces, self.counts, strict=True):
            v, decisions = self._solve(space, penalties, True, True)
            total += float(count) * float(v[space.start])
            hires, _ = _forward_hires(
                decisions,
                self.r,
                self.mu,
                space.p_pos,
                space.in_flight,
                space.pos_next,
                space.neg_next,
                space.hire,
                space.start,
            )
            grad -= float(count) * hires
        return total, grad

    def cap_reach(self, penalties: FloatArray) -> list[float]:
        out = []
        for space in self.spaces:
            _, decisions = self._solve(space, penalties, True, True)
            out.append(
                float(
                    _reach_cap_probability(
                        decisions,
                        self.r,
                        self.mu,
                        space.p_pos,
                        space.in_flight,
                        space.pos_next,
                        space.neg_next,
                        space.hire,
                        space.start,
                    )
                )
            )
        return out


def golden_section(
    f: Any, low: float, high: float, tol: float = 1e-7, max_iter: int = 200
) -> tuple[float, float]:
    """Minimise a convex (unimodal) ``f`` on [low, high]; returns (argmin, min).

    The end points are compared too, so a minimum at λ = 0 is found exactly.
    """
    inv_phi = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = low, high
    c = b - inv_phi * (b - a)
    d = a + inv_phi * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(max_iter):
        if b - a <= tol:
            break
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - inv_phi * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + inv_phi * (b - a)
            fd = f(d)
    candidates = [(fc, c), (fd, d), (f(low), low)]
    best_value, best_x = min(candidates)
    return best_x, best_value


def lagrangian_bound(
    *,
    n_items: int,
    budget: int,
    arrival_rate: float,
    completion_rate: float,
    prior: ArrayLike = (1.0, 1.0),
    thresholds: ArrayLike = 0.5,
    label_cap: int | None = None,
    horizon: float = math.inf,
    vector: bool = False,
    subgradient_steps: int = 150,
) -> BoundResult:
    """Upper bound on the Bayes-optimal expected number of correctly classified tasks.

    Args:
        n_items: K.
        budget: U, the number of workers that may be hired.
        arrival_rate, completion_rate: r and μ.
        prior: Beta pseudo-counts, shape (2,) or (K, 2), columns (b, a) as in
            :class:`~crowdbudget.types.Problem` (class-0 count, class-1 count).
        thresholds: d_x, scalar or shape (K,).
        label_cap: C, workers per task in the DP (default :func:`default_label_cap`).
        horizon: T; a finite T is accepted and bounded by the T = ∞ bound (module docstring).
        vector: also run subgradient descent over λ_ℓ per arrival (tighter, slower).
        subgradient_steps: iterations of the subgradient descent.

    Returns:
        :class:`BoundResult`.
    """
    n_items = check_positive_int(n_items, "n_items")
    budget = check_positive_int(budget, "budget")
    r, mu = _check_rates(arrival_rate, completion_rate)
    if not horizon > 0:
        raise InvalidParameterError(f"horizon must be > 0 (inf for none), got {horizon}")
    cap = default_label_cap(n_items, budget) if label_cap is None else label_cap
    cap = check_positive_int(cap, "label_cap")
    groups, counts, _ = prior_groups(prior, thresholds, n_items)
    spaces = [StateSpace.build(a, b, d, cap) for a, b, d in groups]
    relax = _Relaxation(spaces, counts, budget, r, mu)

    lam, best = golden_section(lambda x: relax.value(np.full(budget, x)), 0.0, LAMBDA_MAX, tol=1e-8)
    scalar_bound = best
    penalties = np.full(budget, lam)
    vector_bound: float | None = None
    if vector:
        penalties, vector_bound = _subgradient(relax, penalties, scalar_bound, subgradient_steps)
    bound = min(scalar_bound, vector_bound) if vector_bound is not None else scalar_bound
    forbid = relax.value(penalties, optimistic=False)
    reach = relax.cap_reach(penalties)
    notes = []
    if not math.isinf(horizon):
        notes.append(
            "finite horizon: the T = ∞ bound is reported (valid, looser); the paper computes "
            "the bound for T = ∞ only (§7)"
        )
    return BoundResult(
        bound=bound,
        bound_scalar=scalar_bound,
        lambda_scalar=lam,
        bound_vector=vector_bound,
        penalties=penalties,
        bound_forbid=forbid,
        cap_reach_probability=reach,
        n_items=n_items,
        budget=budget,
        arrival_rate=r,
        completion_rate=mu,
        label_cap=cap,
        horizon=float(horizon),
        evaluations=relax.evaluations,
        notes=notes,
    )


def _subgradient(
    relax: _Relaxation, start: FloatArray, start_value: float, steps: int
) -> tuple[FloatArray, float]:
    """Projected subgradient descent on λ >= 0 with Polyak-free diminishing steps
    ``step_k = c / sqrt(k + 1) / ||g||`` (c = the scalar λ, or 0.01); keeps the best point."""
    lam = start.copy()
    best_lam, best_value = start.copy(), start_value
    scale = max(float(start.mean()), 1e-2)
    for k in range(steps):
        value, grad = relax.value_and_subgradient(lam)
        if value < best_value:
            best_value, best_lam = value, lam.copy()
        norm = float(np.linalg.norm(grad))
        if norm < 1e-12:
            break
        step = scale / math.sqrt(k + 1.0) / norm * math.sqrt(lam.shape[0])
        lam = np.clip(lam - step * grad, 0.0, LAMBDA_MAX)
    return best_lam, best_value


def relaxed_value(
    penalty: float | ArrayLike,
    *,
    n_items: int,
    budget: int,
    arrival_rate: float,
    completion_rate: float,
    prior: ArrayLike = (1.0, 1.0),
    thresholds: ArrayLike = 0.5,
    label_cap: int | None = None,
    cap_mode: CapMode = "optimistic",
) -> float:
    """B(λ) of eq. (13) at one λ (scalar or shape (U,)) — an upper bound for every λ >= 0."""
    r, mu = _check_rates(arrival_rate, completion_rate)
    cap = default_label_cap(n_items, budget) if label_cap is None else label_cap
    groups, counts, _ = prior_groups(prior, thresholds, n_items)
    spaces = [StateSpace.build(a, b, d, cap) for a, b, d in groups]
    relax = _Relaxation(spaces, counts, budget, r, mu)
    pen = np.broadcast_to(np.asarray(penalty, dtype=float), (budget,)).copy()
    if np.any(pen < 0):
        raise InvalidParameterError("penalties λ must be >= 0")
    return relax.value(pen, optimistic=cap_mode == "optimistic")


# ---- index tables ---------------------------------------------------------------------------
@dataclass(frozen=True)
class IndexTable:
    """λ*(m, s) of §6 for one (prior, threshold): row m−1 for m arrivals to go.

    Attributes:
        space: the :class:`StateSpace`.
        index: shape (n_rows, S); −inf at the cap (no more workers).
        budget: U; rows beyond ``n_rows`` arrivals to go reuse the last row.
        lookahead_change: largest change of λ* between the last two rows kept (how far from
            converged in m the table is; it matters only when ``max_lookahead`` < U).
    """

    space: StateSpace
    index: FloatArray
    budget: int
    lookahead_change: float

    @property
    def n_rows(self) -> int:
        return int(self.index.shape[0])

    def row(self, arrivals_so_far: int) -> FloatArray:
        """The indices of all states when ``arrivals_so_far`` workers have been hired."""
        m = self.budget - arrivals_so_far
        return self.index[min(max(m, 1), self.n_rows) - 1]


def index_grid(n_points: int = 256) -> FloatArray:
    """λ values of the index computation: quadratically spaced on [0, 0.51] (dense near 0)."""
    return 0.51 * np.linspace(0.0, 1.0, n_points) ** 2


_TABLES: dict[tuple[Any, ...], IndexTable] = {}


def index_table(
    *,
    prior_a: float,
    prior_b: float,
    threshold: float,
    budget: int,
    arrival_rate: float,
    completion_rate: float,
    label_cap: int,
    max_lookahead: int | None = None,
    grid_points: int = 256,
    cache_dir: str | os.PathLike[str] | None = None,
) -> IndexTable:
    """The index table for one prior, computed once per process (and per ``cache_dir``)."""
    r, mu = _check_rates(arrival_rate, completion_rate)
    budget = check_positive_int(budget, "budget")
    cap = check_positive_int(label_cap, "label_cap")
    rows = budget if max_lookahead is None else min(budget, max_lookahead)
    rows = check_positive_int(rows, "max_lookahead")
    key = (
        float(prior_a),
        float(prior_b),
        float(threshold),
        rows,
        r,
        mu,
        cap,
        int(grid_points),
    )
    table = _TABLES.get(key)
    if table is not None:
        return IndexTable(table.space, table.index, budget, table.lookahead_change)
    space = StateSpace.build(prior_a, prior_b, threshold, cap)
    path = None
    if cache_dir is not None:
        digest = hashlib.sha256(repr(key).encode()).hexdigest()[:20]
        path = Path(cache_dir) / f"hu-frazier-index-{digest}.npz"
        if path.exists():
            with np.load(path) as stored:
                index = stored["index"]
                change = float(stored["change"])
            table = IndexTable(space, index, budget, change)
            _TABLES[key] = table
            return table
    index, change = _index_kernel(
        index_grid(grid_points),
        rows,
        r,
        mu,
        space.p_pos,
        space.reward,
        space.in_flight,
        space.pos_next,
        space.neg_next,
        space.hire,
    )
    table = IndexTable(space, index, budget, float(change))
    _TABLES[key] = table
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, index=index, change=change)
        os.replace(tmp, path)
    return table


def index_by_bisection(
    space: StateSpace,
    state: tuple[int, int, int],
    arrivals_to_go: int,
    *,
    arrival_rate: float,
    completion_rate: float,
    tol: float = 1e-10,
    scan_points: int = 400,
) -> float:
    """λ* of one state (the largest λ at which hiring is optimal) by a scan of g(λ) = D_λ − λ
    on ``scan_points`` values and bisection of the last sign change; each evaluation is a
    full DP (reference for tests)."""
    s = int(space.lookup[state])
    h = int(space.hire[s])
    if h < 0:
        return -math.inf
    m = arrivals_to_go

    def g(lam: float) -> float:
        values, _ = solve_single_task_reference(
            space,
            np.full(m - 1, lam) if m > 1 else np.zeros(0),
            arrival_rate,
            completion_rate,
            cap_mode="forbid",
        )
        last = values[m - 1]
        return float(last[h] - last[s] - lam)

    # the hire set {λ : g(λ) >= −tie} need not be an interval: scan, then bisect the last
    # down-crossing
    scan = np.linspace(0.0, 0.51, scan_points)
    ok = np.array([g(x) >= -_TIE for x in scan])
    if not ok[0]:
        return 0.0
    if ok[-1]:
        return 0.51
    last = int(np.flatnonzero(ok)[-1])
    lo, hi = float(scan[last]), float(scan[last + 1])
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if g(mid) >= -_TIE:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
