"""The crowd's prior read on the verdict's own posterior: a second empirical-Bayes stage for
the Bayesian Dawid–Skene (:class:`~crowdbudget.aggregation.bayesian_dawid_skene.
BayesianDawidSkene`, Kim & Ghahramani 2012 §3), registered with ``bds-ev-blind-own``'s workers
as ``bds-ev-blind-own-refit`` (``refit="always"``) and, chosen by the evidence on the default's
reading, as ``bds-ev-blind-recheck-refit-ev`` (``refit="evidence"``); with the default's item
difficulty mixture (:class:`PriorRefitItemDifficulty`) as ``bds-hard-blind-recheck-refit-ev``.

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

The change. Fit the parent as it is (stage 1: the parent's reading, its prior on the vote's
counts — with ``prior_form="evidence-one-class"`` the default's re-check included); re-fit the
prior, in the form stage 1 read and with the same floor, on the counts of stage 1's class
posterior ``T`` (N, C) — the labels that reading's start counted, each weighted by its item's
posterior instead of the vote; then fit the parent again with that prior held (stage 2, from
the same majority-vote start, in the same reading). Stage 2's prior is what the crowd looks
like under the verdict's reading (on the cell above: accuracy 0.70), so its workers shrink to
a crowd that errs as the crowd does. Not a joint maximisation: ``prior_fit="every"`` (the
prior and ``q`` maximised jointly) has the degenerate optima of the parent's docstring, and a
stage-2 prior read off a converged posterior cannot drift into them (measured: the held-out
two-coin cells at 2 labels per item read 0.497 with ``bds:prior-fit=every``, 0.63 here and in
stage 1).

Which stage is read (``refit``). ``"always"``: stage 2 (the prototype). ``"evidence"``: the
stage whose fit has the larger variational evidence lower bound — the prior as an
empirical-Bayes hyperparameter chosen by (a bound on) its marginal likelihood, between two
candidates, the vote's prior ``α_v`` and the posterior's ``α_p``. Derivation: for any
hyperparameters ``θ = (α₀, w, ν₀)`` and any ``q(z, π, e, s)``, Jensen gives
``log p(L | θ) ≥ E_q[log p(L, z, π, e, s | θ)] − E_q[log q]``. At ``q(z) = T`` with every
other factor at its optimum for ``T`` the conjugate factors integrate out exactly: a free
worker's term is ``Σ_c [ln B(α₀_c + N_jc) − ln B(α₀_c)]``, the Pólya integral of its expected
counts ``N_jcl = Σ_i T_ic [label (i, j, l)]`` — the ``− ln B(α₀_c)`` is the prior's own
normaliser, so the bound is a function of ``α₀`` as well as of ``T``; a symmetric and a blind
worker's likewise, mixed by ``log Σ_k w_k Z_jk``; ``π`` gives ``ln B(ν₀ + Σ_i T_i) − ln
B(ν₀)`` and ``q(z)`` its entropy::

    L(T; α₀) = Σ_j log Σ_k w_k Z_jk(N_j(T); α₀) + ln B(ν₀ + Σ_i T_i) − ln B(ν₀) + Σ_i H(T_i)
             ≤ log p(L | α₀, w, ν₀)

— :meth:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene.evidence_bound`,
the bound ``prior_form="evidence"`` / ``"evidence-one-class"`` already compare fits by (every
label counted, lone ones too; ``w`` at its type-II fixed point for the counts). Each stage's
``L(T_s; α_s)`` is a lower bound on the evidence of its own ``α_s``, so the two are on one
scale, and keeping the larger is variational type-II ML over ``{α_v, α_p}`` (the VB-EM
criterion, Beal 2003 ch. 2; Bishop 2006 §10.1.4). The bound is not the evidence: the gap is
``KL(q ‖ p(· | L, θ))``, which the mean-field ``q`` leaves at each stage, so the choice is the
bound's, not the marginal likelihood's; and neither stage's prior maximises the bound (``α_v``
is fitted on the vote's counts, ``α_p`` on stage 1's, and the one-coin form on pooled
agreement counts), so stage 2 need not raise it. Stage 1 is kept on a tie.

What it cannot do. Nothing here tells a two-coin crowd (sensitivity below specificity) on a
balanced class prior from a symmetric crowd on a skewed one at two labels per item: their
label pairs have the same law, and the learned class prior takes the skew (the same
confusion as the binary class prior's gate: docs/stress-bed.md).

With the item-difficulty mixture (:class:`PriorRefitItemDifficulty`, the default verdict
``bds-hard-blind-recheck``'s composition). The mixture's gate and evidence ask whether the
labels' errors agree on items beyond what the workers' model alone explains; here the workers'
model alone is this module's fit (stage 1 or 2 as ``refit`` reads), so the gate and the
mixture's evidence compare with it, and the mixture's own fit keeps its vote-started prior
(:mod:`~crowdbudget.aggregation.item_difficulty`). Where the gate refuses, the fit is
``bds-ev-blind-recheck-refit-ev``'s bit for bit.

Cost: two fits of the parent's reading (after the re-check's, if it fires), one Pólya fit (20
fixed-point steps on (J, C, C) counts) and, with ``"evidence"``, two bounds. With a fixed
``confusion_prior`` or ``prior_fit="every"`` there is no stage 1 to re-read and the fit is
the parent's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from crowdbudget.aggregation.base import FloatArray, KnownTruth
from crowdbudget.aggregation.bayesian_dawid_skene import (
    BayesianDawidSkene,
    one_coin_polya_prior,
    polya_prior,
)
from crowdbudget.aggregation.dawid_skene import incidence
from crowdbudget.aggregation.item_difficulty import (
    EASY_PARAMETERS,
    MIXTURE_TOL,
    ItemDifficultyDawidSkene,
)
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError

#: which stage :class:`PriorRefitDawidSkene` reads (``refit``; module docstring)
REFITS = ("always", "evidence")


class PriorRefitDawidSkene(BayesianDawidSkene):
    """:class:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene` whose
    empirical-Bayes prior is re-fitted on its own first fit's posterior (module docstring).

    Args:
        refit: ``"always"`` (read stage 2; default) or ``"evidence"`` (read the stage whose
            fit has the larger evidence lower bound). Every other argument as the parent's.

    Fitted attributes (as the parent's, of the stage read, plus):
        first_prior_: stage 1's prior, fitted on the majority-vote start, shape (C, C).
        stage_bounds_: ``(stage 1's bound, stage 2's bound)`` with ``refit="evidence"``
            (empty otherwise, or with nothing re-fitted).
        refit_read_: whether stage 2 is read.
    """

    def __init__(
        self,
        n_iter: int = 200,
        tol: float = 1e-6,
        class_prior: float = 1.0,
        confusion_prior: Sequence[float] | None = None,
        pool_below: int = 0,
        temperature: float | str = 1.0,
        prior_fit: str = "start",
        prior_form: str = "confusion",
        prior_floor: float = 0.0,
        lone_labels: str = "count",
        asymmetry: str = "free",
        refit: str = "always",
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(
            n_iter=n_iter,
            tol=tol,
            class_prior=class_prior,
            confusion_prior=confusion_prior,
            pool_below=pool_below,
            temperature=temperature,
            prior_fit=prior_fit,
            prior_form=prior_form,
            prior_floor=prior_floor,
            lone_labels=lone_labels,
            asymmetry=asymmetry,
            rng=rng,
        )
        self.refit = refit

    _stage_prior: FloatArray | None = None

    def _fixed_prior(self, C: int) -> FloatArray | None:
        if self._stage_prior is not None:
            return self._stage_prior
        return super()._fixed_prior(C)

    def _chosen_form(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        if self.refit not in REFITS:
            raise InvalidParameterError(
                f"PriorRefitDawidSkene: refit must be one of {', '.join(REFITS)}, "
                f"got {self.refit!r}"
            )
        self.stage_bounds_: tuple[float, ...] = ()
        self.refit_read_ = False
        T = super()._chosen_form(data, known)  # stage 1: the parent's reading
        first = self.confusion_prior_
        self.first_prior_ = first
        if self.confusion_prior is not None or self.prior_fit == "every":
            return T
        # the reading stage 1 read: the re-check's confusion fit counts every label
        rechecked = self.prior_form in ("evidence", "evidence-one-class")
        form = self.prior_form_
        lone = "count" if rechecked and form == "confusion" else self.lone_labels
        evidence = self.refit == "evidence"
        if evidence:
            first_bound = self.evidence_bound(data, self._variational_shares, known)
            first_fit = {name: getattr(self, name) for name in self._FITTED}
            first_shares = self._variational_shares
        self._stage_prior = self._refitted_prior(data, known, T, first, form, lone)
        self._reading = (form, lone)
        try:
            second_T = self._variational(data, known)
        finally:
            self._stage_prior = None
            self._reading = None
        if evidence:
            second_bound = self.evidence_bound(data, self._variational_shares, known)
            self.stage_bounds_ = (first_bound, second_bound)
            if not second_bound > first_bound:  # stage 1 kept on a tie
                for name, value in first_fit.items():
                    setattr(self, name, value)
                self._variational_shares = first_shares
                return T
        self.refit_read_ = True
        return second_T

    def _refitted_prior(
        self,
        data: LabelData,
        known: KnownTruth | None,
        T: FloatArray,
        first: FloatArray,
        form: str,
        lone: str,
    ) -> FloatArray:
        """Stage 2's prior (C, C): the parent's type-II ML fit, in stage 1's ``form`` and
        with its floor, on the worker counts ``N_jcl`` (J, C, C) of the class posterior
        ``T`` (N, C), read through the labels stage 1's start read (every label, or only the
        partnered ones with ``lone="skip-prior"``), started at stage 1's ``first``."""
        model_data, _ = self._pooled(data)
        matrix = incidence(model_data)
        if lone == "skip-prior":
            partnered = self._partnered(model_data, matrix, known)
            matrix = self._worker_evidence(matrix, model_data, partnered, lone)
        C, J = data.n_classes, model_data.n_workers
        counts = np.asarray(matrix.T @ T).reshape(J, C, C).transpose(0, 2, 1)
        fit = one_coin_polya_prior if form == "one-coin" else polya_prior
        # the floor as the parent's (every pseudo-count > 0: the digammas stay finite)
        return np.maximum(fit(counts, first, n_steps=20), float(self.prior_floor))


class PriorRefitItemDifficulty(ItemDifficultyDawidSkene):
    """:class:`~crowdbudget.aggregation.item_difficulty.ItemDifficultyDawidSkene` whose
    workers' model alone (the easy items' fit, the one the gate and the mixture's evidence
    compare with) is :class:`PriorRefitDawidSkene`'s with these parameters (module docstring,
    "With the item-difficulty mixture").

    Args:
        refit: as :class:`PriorRefitDawidSkene`'s (default ``"evidence"``). Every other
            argument as the parent's.

    Fitted attributes: the parent's, plus ``first_prior_``, ``stage_bounds_`` and
    ``refit_read_`` of the workers' model alone.
    """

    def __init__(
        self,
        n_iter: int = 200,
        tol: float = 1e-6,
        class_prior: float = 1.0,
        confusion_prior: Sequence[float] | None = None,
        pool_below: int = 0,
        temperature: float | str = 1.0,
        prior_fit: str = "start",
        prior_form: str = "one-coin",
        prior_floor: float = 0.1,
        lone_labels: str = "skip",
        asymmetry: str = "evidence",
        difficulty: str = "evidence",
        accelerate: bool = True,
        mixture_tol: float = MIXTURE_TOL,
        refit: str = "evidence",
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(
            n_iter=n_iter,
            tol=tol,
            class_prior=class_prior,
            confusion_prior=confusion_prior,
            pool_below=pool_below,
            temperature=temperature,
            prior_fit=prior_fit,
            prior_form=prior_form,
            prior_floor=prior_floor,
            lone_labels=lone_labels,
            asymmetry=asymmetry,
            difficulty=difficulty,
            accelerate=accelerate,
            mixture_tol=mixture_tol,
            rng=rng,
        )
        self.refit = refit

    def _difficulty_fit(
        self, data: LabelData, known: KnownTruth | None, easy_fit: Callable[[], FloatArray]
    ) -> FloatArray:
        """The parent's item model with the workers' model alone re-fitted as
        :class:`PriorRefitDawidSkene` (``easy_fit``, the parent's, is replaced)."""
        parameters = {name: getattr(self, name) for name in EASY_PARAMETERS}
        easy_model = PriorRefitDawidSkene(**parameters, refit=self.refit)

        def refitted_easy_fit() -> FloatArray:
            kept = ("first_prior_", "stage_bounds_", "refit_read_")
            T = self._read_easy_model(easy_model, data, known, kept)
            self._variational_shares = easy_model._variational_shares
            return T

        return super()._difficulty_fit(data, known, refitted_easy_fit)
