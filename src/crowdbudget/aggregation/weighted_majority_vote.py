"""Weighted majority vote: each worker's label counts with that worker's weight.

``probas_[i, c] = Σ_{labels (i, j, c)} w_j / Σ_{labels (i, j, ·)} w_j`` (an item whose labels
all carry weight 0 gets the uniform row); ``labels_`` its argmax, ties at random.

Weights: an array of shape (n_workers,) in the integer coding of the input (for a DataFrame:
workers in order of first appearance — prefer a dict), or a dict worker id → weight (the
string ids of the input; every worker of the input must be present). Weights must be finite
and >= 0. ``weights=None`` uses each worker's agreement with the majority vote (the
"worker agreement with aggregate" weights of crowd-kit's ``Wawa``), so the id ``wmv`` works
without side information; with known truth (``fit(..., known_truth=...)``: control items)
those weights compare a worker with the truth on the known items, and ``probas_`` of a known
item is its one-hot truth (given weights are used as they are).

Example:
    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": ["t", "t", "t"], "worker": ["a", "b", "c"],
    ...                    "label": ["x", "y", "y"]})
    >>> WeightedMajorityVote({"a": 3.0, "b": 1.0, "c": 1.0}).fit_predict(df).to_dict()
    {'t': 'x'}
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from crowdbudget.aggregation.base import (
    FloatArray,
    KnownTruth,
    KnownTruthAggregator,
    vote_counts,
)
from crowdbudget.aggregation.majority_vote import MajorityVote
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError


class WeightedMajorityVote(KnownTruthAggregator):
    """Majority vote with per-worker weights (see the module docstring).

    Args:
        weights: shape (n_workers,) or a dict worker id → weight (>= 0), or None for the
            agreement-with-majority weights.
        rng: seed or generator for breaking exact ties.

    Fitted: ``probas_`` (n_items, n_classes), ``labels_`` (n_items,), ``weights_`` the
    weights used, shape (n_workers,).
    """

    def __init__(
        self,
        weights: npt.ArrayLike | Mapping[str, float] | None = None,
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(rng=rng)
        self.weights = weights

    def _worker_weights(self, data: LabelData, known: KnownTruth | None = None) -> FloatArray:
        if self.weights is None:
            majority = MajorityVote(rng=self.rng).fit(data)
            if known is None:
                return np.asarray(majority.skills_, dtype=float)
            labels = np.array(majority.labels_, dtype=np.int64, copy=True)
            labels[known.items] = known.classes
            hit = (labels[data.items] == data.labels).astype(float)
            n = np.bincount(data.workers, minlength=data.n_workers)
            hits = np.bincount(data.workers, weights=hit, minlength=data.n_workers)
            return np.asarray(hits / np.maximum(n, 1), dtype=float)
        if isinstance(self.weights, Mapping):
            table = {str(k): float(v) for k, v in self.weights.items()}
            missing = [w for w in data.worker_ids if str(w) not in table]
            if missing:
                raise InvalidParameterError(
                    f"weights has no entry for worker {missing[0]!r} ({len(missing)} missing); "
                    f"give a weight for every worker"
                )
            weights = np.array([table[str(w)] for w in data.worker_ids], dtype=float)
        else:
            weights = np.asarray(self.weights, dtype=float)
            if weights.shape != (data.n_workers,):
                raise InvalidParameterError(
                    f"weights must have shape ({data.n_workers},) (one per worker), "
                    f"got {weights.shape}"
                )
        if not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise InvalidParameterError("weights must be finite numbers >= 0")
        return weights

    def _fit(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        weights = self._worker_weights(data, known)
        self.weights_ = weights
        votes = vote_counts(data, weights[data.workers])
        totals = votes.sum(axis=1, keepdims=True)
        return np.where(totals > 0, votes / np.where(totals > 0, totals, 1.0), 1.0 / data.n_classes)
