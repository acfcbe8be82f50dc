"""Dawid–Skene EM with full confusion matrices (Dawid & Skene 1979; crowd-kit's ``DawidSkene``).

Model: item i has a true class z_i ~ Categorical(π); worker j answers l with probability
``errors[j, z_i, l]`` (a C × C confusion matrix per worker, rows sum to 1), independently.

Algorithm (EM, as crowd-kit does it):

1. initialise the item posteriors T (n_items, C) with the majority-vote shares;
2. M-step: ``π = mean_i T[i]``; ``errors[j, c, l] ∝ Σ_{labels (i, j, l)} T[i, c]``, clipped below
   at machine epsilon and normalised over l (so no log(0));
3. E-step: ``log T[i, c] = log π_c + Σ_{labels (i, j, l)} log errors[j, c, l] − const``;
4. with known truth (``fit(..., known_truth=...)``, control items), the posterior of a known
   item is its one-hot truth from the start and after every E-step, so steps 2 and 3 learn
   each worker's matrix from their control answers and π counts the known items at their
   class (semi-supervised EM, Dawid & Skene 1979 §4);
5. stop after ``n_iter`` iterations or when the evidence lower bound per label,
   ``(Σ_i Σ_c T_ic (log π_c + Σ log errors) + H(T)) / n_labels``, rises by less than ``tol``
   (``loss_history_`` keeps it).

Both steps are one sparse matrix product each: with the (n_items × n_workers·C) incidence
matrix ``N[i, j·C + l] = #labels (i, j, l)``, the E-step is ``N @ log E`` where
``log E[(j, l), c] = log errors[j, c, l]`` and the M-step is ``Nᵀ @ T`` — no per-label Python
loop, O(n_labels · C) per iteration.

Differences from crowd-kit (1.x): the evidence lower bound counts ``log π`` once per item
(crowd-kit adds it once per label), which only changes the stopping point at the ``tol`` level.

Example:
    >>> from crowdbudget.datasets import load_dataset
    >>> ds = DawidSkene(n_iter=50).fit(load_dataset("rte"))
    >>> ds.errors_.shape, ds.probas_.shape
    ((164, 2, 2), (800, 2))
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from crowdbudget.aggregation.base import (
    FloatArray,
    KnownTruth,
    KnownTruthAggregator,
    vote_counts,
)
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError

_EPS = float(np.finfo(np.float64).eps)


def check_iterations(n_iter: object, tol: object, owner: str) -> tuple[int, float]:
    """Validate ``n_iter`` (int >= 1) and ``tol`` (float >= 0) with a one-line error."""
    if isinstance(n_iter, bool) or not isinstance(n_iter, int | np.integer) or n_iter < 1:
        raise InvalidParameterError(f"{owner}: n_iter must be an integer >= 1, got {n_iter!r}")
    if isinstance(tol, bool) or not isinstance(tol, int | float) or not tol >= 0:
        raise InvalidParameterError(f"{owner}: tol must be a number >= 0, got {tol!r}")
    return int(n_iter), float(tol)


def incidence(data: LabelData) -> sp.csr_matrix:
    """``N[i, j·C + l]`` = number of labels l from worker j on item i, (n_items, n_workers·C)."""
    C = data.n_classes
    columns = data.workers * C + data.labels
    ones = np.ones(data.n_labels, dtype=np.float64)
    matrix = sp.csr_matrix((ones, (data.items, columns)), shape=(data.n_items, data.n_workers * C))
    matrix.sum_duplicates()
    return matrix


def initial_shares(data: LabelData) -> FloatArray:
    """Majority-vote shares (n_items, C); an item without labels gets the uniform row."""
    counts = vote_counts(data)
    totals = counts.sum(axis=1, keepdims=True)
    return np.where(totals > 0, counts / np.maximum(totals, 1.0), 1.0 / data.n_classes)


def softmax_rows(log_scores: FloatArray) -> FloatArray:
    """Row-wise softmax (max-shifted), (n_rows, n_cols)."""
    shifted = log_scores - log_scores.max(axis=1, keepdims=True)
    expd = np.exp(shifted)
    return np.asarray(expd / expd.sum(axis=1, keepdims=True), dtype=float)


class DawidSkene(KnownTruthAggregator):
    """Dawid–Skene EM with one full confusion matrix per worker (see the module docstring).

    Args:
        n_iter: maximum EM iterations (>= 1).
        tol: stop when the evidence lower bound per label rises by less than this.
        rng: seed or generator for breaking exact ties in ``labels_``.

    Fitted attributes:
        probas_: P(z_i = c | labels), shape (n_items, n_classes).
        labels_: argmax of ``probas_`` (ties at random), shape (n_items,).
        priors_: class prior π, shape (n_classes,).
        errors_: ``errors_[j, c, l]`` = P(worker j says l | true class c),
            shape (n_workers, n_classes, n_classes) (the layout of
            :class:`crowdbudget.simulation.workers.WorkerPool`; crowd-kit's ``errors_``
            DataFrame is its transpose per worker).
        loss_history_: evidence lower bound per label after each iteration.
        n_iter_: iterations run.
    """

    def __init__(
        self, n_iter: int = 100, tol: float = 1e-5, rng: int | np.random.Generator | None = 0
    ) -> None:
        super().__init__(rng=rng)
        self.n_iter = n_iter
        self.tol = tol

    # -- the two EM steps -------------------------------------------------------------------
    def _m_step(self, data: LabelData, counts_matrix: sp.csr_matrix, T: FloatArray) -> FloatArray:
        """Confusion matrices (n_workers, C, C) from item posteriors T."""
        C = data.n_classes
        # counts[(j, l), c] = Σ_{labels (i, j, l)} T[i, c]
        counts = np.asarray(counts_matrix.T @ T).reshape(data.n_workers, C, C)  # [j, l, c]
        errors = np.maximum(counts.transpose(0, 2, 1), _EPS)  # [j, c, l]
        return np.asarray(errors / errors.sum(axis=2, keepdims=True), dtype=float)

    def _log_likelihood(
        self, counts_matrix: sp.csr_matrix, priors: FloatArray, errors: FloatArray
    ) -> FloatArray:
        """log π_c + Σ log errors[j, c, l] per item, (n_items, C)."""
        n_workers, C, _ = errors.shape
        log_e = np.log(errors).transpose(0, 2, 1).reshape(n_workers * C, C)  # [(j, l), c]
        return np.asarray(counts_matrix @ log_e, dtype=float) + np.log(np.maximum(priors, _EPS))

    def _fit(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        """The EM of the module docstring; ``known`` items (if any) keep their one-hot truth
        as posterior in every step (semi-supervised EM, Dawid & Skene 1979 §4)."""
        n_iter, tol = check_iterations(self.n_iter, self.tol, type(self).__name__)
        matrix = incidence(data)
        T = initial_shares(data)
        if known is not None:
            T = known.clamp(T)
        priors = T.mean(axis=0)
        errors = self._m_step(data, matrix, T)
        log_lik = self._log_likelihood(matrix, priors, errors)
        history: list[float] = []
        previous = -np.inf
        iteration = 0
        for iteration in range(1, n_iter + 1):  # noqa: B007 - n_iter_ below
            T = softmax_rows(log_lik)
            if known is not None:
                T = known.clamp(T)
            priors = T.mean(axis=0)
            errors = self._m_step(data, matrix, T)
            log_lik = self._log_likelihood(matrix, priors, errors)
            entropy = -np.sum(T * np.log(np.maximum(T, 1e-300)))
            loss = float((np.sum(T * log_lik) + entropy) / max(data.n_labels, 1))
            history.append(loss)
            if loss - previous < tol:
                break
            previous = loss
        self.priors_ = priors
        self.errors_ = errors
        self.loss_history_ = history
        self.n_iter_ = iteration
        return T
