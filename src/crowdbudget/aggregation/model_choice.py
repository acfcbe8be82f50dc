"""The verdict chosen by the data (``auto``): among candidate aggregators, the one whose
posterior best predicts labels it has not seen.

No single aggregator is right for every crowd: a model with uniform classes (MACE) loses on
an imbalanced binary crowd, a full confusion model (Dawid–Skene) can lose on a crowd of
one-off workers (docs/stress-bed.md). :class:`HeldOutLabelChoice` lets the labels decide, by
K-fold cross-validation over *labels* (not items, so every item keeps most of its labels):

1. The labels are split into ``n_folds`` folds by a seeded hash of each label's (item id,
   worker id) (:func:`label_folds`; the seed from ``rng``), so the split does not depend on
   the order of the rows. Renaming items or workers changes the split, which can change the
   choice only between candidates whose scores the labels cannot tell apart. An item with
   at most ``together_up_to`` labels (default 2) keeps them in one fold, and only labels
   with a *partner* — another label of their item in a training fold — are scored
   (:func:`partnered_labels`): a held-out label whose item has no training label is
   predicted by the candidate's class prior alone, and a lone training label beside it
   tests only how far the candidate trusts one label, which the labels cannot settle
   (docs/stress-bed.md, mechanism 1). With fewer than ``min_partnered`` scored labels (one
   or two labels per item) nothing is fitted twice: the first candidate is the verdict.
2. For each fold and candidate: the candidate is fitted on the other folds, giving the
   posterior ``T`` of every item's class, shape (n_items, C) (an item whose labels are all
   held out gets the candidate's prior). Every candidate is then read through one shared
   worker model, so the score compares posteriors, not worker models: worker j's confusion
   matrix from the training labels, ``counts_j[t, l] = Σ_{training labels (i, j, l)} T[i, t]``,
   shrunk to the crowd's pooled matrix (``(counts_j + s · pooled) / (n_j + s)`` row-wise,
   ``s = shrinkage`` labels' worth; the pooled matrix has one pseudo-label per cell, so every
   entry is > 0 and the logs below are finite). A held-out label ``(i, j, l)`` has predictive
   probability ``Σ_t T[i, t] · confusion_j[t, l]``.
3. A candidate's score is the mean log predictive probability of the scored labels (each
   held out once). A candidate is level with the best scorer when its shortfall is
   within ``level_within`` standard errors of the paired per-label difference (so a
   difference the labels cannot tell from noise decides nothing); among level candidates the
   earliest in ``candidates`` wins (the order is the preference: the candidate with the
   smallest worst case first). The winner is fitted on all labels and gives ``probas_``.

This is the held-out predictive likelihood of the labels — evidence the labels themselves
give, with no gold. It rewards a posterior that puts each item's mass where the other
workers' labels point, after the workers' own biases are accounted for: a uniform class
prior on an imbalanced crowd turns split items to the rare class, and the held-out labels
of those items then come out less likely.

What it does not do: the held-out likelihood of *labels* is not the accuracy on the *truth*.
On the stress bed it prefers ``bds`` to ``bds-oc`` almost everywhere and, on a skewed
10-class crowd, every alternative to ``bds-oc`` by about 10 standard errors while every one
of them is 1–5 points less accurate (docs/stress-bed.md, 2026-11-28). Hence the default
verdict first and a wide level (3 standard errors): ``auto`` is a registered option, not
the default.

Cost: ``n_folds × len(candidates)`` fits on ``(n_folds − 1)/n_folds`` of the labels, plus
one fit of the winner, plus O(n_labels · C) per score; one fit of the first candidate when
nothing can be scored.

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
from crowdbudget.aggregation.defaults import DEFAULT_VERDICT
from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError
from crowdbudget.labels import LabelData
from crowdbudget.types import BoolArray

#: the candidates of ``auto``, in order of preference (docs/stress-bed.md says why these):
#: the default verdict (:data:`~crowdbudget.aggregation.defaults.DEFAULT_VERDICT`) first, so
#: ``auto`` leaves it only on strong evidence, then MACE with and without a learned class prior
DEFAULT_CANDIDATES = (
    DEFAULT_VERDICT,
    *(c for c in ("mace-eb-cp", "mace-eb") if c != DEFAULT_VERDICT),
)


def label_folds(data: LabelData, n_folds: int, seed: int, together_up_to: int = 0) -> IntArray:
    """The fold of every label, shape (n_labels,), in 0..n_folds − 1: a seeded hash of the
    label's (item id, worker id), so the split does not depend on the order of the rows.

    An item with at most ``together_up_to`` labels keeps them in one fold (the hash of its
    item id alone): held out, none of its labels has a partner left in training, so it is
    not scored (:func:`partnered_labels`); in training, it teaches the workers' models."""
    item_keys = data.item_ids[data.items].astype(str)
    pairs = item_keys + "\x1f" + data.worker_ids[data.workers].astype(str)
    per_item = np.bincount(data.items, minlength=data.n_items)[data.items]
    keys = np.where(per_item <= together_up_to, item_keys, pairs)
    hashed = pd.util.hash_array(np.asarray(keys, dtype=object))
    salt = np.uint64(np.random.default_rng(seed).integers(2**62))
    # xor with the seed's salt, then one more mixing step of the hash so the salt reaches
    # every bit of the fold (uint64 arithmetic wraps, which is what a hash wants)
    mixed = pd.util.hash_array(hashed ^ salt)
    return np.asarray(mixed % np.uint64(n_folds), dtype=np.int64)


