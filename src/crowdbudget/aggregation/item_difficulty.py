"""Item difficulty as a source of correlated errors: every item of the Bayesian Dawid–Skene
(:class:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene`, Kim & Ghahramani
2012 §3) is either **easy** — its labels follow each worker's own confusion matrix, as in
Dawid & Skene (1979) — or **hard** — its labels follow one confusion matrix shared by the whole
crowd, so that on a hard item every worker errs in the same way (the item misleads everyone).
The share of hard items of each class is learned from the labels.

Why. The Dawid–Skene family reads the labels as independent given the true class. Where
several workers err *together* on the same items (fact_eval: groups of class-1 items that
several workers call 0), independence makes those items a real class-0 group that the other
workers miss: their class-0 rows look poor, the workers who said 0 look like reliable class-0
detectors, and an item split 2 / 3 is handed to the two "detectors" (docs/stress-bed.md, the
``bds-ev`` sections). A mixture over items is the simplest model in which labels are
exchangeable but *not* independent given the class: marginally over ``h_i`` an item's labels
are correlated, and an item whose labels disagree more than its workers' accuracies allow is
read as hard, not as evidence against the workers who disagree. It is the two-component case
of the item-difficulty models of Whitehill et al. 2009 (GLAD, §3: a per-item difficulty that
scales every worker's reliability; here the difficulty is binary and a hard item's labels
ignore the workers' skill altogether) and of the "item-clustered" confusion models of Venanzi
et al. 2014 (Community-based Bayesian aggregation, §3: labels from a shared confusion matrix
of a group; here the group is a group of items, not of workers).

Model (shapes: N items, J workers, C classes; ``π`` indexed by (class, difficulty))::

    π ~ Dir(ν₀ 1_{2C})                               class × difficulty proportions, (C, 2)
    (z_i, h_i) | π ~ Cat(π)                          true class, hard (1) or easy (0)
    e_jc ~ the workers of bds-ev (worker_asymmetry)  worker j's confusion row c, (C,)
    H_c ~ Dir(η_c),  η_cl = 1 + [c = l]              the crowd's confusion on hard items, (C, C)
    l | z_i = c, h_i = 0, worker j ~ Cat(e_jc);   l | z_i = c, h_i = 1 ~ Cat(H_c)

``π`` over (class, difficulty) lets the classes differ in how often they are hard (on
fact_eval the class-1 items are the ones workers disagree on). ``η`` is weak and leans to the
diagonal (mean accuracy 2 / (C + 1)): where no item needs the hard component it keeps a
chance-like ``H`` that explains agreeing labels badly, so the hard share falls to the prior's
``ν₀`` pseudo-counts and the fit is the easy model's; where many items are hard, ``H`` is
their labels' own confusion.

Variational inference (Simpson et al. 2013 §2, the updates of ``bds``), with
``q(z, h, π, e, H) = Π_i q(z_i, h_i) q(π) q(e) q(H)`` and ``R_ich = q(z_i = c, h_i = h)``
(N, C, 2); ``E = R[:, :, 0]`` (easy), ``D = R[:, :, 1]`` (hard), ``T = E + D`` the class
posterior that the verdict reports:

- ``q(e)``: the workers of ``bds-ev`` (:func:`~crowdbudget.aggregation.worker_asymmetry.
  worker_model`, symmetric or free by their evidence) on the *easy* expected counts
  ``N_jcl = Σ_{labels (i, j, l)} E_ic``;
- ``q(H_c) = Dir(η_c + M_c)``, ``M_cl = Σ_{labels (i, j, l)} D_ic`` (the hard counts);
- ``q(π) = Dir(ν₀ + Σ_i R_i)``;
- ``log R_ic0 = E[log π_c0] + Σ_{labels (i, j, l)} E[log e_jcl]``,
  ``log R_ic1 = E[log π_c1] + Σ_l V_il E[log H_cl]`` (``V`` (N, C): the item's votes),
  normalised over the 2C cells.

Everything the workers' side of ``bds-ev`` does is kept: its one-coin empirical-Bayes prior
fitted once on the majority-vote start, the floor, the lone labels left out of the workers'
counts (and, for the same reason, out of ``H``'s: a label alone on its item agrees with
itself), the evidence's share of symmetric workers. When nothing can be checked (fewer than
two workers with a partnered label: one label per item) no item can look hard and the fit is
``bds-ev``'s, bit for bit.

Start: ``T`` = majority-vote shares, and ``q(h_i = 1) = (1 − max_c T_ic) · C / (C − 1)``, the
item's disagreement (0 when its labels agree, 1 at an even split) — the variational fit is
local and this starts it where the two components mean what their names say. Stop after
``n_iter`` iterations or when no ``R_ich`` moves by more than ``tol``.

Cost per iteration: ``bds-ev``'s, plus two (N, C) × (C, C) products and the C × 2 Dirichlet.

Tempering (``temperature``) is ``bds``'s, with the leave-one-label-out criterion read off the
easy component (the workers' confusions); known truth clamps ``z_i`` and leaves ``h_i`` free.

Example:
    >>> from crowdbudget.datasets import load_dataset
    >>> fit = ItemDifficultyDawidSkene().fit(load_dataset("rte"))
    >>> fit.hard_.shape, fit.hard_confusion_.shape
    ((800,), (2, 2))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma

from crowdbudget.aggregation.base import FloatArray, KnownTruth
from crowdbudget.aggregation.bayesian_dawid_skene import (
    BayesianDawidSkene,
    one_coin_polya_prior,
    polya_prior,
)
from crowdbudget.aggregation.dawid_skene import check_iterations, incidence, initial_shares
from crowdbudget.aggregation.worker_asymmetry import Evidence, worker_model
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError

#: the item model (``difficulty``): every item easy (``"none"``: the parent's fit) or each
#: item easy or hard (``"mixture"``; module docstring)
DIFFICULTIES = ("mixture", "none")


@dataclass
class _Fit:
    """The state of the mixture's variational fit (module docstring).

    Attributes:
        R: ``q(z_i = c, h_i = h)`` at column ``c + C·h``, shape (N, 2C).
        share: the crowd's share of symmetric workers (``bds-ev``'s ``w``).
        evidence: the workers' evidence terms of the last iteration (re-used when unmoved).
        hard_alpha: ``q(H)``'s Dirichlet rows ``η + M``, shape (C, C).
        hard: the bounded point estimate of ``H`` the items read, shape (C, C).
    """

    R: FloatArray
    share: float = 0.5
    evidence: Evidence | None = None
    hard_alpha: FloatArray | None = None
    hard: FloatArray | None = None


@dataclass(frozen=True)
class _Design:
    """The fixed sparse designs of a fit.

    Attributes:
        matrix: ``bds``'s incidence (N, J·C): the items' update of the easy component.
        workers: the incidence whose labels feed the workers' counts (N, J·C).
        votes: every label's vote (N, C): the items' update of the hard component.
        checked: the votes that feed ``H``'s counts (N, C) (those of the workers' counts).
    """

    matrix: sp.csr_matrix
    workers: sp.csr_matrix
    votes: sp.csr_matrix
    checked: sp.csr_matrix


def start_responsibilities(T: FloatArray) -> FloatArray:
    """``R`` (N, 2C) of the start — columns ``[0, C)`` easy, ``[C, 2C)`` hard — : the class
    shares ``T`` (N, C) split by the items' disagreement ``(1 − max_c T_ic) · C / (C − 1)``
    in [0, 1] (module docstring)."""
    C = T.shape[1]
    hard = (1.0 - _row_max(T)) * (C / max(C - 1, 1))
    hard = np.clip(hard, 0.0, 1.0)[:, None]
    return np.ascontiguousarray(np.concatenate([T * (1.0 - hard), T * hard], axis=1))


def _row_max(x: FloatArray) -> FloatArray:
    """``x.max(axis=1)`` of an (N, K) array with few columns, column by column (NumPy's
    reduction over a short last axis costs several times more)."""
    out = np.array(x[:, 0], dtype=float)
    for k in range(1, x.shape[1]):
        np.maximum(out, x[:, k], out=out)
    return out


def _row_sums(x: FloatArray) -> FloatArray:
    """``x.sum(axis=1)`` as a product with ones (as :mod:`.worker_asymmetry` does)."""
    return np.asarray(x @ np.ones(x.shape[1]))


def bounded_confusion(alpha: FloatArray, easy_rate: FloatArray) -> FloatArray:
    """The hard items' confusion ``H`` (C, C): the posterior mean ``α / Σ_l α`` of the
    Dirichlet rows ``alpha`` (C, C), each row's diagonal kept at least its largest other
    entry (and 1/C) and at most halfway between chance (1/C) and the crowd's agreement rate
    on easy items of that class ``easy_rate`` (C,), the rest of the row scaled to fill it
    (module docstring, "Bounds")."""
    C = alpha.shape[0]
    mean = alpha / alpha.sum(axis=1, keepdims=True)  # alpha >= η > 0
    diagonal = np.diagonal(mean)
    # the plurality bound: the diagonal d' at which the row's largest other entry m, scaled
    # by (1 − d') / (1 − d), equals it: d' = m / (1 − d + m) (<= d when d >= m already)
    largest = np.max(np.where(np.eye(C, dtype=bool), 0.0, mean), axis=1)
    low = np.maximum(largest / (1.0 - diagonal + largest), 1.0 / C)
    # "hard": at most halfway between chance and the easy items' agreement rate
    high = np.maximum((1.0 / C + np.minimum(easy_rate, 1.0)) / 2.0, low)
    bounded = np.clip(diagonal, low, high)  # < 1: the off-diagonal keeps some mass
    # off the diagonal: scaled by (1 − new diagonal) / (1 − old diagonal); the old diagonal
    # is < 1 because every alpha entry is >= η > 0
    scale = (1.0 - bounded) / (1.0 - diagonal)
    out = mean * scale[:, None]
    out[np.arange(C), np.arange(C)] = bounded
    return np.asarray(out)


def hard_prior(C: int) -> FloatArray:
    """``η`` (C, C): 2 on the diagonal, 1 elsewhere (module docstring)."""
    return np.where(np.eye(C, dtype=bool), 2.0, 1.0)


class ItemDifficultyDawidSkene(BayesianDawidSkene):
    """``bds-ev`` whose items are each easy or hard (see the module docstring).

    Args:
        difficulty: ``"mixture"`` (default: each item easy or hard) or ``"none"`` (every item
            easy: the parent's fit, bit for bit).
        accelerate: SQUAREM steps between the plain updates (default; module docstring,
            "Speed"); False runs the plain coordinate updates only.
        n_iter, tol, class_prior, confusion_prior, pool_below, temperature, prior_fit,
        prior_form, prior_floor, lone_labels, asymmetry, rng: as
            :class:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene`
            (defaults: ``bds-ev``'s).

    Fitted attributes (besides the parent's; ``errors_`` are the easy items' workers):
        hard_: ``q(h_i = 1)``, each item's probability of being hard, shape (n_items,).
        hard_share_: the posterior mean share of hard items.
        hard_confusion_: ``E[H_cl]``, the crowd's confusion on hard items, shape (C, C).
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
        difficulty: str = "mixture",
        accelerate: bool = True,
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
        self.difficulty = difficulty
        self.accelerate = accelerate

    def _variational(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        if self.difficulty not in DIFFICULTIES:
            raise InvalidParameterError(
                f"ItemDifficultyDawidSkene: difficulty must be one of {', '.join(DIFFICULTIES)}, "
                f"got {self.difficulty!r}"
            )
        if self.prior_fit == "every" and self.difficulty == "mixture":
            raise InvalidParameterError(
                "ItemDifficultyDawidSkene: prior_fit='every' is not supported with "
                "difficulty='mixture' (the workers' prior is fitted once, on the start)"
            )
        model_data, mapping = self._pooled(data)
        self._check()
        matrix: sp.csr_matrix = incidence(model_data)
        partnered = self._partnered(model_data, matrix, known)
        if self.difficulty == "none" or partnered is None:
            # nothing can be checked (or no mixture asked for): the parent's fit
            T = super()._variational(data, known)
            self.hard_ = np.zeros(data.n_items)
            self.hard_share_ = 0.0
            self.hard_confusion_ = hard_prior(data.n_classes) / (data.n_classes + 1.0)
            return T
        return self._mixture(model_data, mapping, matrix, partnered, known)

    def _start_prior(self, matrix: sp.csr_matrix, T: FloatArray, J: int, C: int) -> FloatArray:
        """The workers' prior ``α₀`` (C, C): fixed, or ``bds``'s two-stage empirical Bayes on
        the majority-vote start ``T`` (N, C), read through ``matrix`` (the labels it counts:
        every label, or the partnered ones with ``"skip-prior"``)."""
        fixed = self._fixed_prior(C)
        if fixed is not None:
            return fixed
        fit_prior = one_coin_polya_prior if self.prior_form == "one-coin" else polya_prior
        start = np.asarray(matrix.T @ T).reshape(J, C, C).transpose(0, 2, 1)
        first = np.where(np.eye(C, dtype=bool), 2.0, 1.0)
        return np.maximum(fit_prior(start, first, n_steps=20), float(self.prior_floor))

    def _design(self, data: LabelData, matrix: sp.csr_matrix, partnered: np.ndarray) -> _Design:
        """The sparse designs of :class:`_Design` for ``data``."""
        C, N, K = data.n_classes, data.n_items, data.n_labels
        checked = (partnered if self.lone_labels != "count" else np.ones(K, bool)).astype(float)
        return _Design(
            matrix=matrix,
            workers=self._worker_evidence(matrix, data, partnered),
            votes=sp.csr_matrix((np.ones(K), (data.items, data.labels)), shape=(N, C)),
            checked=sp.csr_matrix((checked, (data.items, data.labels)), shape=(N, C)),
        )

    def _mixture(
        self,
        data: LabelData,
        mapping: np.ndarray,
        matrix: sp.csr_matrix,
        partnered: np.ndarray,
        known: KnownTruth | None,
    ) -> FloatArray:
        """The variational fit of the module docstring on (pooled) ``data``."""
        n_iter, tol = check_iterations(self.n_iter, self.tol, "ItemDifficultyDawidSkene")
        nu0 = self.class_prior
        if isinstance(nu0, bool) or not isinstance(nu0, int | float) or not nu0 > 0:
            raise InvalidParameterError(
                f"ItemDifficultyDawidSkene: class_prior must be a number > 0, got {nu0!r}"
            )
        C, J = data.n_classes, data.n_workers
        design = self._design(data, matrix, partnered)
        T = initial_shares(data)
        if known is not None:
            T = known.clamp(T)
        start_matrix = design.workers if self.lone_labels == "skip-prior" else matrix
        prior = self._start_prior(start_matrix, T, J, C)
        fit = _Fit(R=start_responsibilities(T))
        iteration = self._iterate(fit, prior, design, known, n_iter, tol)
        counts = np.asarray(design.workers.T @ fit.R[:, :C]).reshape(J, C, C).transpose(0, 2, 1)
        final = worker_model(counts, prior, self.asymmetry, fit.share, True, fit.evidence)
        assert final.errors is not None  # means=True
        T = fit.R[:, :C] + fit.R[:, C:]
        log_T = np.log(np.maximum(T, 1e-300))  # T > 0 up to underflow
        tau = self._temperature(data, log_T, final.expected_log_e, final.errors)
        if tau != 1.0:
            scores = tau * log_T
            scores -= scores.max(axis=1, keepdims=True)
            T = np.exp(scores)
            T /= T.sum(axis=1, keepdims=True)
            if known is not None:
                T = known.clamp(T)
        self.temperature_ = tau
        self.confusion_prior_ = prior
        self.errors_ = final.errors[mapping]
        self.symmetric_ = final.symmetric[mapping]
        self.symmetric_share_ = final.share
        totals = fit.R.sum(axis=0)  # (2C,)
        self.priors_ = (float(nu0) + totals[:C] + totals[C:]) / (C * float(nu0) + totals.sum())
        self.hard_ = _row_sums(fit.R[:, C:])
        self.hard_share_ = float((1.0 + totals[C:].sum()) / (2.0 + totals.sum()))
        assert fit.hard is not None  # set by every step
        self.hard_confusion_ = fit.hard
        self.n_iter_ = iteration
        return T

    def _iterate(
        self,
        fit: _Fit,
        prior: FloatArray,
        design: _Design,
        known: KnownTruth | None,
        n_iter: int,
        tol: float,
    ) -> int:
        """The coordinate updates until the class shares move by at most ``tol`` or
        ``n_iter`` updates ran, accelerated by SQUAREM (module docstring, "Speed"); returns
        the number of updates. ``fit.R`` holds the last update's output."""
        C = fit.R.shape[1] // 2
        evaluations = 0

        def update(R: FloatArray) -> tuple[FloatArray, float]:
            nonlocal evaluations
            evaluations += 1
            fit.R = R
            new = self._step(fit, prior, design)
            if known is not None:
                new = _clamp(new, known)
            moved = (new[:, :C] - R[:, :C]) + (new[:, C:] - R[:, C:])
            return new, float(np.max(np.abs(moved))) if moved.size else 0.0

        current = fit.R
        while True:
            first, change = update(current)
            if change <= tol or evaluations >= n_iter:
                fit.R = first
                return evaluations
            second, change = update(first)
            if change <= tol or evaluations >= n_iter or not self.accelerate:
                fit.R = second
                if change <= tol or evaluations >= n_iter:
                    return evaluations
                current = second
                continue
            r = first - current
            v = second - 2.0 * first + current
            scale = float(np.sqrt(np.sum(v * v)))
            if scale == 0.0:
                current = second
                continue
            # SqS3 step length (Varadhan & Roland 2008), at least a plain step, at most 8
            alpha = min(max(-float(np.sqrt(np.sum(r * r))) / scale, -8.0), -1.0)
            jump = current - 2.0 * alpha * r + alpha * alpha * v
            np.maximum(jump, 0.0, out=jump)
            total = _row_sums(jump)
            # a row the jump emptied (all entries clipped) keeps the last plain update
            bad = ~(total > 1e-12)
            jump[bad] = second[bad]
            total[bad] = 1.0
            current = jump / total[:, None]
            if known is not None:
                current = _clamp(current, known)

    def _step(self, fit: _Fit, prior: FloatArray, design: _Design) -> FloatArray:
        """One round of the coordinate updates (module docstring); updates ``fit``'s worker
        state and ``H`` and returns the new ``R`` (N, 2C)."""
        N, C = fit.R.shape[0], fit.R.shape[1] // 2
        J = design.matrix.shape[1] // C
        easy, hard = fit.R[:, :C], fit.R[:, C:]
        # [j, c, l]: the workers' expected counts on the easy items
        counts = np.asarray(design.workers.T @ easy).reshape(J, C, C).transpose(0, 2, 1)
        workers = worker_model(counts, prior, self.asymmetry, fit.share, False, fit.evidence)
        fit.share, fit.evidence = workers.share, workers.evidence
        # [c, l]: the hard items' expected votes M, and H within its bounds
        fit.hard_alpha = hard_prior(C) + np.asarray(design.checked.T @ hard).T
        crowd = counts.sum(axis=0)  # (C, C): the easy labels' confusion, summed over workers
        easy_rate = np.diagonal(crowd) / np.maximum(crowd.sum(axis=1), 1e-300)
        fit.hard = bounded_confusion(fit.hard_alpha, easy_rate)
        hard_log = np.log(fit.hard)  # every entry > 0 (bounded_confusion)
        # q(π) = Dir(ν₀ + Σ_i T_i), q(ρ) = Beta(1 + Σ_i q(easy), 1 + Σ_i q(hard))
        totals = fit.R.sum(axis=0)  # (2C,)
        nu = float(self.class_prior) + totals[:C] + totals[C:]
        rho = 1.0 + np.array([totals[:C].sum(), totals[C:].sum()])
        log_pi = digamma(nu) - digamma(nu.sum())  # (C,)
        log_rho = digamma(rho) - digamma(rho.sum())  # (2,)
        log_e = workers.expected_log_e.transpose(0, 2, 1).reshape(J * C, C)  # [(j, l), c]
        scores = np.empty((N, 2 * C))
        scores[:, :C] = np.asarray(design.matrix @ log_e) + (log_pi + log_rho[0])
        scores[:, C:] = np.asarray(design.votes @ hard_log.T) + (log_pi + log_rho[1])
        # softmax over the 2C cells of each item: the max subtracted, every exp <= 1
        scores -= _row_max(scores)[:, None]
        R = np.exp(scores)
        R /= _row_sums(R)[:, None]
        return R


def _clamp(R: FloatArray, known: KnownTruth) -> FloatArray:
    """``R`` (N, 2C) with every known item's class fixed to its truth, its split between
    easy and hard (within the true class) kept, in place."""
    C = R.shape[1] // 2
    easy, hard = R[known.items, known.classes], R[known.items, C + known.classes]
    total = easy + hard
    # a row of zeros (underflow) falls back to an even split
    share = np.where(total > 0, easy / np.where(total > 0, total, 1.0), 0.5)
    R[known.items] = 0.0
    R[known.items, known.classes] = share
    R[known.items, C + known.classes] = 1.0 - share
    return R
