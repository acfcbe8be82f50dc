"""Exact dynamic programming for the Beta–Bernoulli budget-allocation MDP (small problems).

Chen, Lin, Zhou (2013), §2.4: with K items, prior Beta(a_i, b_i) per item, threshold d_i and a
budget of T unit-price labels, the optimal expected number of correct final labels (eq. 6) is

    V(S) = Σ_i h(P_i)                                       when no label is left,
    V_s(S) = max_i [ p_i V_{s−1}(S + e_i⁺) + (1 − p_i) V_{s−1}(S + e_i⁻) ]  with s labels left,

where ``p_i = a_i / (a_i + b_i)`` is the predictive probability of a positive label (eq. 2),
``P_i = I(a_i, b_i)`` and ``h(x) = max(x, 1 − x)`` (Prop. 2.1). This is backward induction on
eq. 8 written with the terminal reward instead of the stage rewards (the two are equal by
Prop. 2.3); we evaluate ``h(P) = 1 − e`` with the directly computed error probability ``e`` so
that no digits are lost.

States are the label counts per item, shape (K, 2) (column 0 negatives, column 1 positives, as
in :class:`~crowdbudget.types.CampaignState`). Items with the same prior and threshold are
exchangeable, so the memo key sorts their counts: for K identical items the number of states
with t labels is the number of multisets of K (n⁻, n⁺) pairs summing to t. The cost grows
exponentially in T (eq. 11), so the solver refuses problems with more than ``max_states``
reachable states (default 2·10⁶), e.g. K = 4 and T = 14 is fine, K = 10 and T = 20 is not.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.types import FloatArray, IntArray, Problem

_TIE_TOLERANCE = 1e-12


def _count_states(n_items: int, budget: int) -> int:
    """Upper bound on the states visited: Σ_t C(t + 2K − 1, 2K − 1) (compositions of t)."""
    return sum(math.comb(t + 2 * n_items - 1, 2 * n_items - 1) for t in range(budget + 1))


class ExactDPSolution:
    """Optimal values and actions of a small Beta–Bernoulli allocation problem.

    Args:
        prior: pseudo-counts, shape (K, 2) (column 1 = a, column 0 = b).
        thresholds: d per item, shape (K,).
        budget: number of labels T (an integer).
        max_states: refuse problems with more reachable states than this.

    ``value`` is solved on first access; ``value_of``, ``q_values`` and ``optimal_actions``
    solve only the sub-problem they are asked about (any counts, any number of labels left).
    """

    def __init__(
        self,
        prior: ArrayLike,
        thresholds: ArrayLike,
        budget: int,
        *,
        max_states: int = 2_000_000,
    ) -> None:
        self.prior = np.asarray(prior, dtype=float)
        self.thresholds = np.asarray(thresholds, dtype=float)
        self.n_items = int(self.prior.shape[0])
        self.budget = int(budget)
        if self.budget < 0:
            raise InvalidParameterError(f"budget must be >= 0, got {budget}")
        n_states = _count_states(self.n_items, self.budget)
        if n_states > max_states:
            raise InvalidParameterError(
                f"exact DP with {self.n_items} items and budget {self.budget} has ~{n_states:.2e} "
                f"states; the limit is {max_states:.0e} (use fewer items or a smaller budget)"
            )
        # exchangeable groups: items with the same prior row and threshold
        keys = [(*self.prior[i].tolist(), float(self.thresholds[i])) for i in range(self.n_items)]
        group_of = {k: g for g, k in enumerate(dict.fromkeys(keys))}
        self._group = [group_of[k] for k in keys]
        self._value = lru_cache(maxsize=None)(self._value_uncached)
        self._error = lru_cache(maxsize=None)(self._error_uncached)

    @property
    def value(self) -> float:
        """Optimal expected number of correct final labels from the prior with the whole budget
        (V(S⁰) of eq. 6); solved on first access."""
        return self.value_of(np.zeros((self.n_items, 2), dtype=np.int64), self.budget)

    # ---- internals ---------------------------------------------------------------------------
    def _error_uncached(self, item_group: int, neg: int, pos: int) -> float:
        i = self._group.index(item_group)
        a = self.prior[i, 1] + pos
        b = self.prior[i, 0] + neg
        return float(error_probability(a, b, self.thresholds[i]))

    def _key(self, counts: tuple[tuple[int, int], ...]) -> Hashable:
        return tuple(sorted((self._group[i], c[0], c[1]) for i, c in enumerate(counts)))

    def _value_uncached(self, key: Hashable, steps_left: int) -> float:
        triples: tuple[tuple[int, int, int], ...] = key  # type: ignore[assignment]
        if steps_left == 0:
            return len(triples) - sum(self._error(g, n, p) for g, n, p in triples)
        best = -math.inf
        seen: set[tuple[int, int, int]] = set()
        for k, (g, n, p) in enumerate(triples):
            if (g, n, p) in seen:  # exchangeable duplicates have the same continuation
                continue
            seen.add((g, n, p))
            best = max(best, self._q(triples, k, steps_left))
        return best

    def _q(self, triples: tuple[tuple[int, int, int], ...], k: int, steps_left: int) -> float:
        g, n, p = triples[k]
        i = self._group.index(g)
        a = self.prior[i, 1] + p
        b = self.prior[i, 0] + n
        p_pos = a / (a + b)
        up = tuple(sorted((*triples[:k], (g, n, p + 1), *triples[k + 1 :])))
        down = tuple(sorted((*triples[:k], (g, n + 1, p), *triples[k + 1 :])))
        return p_pos * self._value(up, steps_left - 1) + (1 - p_pos) * self._value(
            down, steps_left - 1
        )

    def _check(self, counts: ArrayLike, steps_left: int) -> tuple[tuple[int, int], ...]:
        arr = np.asarray(counts, dtype=np.int64)
        if arr.shape != (self.n_items, 2) or np.any(arr < 0):
            raise InvalidParameterError(f"counts must be non-negative, shape ({self.n_items}, 2)")
        if steps_left < 0:
            raise InvalidParameterError(f"steps_left must be >= 0, got {steps_left}")
        return tuple((int(r[0]), int(r[1])) for r in arr)

    # ---- public ------------------------------------------------------------------------------
    def value_of(self, counts: ArrayLike, steps_left: int) -> float:
        """Optimal expected number of correct labels from state ``counts`` (shape (K, 2),
        negatives then positives) with ``steps_left`` labels to spend."""
        return float(self._value(self._key(self._check(counts, steps_left)), steps_left))

    def q_values(self, counts: ArrayLike, steps_left: int) -> FloatArray:
        """Value of labeling item i now and acting optimally after, shape (K,)."""
        state = self._check(counts, steps_left)
        if steps_left == 0:
            raise InvalidParameterError("no label is left to act with")
        out = np.empty(self.n_items)
        for i in range(self.n_items):
            g = self._group[i]
            n, p = state[i]
            a = self.prior[i, 1] + p
            b = self.prior[i, 0] + n
            p_pos = a / (a + b)
            up = [list(c) for c in state]
            up[i][1] += 1
            down = [list(c) for c in state]
            down[i][0] += 1
            out[i] = p_pos * self.value_of(up, steps_left - 1) + (1 - p_pos) * self.value_of(
                down, steps_left - 1
            )
            del g
        return out

    def optimal_actions(self, counts: ArrayLike, steps_left: int) -> IntArray:
        """Every item whose labeling now is optimal (within 1e-12), ascending."""
        q = self.q_values(counts, steps_left)
        return np.flatnonzero(q >= q.max() - _TIE_TOLERANCE)

    def action(self, counts: ArrayLike, steps_left: int) -> int:
        """The smallest optimal item."""
        return int(self.optimal_actions(counts, steps_left)[0])


@lru_cache(maxsize=64)
def _cached_solution(
    prior: tuple[tuple[float, float], ...], thresholds: tuple[float, ...], budget: int
) -> ExactDPSolution:
    return ExactDPSolution(np.array(prior), np.array(thresholds), budget)


def solve_exact_dp(problem: Problem) -> ExactDPSolution:
    """Solve ``problem`` exactly (binary, unit prices, integer budget; small K and T).

    Solutions are cached per (prior, thresholds, budget), so replications of one problem solve
    it once per process.

    Example:
        >>> from crowdbudget.types import Problem
        >>> round(solve_exact_dp(Problem(n_items=1, budget=1)).value, 6)
        0.75
    """
    if problem.n_classes != 2:
        raise InvalidParameterError("exact DP handles binary problems only")
    if problem.worker_prices is not None:
        raise InvalidParameterError("exact DP assumes unit prices")
    budget = math.floor(problem.budget + 1e-9)
    prior = tuple(tuple(map(float, row)) for row in problem.prior_array)
    thresholds = tuple(map(float, problem.threshold_array))
    return _cached_solution(prior, thresholds, budget)
