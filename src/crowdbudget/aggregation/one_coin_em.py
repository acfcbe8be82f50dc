"""One-coin Dawid–Skene EM: one accuracy per worker (crowd-kit's ``OneCoinDawidSkene``).

Model: as :class:`~crowdbudget.aggregation.dawid_skene.DawidSkene`, with the confusion matrix
of worker j constrained to ``errors[j, c, l] = s_j`` if ``l == c`` else ``(1 − s_j)/(C − 1)``
(the one-coin model of Chen, Lin, Zhou 2013 §4 with ρ_j = s_j; Raykar et al. 2010).

Algorithm: EM from the majority-vote shares. E-step as Dawid–Skene. M-step: ``π = mean T``;
``s_j = (1/n_j) Σ_{labels (i, j, l)} T[i, l]`` — the expected fraction of worker j's labels
that are correct (the maximiser of the expected complete log-likelihood in s_j, since the
off-diagonal mass ``(1 − s_j)`` is shared equally); ``s_j`` is clipped to [ε, 1 − ε]. The sum
is the trace of the Dawid–Skene count tensor, so it costs one sparse product too.

Example:
    >>> from crowdbudget.datasets import load_dataset
    >>> em = OneCoinDawidSkene().fit(load_dataset("rte"))
    >>> em.skills_.shape
    (164,)
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from crowdbudget.aggregation.base import FloatArray
from crowdbudget.aggregation.dawid_skene import _EPS, DawidSkene
from crowdbudget.datasets.loaders import LabelData


def one_coin_errors(skills: FloatArray, n_classes: int) -> FloatArray:
    """Confusion matrices (n_workers, C, C) of one-coin workers with accuracies ``skills``."""
    off = (1.0 - skills) / (n_classes - 1)
    eye = np.eye(n_classes)
    errors = off[:, None, None] * (1.0 - eye) + skills[:, None, None] * eye
    return np.asarray(np.maximum(errors, _EPS), dtype=float)


class OneCoinDawidSkene(DawidSkene):
    """EM for one-coin workers (see the module docstring).

    Args:
        n_iter, tol, rng: as :class:`DawidSkene`.

    Fitted attributes: those of :class:`DawidSkene` (``errors_`` is the one-coin matrix) and
    ``skills_``: estimated accuracy per worker, shape (n_workers,).
    """

    def _m_step(self, data: LabelData, counts_matrix: sp.csr_matrix, T: FloatArray) -> FloatArray:
        C = data.n_classes
        counts = np.asarray(counts_matrix.T @ T).reshape(data.n_workers, C, C)  # [j, l, c]
        n_labels = counts.sum(axis=(1, 2))
        correct = np.trace(counts, axis1=1, axis2=2)
        skills = np.clip(correct / np.maximum(n_labels, _EPS), _EPS, 1.0 - _EPS)
        self.skills_ = skills
        return one_coin_errors(skills, C)
