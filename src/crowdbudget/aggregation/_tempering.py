"""The tempered posterior's τ (``temperature="auto"`` of
:class:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene`): the maximiser of the
leave-one-label-out predictive likelihood, found by a bounded search.

Criterion (the model's module docstring, "Tempering"). For every label (i, j, l), with
``r_c = log T_ic − E[log e_jcl]`` (the item's log posterior from its *other* labels, up to a
per-label constant) and ``p_c = E[e_jcl]`` (worker j's posterior mean probability of saying l
on a class-c item)::

    L(τ) = Σ_labels log h(τ),   h(τ) = Σ_c exp(τ r_c) p_c / Σ_c exp(τ r_c),

the log probability that the tempered posterior from the item's other labels gives the held-out
label; ``τ* = argmax L`` over ``τ ∈ [0.025, 1]`` (:data:`TAU_BOUNDS`).

Evaluation. Each label's largest ``r`` (class k) is factored out: with ``g_c = r_c − r_k ≤ 0``
for the C − 1 other classes,
``h(τ) = (p_k + Σ_{c≠k} p_c e^{τ g_c}) / (1 + Σ_{c≠k} e^{τ g_c})``. Every exponent is ≤ 0 (no
overflow), the denominator lies in [1, C] and the numerator is at least ``p_k > 0`` (a
posterior-mean confusion is a Dirichlet mean, > 0), so ``h ∈ (0, 1]`` and its logarithm is
finite. That costs C − 1 exponentials per label instead of C, and the arrays are laid out
(C − 1, n_labels), so the sums over classes are additions of whole rows (NumPy's reductions
over a short last axis are several times slower); the per-label gaps, ``p_k`` and ``p_c`` are
gathered once per fit (:func:`held_out_labels`), not once per τ. The slope
``L'(τ) = Σ [Σ_{c≠k} p_c g_c e^{τ g_c} / num − Σ_{c≠k} g_c e^{τ g_c} / den]`` reuses the
exponentials (:func:`held_out_slope`).

Search (:func:`searched_temperature`). The criterion was measured on the verdict table's sets
(docs/stress-bed.md, the 2026-12-07 section on the tempered default): unimodal in τ on every
draw, with its maximum at τ = 1 on some sets (wsd) and inside the interval on others. The
search does not assume it: it first reads the slope at τ = 1 — if ``L'(1) ≥ 0`` the value
there is already at least that of every τ slightly below it, and the search scans the
:data:`COARSE` points of the interval (the 40-point grid's every eighth) to make sure that no
interior maximum is larger; otherwise it takes the coarse point of largest ``L`` and refines
between its neighbours by Brent's bounded search (golden section with parabolic steps,
SciPy's ``minimize_scalar(method="bounded")``) to :data:`TAU_TOLERANCE`. The answer is the
evaluated point of largest ``L`` — the coarse points and τ = 1 included — so it is never below
the coarse points; where ``L`` is unimodal it is within the tolerance of the true maximum,
hence at least the 40-point grid's value up to the curvature over one tolerance
(``tests/test_tempering.py`` checks ≥ the grid's on fixtures and the bundled sets). About 5 +
10 evaluations instead of 40, each cheaper (above). :func:`grid_temperature` keeps the
40-point grid (the rule before; first maximum on ties) for comparison.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize_scalar

from crowdbudget.aggregation.base import FloatArray

#: the interval τ is chosen in
TAU_BOUNDS = (0.025, 1.0)

#: the 40-point grid of the rule before (:func:`grid_temperature`)
GRID = np.linspace(TAU_BOUNDS[0], TAU_BOUNDS[1], 40)

#: the coarse scan of :func:`searched_temperature`: 9 points evenly spaced in log τ (each
#: 1.585 times the last), both ends included
COARSE = np.geomspace(TAU_BOUNDS[0], TAU_BOUNDS[1], 9)

#: relative difference in ``L`` below which two τ are level (the sum's rounding over a
#: million labels is about 1e-13 of it)
FLAT = 1e-12

#: the bounded search's tolerance in log τ (0.5 % of τ: a fifth of the grid's spacing at
#: τ = 1, finer below)
LOG_TAU_TOLERANCE = 0.005


class HeldOutLabels(NamedTuple):
    """Each label's terms of the criterion (module docstring, "Evaluation"); n = labels."""

    #: ``g_c = r_c − r_k`` of the C − 1 classes other than the label's largest, (C − 1, n), ≤ 0
    gaps: FloatArray
    #: ``p_k``, the held-out label's probability under that class, (n,)
    top: FloatArray
    #: ``p_c`` of the other classes, (C − 1, n)
    others: FloatArray


