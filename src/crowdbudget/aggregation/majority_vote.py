"""Majority vote and the Bayes-rule label of the Beta/Dirichlet posterior.

``MajorityVote``: the most frequent label per item; ``probas_`` are the vote shares.
``BayesRuleAggregator``: the final label of Chen, Lin, Zhou (2013) Prop. 2.1 — the class most
likely to be the largest component of the item's Dirichlet posterior (for two classes with
threshold 0.5, positive iff ``I(a, b) >= 0.5``, i.e. ``a >= b``: Cor. 2.2), from a prior
Dirichlet(``prior``) plus the vote counts. Each label counts once whatever the worker,
as in the paper's noiseless-worker model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from crowdbudget._validation import check_prior
from crowdbudget.aggregation.base import Aggregator, FloatArray, LabelsInput, vote_counts
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.posteriors.beta_bernoulli import positive_probability
from crowdbudget.posteriors.dirichlet import largest_class_probabilities


class MajorityVote(Aggregator):
    """Most frequent label per item; ties broken uniformly by ``rng``.

    Fitted: ``probas_`` vote shares (n_items, n_classes); ``labels_`` (n_items,);
    ``skills_`` per worker, agreement with the majority label, shape (n_workers,).

    Example:
        >>> import pandas as pd
        >>> df = pd.DataFrame({"task": ["t1", "t1", "t1", "t2"], "worker": ["a", "b", "c", "a"],
        ...                    "label": ["x", "x", "y", "y"]})
        >>> MajorityVote().fit_predict(df).to_dict()
        {'t1': 'x', 't2': 'y'}
    """

    def _fit_probas(self, data: LabelData) -> FloatArray:
        counts = vote_counts(data)
        totals = counts.sum(axis=1, keepdims=True)
        # an item without a label (a policy's log before every item was asked) is a tie among
        # all classes, broken by ``rng`` like any other tie
        return np.where(totals > 0, counts / np.maximum(totals, 1), 1.0 / counts.shape[1])

    def fit(self, labels: LabelsInput, *, known_truth: Mapping[Any, Any] | None = None) -> Self:
        # a vote rule: known truth is not read (base module docstring)
        super().fit(labels, known_truth=known_truth)
        agree = (self.labels_[self.data_.items] == self.data_.labels).astype(float)
        n = np.bincount(self.data_.workers, minlength=self.data_.n_workers)
        hits = np.bincount(self.data_.workers, weights=agree, minlength=self.data_.n_workers)
        self.skills_ = hits / np.maximum(n, 1)
        return self

    def expected_accuracy(self, gold: npt.ArrayLike) -> float:
        """Seed-free accuracy: a tie among k classes containing the gold class counts 1/k.

        ``gold``: true class per item (n_items,), ``-1`` where unknown.
        """
        truth = np.asarray(gold)
        mask = truth >= 0
        shares = self.probas_[mask]
        tied = shares >= shares.max(axis=1, keepdims=True) - 1e-12
        hit = tied[np.arange(shares.shape[0]), truth[mask]]
        return float(np.mean(hit / tied.sum(axis=1)))


class BayesRuleAggregator(Aggregator):
    """Bayes-rule labels from a Beta (two classes) or Dirichlet posterior.

    Args:
        prior: per-class pseudo-counts, shape (n_classes,) or (n_items, n_classes);
            any positive reals (default 1: uniform).
        threshold: for two classes, label 1 iff ``P(θ >= threshold) >= 1/2``.

    Fitted: ``probas_`` = P(class c is the true class | data) under the model:
    ``[1 − I, I]`` for two classes, ``P(θ_c is the largest component)`` otherwise.
    """

    def __init__(
        self,
        prior: float | npt.ArrayLike = 1.0,
        threshold: float = 0.5,
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(rng=rng)
        self.prior = prior
        self.threshold = threshold

    def _fit_probas(self, data: LabelData) -> FloatArray:
        prior = np.broadcast_to(np.asarray(self.prior, dtype=float), (data.n_items, data.n_classes))
        alpha = check_prior(prior, data.n_items, data.n_classes) + vote_counts(data)
        if data.n_classes == 2:
            p = positive_probability(alpha[:, 1], alpha[:, 0], self.threshold)
            return np.column_stack([1.0 - p, p])
        return largest_class_probabilities(alpha)
