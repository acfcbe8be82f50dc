"""Index tables λ*(m, s) of Hu & Frazier, "Bayes-Optimal Effort Allocation in Crowdsourcing:
Bounds and Index Policies" (§6, Algorithm 1), read by the ``lagrangian-index`` policy
(:mod:`crowdbudget.policies.lagrangian_index`). The single-task DP they solve, its states and
label cap are in :mod:`crowdbudget.bounds.single_task`.

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
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from crowdbudget._validation import check_positive_int
from crowdbudget.bounds.single_task import (
    TIE,
    StateSpace,
    check_rates,
    solve_single_task_reference,
)
from crowdbudget.types import FloatArray


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
                    if g >= -TIE:
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
                                if g0 + s0 * (kink - x0) >= -TIE:
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
    r, mu = check_rates(arrival_rate, completion_rate)
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
    ok = np.array([g(x) >= -TIE for x in scan])
    if not ok[0]:
        return 0.0
    if ok[-1]:
        return 0.51
    last = int(np.flatnonzero(ok)[-1])
    lo, hi = float(scan[last]), float(scan[last + 1])
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if g(mid) >= -TIE:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