def held_out_labels(
    items: np.ndarray,
    workers: np.ndarray,
    labels: np.ndarray,
    log_T: FloatArray,
    expected_log_e: FloatArray,
    errors: FloatArray,
) -> HeldOutLabels:
    """The criterion's per-label terms from the fit: ``log_T`` (n_items, C) the items' log
    posteriors, ``expected_log_e`` and ``errors`` (n_workers, C, C) ``E[log e_jcl]`` and
    ``E[e_jcl]``; ``items``, ``workers``, ``labels`` (n_labels,) the labels. Rows are gathered
    with ``np.take`` on flat indices (a fancy index of a 3-d array is about four times
    slower, and this gathering is as costly as several evaluations of ``L``)."""
    n_workers, C, _ = expected_log_e.shape
    rows = workers * C + labels  # row (j, l) of the [(j, l), c] tables below
    # the item's posterior from its other labels, up to a per-label constant: (n, C)
    rest = np.take(log_T, items, axis=0)
    rest -= np.take(expected_log_e.transpose(0, 2, 1).reshape(n_workers * C, C), rows, axis=0)
    # P(label l | class c) for worker j, (n, C)
    predict = np.take(errors.transpose(0, 2, 1).reshape(n_workers * C, C), rows, axis=0)
    n = rest.shape[0]
    top_class = np.argmax(rest, axis=1)  # (n,)
    starts = np.arange(0, n * C, C)
    flat_top = starts + top_class
    # the other classes' flat indices, in class order: c for c < k, c + 1 for c >= k
    shifted = np.arange(C - 1)[:, None]
    flat_others = starts + shifted + (shifted >= top_class)  # (C − 1, n)
    flat_rest, flat_predict = rest.reshape(-1), predict.reshape(-1)
    gaps = np.take(flat_rest, flat_others)
    gaps -= np.take(flat_rest, flat_top)
    return HeldOutLabels(gaps, np.take(flat_predict, flat_top), np.take(flat_predict, flat_others))


def _exponentials(held: HeldOutLabels, tau: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``e^{τ g}`` (C − 1, n) and each label's numerator and denominator of ``h(τ)``, (n,)."""
    weights = np.multiply(held.gaps, tau)
    np.exp(weights, out=weights)  # τ g ≤ 0: in (0, 1]
    numerator = held.top.copy()
    denominator = np.ones_like(numerator)
    for row in range(weights.shape[0]):  # C − 1 row additions (module docstring)
        numerator += held.others[row] * weights[row]
        denominator += weights[row]
    return weights, numerator, denominator


def held_out_log_likelihood(held: HeldOutLabels, tau: float) -> float:
    """``L(τ)`` (nats): the sum over the labels of ``log h(τ)`` (module docstring)."""
    _, numerator, denominator = _exponentials(held, tau)
    # numerator ≥ p_k > 0 and denominator ≥ 1: the quotient is in (0, 1], its log finite
    numerator /= denominator
    return float(np.sum(np.log(numerator)))


def held_out_slope(held: HeldOutLabels, tau: float) -> tuple[float, float]:
    """``(L(τ), L'(τ))`` (module docstring, "Evaluation")."""
    weights, numerator, denominator = _exponentials(held, tau)
    value = float(np.sum(np.log(numerator / denominator)))
    weighted = weights * held.gaps  # g e^{τ g}, (C − 1, n)
    numerator_slope = np.zeros_like(numerator)
    denominator_slope = np.zeros_like(numerator)
    for row in range(weights.shape[0]):
        numerator_slope += held.others[row] * weighted[row]
        denominator_slope += weighted[row]
    slope = float(np.sum(numerator_slope / numerator) - np.sum(denominator_slope / denominator))
    return value, slope


def grid_temperature(held: HeldOutLabels) -> float:
    """The 40-point grid's τ (:data:`GRID`; the smallest on ties): the rule before the
    search, kept for comparison."""
    best_tau, best = 1.0, -np.inf
    for tau in GRID:
        score = held_out_log_likelihood(held, float(tau))
        if score > best:
            best_tau, best = float(tau), score
    return best_tau


def searched_temperature(held: HeldOutLabels) -> float:
    """τ maximising ``L`` on :data:`TAU_BOUNDS`: the coarse scan, then Brent's bounded search
    in log τ between the best coarse point's neighbours, then the two grid points around the
    point found (module docstring, "Search")."""
    if held.top.size == 0:
        return 1.0
    values = {float(tau): held_out_log_likelihood(held, float(tau)) for tau in COARSE[:-1]}
    values[1.0], slope = held_out_slope(held, 1.0)
    best = _least_tempering(values)
    if best == 1.0 and slope >= -FLAT * abs(values[1.0]):
        return 1.0  # the largest coarse value, and L does not fall towards τ = 1
    index = list(values).index(best)  # the coarse points in order
    low = float(COARSE[max(index - 1, 0)])
    high = float(COARSE[min(index + 1, COARSE.size - 1)])
    found = minimize_scalar(
        lambda log_tau: -held_out_log_likelihood(held, float(np.exp(log_tau))),
        bounds=(np.log(low), np.log(high)),
        method="bounded",
        options={"xatol": LOG_TAU_TOLERANCE},
    )
    tau = float(np.exp(found.x))
    values[tau] = -float(found.fun)
    # the grid points around it: never below the grid where L is unimodal (docstring)
    above = int(np.searchsorted(GRID, tau))
    for neighbour in GRID[max(above - 1, 0) : above + 1]:
        if float(neighbour) not in values:
            values[float(neighbour)] = held_out_log_likelihood(held, float(neighbour))
    return _least_tempering(values)


def _least_tempering(values: dict[float, float]) -> float:
    """The largest τ among the evaluated ones whose ``L`` is the largest up to rounding
    (:data:`FLAT`): a difference the sum's rounding can make is no evidence for tempering."""
    best = max(values.values())
    level = best - FLAT * abs(best)
    return max(tau for tau, value in values.items() if value >= level)
