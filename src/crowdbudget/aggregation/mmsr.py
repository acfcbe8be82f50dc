"""M-MSR: worker skills by robust rank-one completion of the worker covariance matrix (Ma &
Olshevsky, "Adversarial Crowdsourcing Through Robust Rank-One Matrix Completion", NeurIPS 2020;
crowd-kit's ``MMSR``).

Model: one-coin workers — worker j gives the true class with probability ``p_j`` and each
other class with probability ``(1 − p_j)/(K − 1)``. With ``s_j = (K p_j − 1)/(K − 1)`` the
rescaled agreement of two workers on their common tasks has expectation
``C_ij = K/(K − 1) · P(l_i = l_j) − 1/(K − 1) = s_i s_j`` (i ≠ j): the observed entries of the
worker × worker matrix C are those of the rank-one ``s sᵀ``, and up to F of a worker's
entries may be adversarial.

Algorithm (the paper's M-MSR, "Median / Mean-Subsequence-Reduced", §3):

1. ``C_ij`` on every pair of workers with common tasks (two sparse products: counts of common
   tasks and of equal labels), ``X = |C|``;
2. alternate, ``n_iter`` times or until ``‖u vᵀ − u' v'ᵀ‖_F < tol``: for every worker j,
   ``v_j ←`` the mean of ``{X_ij / u_i}`` over j's co-workers after the MSR trimming —
   drop the F largest values above the current ``v_j`` (all of them if there are fewer
   than F) and the F smallest below it — then the same for ``u`` with the new ``v``. F =
   ⌊(smallest number of co-workers of any worker) / 2⌋ − 1 (crowd-kit's choice), at least 0.
   A worker left with only one value, 0, gets ``1/√n_tasks`` (crowd-kit's guard);
3. ``|s| = u / √(‖u‖/‖v‖)``; signs: those of the leading eigenvector of the observed part of
   C (in expectation ``s sᵀ``, whose leading eigenvector is ``s``), oriented so that most
   workers are better than random. The paper determines the signs from the sign pattern
   of C (a two-colouring of the signed co-worker graph); crowd-kit builds that graph from
   the dense matrix, in which every pair *without* common tasks has ``C = −1/(K − 1) < 0``
   — a negative edge — so on sparse designs it marks good workers adversarial (rte: 61 of
   164 workers negative, accuracy 0.8575, below majority vote's 0.8975; with the eigenvector
   of the observed C: 7 negative, 0.925). The magnitudes ``|s|`` are crowd-kit's to 1e-6
   (tests/test_crowdkit_agreement.py); the labels differ where the signs do.
4. ``s`` is clipped to ``[−1/(K − 1) + 1/√n_tasks, 1 − 1/√n_tasks]``, ``p = s (K − 1)/K + 1/K``
   and the skill is the one-coin log-likelihood ratio ``w_j = log((K − 1) p_j / (1 − p_j))``.

Verdict: the weighted vote with weights ``w_j`` (crowd-kit's ``MMSR`` labels). crowd-kit
reports the normalised weighted votes as scores (negative when a skill is); here ``probas_``
is the posterior of the one-coin model with accuracies p (``P(z_i = c) ∝ exp Σ_{labels
(i, j, c)} w_j``, uniform class prior), whose argmax is the same weighted vote.

After each iteration ``u`` and ``v`` are rescaled to equal norms (``u vᵀ`` unchanged; without
it the free scale drifts to overflow when items have two or three labels). Where the update
still diverges (F = 0 makes it a plain mean, which need not contract), the last finite
iterate is kept.

Start: ``u = v = 1`` (crowd-kit draws both uniformly with its ``random_state``; the fixed point
does not depend on the start when the iteration converges, and a constant start keeps the
result independent of how workers are named).

Cost: C is two sparse products (O(Σ_items labels²)); an iteration is two compiled passes over
the P stored pairs of co-workers (``_msr_rows``): each worker's ratios are split at its current
value and only the kept ranks are picked from either side — no sort, O(P) expected. At 10^6
labels (1,000 workers, P ≈ 10^6, 30 iterations) a fit takes about 2 s, against 25 s with a
lexsort of all P ratios per pass (``_msr_means_reference``, kept as the tests' reference; same
results bit for bit; benchmarks/README.md, "GLAD, MACE, MMSR, Wawa, Zero-Based Skill side by
side with crowd-kit").

Example:
    >>> from crowdbudget.datasets import load_dataset
    >>> mmsr = MMSR().fit(load_dataset("rte"))
    >>> mmsr.skills_.shape
    (164,)
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit
from scipy.sparse.linalg import eigsh

from crowdbudget.aggregation.base import Aggregator, FloatArray, IntArray, vote_counts
from crowdbudget.aggregation.dawid_skene import check_iterations, softmax_rows
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError


def worker_covariance(data: LabelData) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """``(C, common)``: C_ij (observed pairs only) and the number of common tasks, both
    sparse (n_workers, n_workers), zero diagonal."""
    n_w, n_i, K = data.n_workers, data.n_items, data.n_classes
    ones = np.ones(data.n_labels)
    labeled = sp.csr_matrix((ones, (data.workers, data.items)), shape=(n_w, n_i))
    labeled.data[:] = 1.0  # a worker who labeled an item twice counts once
    answered = sp.csr_matrix(
        (ones, (data.workers, data.items * K + data.labels)), shape=(n_w, n_i * K)
    )
    answered.data[:] = 1.0
    common = (labeled @ labeled.T).tocsr()
    common.setdiag(0)
    common.eliminate_zeros()
    equal = (answered @ answered.T).tocsr()
    # agreement on exactly the pattern of ``common`` (equal ⊆ common), in its storage order
    agree = _entries_at(
        common.indptr,
        common.indices,
        equal.indptr,
        equal.indices,
        np.asarray(equal.data, dtype=float),
        n_w,
    )
    covariance = common.copy()
    covariance.data = K / (K - 1.0) * agree / common.data - 1.0 / (K - 1.0)
    return covariance, common


@njit(cache=True, nogil=True)
def _entries_at(
    indptr: IntArray,
    indices: IntArray,
    source_indptr: IntArray,
    source_indices: IntArray,
    source_data: FloatArray,
    n_columns: int,
) -> FloatArray:
    """The entries of the CSR matrix ``source`` at the stored positions of the CSR pattern
    ``(indptr, indices)``, in its storage order (``source[pattern.nonzero()]``; duplicates
    summed), through one dense row at a time: O(stored entries of both)."""
    out = np.zeros(indices.size)
    row = np.zeros(n_columns)
    for j in range(indptr.size - 1):
        for k in range(source_indptr[j], source_indptr[j + 1]):
            row[source_indices[k]] += source_data[k]
        for k in range(indptr[j], indptr[j + 1]):
            out[k] = row[indices[k]]
        for k in range(source_indptr[j], source_indptr[j + 1]):
            row[source_indices[k]] = 0.0
    return out


def _msr_means_reference(
    matrix: sp.csr_matrix, divisor: FloatArray, current: FloatArray, trim: int, n_tasks: int
) -> FloatArray:
    """Row-wise MSR-trimmed means of ``matrix[j, i] / divisor[i]`` (see the module doc): the
    first, vectorised implementation (a lexsort of every stored value per call), kept as the
    reference that :func:`_msr_means` must match bit for bit (tests/test_mmsr_speed.py)."""
    n = matrix.shape[0]
    rows = np.repeat(np.arange(n), np.diff(matrix.indptr))
    # a co-worker whose current value is 0 gives ±inf (or NaN for 0/0), as in the paper's
    # and crowd-kit's arithmetic: an infinite ratio is among the largest and is trimmed first,
    # a NaN sorts last and fails every comparison; a mean that comes out NaN (a NaN survived
    # the trimming) keeps the current value
    with np.errstate(divide="ignore", invalid="ignore"):
        values = matrix.data / divisor[matrix.indices]
    order = np.lexsort((values, rows))
    rows, values = rows[order], values[order]
    degree = np.diff(matrix.indptr)
    rank = np.arange(values.size) - matrix.indptr[rows]
    a = current[rows]
    n_less = np.bincount(rows, weights=(values < a), minlength=n)
    n_greater = np.bincount(rows, weights=(values > a), minlength=n)
    keep_low = np.where(n_less[rows] < trim, values >= a, rank >= trim)
    keep_high = np.where(n_greater[rows] < trim, values <= a, rank < degree[rows] - trim)
    keep = keep_low & keep_high
    count = np.bincount(rows, weights=keep, minlength=n)
    total = np.bincount(rows, weights=np.where(keep, values, 0.0), minlength=n)
    lone_zero = (count == 1) & (total == 0.0)
    out = current.copy()
    with np.errstate(invalid="ignore"):
        mean = total / np.maximum(count, 1)
    filled = (count > 0) & np.isfinite(mean)
    out[filled] = mean[filled]
    # crowd-kit's guard: a single surviving value of exactly 0 becomes 1/√n_tasks
    out[lone_zero] = 1.0 / np.sqrt(n_tasks)
    return out


@njit(cache=True, nogil=True)
def _select(buf: FloatArray, left: int, right: int, k: int) -> None:
    """Partial sort of ``buf[left:right]`` (no NaN) in place so that ``buf[k]`` holds its
    k-th smallest value, ``buf[left:k]`` the smaller and ``buf[k + 1:right]`` the larger ones
    (Hoare's FIND with a median-of-three pivot)."""
    lo, hi = left, right - 1
    while lo < hi:
        x, y, z = buf[lo], buf[k], buf[hi]
        pivot = max(min(x, y), min(max(x, y), z))
        i, j = lo, hi
        while i <= j:
            while buf[i] < pivot:
                i += 1
            while pivot < buf[j]:
                j -= 1
            if i <= j:
                buf[i], buf[j] = buf[j], buf[i]
                i += 1
                j -= 1
        if j < k:
            lo = i
        if k < i:
            hi = j


#: up to this many values are picked from a part of a row by one scan (a short sorted list of
#: the best so far, rarely updated); more are picked by :func:`_select` and a sort
_SCAN_PICK = 32


@njit(cache=True, nogil=True)
def _add_largest(buf: FloatArray, left: int, right: int, k: int, total: float) -> float:
    """``total`` plus the k largest values of ``buf[left:right]`` (no NaN), added one at a
    time in ascending order; ``buf`` is reordered in place."""
    if k <= 0:
        return total
    first = right - k
    if k > _SCAN_PICK or 4 * k > right - left:
        if first > left:
            _select(buf, left, right, first)
        buf[first:right].sort()
    else:
        # buf[first:right] holds the k largest so far, ascending; a value above their
        # smallest replaces it and is sifted to its place (rare once a few are seen)
        buf[first:right].sort()
        for i in range(left, first):
            x = buf[i]
            if x > buf[first]:
                p = first
                while p + 1 < right and buf[p + 1] < x:
                    buf[p] = buf[p + 1]
                    p += 1
                buf[p] = x
    for r in range(first, right):
        total += buf[r]
    return total


@njit(cache=True, nogil=True)
def _add_smallest(buf: FloatArray, left: int, right: int, k: int, total: float) -> float:
    """``total`` plus the k smallest values of ``buf[left:right]`` (no NaN), added one at a
    time in ascending order; ``buf`` is reordered in place."""
    if k <= 0:
        return total
    stop = left + k
    if k > _SCAN_PICK or 4 * k > right - left:
        if stop < right:
            _select(buf, left, right, stop - 1)
        buf[left:stop].sort()
    else:
        # buf[left:stop] holds the k smallest so far, ascending (mirror of _add_largest)
        buf[left:stop].sort()
        last = stop - 1
        for i in range(stop, right):
            x = buf[i]
            if x < buf[last]:
                p = last
                while p > left and buf[p - 1] > x:
                    buf[p] = buf[p - 1]
                    p -= 1
                buf[p] = x
    for r in range(left, stop):
        total += buf[r]
    return total


@njit(cache=True, nogil=True, error_model="numpy")
def _msr_rows(
    data: FloatArray,
    indices: IntArray,
    indptr: IntArray,
    divisor: FloatArray,
    current: FloatArray,
    trim: int,
    lone_zero: float,
    out: FloatArray,
) -> None:
    """:func:`_msr_means` on the CSR arrays, into ``out``: per row one pass over its values and
    one pick from each side of the current value, no sort of the row.

    In the order the reference sorts a row of d values (ascending, NaN last) come the
    ``n_less`` values below ``a = current[j]``, the ``n_equal`` equal to it, the ``n_greater``
    above it, then the NaNs (m values are not NaN). Its kept set is one run of ranks
    ``[lo, hi)``: ``lo = n_less`` if ``n_less < F`` else F; ``hi`` is m if ``n_less < F``,
    else d, then at most ``m − n_greater`` (the values ``<= a``) if ``n_greater < F``, else at
    most ``d − F``. So ``lo <= n_less`` and ``hi >= n_less + n_equal``: the run is the
    ``n_less − lo`` largest values below a, every value equal to a, and the ``hi − n_less −
    n_equal`` smallest values above it — unless it reaches a NaN (``hi > m``: the mean is NaN
    and the value stays). The pass puts the values below a at the front of a buffer and
    those above it at the back (without branches: a mispredicted branch per value cost
    three times the rest of the pass); each side's kept values are picked and summed from
    0.0 in ascending order, the equal ones in between as ``a`` — the sum the reference's
    ``bincount`` forms (the trimmed values it adds in between are 0.0; equal values may
    come in any order, as only ±0 differ in bits and the running sum is never −0).
    """
    n = indptr.size - 1
    widest = 0
    for j in range(n):
        widest = max(widest, indptr[j + 1] - indptr[j])
    buf = np.empty(widest)
    for j in range(n):
        start, end = indptr[j], indptr[j + 1]
        a = current[j]
        out[j] = a
        if end == start:
            continue
        d = end - start
        if np.isnan(a):
            # every comparison with a fails: trimming by value keeps nothing, F = 0 keeps all
            if trim == 0:
                m = 0
                for k in range(start, end):
                    x = data[k] / divisor[indices[k]]
                    if not np.isnan(x):
                        buf[m] = x
                        m += 1
                if m < d:
                    continue  # a NaN kept: the value stays
                total = _add_largest(buf, 0, d, d, 0.0)
                if d == 1 and total == 0.0:
                    out[j] = lone_zero
                elif np.isfinite(total / d):
                    out[j] = total / d
            continue
        n_less = 0
        n_greater = 0
        n_nan = 0
        back = d - 1
        for k in range(start, end):
            x = data[k] / divisor[indices[k]]
            # both slots are free (n_less + n_greater < d here), the counts decide which
            # write is kept
            buf[n_less] = x
            buf[back - n_greater] = x
            n_less += x < a
            n_greater += x > a
            n_nan += x != x
        m = d - n_nan
        n_equal = m - n_less - n_greater
        if n_less < trim:
            lo, hi = n_less, m
        else:
            lo, hi = trim, d
        hi = min(hi, m - n_greater if n_greater < trim else d - trim)
        if hi <= lo or hi > m:
            continue  # nothing kept, or a NaN kept (a NaN mean): the value stays
        total = _add_largest(buf, 0, n_less, n_less - lo, 0.0)
        for _ in range(n_equal):
            total += a
        total = _add_smallest(buf, d - n_greater, d, hi - n_less - n_equal, total)
        count = hi - lo
        if count == 1 and total == 0.0:
            # crowd-kit's guard: a single surviving value of exactly 0 becomes 1/√n_tasks
            out[j] = lone_zero
        else:
            mean = total / count
            if np.isfinite(mean):
                out[j] = mean


def _msr_means(
    matrix: sp.csr_matrix, divisor: FloatArray, current: FloatArray, trim: int, n_tasks: int
) -> FloatArray:
    """Row-wise MSR-trimmed means of ``matrix[j, i] / divisor[i]`` (see the module doc).

    A co-worker whose current value is 0 gives ±inf (or NaN for 0/0), as in the paper's and
    crowd-kit's arithmetic: an infinite ratio is among the largest and is trimmed first, a
    NaN sorts last and fails every comparison; a mean that comes out NaN (a NaN survived the
    trimming) keeps the current value. Bit for bit :func:`_msr_means_reference`, with one pass
    over each row and a pick of its kept values (:func:`_msr_rows`) instead of its sort of
    every stored value."""
    out = np.empty(matrix.shape[0])
    _msr_rows(
        np.asarray(matrix.data, dtype=float),
        matrix.indices,
        matrix.indptr,
        np.asarray(divisor, dtype=float),
        np.asarray(current, dtype=float),
        int(trim),
        1.0 / np.sqrt(n_tasks),
        out,
    )
    return out


def _signs(covariance: sp.csr_matrix) -> FloatArray:
    """±1 per worker from the leading eigenvector of the observed covariance matrix (0 for a
    worker without co-workers); oriented so that the signs sum to >= 0."""
    n = covariance.shape[0]
    active = np.diff(covariance.indptr) > 0
    out = np.zeros(n)
    if active.sum() == 0:
        return out
    sub = covariance[active][:, active].astype(float)
    if sub.shape[0] <= 2:
        vector = np.linalg.eigh(sub.toarray())[1][:, -1]
    else:
        vector = eigsh(sub, k=1, which="LA", v0=np.ones(sub.shape[0]))[1][:, 0]
    signs = np.where(vector >= 0, 1.0, -1.0)
    if signs.sum() < 0:
        signs = -signs
    out[active] = signs
    return out


class MMSR(Aggregator):
    """M-MSR (Ma & Olshevsky 2020; module docstring).

    Args:
        n_iter: maximum alternating iterations (>= 1; crowd-kit's default 10000).
        tol: stop when ``‖u vᵀ − u' vᵀ'‖_F`` falls below this (crowd-kit's 1e-10).
        rng: seed or generator for ties.

    Fitted: ``probas_`` (n_items, C), ``labels_`` (n_items,), ``skills_`` the weights
    ``log((K − 1) p / (1 − p))`` (n_workers,), ``accuracies_`` p (n_workers,),
    ``loss_history_``, ``n_iter_``.
    """

    #: the row-wise trimmed means (tests/test_mmsr_speed.py swaps in the reference)
    _row_means = staticmethod(_msr_means)

    def __init__(
        self, n_iter: int = 10_000, tol: float = 1e-10, rng: int | np.random.Generator | None = 0
    ) -> None:
        super().__init__(rng=rng)
        self.n_iter = n_iter
        self.tol = tol

    def _fit_probas(self, data: LabelData) -> FloatArray:
        n_iter, tol = check_iterations(self.n_iter, self.tol, "MMSR")
        K = data.n_classes
        if K < 2:
            raise InvalidParameterError("MMSR needs at least 2 classes")
        n_tasks = int(np.count_nonzero(np.bincount(data.items)))  # items with a label
        covariance, common = worker_covariance(data)
        degree = np.diff(common.indptr)
        trim = max(int(np.floor(degree.min() / 2)) - 1, 0) if degree.size else 0
        X = covariance.copy()
        X.data = np.abs(X.data)
        u = np.ones(data.n_workers)
        v = np.ones(data.n_workers)
        history: list[float] = []
        iteration = 0
        for iteration in range(1, n_iter + 1):  # noqa: B007 - n_iter_ below
            u_old, v_old = u, v
            # X is symmetric: column j of X is row j
            with np.errstate(over="ignore", invalid="ignore"):
                v = self._row_means(X, u, v, trim, n_tasks)
                u = self._row_means(X, v, u, trim, n_tasks)
            largest = max(float(np.abs(u).max(initial=0.0)), float(np.abs(v).max(initial=0.0)))
            if not np.isfinite(largest) or largest > 1e12:
                # with F = 0 (two or three labels per item) the update is a plain mean, which
                # need not contract: keep the last finite iterate
                u, v = u_old, v_old
                break
            # u vᵀ is what the iteration estimates; (c u, v / c) is the same matrix, and the
            # alternating means can let c drift (to overflow on sparse designs): balance the
            # norms, which leaves u vᵀ, the loss and the final |s| unchanged
            balance = float(np.sqrt(np.linalg.norm(u) / max(float(np.linalg.norm(v)), 1e-300)))
            if balance > 0 and np.isfinite(balance):
                u, v = u / balance, v * balance
            # ‖u vᵀ − u' v'ᵀ‖²_F = |u|²|v|² − 2 (u·u')(v·v') + |u'|²|v'|², without the n×n
            squared = float((u @ u) * (v @ v) - 2 * (u @ u_old) * (v @ v_old))
            squared += float((u_old @ u_old) * (v_old @ v_old))
            loss = float(np.sqrt(max(squared, 0.0)))
            history.append(loss)
            if loss < tol:
                break
        scale = float(np.sqrt(np.linalg.norm(u) / max(float(np.linalg.norm(v)), 1e-300)))
        s = _signs(covariance) * u / scale
        s = np.clip(s, -1.0 / (K - 1) + 1.0 / np.sqrt(n_tasks), 1.0 - 1.0 / np.sqrt(n_tasks))
        accuracy = s * (K - 1) / K + 1.0 / K
        skills = np.log(accuracy * (K - 1) / (1.0 - accuracy))
        self.accuracies_ = accuracy
        self.skills_ = skills
        self.loss_history_ = history
        self.n_iter_ = iteration
        return softmax_rows(vote_counts(data, skills[data.workers]))
