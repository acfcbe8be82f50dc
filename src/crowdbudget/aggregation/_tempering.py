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

On the mixture (:func:`mixture_held_out_labels`). Where the item-difficulty mixture of
:class:`~crowdbudget.aggregation.item_difficulty.ItemDifficultyDawidSkene` is the fit, the
criterion must score the model that made the posterior, not the workers' model alone. That
model's item posterior is over (class, difficulty), ``R_i,c+C·h = q(z_i = c, h_i = h)``, and
its log scores are sums of one term per label: ``E[log e_jcl]`` in the easy cell of class c,
``log H_cl`` in the hard cell (a hard item's label follows the crowd confusion ``H``, whoever
gives it). So, for a label (i, j, l), the joint posterior from the item's *other* labels is,
up to one per-label constant, ``a_c = log R_ic − E[log e_jcl]`` (easy) and
``b_c = log R_i,c+C − log H_cl`` (hard), and the label's probability is ``ē_jcl`` given
(c, easy) and ``H_cl`` given (c, hard). The mixture's leave-one-label-out predictive is
``Σ_{c,h} q(c, h | rest) P(l | c, h, j)``. The verdict reports the class posterior
``T_ic = R_ic + R_i,c+C`` tempered, ``∝ T_ic^τ``, so the criterion tempers the class posterior
from the other labels and keeps the model's split between easy and hard within each class::

    r_c = log(e^{a_c} + e^{b_c}),   p_c = (e^{a_c} ē_jcl + e^{b_c} H_cl) / (e^{a_c} + e^{b_c}),

the criterion's own form with these ``r`` and ``p`` (:func:`factored_terms`): at τ = 1 it is
the mixture's predictive; with no hard mass (``b_c → −∞``) it is the workers' criterion above.
On a hard item the held-out label is predicted by ``H`` — near chance, whatever the class —
so disagreeing labels there no longer count against a confident class posterior: the
mixture has already explained them. Tempering the 2C cells instead would score a class
posterior other than ``T^τ``, the one reported.

Search (:func:`searched_temperature`). Its shape, measured on every crowd of the verdict
table (334 fits; docs/stress-bed.md, "2026-12-07: a cheaper τ search"): the maximum at τ = 1
on most (up to rounding: wsd's criterion is flat to 1e-15 above τ = 0.8), inside the interval
on the others, and two local maxima on three fits — a narrow peak near τ = 0.12 beside a
plateau reaching τ = 1 (a 40-labels-per-item cell; millionaire at all labels). Other fits
hide a maximum between the points of a coarse scan (``bds:prior-fit=every`` on temp: two
maxima 0.06 nats apart) or a peak and a dip inside one interval. So the search does not
assume one maximum:

1. a scan of :data:`COARSE`, 9 points evenly spaced in log τ (ratio 1.585, both ends
   included) — in log τ because a label's term moves over ``τ ~ 1/|g|``, so a maximum at
   small τ is as narrow in τ as it is small (a scan evenly spaced in τ missed the 40-label
   cell's peak) — with the value and the slope at each point;
2. Brent's bounded search (golden section with parabolic steps: SciPy's
   ``minimize_scalar(method="bounded")``) in log τ, to :data:`LOG_TAU_TOLERANCE`, inside every
   coarse interval where the slope turns from rising to falling (a maximum inside, for
   certain), and inside an interval whose mean slope lies outside both end slopes of one sign
   (the derivative is not monotone there: a peak and a dip may hide) where the Hermite cubic
   through the ends promises more than the best value in hand (:func:`_cubic_maximum`);
3. the two points of the 40-point grid around each point found.

Where ``L`` rises to τ = 1 (the common case) that is 9 evaluations; with a maximum inside,
17–20 (every fit of the table). The answer is the largest τ among those evaluated whose ``L``
is the largest up to rounding (:data:`FLAT`; a difference the sum's rounding can make is no
evidence for tempering). It is never below the coarse points, and where each coarse interval
holds at most one turn of ``L`` it is at least the grid's (on all 334 fits measured;
``tests/test_tempering.py``: real and synthetic crowds, the 40-label cell, two-maxima
fixtures either way). :func:`grid_temperature` keeps the 40-point grid (the rule before, first
maximum on ties) for comparison. Measured and not used (docs/stress-bed.md): a compiled loop
per evaluation (slower than NumPy's vectorised ``exp`` and ``log``), preallocated buffers (no
gain).
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
    return factored_terms(rest, predict)


