"""The verdict chosen by the data (``auto``): among candidate aggregators, the one whose
posterior best predicts labels it has not seen.

No single aggregator is right for every crowd: a model with uniform classes (MACE) loses on
an imbalanced binary crowd, a full confusion model (Dawid–Skene) can lose on a crowd of
one-off workers (docs/stress-bed.md). :class:`HeldOutLabelChoice` lets the labels decide, by
K-fold cross-validation over *labels* (not items, so every item keeps most of its labels):

1. The labels are split into ``n_folds`` folds by a seeded hash of each label's (item id,
   worker id) (:func:`label_folds`; the seed from ``rng``), so the split does not depend on
   the order of the rows. Renaming items or workers changes the split, which can change the
   choice only between candidates whose scores the labels cannot tell apart.
2. For each fold and candidate: the candidate is fitted on the other folds, giving the
   posterior ``T`` of every item's class, shape (n_items, C) (an item whose labels are all
   held out gets the candidate's prior). Every candidate is then read through one shared
   worker model, so the score compares posteriors, not worker models: worker j's confusion
   matrix from the training labels, ``counts_j[t, l] = Σ_{training labels (i, j, l)} T[i, t]``,
   shrunk to the crowd's pooled matrix (``(counts_j + s · pooled) / (n_j + s)`` row-wise,
   ``s = shrinkage`` labels' worth; the pooled matrix has one pseudo-label per cell, so every
   entry is > 0 and the logs below are finite). A held-out label ``(i, j, l)`` has predictive
   probability ``Σ_t T[i, t] · confusion_j[t, l]``.
3. A candidate's score is the mean log predictive probability of all held-out labels (every
   label is held out once). A candidate is level with the best scorer when its shortfall is
   within ``level_within`` standard errors of the paired per-label difference (so a
   difference the labels cannot tell from noise decides nothing); among level candidates the
   earliest in ``candidates`` wins (the order is the preference: the candidate with the
   smallest worst case first). The winner is fitted on all labels and gives ``probas_``.

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
import pandas as pd

from crowdbudget._random import as_generator
from crowdbudget.aggregation.base import Aggregator, FloatArray, IntArray
from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError
from crowdbudget.labels import LabelData

#: the candidates of ``auto``, in order of preference (docs/stress-bed.md says why these)
DEFAULT_CANDIDATES = ("bds", "ds", "mace-eb-cp", "mace-eb")


def label_folds(data: LabelData, n_folds: int, seed: int) -> IntArray:
    """The fold of every label, shape (n_labels,), in 0..n_folds − 1: a seeded hash of the
    label's (item id, worker id), so the split does not depend on the order of the rows."""
    pairs = (
        data.item_ids[data.items].astype(str) + "\x1f" + data.worker_ids[data.workers].astype(str)
    )
    hashed = pd.util.hash_array(np.asarray(pairs, dtype=object))
    salt = np.uint64(np.random.default_rng(seed).integers(2**62))
    # xor with the seed's salt, then one more mixing step of the hash so the salt reaches
    # every bit of the fold (uint64 arithmetic wraps, which is what a hash wants)
    mixed = pd.util.hash_array(hashed ^ salt)
    return np.asarray(mixed % np.uint64(n_folds), dtype=np.int64)


def held_out_log_likelihood(
    posterior: FloatArray, train: LabelData, test: LabelData, shrinkage: float = 2.0
) -> FloatArray:
    """Log predictive probability of each label of ``test``, shape (test.n_labels,), given
    the class posterior ``posterior`` (n_items, C) fitted on ``train``, through per-worker
    confusion matrices estimated from ``train`` and shrunk to the pooled one (module
    docstring, step 2)."""
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
    return np.asarray(np.log(predictive), dtype=float)


