"""Bounded knapsack (BKP, eq. 3) of Rangi, Franceschetti 2018: the density-ordered greedy
algorithm (Algorithm 2) and an exact optimum for the regret baseline.

BKP: maximise ``sum_k x_k v_k`` subject to ``sum_k x_k c_k <= B`` and integer
``0 <= x_k <= m_k``. Arrays have shape (K,).

Algorithm 2 (*Density Ordered Greedy Algorithm for BKP*) as written: optimistic values
``w_k = v_hat_k + sqrt(2 log n / (M_k - m_k))`` (the UCB term; ``M_k - m_k`` is how often
worker k has been selected), workers sorted by decreasing ``w_k / c_k``, then in that order
``x_k = min(m_k, floor((B_n - used) / c_k))`` whenever one more evaluation of k still fits,
else 0. Ties in ``w_k / c_k`` keep worker order (stable sort). A worker never selected
(``M_k = m_k``) gets an infinite bonus so it comes first — the initialisation phase of
Algorithm 1 makes this case not arise inside B-KUBE.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from crowdbudget.exceptions import InvalidParameterError


def ucb_values(
    value_estimate: np.ndarray, capacity: np.ndarray, remaining: np.ndarray, iteration: int
) -> np.ndarray:
    """``w_k = v_hat_k + sqrt(2 log n / (M_k - m_k))`` (Algorithm 2, initialisation), shape (K,)."""
    pulls = np.asarray(capacity, dtype=float) - np.asarray(remaining, dtype=float)
    with np.errstate(divide="ignore"):
        # pulls == 0 gives +inf: a never-tried worker is maximally optimistic
        bonus = np.sqrt(2.0 * np.log(max(iteration, 1)) / pulls)
    return np.asarray(value_estimate, dtype=float) + bonus


def greedy_bounded_knapsack(
    values: np.ndarray, costs: np.ndarray, capacities: np.ndarray, budget: float
) -> np.ndarray:
    """Density-ordered greedy for BKP (Algorithm 2 given the values ``w_k``).

    Args:
        values: shape (K,), value per unit (``w_k``; may be +inf).
        costs: shape (K,), ``c_k > 0``.
        capacities: shape (K,), integer ``m_k >= 0``.
        budget: ``B_n >= 0``.

    Returns:
        Integer counts ``x_k``, shape (K,), with ``sum x_k c_k <= budget`` and ``x_k <= m_k``.
    """
    values = np.asarray(values, dtype=float)
    costs = np.asarray(costs, dtype=float)
    capacities = np.asarray(capacities, dtype=np.int64)
    _check(values, costs, capacities, budget)
    return greedy_counts(values, costs, capacities, budget)


def greedy_counts(
    values: np.ndarray, costs: np.ndarray, capacities: np.ndarray, budget: float
) -> np.ndarray:
    """:func:`greedy_bounded_knapsack` without the argument checks, for callers whose
    arrays are checked once (B-KUBE's selector, every iteration): float ``values`` and
    ``costs`` and integer ``capacities`` of shape (K,), ``costs > 0``.

    The loop over the K workers runs on Python floats: the same IEEE-754 double operations
    in the same order as on NumPy scalars (so the same counts), without their overhead."""
    density = values / costs
    # stable sort on -density; +inf densities (untried workers) come first
    order = np.argsort(-density, kind="stable").tolist()
    cost = costs.tolist()
    capacity = capacities.tolist()
    counts = [0] * len(cost)
    used = 0.0
    for k in order:  # K iterations, K = number of workers (not items)
        price = cost[k]
        if used + price <= budget:
            # the small epsilon guards floor() against (B - used)/c landing a hair below an
            # integer through rounding; the budget check below keeps the result feasible
            take = min(capacity[k], math.floor((budget - used) / price + 1e-12))
            while take > 0 and used + take * price > budget + 1e-9:
                take -= 1
            counts[k] = take
            used += take * price
    return np.array(counts, dtype=np.int64)


def exact_bounded_knapsack(
    values: np.ndarray, costs: np.ndarray, capacities: np.ndarray, budget: float
) -> tuple[np.ndarray, float]:
    """The optimum ``v*(B)`` of BKP (eq. 3) by mixed-integer programming (HiGHS via scipy).

    Returns ``(x, value)``; x has shape (K,). Used as the regret baseline with the true v_k.
    """
    values = np.asarray(values, dtype=float)
    costs = np.asarray(costs, dtype=float)
    capacities = np.asarray(capacities, dtype=np.int64)
    _check(values, costs, capacities, budget)
    if np.any(~np.isfinite(values)):
        raise InvalidParameterError("exact_bounded_knapsack needs finite values")
    result = milp(
        c=-values,
        constraints=LinearConstraint(costs[None, :], -np.inf, budget),
        integrality=np.ones(values.size),
        bounds=Bounds(np.zeros(values.size), capacities.astype(float)),
        # presolve off: HiGHS 1.x (scipy 1.17) prints a debug line to the C stdout from its
        # presolve on some instances, which would corrupt `--json` output; the instances
        # are tiny (K variables, one constraint), so presolve buys nothing
        options={"mip_rel_gap": 1e-9, "presolve": False},
    )
    if not result.success:  # pragma: no cover - x = 0 is always feasible
        raise RuntimeError(f"knapsack MILP failed: {result.message}")
    x = np.rint(result.x).astype(np.int64)
    return x, float(values @ x)


def _check(values: np.ndarray, costs: np.ndarray, capacities: np.ndarray, budget: float) -> None:
    if values.ndim != 1 or costs.shape != values.shape or capacities.shape != values.shape:
        raise InvalidParameterError(
            f"values, costs and capacities must be 1-D of equal length; got {values.shape}, "
            f"{costs.shape}, {capacities.shape}"
        )
    if np.any(~(costs > 0)) or np.any(~np.isfinite(costs)):
        raise InvalidParameterError("costs must be finite and > 0")
    if np.any(capacities < 0):
        raise InvalidParameterError("capacities must be >= 0")
    if not np.isfinite(budget) or budget < 0:
        raise InvalidParameterError(f"budget must be finite and >= 0, got {budget}")