def mixture_held_out_labels(
    items: np.ndarray,
    workers: np.ndarray,
    labels: np.ndarray,
    log_R: FloatArray,
    expected_log_e: FloatArray,
    errors: FloatArray,
    hard: FloatArray,
) -> HeldOutLabels:
    """The criterion's per-label terms read on the item-difficulty mixture's own predictive
    (:mod:`~crowdbudget.aggregation.item_difficulty`; module docstring, "On the mixture"):
    ``log_R`` (n_items, 2C) the items' log ``q(z_i = c, h_i = h)`` (columns ``[0, C)`` easy,
    ``[C, 2C)`` hard), ``expected_log_e`` and ``errors`` (n_workers, C, C) the easy items'
    workers, ``hard`` (C, C) the crowd's confusion ``H`` on hard items (every entry > 0)."""
    n_workers, C, _ = expected_log_e.shape
    rows = workers * C + labels  # row (j, l) of the [(j, l), c] tables below
    # a_c: the easy cells from the item's other labels (its label's E[log e_jcl] removed)
    easy = np.take(log_R[:, :C], items, axis=0)
    easy -= np.take(expected_log_e.transpose(0, 2, 1).reshape(n_workers * C, C), rows, axis=0)
    # b_c: the hard cells (its vote's log H_cl removed; H_cl is the same for every worker)
    hard_by_label = np.ascontiguousarray(hard.T)  # [l, c]
    difficult = np.take(log_R[:, C:], items, axis=0)
    difficult -= np.take(np.log(hard_by_label), labels, axis=0)
    rest = np.logaddexp(easy, difficult)  # r_c = log(e^a_c + e^b_c), finite
    # p_c: the label's probability given class c, mixed by q(h | c, rest); both weights are
    # exponentials of values ≤ 0 summing to 1, so p_c lies between ē_jcl and H_cl, > 0
    predict = np.take(errors.transpose(0, 2, 1).reshape(n_workers * C, C), rows, axis=0)
    predict *= np.exp(easy - rest)
    predict += np.take(hard_by_label, labels, axis=0) * np.exp(difficult - rest)
    return factored_terms(rest, predict)


def factored_terms(rest: FloatArray, predict: FloatArray) -> HeldOutLabels:
    """The criterion's factored terms (module docstring, "Evaluation") from each label's
    ``r_c`` (``rest``, (n, C): the item's log posterior from its other labels, up to a
    per-label constant) and ``p_c`` (``predict``, (n, C): the held-out label's probability
    given class c, > 0)."""
    n, C = rest.shape
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
    """``(L(τ), L'(τ))``: with ``h = num / den``, ``L'`` is
    ``Σ_labels Σ_{c≠k} g_c e^{τ g_c} (p_c − h) / num`` (the derivative of ``log num − log den``:
    ``p_c / num − 1 / den = (p_c − h) / num``; module docstring, "Evaluation")."""
    weights, numerator, denominator = _exponentials(held, tau)
    held_out = numerator / denominator  # h ∈ (0, 1] (module docstring)
    value = float(np.sum(np.log(held_out)))
    slope = 0.0
    for row in range(weights.shape[0]):
        # products and a sum, not np.dot: a BLAS dot may start threads (and spin) on a
        # shared machine for a few microseconds of work
        term = held.others[row] - held_out
        term *= weights[row]
        term *= held.gaps[row]
        term /= numerator  # ≥ p_k > 0
        slope += float(np.sum(term))
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
    """τ maximising ``L`` on :data:`TAU_BOUNDS`: the coarse scan with slopes, Brent's bounded
    search in log τ inside every coarse interval whose cubic through the values and slopes at
    its ends has a maximum inside, then the two grid points around each point found (module
    docstring, "Search")."""
    if held.top.size == 0:
        return 1.0
    logs = np.log(COARSE)
    values: dict[float, float] = {}
    slopes = np.empty(COARSE.size)  # dL / d log τ = τ L'(τ)
    for index, tau in enumerate(COARSE):
        values[float(tau)], slope = held_out_slope(held, float(tau))
        slopes[index] = float(tau) * slope
    ends = np.array(list(values.values()))
    level = FLAT * float(np.max(np.abs(ends)))  # differences this small are rounding
    candidates = []
    for index in range(COARSE.size - 1):
        found = _cubic_maximum(
            logs[index : index + 2], ends[index : index + 2], slopes[index : index + 2]
        )
        if found is not None:  # else L is monotone here as far as the ends show
            candidates.append(found)
    # every certain maximum, and a possible one where the cubic promises more than the best
    # in hand (the most promising first)
    for height, certain, bracket in sorted(candidates, reverse=True):
        if not certain and height <= max(values.values()) + level:
            continue
        tau, values[tau] = _bounded_search(held, bracket)
        # the grid points around it: never below the grid's value there (docstring)
        above = int(np.searchsorted(GRID, tau))
        for neighbour in GRID[max(above - 1, 0) : above + 1]:
            if float(neighbour) not in values:
                values[float(neighbour)] = held_out_log_likelihood(held, float(neighbour))
    return _least_tempering(values)