class HeldOutLabelChoice(Aggregator):
    """The candidate whose posterior best predicts held-out labels (module docstring).

    Args:
        candidates: aggregator ids (with parameters, ``ds:n-iter=50``), in order of
            preference; not ``auto`` itself. Candidates that refuse the data (binary-only
            ones on more classes) are skipped.
        n_folds: folds of the labels (>= 2).
        shrinkage: labels' worth of the pooled confusion matrix in each worker's (> 0).
        level_within: standard errors of the paired per-label score difference within which
            a candidate is level with the best (>= 0; 0: the best score wins outright).
        rng: seed of the fold split, passed on to every candidate as its ``seed``.

    Fitted: ``probas_``, ``labels_`` (the winner's, fitted on all labels), ``chosen_`` (the
    winner's id), ``scores_`` (id → mean held-out log-likelihood per label; a skipped
    candidate is absent), ``standard_errors_`` (id → standard error of its mean shortfall to
    the best score), ``chosen_aggregator_`` (the fitted winner), ``reason_`` (one line
    saying what was chosen and why).
    """

    def __init__(
        self,
        candidates: Sequence[str] | str = ",".join(DEFAULT_CANDIDATES),
        n_folds: int = 3,
        shrinkage: float = 2.0,
        level_within: float = 2.0,
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(rng=rng)
        self.candidates = candidates
        self.n_folds = n_folds
        self.shrinkage = shrinkage
        self.level_within = level_within

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
        if not self.level_within >= 0:
            raise InvalidParameterError(
                f"auto: level_within must be >= 0, got {self.level_within!r}"
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
        if data.n_labels < self.n_folds:  # nothing to hold out: the first candidate
            candidates = candidates[:1]
        fold = label_folds(data, self.n_folds, seed)
        per_label: dict[str, FloatArray] = {}
        for candidate in candidates:
            scores = np.empty(data.n_labels)
            try:
                for k in range(self.n_folds):
                    held = fold == k
                    train, test = data.labels_subset(~held), data.labels_subset(held)
                    posterior = self._build(candidate, seed).fit(train).probas_
                    scores[held] = held_out_log_likelihood(
                        posterior, train, test, float(self.shrinkage)
                    )
            except CrowdBudgetError:  # e.g. a binary-only candidate on more classes
                continue
            per_label[candidate] = scores
        if not per_label:
            raise InvalidParameterError(
                f"auto: every candidate refused the data ({', '.join(candidates)})"
            )
        totals = {c: float(v.mean()) if v.size else 0.0 for c, v in per_label.items()}
        best = max(totals, key=lambda c: totals[c])
        n = max(data.n_labels, 1)

        # the standard error of each candidate's mean shortfall to the best, from the paired
        # per-label differences (0 for the best itself)
        errors = {
            c: float((per_label[best] - v).std()) / float(np.sqrt(n)) for c, v in per_label.items()
        }
        chosen = next(
            c
            for c in candidates
            if c in per_label and totals[best] - totals[c] <= self.level_within * errors[c]
        )
        winner = self._build(chosen, seed).fit(data)
        if chosen == best:
            others = [totals[c] for c in totals if c != chosen]
            why = f", {totals[chosen] - max(others):+.4f} over the next" if others else ""
        else:
            why = (
                f"; level with {best} ({totals[best]:.4f}) within {self.level_within:g} "
                "standard errors, and earlier in the order of preference"
            )
        self.chosen_ = chosen
        self.scores_ = totals
        self.standard_errors_ = errors
        self.chosen_aggregator_ = winner
        self.reason_ = (
            f"{chosen}: held-out label log-likelihood "
            f"({totals[chosen]:.4f} nats per label over {self.n_folds} folds{why})"
        )
        return np.asarray(winner.probas_, dtype=float)

    def choice(self) -> dict[str, Any]:
        """What was chosen and why, JSON-ready: ``chosen``, ``reason``, ``scores``."""
        return {"chosen": self.chosen_, "reason": self.reason_, "scores": dict(self.scores_)}
