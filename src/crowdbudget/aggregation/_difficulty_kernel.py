"""The per-update passes over the labels of the item-difficulty mixture
(:mod:`~crowdbudget.aggregation.item_difficulty`), compiled.

One update of the mixture reads every label three times in NumPy and SciPy — the workers'
expected counts ``N = Wᵀ E`` on the easy responsibilities, the hard items' votes ``M`` and the
items' scores ``M · E[log e]`` plus the hard component's ``V · log Hᵀ`` — and then takes an
(N, 2C) softmax through a handful of whole-array temporaries. On a crowd of many items and
few workers (fact_eval: 42,624 items, 57 workers) those passes are most of an update; here
they are two compiled loops over the items' labels:

- :func:`mixture_counts`: ``N[j, c, l] = Σ_{labels (i, j, l)} w · E_ic`` (``w`` the label's
  weight in the workers' incidence: 0 for a lone label under ``skip``) and
  ``M[c, l] = Σ_i D_ic · checked_il``;
- :func:`mixture_scores`: for each item the 2C scores ``E[log π_c] + E[log(1 − ρ)] +
  Σ_labels E[log e_jcl]`` (easy) and ``E[log π_c] + E[log ρ] + Σ_l V_il log H_cl`` (hard),
  max-shifted (every exponential <= 1); the exponential is NumPy's (its SIMD loop is several
  times faster than a compiled scalar ``exp``), then :func:`normalise_rows` divides each row
  by its sum and returns the update's stopping move in the same pass.

The same numbers as the NumPy update up to the order of the sums (so to rounding, not bit
for bit: ``tests/test_item_difficulty.py`` compares the fits).

The workers' model (:func:`~crowdbudget.aggregation.worker_asymmetry.worker_model`, J × C × C
numbers) and ``H``'s bounds stay NumPy. Shapes: N items, J workers, C classes; the incidence
matrices are CSR (N, J·C) with the column of label l of worker j at ``j·C + l``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from crowdbudget.aggregation.base import FloatArray


@njit(cache=True, nogil=True)
def mixture_counts(
    indptr: Any,
    indices: Any,
    weights: Any,
    R: FloatArray,
    checked: FloatArray,
    n_workers: int,
) -> tuple[FloatArray, FloatArray]:  # pragma: no cover (compiled; compared with NumPy's)
    """``(N, M)``: the workers' expected counts on the easy responsibilities ``R[:, :C]``,
    shape (J, C, C) ``[j, c, l]``, from the workers' incidence (``indptr``, ``indices``,
    ``weights``), and the hard items' checked votes (C, C) ``[c, l]`` from ``R[:, C:]`` and
    ``checked`` (N, C)."""
    n_items, C = checked.shape
    counts = np.zeros((n_workers, C, C))
    hard = np.zeros((C, C))
    for i in range(n_items):
        for k in range(indptr[i], indptr[i + 1]):
            w = weights[k]
            if w == 0.0:
                continue
            column = indices[k]
            j, label = column // C, column % C
            for c in range(C):
                counts[j, c, label] += w * R[i, c]
        for label in range(C):
            v = checked[i, label]
            if v != 0.0:
                for c in range(C):
                    hard[c, label] += v * R[i, C + c]
    return counts, hard


@njit(cache=True, nogil=True)
def mixture_scores(
    indptr: Any,
    indices: Any,
    weights: Any,
    expected_log_e: FloatArray,
    votes: FloatArray,
    hard_log: FloatArray,
    easy_offset: FloatArray,
    hard_offset: FloatArray,
    out: FloatArray,
) -> None:  # pragma: no cover (compiled; compared with NumPy's)
    """``out`` (N, 2C) ← each item's 2C scores, max-shifted (every exponential <= 1): the
    easy ones from the label incidence (``indptr``, ``indices``, ``weights``) and ``E[log e]``
    (J, C, C) ``[j, c, l]``, the hard ones from the votes (N, C) and ``log H`` (C, C), plus
    the offsets (C,) ``E[log π] + E[log(1 − ρ)]`` and ``E[log π] + E[log ρ]``. The
    exponential is NumPy's (its SIMD loop; :func:`normalise_rows` then)."""
    n_items, C = votes.shape
    for i in range(n_items):
        for c in range(C):
            out[i, c] = easy_offset[c]
            out[i, C + c] = hard_offset[c]
        for k in range(indptr[i], indptr[i + 1]):
            a = weights[k]
            column = indices[k]
            j, label = column // C, column % C
            for c in range(C):
                out[i, c] += a * expected_log_e[j, c, label]
        for label in range(C):
            v = votes[i, label]
            if v != 0.0:
                for c in range(C):
                    out[i, C + c] += v * hard_log[c, label]
        top = out[i, 0]
        for x in range(1, 2 * C):
            top = max(top, out[i, x])
        for x in range(2 * C):
            out[i, x] -= top


