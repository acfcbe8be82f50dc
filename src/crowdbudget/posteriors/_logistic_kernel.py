"""Compiled global look-ahead of the logistic feature model (Chen, Lin, Zhou 2013, §5).

``FeatureKnowledgeGradient`` with the paper's global reward scores every candidate item i by
the change of every item's error after a label on i (:mod:`crowdbudget.policies.feature_kg`):

    err_after(i, z) = Σ_k Φ(−|m_k + α_i^z C_ki − cut_k| / √max(v_k − β_i^z C_ki², 1e-300)),

an (n_items × n_candidates) array of normal CDFs per outcome z. In NumPy that is nine array
passes over n_items × n_candidates temporaries (the gathered columns of C, the moved means and
variances, the floor, the division, ``ndtr``, the sum) per outcome. :func:`error_sums_after`
does both outcomes candidate by candidate: C's column i read as row i (C is kept exactly
symmetric), one loop of the moved ratios that LLVM runs on SIMD lanes, one loop of Φ — our
:func:`~crowdbudget._compiled_special.normal_cdf`'s tail, inline, where SciPy's ``ndtr`` (a
call, two exponentials in its tail) was the cost — and each candidate's sum over k by NumPy's
pairwise summation (:func:`pairwise_sum`).

Not the NumPy expression's bits any more (``tests/test_feature_kg.py`` compares within 1e-13
of the error sum): the ratios are the same operations in the same order (Numba compiles
without fast-math: nothing is reassociated or fused into FMAs), but Φ is within a few 1e-15
relatively of SciPy's, not equal, and an item whose moved ratio is at or below
:data:`NEGLIGIBLE_BELOW` counts 0 (Φ < 1e-17 there). The sum is still ``np.sum``'s, term
for term: ``cross[:, cand]`` (advanced indexing on the second axis) is laid out
column-major, the element-wise steps keep that layout, so ``sum(axis=0)`` runs along
contiguous columns and NumPy sums each one pairwise, not row after row.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from crowdbudget._compiled_special import expit, normal_lower_tail
from crowdbudget.types import FloatArray, IntArray

_V_FLOOR = 1e-300  # posteriors.logistic._V_FLOOR


def _numpy_sum_chunk() -> int:
    """How many terms of a contiguous float64 array ``np.sum`` adds pairwise at a time.

    NumPy 1.x reduces in chunks of its 8192-element buffer (each chunk pairwise, the chunks'
    sums added left to right); NumPy 2 passes the whole array to the pairwise loop. Probed, not
    read from the version: 1.0 at index 0 and 2⁻⁵³ at 8192 and 12288 of 24,576 terms sum to
    1 + 2⁻⁵² in 8192-chunks (the two small terms meet first) but to 1.0 pairwise over the whole
    (each small term meets 1.0 alone and rounds away, ties to even)."""
    probe = np.zeros(3 * 8192)
    probe[0] = 1.0
    probe[8192] = probe[12288] = 2.0**-53
    return 8192 if float(np.sum(probe)) != 1.0 else np.iinfo(np.int64).max


#: the chunk of :func:`_numpy_sum_chunk` for this NumPy (an argument of the kernels, not a
#: global they freeze: the on-disk cache outlives a NumPy upgrade)
NUMPY_SUM_CHUNK = _numpy_sum_chunk()


#: the look-ahead counts an item's error as 0 once its ratio is at or below this:
#: Φ(−8.5) = 9.5e-18, so each error sum moves by less than n_items · 1e-17 (5e-14 at the
#: policy's 5,000-item limit, below the 1e-13 the kernel is tested to) — while late in a
#: campaign most items sit there, where Φ costs an exponential (about half the kernel's time)
NEGLIGIBLE_BELOW = -8.5


@njit(cache=True, nogil=True)
def _block_sum(a: FloatArray, start: int, n: int) -> float:
    """NumPy's pairwise summation of at most 128 terms (a leaf of :func:`pairwise_sum`)."""
    if n < 8:
        total = 0.0
        for i in range(start, start + n):
            total += a[i]
        return total
    r0, r1, r2, r3 = a[start], a[start + 1], a[start + 2], a[start + 3]
    r4, r5, r6, r7 = a[start + 4], a[start + 5], a[start + 6], a[start + 7]
    i = 8
    whole = n - n % 8
    while i < whole:
        r0 += a[start + i]
        r1 += a[start + i + 1]
        r2 += a[start + i + 2]
        r3 += a[start + i + 3]
        r4 += a[start + i + 4]
        r5 += a[start + i + 5]
        r6 += a[start + i + 6]
        r7 += a[start + i + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        total += a[start + i]
        i += 1
    return total


@njit(cache=True, nogil=True)
def pairwise_sum(a: FloatArray, start: int, n: int, chunk: int) -> float:
    """``np.sum(a[start:start + n])`` for a contiguous float64 array, the same bits, with
    ``chunk`` = :data:`NUMPY_SUM_CHUNK`: the terms in chunks of ``chunk``, each chunk's sum
    added left to right from 0 (one chunk when n ≤ chunk, then just that chunk's sum).

    Each chunk is NumPy's pairwise summation (``pairwise_sum`` of its ``loops_utils``,
    :func:`_pairwise_sum`)."""
    if n <= chunk:
        return _pairwise_sum(a, start, n)
    total = 0.0
    for first in range(start, start + n, chunk):
        total += _pairwise_sum(a, first, min(chunk, start + n - first))
    return total


@njit(cache=True, nogil=True)
def _pairwise_sum(a: FloatArray, start: int, n: int) -> float:
    """NumPy's pairwise summation of ``a[start:start + n]``: below 8 terms a plain sum from
    0; up to 128 eight running sums combined as a tree, then the remainder; above that the two
    halves (split at a multiple of 8) summed the same way and added, left first.

    The recursion is unrolled onto an explicit stack: Numba's on-disk cache cannot hold a
    self-recursive function (a cached one crashed when loaded in a new process)."""
    if n <= 128:
        return _block_sum(a, start, n)
    # frames of the recursion: (start, n, left half's sum once known); depth ≤ log2(n) < 64
    frame_start = np.empty(64, np.int64)
    frame_n = np.empty(64, np.int64)
    left_sum = np.empty(64)
    left_done = np.zeros(64, np.bool_)
    depth = 0
    frame_start[0] = start
    frame_n[0] = n
    while True:
        size = frame_n[depth]
        if size > 128:  # descend into the left half
            half = size // 2
            half -= half % 8
            frame_start[depth + 1] = frame_start[depth]
            frame_n[depth + 1] = half
            left_done[depth + 1] = False
            depth += 1
            continue
        value = _block_sum(a, frame_start[depth], size)
        while True:  # hand the finished sum to the frames above
            depth -= 1
            if depth < 0:
                return value
            if left_done[depth]:
                value = left_sum[depth] + value
                continue
            left_sum[depth] = value
            left_done[depth] = True
            half = frame_n[depth] // 2
            half -= half % 8
            frame_start[depth + 1] = frame_start[depth] + half
            frame_n[depth + 1] = frame_n[depth] - half
            left_done[depth + 1] = False
            depth += 1
            break


@njit(cache=True, nogil=True)
def error_sums_after(
    m: FloatArray,
    v: FloatArray,
    cuts: FloatArray,
    cross: FloatArray,
    candidates: IntArray,
    alpha: FloatArray,
    beta: FloatArray,
    out: FloatArray,
    sum_chunk: int,
) -> None:
    """``out[z, j]`` = Σ_k error of item k after label z on item ``candidates[j]``.

    Args:
        m, v, cuts: every item's score mean, score variance and cut, shape (n_items,).
        cross: C = XΣXᵀ, shape (n_items, n_items), exactly symmetric (as the posterior keeps
            it): column i is read as row i, contiguous.
        candidates: item indices, shape (n_cand,).
        alpha, beta: the Laplace step of each outcome on each candidate, shape (2, n_cand)
            (row z: label z).
        out: written, shape (2, n_cand).
        sum_chunk: :data:`NUMPY_SUM_CHUNK` (the sum over k is ``np.sum``'s, on this NumPy).
    """
    n_items = m.shape[0]
    ratios = np.empty(n_items)
    errors = np.empty(n_items)
    for j in range(candidates.shape[0]):
        i = candidates[j]
        column = cross[i]  # C[:, i], read as row i: C is symmetric bit for bit (posterior)
        for z in range(2):
            a = alpha[z, j]
            b = beta[z, j]
            # m_after = m + c·α; v_after = v − (c·c)·β; logistic_error's floor and ratio.
            # No call and no branch (the floor a select): LLVM runs this loop on SIMD lanes,
            # where sqrt and division are IEEE-exact too. A NaN variance is floored here
            # where np.maximum keeps it — it only comes from a NaN v_k, and then the
            # current error sum, hence every reward, is NaN all the same
            for k in range(n_items):
                c = column[k]
                spread = v[k] - (c * c) * b
                spread = spread if spread > _V_FLOOR else _V_FLOOR
                ratios[k] = -abs((m[k] + c * a) - cuts[k]) / math.sqrt(spread)
            for k in range(n_items):
                ratio = ratios[k]  # ≤ 0 or NaN
                if ratio <= NEGLIGIBLE_BELOW:  # Φ < 1e-17: see NEGLIGIBLE_BELOW
                    errors[k] = 0.0
                elif ratio != ratio:
                    errors[k] = ratio
                else:
                    errors[k] = normal_lower_tail(-ratio)
            out[z, j] = pairwise_sum(errors, 0, n_items, sum_chunk)


@njit(cache=True, nogil=True)
def laplace_steps(
    m: FloatArray,
    v: FloatArray,
    y: FloatArray,
    alpha: FloatArray,
    beta: FloatArray,
    mode: FloatArray,
) -> None:
    """:func:`~crowdbudget.posteriors.logistic.laplace_step` on flat arrays (shape (n,) each;
    ``alpha``, ``beta``, ``mode`` written), the same bits.

    The NumPy loop runs clipped Newton steps on every element until *all* have converged (an
    element that has converged keeps taking its tiny steps, which can change its last bits), so
    this does the same: every element, iteration after iteration, in lockstep, stopping at the
    first iteration where every element's step was within the tolerance (at most 60). Each
    scalar step is the array step's operation in the same order; ``expit`` is SciPy's own;
    ``np.clip(x, lo, hi)`` is ``min(max(x, lo), hi)`` (lo ≤ hi here, and a NaN stays NaN)."""
    n = m.shape[0]
    s = m.copy()
    lo = np.empty(n)
    hi = np.empty(n)
    for e in range(n):
        lo[e] = m[e] if y[e] > 0 else m[e] - v[e]
        hi[e] = m[e] + v[e] if y[e] > 0 else m[e]
    for _ in range(60):
        all_done = True
        for e in range(n):
            sig = expit(s[e], 0)
            g = s[e] - m[e] - v[e] * (y[e] - sig)
            step = g / (1.0 + v[e] * sig * (1.0 - sig))
            moved = s[e] - step
            # np.clip: NaN-propagating max with lo, then min with hi
            if moved == moved:
                moved = moved if moved > lo[e] else lo[e]
            if moved == moved:
                moved = moved if moved < hi[e] else hi[e]
            if not abs(moved - s[e]) <= 1e-12 * (1.0 + abs(s[e])):
                all_done = False
            s[e] = moved
        if all_done:
            break
    for e in range(n):
        sig = expit(s[e], 0)
        lam = sig * (1.0 - sig)
        alpha[e] = y[e] - sig
        beta[e] = lam / (1.0 + lam * v[e])
        mode[e] = s[e]


@njit(cache=True, nogil=True)
def rank_one_downdate(cross: FloatArray, c: FloatArray, beta: float) -> None:
    """``cross -= beta * np.outer(c, c)`` in place, the same bits, without the n_items²
    temporary (C' = C − β c cᵀ of the posterior's update; shapes (n, n) and (n,)).

    c[k]·c[l] and c[l]·c[k] are the same product, so a symmetric C stays symmetric."""
    n = c.shape[0]
    for k in range(n):
        scaled = c[k]
        for col in range(n):
            cross[k, col] = cross[k, col] - beta * (scaled * c[col])