def _bounded_search(held: HeldOutLabels, bracket: tuple[float, float]) -> tuple[float, float]:
    """``(τ, L(τ))`` at the τ maximising ``L`` with log τ in ``bracket``, by Brent's bounded
    search to :data:`LOG_TAU_TOLERANCE`."""
    found = minimize_scalar(
        lambda log_tau: -held_out_log_likelihood(held, float(np.exp(log_tau))),
        bounds=bracket,
        method="bounded",
        options={"xatol": LOG_TAU_TOLERANCE},
    )
    return float(np.exp(found.x)), -float(found.fun)


def _cubic_maximum(
    at: FloatArray, values: FloatArray, slopes: FloatArray
) -> tuple[float, bool, tuple[float, float]] | None:
    """Whether ``L`` may have a maximum inside ``[at[0], at[1]]`` (log τ), from its values and
    slopes at the two ends: ``(height, certain, part)`` — the height of the Hermite cubic's
    interior maximum, whether a maximum is certain (the slope turns from rising to falling)
    and the part of the interval holding the cubic's maximum — or None.

    With ``t ∈ [0, 1]`` and ``h = at[1] − at[0]`` the cubic's derivative is ``a t² + b t + c``:
    ``c = h·slopes[0]``, ``a + b + c = h·slopes[1]`` and its mean ``a/3 + b/2 + c`` the rise
    ``values[1] − values[0]``. Besides a sign change, a maximum then a dip between two rising
    ends (or a dip then a maximum between two falling ones) is possible only when the mean
    slope lies outside the end slopes: the mean of a monotone derivative lies between its
    ends. Where it lies between them ``L`` is read as monotone (a cubic would overshoot an
    exponential approach to a plateau and promise a maximum that is not there)."""
    width = float(at[1] - at[0])
    c, end = width * float(slopes[0]), width * float(slopes[1])
    rise = float(values[1] - values[0])
    certain = c > 0 > end
    hidden = (end > 0 and rise < min(c, end)) or (end < 0 and rise > max(c, end))
    if not certain and not hidden:
        return None  # monotone as far as the ends show
    a = 3.0 * (end + c) - 6.0 * rise
    b = end - c - a
    if abs(a) <= 1e-12 * (abs(b) + abs(c)):  # a quadratic cubic: one turning point
        roots = [-c / b] if b != 0.0 else []
    else:
        discriminant = b * b - 4.0 * a * c
        if discriminant <= 0.0:
            return None  # the derivative keeps its sign: monotone
        root = np.sqrt(discriminant)
        roots = sorted(((-b - root) / (2 * a), (-b + root) / (2 * a)))
    turning = [t for t in roots if 0.0 < t < 1.0]
    tops = [t for t in turning if 2 * a * t + b < 0]  # the derivative falls through zero
    if not tops:
        return None
    top = tops[0]
    height = values[0] + top * (c + top * (b / 2 + top * a / 3))  # the cubic at its maximum
    if height <= max(values[0], values[1]):
        return None
    dips = [t for t in turning if t not in tops]
    low = max([t for t in dips if t < top], default=0.0)
    high = min([t for t in dips if t > top], default=1.0)
    return float(height), certain, (float(at[0] + low * width), float(at[0] + high * width))


def _least_tempering(values: dict[float, float]) -> float:
    """The largest τ among the evaluated ones whose ``L`` is the largest up to rounding
    (:data:`FLAT`): a difference the sum's rounding can make is no evidence for tempering."""
    best = max(values.values())
    level = best - FLAT * abs(best)
    return max(tau for tau, value in values.items() if value >= level)