@njit(cache=True, nogil=True)
def normalise_rows(out: FloatArray, previous: FloatArray) -> float:  # pragma: no cover
    """``out`` (N, 2C) of exponentials ← each row over its sum (>= 1: the max's own term);
    returns the largest move of a class share ``T_ic = R_ic + R_i,C+c`` from ``previous``
    (N, 2C) (the update's stopping move)."""
    n_items, cells = out.shape
    C = cells // 2
    moved = 0.0
    for i in range(n_items):
        total = 0.0
        for x in range(cells):
            total += out[i, x]
        for x in range(cells):
            out[i, x] /= total
        for c in range(C):
            change = (out[i, c] + out[i, C + c]) - (previous[i, c] + previous[i, C + c])
            moved = max(moved, abs(change))
    return moved


@njit(cache=True, nogil=True)
def frozen_e_step(
    log_easy: FloatArray,
    votes: FloatArray,
    checked: FloatArray,
    hard_log: FloatArray,
    easy_offset: FloatArray,
    hard_offset: FloatArray,
    out: FloatArray,
) -> tuple[float, FloatArray, FloatArray, FloatArray]:  # pragma: no cover (compiled)
    """One E-step of the gate's frozen mixture (:mod:`._difficulty_gate`) in one pass over
    the items: ``out`` (N, 2C) ← the normalised ``q(z, h)`` from the workers' frozen
    ``log_easy`` (N, C) and the votes (N, C) under ``log H`` (C, C) and the offsets (C,)
    ``log π + log(1 − ρ)``, ``log π + log ρ``. Returns the labels' log-likelihood
    ``Σ_i log Σ_cells exp(score)``, the responsibilities' column sums (2C,), and the checked
    votes (C, C) ``[c, l]`` under the easy and the hard responsibilities (``Eᵀ checked``,
    ``Dᵀ checked``) — what the M-step reads."""
    n_items, C = votes.shape
    scores = np.empty(2 * C)
    sums = np.zeros(2 * C)
    easy_checked = np.zeros((C, C))
    hard_checked = np.zeros((C, C))
    value = 0.0
    for i in range(n_items):
        for c in range(C):
            scores[c] = log_easy[i, c] + easy_offset[c]
            hard = 0.0
            for label in range(C):
                v = votes[i, label]
                if v != 0.0:
                    hard += v * hard_log[c, label]
            scores[C + c] = hard + hard_offset[c]
        top = -np.inf
        for x in range(2 * C):
            top = max(top, scores[x])
        total = 0.0
        for x in range(2 * C):
            e = np.exp(scores[x] - top)  # <= 1: the max subtracted
            out[i, x] = e
            total += e
        value += np.log(total) + top  # total >= 1 (the max's own term)
        for x in range(2 * C):
            out[i, x] /= total
            sums[x] += out[i, x]
        for label in range(C):
            v = checked[i, label]
            if v != 0.0:
                for c in range(C):
                    easy_checked[c, label] += v * out[i, c]
                    hard_checked[c, label] += v * out[i, C + c]
    return value, sums, easy_checked, hard_checked