def partnered_labels(data: LabelData, fold: IntArray) -> BoolArray:
    """Which labels, shape (n_labels,), have another label of their item in a different fold
    — a partner left in training when they are held out. Only these are scored: a held-out
    label whose item has no training label is predicted by the candidate's class prior
    alone, and with one label per item nothing in the labels can check a class prior
    (docs/stress-bed.md, mechanism 1)."""
    n_folds = int(fold.max()) + 1 if fold.size else 1
    # labels of each item in each fold, shape (n_items, n_folds)
    per_fold = np.bincount(data.items * n_folds + fold, minlength=data.n_items * n_folds).reshape(
        data.n_items, n_folds
    )
    elsewhere = per_fold.sum(axis=1)[data.items] - per_fold[data.items, fold]
    return np.asarray(elsewhere > 0, dtype=bool)


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
        together_up_to: an item with at most this many labels keeps them in one fold and is
            not scored (>= 0; 0: every label hashed on its own).
        min_partnered: with fewer scored labels than this, the first candidate that accepts
            the data is the verdict, without cross-validation (>= 0).
        rng: seed of the fold split, passed on to every candidate as its ``seed``.

    Fitted: ``probas_``, ``labels_`` (the winner's, fitted on all labels), ``chosen_`` (the
    winner's id), ``scores_`` (id → mean held-out log-likelihood per label; a skipped
    candidate is absent), ``standard_errors_`` (id → standard error of its mean shortfall to
    the best score), ``chosen_aggregator_`` (the fitted winner), ``reason_`` (one line
    saying what was chosen and why). ``scores_`` and ``standard_errors_`` are empty when
    nothing could be scored.
    """

    def __init__(
        self,
        candidates: Sequence[str] | str = ",".join(DEFAULT_CANDIDATES),
        n_folds: int = 3,
        shrinkage: float = 2.0,
        level_within: float = 3.0,
        together_up_to: int = 2,
        min_partnered: int = 30,
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(rng=rng)
        self.candidates = candidates
        self.n_folds = n_folds
        self.shrinkage = shrinkage
        self.level_within = level_within
        self.together_up_to = together_up_to
        self.min_partnered = min_partnered

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
        for name in ("together_up_to", "min_partnered"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidParameterError(f"auto: {name} must be an integer >= 0, got {value!r}")
        return candidates

    def _seed(self) -> int:
        """An int seed for the candidates (each is built from its id, so it takes an int)."""
        if isinstance(self.rng, int | np.integer):
            return int(self.rng)
        return int(as_generator(self.rng).integers(2**31))

    def _build(self, candidate: str, seed: int) -> Aggregator:
        from crowdbudget.aggregation.registry import make_aggregator

        return make_aggregator(candidate if ":seed=" in candidate else f"{candidate}:seed={seed}")

    def cross_validated_scores(
        self, data: LabelData, candidates: Sequence[str], seed: int
    ) -> dict[str, FloatArray]:
        """Every candidate's held-out log-likelihood of each *partnered* label (module
        docstring, steps 1–3), shape (n_partnered,) each; a candidate that refuses the data
        is absent. Empty when fewer than ``min_partnered`` labels have a partner."""
        fold = label_folds(data, self.n_folds, seed, self.together_up_to)
        scored = partnered_labels(data, fold)
        if int(scored.sum()) < max(self.min_partnered, 1):
            return {}
        per_label: dict[str, FloatArray] = {}
        for candidate in candidates:
            scores = np.zeros(data.n_labels)
            try:
                for k in range(self.n_folds):
                    held = fold == k
                    if not (held & scored).any():
                        continue
                    train, test = data.labels_subset(~held), data.labels_subset(held & scored)
                    posterior = self._build(candidate, seed).fit(train).probas_
                    scores[held & scored] = held_out_log_likelihood(
                        posterior, train, test, float(self.shrinkage)
                    )
            except CrowdBudgetError:  # e.g. a binary-only candidate on more classes
                continue
            per_label[candidate] = scores[scored]
        return per_label

    def _fit_probas(self, data: LabelData) -> FloatArray:
        candidates = self._check()
        seed = self._seed()
        for candidate in candidates:  # an unknown id fails before any fit
            self._build(candidate, seed)
        per_label = self.cross_validated_scores(data, candidates, seed)
        if not per_label:  # no label can be checked: the order of preference decides
            return self._defer(data, candidates, seed)
        totals = {c: float(v.mean()) for c, v in per_label.items()}
        best = max(totals, key=lambda c: totals[c])
        n = next(iter(per_label.values())).size
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
        if chosen == best:
            others = [totals[c] for c in totals if c != chosen]
            why = f", {totals[chosen] - max(others):+.4f} over the next" if others else ""
        else:
            why = (
                f"; level with {best} ({totals[best]:.4f}) within {self.level_within:g} "
                "standard errors, and earlier in the order of preference"
            )
        reason = (
            f"{chosen}: held-out label log-likelihood ({totals[chosen]:.4f} nats per label "
            f"over {n} labels with a partner on their item, {self.n_folds} folds{why})"
        )
        return self._keep(data, chosen, seed, totals, errors, reason)

    def _defer(self, data: LabelData, candidates: Sequence[str], seed: int) -> FloatArray:
        """No label has a partner to check it: the first candidate that accepts the data."""
        for candidate in candidates:
            try:
                return self._keep(
                    data,
                    candidate,
                    seed,
                    {},
                    {},
                    f"{candidate}: first in the order of preference (fewer than "
                    f"{self.min_partnered} labels have a partner on their item to score with)",
                )
            except CrowdBudgetError:
                continue
        raise InvalidParameterError(
            f"auto: every candidate refused the data ({', '.join(candidates)})"
        )

    def _keep(
        self,
        data: LabelData,
        chosen: str,
        seed: int,
        totals: dict[str, float],
        errors: dict[str, float],
        reason: str,
    ) -> FloatArray:
        """Fit ``chosen`` on all labels and record the choice."""
        winner = self._build(chosen, seed).fit(data)
        self.chosen_ = chosen
        self.scores_ = totals
        self.standard_errors_ = errors
        self.chosen_aggregator_ = winner
        self.reason_ = reason
        return np.asarray(winner.probas_, dtype=float)

    def choice(self) -> dict[str, Any]:
        """What was chosen and why, JSON-ready: ``chosen``, ``reason``, ``scores``."""
        return {"chosen": self.chosen_, "reason": self.reason_, "scores": dict(self.scores_)}
