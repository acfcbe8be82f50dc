"""The verdict chosen by the data (``auto``): among candidate aggregators, the one whose
posterior best predicts labels it has not seen.

No single aggregator is right for every crowd: a model with uniform classes (MACE) loses on
an imbalanced binary crowd, a full confusion model (Dawid–Skene) can lose on a crowd of
one-off workers (docs/stress-bed.md). :class:`HeldOutLabelChoice` lets the labels decide, by
K-fold cross-validation over *labels* (not items, so every item keeps most of its labels):

1. The labels are split into ``n_folds`` folds by a seeded permutation (the generator of
   ``rng``).
2. For each fold and candidate: the candidate is fitted on the other folds, giving the
   posterior ``T`` of every item's class, shape (n_items, C) (an item whose labels are all
   held out gets the candidate's prior). Every candidate is then read through one shared
   worker model, so the score compares posteriors, not worker models: worker j's confusion
   matrix from the training labels, ``counts_j[t, l] = Σ_{training labels (i, j, l)} T[i, t]``,
   shrunk to the crowd's pooled matrix (``(counts_j + s · pooled) / (n_j + s)`` row-wise,
   ``s = shrinkage`` labels' worth; the pooled matrix has one pseudo-label per cell, so every
   entry is > 0 and the logs below are finite). A held-out label ``(i, j, l)`` has predictive
   probability ``Σ_t T[i, t] · confusion_j[t, l]``.
3. A candidate's score is the mean log predictive probability of all held-out labels. The
   highest score wins; a candidate within ``tie_tolerance`` nats per label of the best is
   level with it, and among level candidates the earliest in ``candidates`` wins (the order
   is the preference). The winner is fitted on all labels and gives ``probas_``.

This is the held-out predictive likelihood of the labels — evidence the labels themselves
give, with no gold. It rewards a posterior that puts each item's mass where the other
workers' labels point, after the workers' own biases are accounted for: a uniform class
prior on an imbalanced crowd turns split items to the rare class, and the held-out labels
of those items then come out less likely.

Cost: ``n_folds × len(candidates)`` fits on ``(n_folds − 1)/n_folds`` of the labels, plus
one fit of the winner, plus O(n_labels · C) per score.

Example:
    >>> from crowdbudget.datasets import load_dataset
    >>> choice = HeldOutLabelChoice(candidates=("mv", "ds")).fit(load_dataset("rte"))
    >>> choice.chosen_ in ("mv", "ds")
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from crowdbudget._random import as_generator
from crowdbudget.aggregation.base import Aggregator, FloatArray
from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError
from crowdbudget.labels import LabelData

#: the candidates of ``auto``, in order of preference (docs/stress-bed.md says why these)
DEFAULT_CANDIDATES = ("bds", "ds", "mace-eb-cp", "mace-eb")


def _subset(data: LabelData, keep: np.ndarray) -> LabelData:
    """The labels where ``keep`` (bool, shape (n_labels,)) is true; items, workers and
    classes keep their codes."""
    return LabelData(
        items=data.items[keep],
        workers=data.workers[keep],
        labels=data.labels[keep],
        item_ids=data.item_ids,
        worker_ids=data.worker_ids,
        classes=data.classes,
        gold=data.gold,
        name=data.name,
    )


def held_out_log_likelihood(
    posterior: FloatArray, train: LabelData, test: LabelData, shrinkage: float = 2.0
) -> float:
    """Mean log predictive probability of the labels of ``test`` given the class posterior
    ``posterior`` (n_items, C) fitted on ``train``, through per-worker confusion matrices
    estimated from ``train`` and shrunk to the pooled one (module docstring, step 2)."""
    C, n_w = train.n_classes, train.n_workers
    soft = posterior[train.items]  # (n_train, C): P(true class t) of each training label
    # counts[j, t, l] = Σ soft[n, t] over worker j's training labels l: one bincount
    flat = (train.workers * C * C + train.labels)[:, None] + (np.arange(C) * C)[None, :]
    counts = np.bincount(flat.ravel(), weights=soft.ravel(), minlength=n_w * C * C).reshape(
        n_w, C, C
    )
    pooled = counts.sum(axis=0) + 1.0  # one pseudo-label per cell keeps every entry > 0
    pooled /= pooled.sum(axis=1, keepdims=True)
    confusion = (counts + shrinkage * pooled[None]) / (
        counts.sum(axis=2, keepdims=True) + shrinkage
    )
    # Σ_t T[i, t] · confusion_j[t, l] for every held-out label, a probability > 0
    predictive = np.einsum(
        "nt,nt->n", posterior[test.items], confusion[test.workers, :, test.labels]
    )
    return float(np.mean(np.log(predictive)))


class HeldOutLabelChoice(Aggregator):
    """The candidate whose posterior best predicts held-out labels (module docstring).

    Args:
        candidates: aggregator ids (with parameters, ``ds:n-iter=50``), in order of
            preference; not ``auto`` itself. Candidates that refuse the data (binary-only
            ones on more classes) are skipped.
        n_folds: folds of the labels (>= 2).
        shrinkage: labels' worth of the pooled confusion matrix in each worker's (> 0).
        tie_tolerance: nats per held-out label within which candidates are level (>= 0).
        rng: seed of the fold split, passed on to every candidate as its ``seed``.

    Fitted: ``probas_``, ``labels_`` (the winner's, fitted on all labels), ``chosen_`` (the
    winner's id), ``scores_`` (id → mean held-out log-likelihood per label; a skipped
    candidate is absent), ``chosen_aggregator_`` (the fitted winner), ``reason_`` (one line
    saying what was chosen and why).
    """

    def __init__(
        self,
        candidates: Sequence[str] = DEFAULT_CANDIDATES,
        n_folds: int = 3,
        shrinkage: float = 2.0,
        tie_tolerance: float = 1e-4,
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(rng=rng)
        self.candidates = candidates
        self.n_folds = n_folds
        self.shrinkage = shrinkage
        self.tie_tolerance = tie_tolerance

    def _check(self) -> tuple[str, ...]:
        candidates = (
            tuple(c for c in self.candidates.split(",") if c)
            if isinstance(self.candidates, str)
            else tuple(self.candidates)
        )
        if not candidates:
            raise InvalidParameterError("auto: candidates must name at least one aggregator")
        if any(c.partition(":")[0] == "auto" for c in candidates):
            raise InvalidParameterError("auto: candidates cannot include auto itself")
        n_folds = self.n_folds
        if isinstance(n_folds, bool) or not isinstance(n_folds, int) or n_folds < 2:
            raise InvalidParameterError(f"auto: n_folds must be an integer >= 2, got {n_folds!r}")
        if not self.shrinkage > 0:
            raise InvalidParameterError(f"auto: shrinkage must be > 0, got {self.shrinkage!r}")
        if not self.tie_tolerance >= 0:
            raise InvalidParameterError(
                f"auto: tie_tolerance must be >= 0, got {self.tie_tolerance!r}"
            )
        return candidates

    def _seed(self) -> int:
        """An int seed for the candidates (each is built from its id, so it takes an int)."""
        if isinstance(self.rng, int | np.integer):
            return int(self.rng)
        return int(as_generator(self.rng).integers(2**31))

    def _build(self, candidate: str, seed: int) -> Aggregator:
        from crowdbudget.aggregation.registry import make_aggregator

        return make_aggregator(candidate if ":seed=" in candidate else f"{candidate}:seed={seed}")

    def _fit_probas(self, data: LabelData) -> FloatArray:
        candidates = self._check()
        seed = self._seed()
        for candidate in candidates:  # an unknown id fails before any fit
            self._build(candidate, seed)
        fold = np.random.default_rng(seed).permutation(data.n_labels) % self.n_folds
        totals: dict[str, float] = {}
        for candidate in candidates:
            total, refused = 0.0, False
            for k in range(self.n_folds):
                train, test = _subset(data, fold != k), _subset(data, fold == k)
                try:
                    posterior = self._build(candidate, seed).fit(train).probas_
                except CrowdBudgetError:  # e.g. a binary-only candidate on more classes
                    refused = True
                    break
                score = held_out_log_likelihood(posterior, train, test, float(self.shrinkage))
                total += score * test.n_labels
            if not refused:
                totals[candidate] = total / max(data.n_labels, 1)
        if not totals:
            raise InvalidParameterError(
                f"auto: every candidate refused the data ({', '.join(candidates)})"
            )
        best = max(totals.values())
        chosen = next(
            c for c in candidates if c in totals and totals[c] >= best - self.tie_tolerance
        )
        winner = self._build(chosen, seed).fit(data)
        runner_up = sorted((s for c, s in totals.items() if c != chosen), reverse=True)
        margin = f", {totals[chosen] - runner_up[0]:+.4f} over the next" if runner_up else ""
        self.chosen_ = chosen
        self.scores_ = totals
        self.chosen_aggregator_ = winner
        self.reason_ = (
            f"{chosen}: highest held-out label log-likelihood "
            f"({totals[chosen]:.4f} nats per label over {self.n_folds} folds{margin})"
        )
        return np.asarray(winner.probas_, dtype=float)

    def choice(self) -> dict[str, Any]:
        """What was chosen and why, JSON-ready: ``chosen``, ``reason``, ``scores``."""
        return {"chosen": self.chosen_, "reason": self.reason_, "scores": dict(self.scores_)}
