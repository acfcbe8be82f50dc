"""The crowd's prior read on the verdict's own posterior: a second empirical-Bayes stage for
the Bayesian Dawid–Skene (:class:`~crowdbudget.aggregation.bayesian_dawid_skene.
BayesianDawidSkene`, Kim & Ghahramani 2012 §3), registered with ``bds-ev-blind-own``'s workers
as ``bds-ev-blind-own-refit``.

Why (docs/stress-bed.md, "the held-out bed's worst rows"). The parent's prior ``α₀`` (C, C) —
the upper level every worker's confusion rows shrink to — is the type-II ML fit of the
workers' counts under the *majority-vote start* (two-stage empirical Bayes, its module
docstring "When"). The vote agrees with itself: on a crowd where half the workers answer at
random and items hold two or three labels, each worker's start counts credit it with the
vote's agreement, so the fitted crowd accuracy is high (on the held-out
``binary-88-12-one-coin-spam50-k5`` at 2 labels per item: 0.75, with 57 % spammers). A worker
seen a handful of times is then read close to that prior on the rows it has barely been seen
on — on an imbalanced crowd, its rare-class row — and a spammer's rare-class answers count as
evidence: the verdict calls 14 % of the items rare where 12 % are and 5 % is the Bayes rule's
call (accuracy 0.827 against 0.877 for every worker one accuracy, ``bds-sym``).

The change. Fit the parent as it is (stage 1: prior on the vote's counts); re-fit the prior,
in the same form (``prior_form``) and with the same floor, on the counts of stage 1's class
posterior ``T`` (N, C) — the labels the stage-1 prior read, each weighted by its item's
posterior instead of the vote; then fit the parent again with that prior held (stage 2, from
the same majority-vote start). Stage 2's prior is what the crowd looks like under the
verdict's reading (on the cell above: accuracy 0.70), so its workers shrink to a crowd that
errs as the crowd does. One re-fit, not a joint maximisation: ``prior_fit="every"`` (the
prior and ``q`` maximised jointly) has the degenerate optima of the parent's docstring, and
one stage-2 prior read off a converged posterior cannot drift into them (measured: the
held-out two-coin cells at 2 labels per item read 0.497 with ``bds:prior-fit=every``, 0.63
here and in stage 1).

What it cannot do. Nothing here tells a two-coin crowd (sensitivity below specificity) on a
balanced class prior from a symmetric crowd on a skewed one at two labels per item: their
label pairs have the same law, and the learned class prior takes the skew (the same
confusion as the binary class prior's gate: docs/stress-bed.md). Those rows of the held-out
bed are read as by stage 1.

Cost: two fits of the parent and one Pólya fit (20 fixed-point steps on (J, C, C) counts).
With a fixed ``confusion_prior`` or ``prior_fit="every"`` there is no stage 1 to re-read and
the fit is the parent's.
"""

from __future__ import annotations

import numpy as np

from crowdbudget.aggregation.base import FloatArray, KnownTruth
from crowdbudget.aggregation.bayesian_dawid_skene import (
    BayesianDawidSkene,
    one_coin_polya_prior,
    polya_prior,
)
from crowdbudget.aggregation.dawid_skene import incidence
from crowdbudget.datasets.loaders import LabelData


class PriorRefitDawidSkene(BayesianDawidSkene):
    """:class:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene` whose
    empirical-Bayes prior is re-fitted once on its own first fit's posterior (module
    docstring). Arguments and fitted attributes as the parent's (``confusion_prior_`` is
    stage 2's prior), plus:

    Fitted attributes:
        first_prior_: stage 1's prior, fitted on the majority-vote start, shape (C, C).
    """

    _stage_prior: FloatArray | None = None

    def _fixed_prior(self, C: int) -> FloatArray | None:
        if self._stage_prior is not None:
            return self._stage_prior
        return super()._fixed_prior(C)

    def _variational(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        if self.confusion_prior is not None or self.prior_fit == "every":
            T = super()._variational(data, known)
            self.first_prior_ = self.confusion_prior_
            return T
        T = super()._variational(data, known)
        first = self.confusion_prior_
        self.first_prior_ = first
        self._stage_prior = self._refitted_prior(data, known, T, first)
        try:
            return super()._variational(data, known)
        finally:
            self._stage_prior = None

    def _refitted_prior(
        self, data: LabelData, known: KnownTruth | None, T: FloatArray, first: FloatArray
    ) -> FloatArray:
        """Stage 2's prior (C, C): the parent's type-II ML fit, in its form and with its
        floor, on the worker counts ``N_jcl`` (J, C, C) of the class posterior ``T`` (N, C),
        read through the labels the parent's start read (every label, or only the
        partnered ones with ``lone_labels="skip-prior"``), started at stage 1's ``first``."""
        model_data, _ = self._pooled(data)
        matrix = incidence(model_data)
        if self.lone_labels == "skip-prior":
            partnered = self._partnered(model_data, matrix, known)
            matrix = self._worker_evidence(matrix, model_data, partnered)
        C, J = data.n_classes, model_data.n_workers
        counts = np.asarray(matrix.T @ T).reshape(J, C, C).transpose(0, 2, 1)
        fit = one_coin_polya_prior if self.prior_form == "one-coin" else polya_prior
        # the floor as the parent's (every pseudo-count > 0: the digammas stay finite)
        return np.maximum(fit(counts, first, n_steps=20), float(self.prior_floor))
