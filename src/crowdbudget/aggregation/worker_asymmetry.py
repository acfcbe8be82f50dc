"""How asymmetric a worker's errors may be, decided by the evidence: each worker of the
Bayesian Dawid–Skene (:class:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene`,
Kim & Ghahramani 2012 §3) is either **symmetric** (one accuracy ``p_j`` on every class:
sensitivity = specificity, the one-coin worker of Raykar et al. 2010 §2) or **free** (a full
confusion matrix: one accuracy per class), with a crowd-level share ``w`` of symmetric workers
fitted by type-II maximum likelihood.

Model (shapes: J workers, C classes). With the empirical-Bayes prior ``α₀`` (C, C) of the
verdict, its one-coin summary ``a = mean_c α₀_cc``, ``b = mean_c Σ_{l≠c} α₀_cl``, and the
off-diagonal part ``β_c = (α₀_cl)_{l≠c}`` of each row (``B_c = Σ_{l≠c} α₀_cl``)::

    s_j ~ Bernoulli(w)                               symmetric (1) or free (0)
    s_j = 0:  e_jc ~ Dir(α₀_c)   for every class c   (the Dawid–Skene worker)
    s_j = 1:  p_j ~ Beta(a, b);  φ_jc ~ Dir(β_c);
              e_jcc = p_j,  e_jcl = (1 − p_j) φ_jcl  (l ≠ c)

The symmetric worker is the free one constrained to a single accuracy; which wrong label it
gives on class c (``φ_jc``) stays free, so on two classes it is the one-coin worker, and on
more classes ordinal or confusable pairs keep their structure. For the one-coin prior of
``bds-oc`` (every row ``α_d`` on the diagonal, the same off-diagonal mass) both models have the
same prior mean ``E[e_jcl]``, so neither is favoured a priori except by ``w``.

Mean field (Simpson et al. 2013 §2) with ``q(z) q(s_j, θ_j)``, θ_j the worker's parameters.
Given the items' shares ``T`` the optimal ``q(s_j, θ_j) ∝ p(s_j) p(θ_j | s_j) Π_labels Π_c
θ(c, l)^{T_ic}`` factors as ``q(s_j) q(θ_j | s_j)``: ``q(θ_j | s_j)`` is the conjugate
posterior of model ``s_j`` given the worker's expected counts ``N_jcl = Σ_{labels (i, j, l)}
T_ic``, and ``q(s_j = 1) = σ(logit w + log Z_sym(N_j) − log Z_free(N_j))``, ``Z`` the marginal
likelihood of the expected counts (the multinomial coefficient is the same for both models and
cancels)::

    log Z_free = Σ_c [lnΓ(A_c) − lnΓ(A_c + n_jc) + Σ_l (lnΓ(α₀_cl + N_jcl) − lnΓ(α₀_cl))]
    log Z_sym  = ln B(a + g_j, b + d_j) − ln B(a, b)
                 + Σ_c [lnΓ(B_c) − lnΓ(B_c + d_jc) + Σ_{l≠c} (lnΓ(α₀_cl + N_jcl) − lnΓ(α₀_cl))]

with ``A_c = Σ_l α₀_cl``, ``n_jc = Σ_l N_jcl``, ``d_jc = n_jc − N_jcc`` (row c's errors),
``g_j = Σ_c N_jcc`` (agreeing) and ``d_j = Σ_c d_jc`` (disagreeing); on two classes the second
line is 0. The items' update then reads, for every label (i, j, l), ``E[log e_jcl] =
q_j E_sym[log e_jcl] + (1 − q_j) E_free[log e_jcl]``, with ``E_free = ψ(α₀_cl + N_jcl) −
ψ(A_c + n_jc)``, and ``E_sym = ψ(a + g_j) − ψ(a + b + n_j)`` on the diagonal, ``ψ(b + d_j) −
ψ(a + b + n_j) + ψ(α₀_cl + N_jcl) − ψ(B_c + d_jc)`` off it.

The share ``w`` maximises ``Σ_j log(w Z_sym,j + (1 − w) Z_free,j)`` — the evidence of the
whole crowd as a two-component mixture — over the workers with a count, by its EM fixed
point ``w ← mean_j q(s_j = 1)`` (:func:`fit_share`), re-run (warm-started) at every
iteration of the verdict; kept in [1e-6, 1 − 1e-6] so that the logit stays finite. It is
type-II ML like the verdict's prior, so nothing here is tuned: the data sets how asymmetric
the workers may be.

What it decides. The free model has C accuracies per worker and the symmetric one a single
one; the marginal likelihood charges the free model for its extra freedom (the Occam factor of
the Pólya integral), so a worker whose counts are explained as well by one accuracy is read as
symmetric, and only counts whose accuracy clearly depends on the class (e.g. a worker who says
"positive" whenever unsure) buy the full matrix. A worker with few labels carries little
evidence and takes the crowd's share ``w``; a crowd whose workers are mostly asymmetric drives
``w`` down, so even its light workers keep full matrices.

What it cannot decide. The evidence reads the labels under the model's own assumption that
they are independent given the class. Where workers err *together* on the same items (a group
of items that several workers call the rare class wrongly), the labels themselves look like
free workers missing a real rare class, and the evidence says so (docs/stress-bed.md:
fact_eval).

Cost per iteration of the verdict: the free workers' O(J · C²) ψ, O(J · C) lnΓ and ψ more
(the cells both evidences share cancel in their difference: :func:`evidence_difference`),
and the fixed point of ``w`` on J numbers. A worker whose expected counts have not moved
(by more than :data:`STALE_COUNTS` labels) since its evidence was computed keeps it
(:func:`updated_evidence`): once the items' posteriors settle, most workers' counts stop
moving (millionaire: 93–99 % of its 37,332 workers from the third iteration on).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
from numba import njit
from scipy.special import betaln, digamma, expit, gammaln, logit

from crowdbudget import _compiled_special
from crowdbudget._lean_load import lean_loads
from crowdbudget.aggregation.base import FloatArray
from crowdbudget.posteriors._logistic_kernel import NUMPY_SUM_CHUNK, pairwise_sum

#: bounds of the crowd's share of symmetric workers ``w`` (module docstring)
SHARE_BOUNDS = (1e-6, 1.0 - 1e-6)

#: whether a worker's confusion matrix is free (``"free"``), symmetric (``"none"``) or chosen
#: by the evidence (``"evidence"``; module docstring), or among those two and a class-blind
#: worker (``"evidence-blind"``: :mod:`~crowdbudget.aggregation.worker_blind`; with
#: ``"evidence-blind-own"`` a worker is read blind only on its own strong evidence)
ASYMMETRY = ("free", "none", "evidence", "evidence-blind", "evidence-blind-own")


#: a worker's evidence is computed anew when one of its expected counts has moved by more than
#: this (in labels) since it was last computed (module docstring, "Cost")
STALE_COUNTS = 1e-12


@dataclass(frozen=True)
class Evidence:
    """The per-worker terms of the mixture and the counts they were computed at.

    Attributes:
        prior: the prior ``α₀`` (C, C).
        n_jc: the workers' count row sums ``n_jc``, shape (J, C).
        right: their diagonals ``N_jcc``, shape (J, C).
        difference: ``log Z_sym − log Z_free``, shape (J,).
        free_total: ``ψ(A_c + n_jc)``, shape (J, C).
        wrong_total: ``ψ(B_c + d_jc)``, shape (J, C).
        on: ``ψ(a + g_j) − ψ(a + b + n_j)``, shape (J,).
        off: ``ψ(b + d_j) − ψ(a + b + n_j)``, shape (J,).
        seen: whether the worker has a count (``n_j > 0``), shape (J,).
    """

    prior: FloatArray
    n_jc: FloatArray
    right: FloatArray
    difference: FloatArray
    free_total: FloatArray
    wrong_total: FloatArray
    on: FloatArray
    off: FloatArray
    seen: np.ndarray


@dataclass(frozen=True)
class WorkerModel:
    """The workers' posterior under the mixture (module docstring).

    Attributes:
        expected_log_e: ``E[log e_jcl]``, shape (J, C, C).
        errors: posterior mean ``E[e_jcl]``, shape (J, C, C); None when not asked for
            (``worker_model(..., means=False)``: the verdict's iterations read only the logs).
        symmetric: ``q(s_j = 1)``, shape (J,).
        share: the crowd's share of symmetric workers ``w``.
        evidence: the workers' :class:`Evidence` (``"evidence"`` only; the next call's
            ``previous``).
    """

    expected_log_e: FloatArray
    errors: FloatArray | None
    symmetric: FloatArray
    share: float
    evidence: Evidence | None = None


def _one_coin_summary(prior: FloatArray) -> tuple[float, float]:
    """``(a, b)``: the prior's mean diagonal pseudo-count and mean off-diagonal row mass."""
    diagonal = float(np.mean(np.diag(prior)))
    return diagonal, float(np.mean(prior.sum(axis=1))) - diagonal


def log_evidence(counts: FloatArray, prior: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(log Z_sym, log Z_free)`` per worker, each shape (J,), of the expected counts
    ``counts[j, c, l]`` (J, C, C) under the prior ``prior`` (C, C) (module docstring). The
    verdict reads only their difference (:func:`evidence_difference`)."""
    C = prior.shape[0]
    eye = np.eye(C, dtype=bool)
    a, b = _one_coin_summary(prior)
    totals = prior.sum(axis=1)  # A_c, (C,)
    off_totals = totals - np.diag(prior)  # B_c, (C,)
    n_jc = counts.sum(axis=2)  # (J, C)
    d_jc = n_jc - np.diagonal(counts, axis1=1, axis2=2)  # row c's errors, (J, C)
    # all Γ arguments are >= the prior's pseudo-counts > 0: every term is finite
    cells = gammaln(prior + counts) - gammaln(prior)  # (J, C, C)
    free = np.sum(gammaln(totals) - gammaln(totals + n_jc), axis=1) + np.sum(cells, axis=(1, 2))
    agree = np.trace(counts, axis1=1, axis2=2)
    disagree = d_jc.sum(axis=1)
    wrong_label = np.sum(gammaln(off_totals) - gammaln(off_totals + d_jc), axis=1) + np.sum(
        np.where(eye, 0.0, cells), axis=(1, 2)
    )
    symmetric = betaln(a + agree, b + disagree) - betaln(a, b) + wrong_label
    return symmetric, free


def fit_share(difference: FloatArray, share: float) -> float:
    """The crowd's share ``w`` of symmetric workers: the EM fixed point ``w ← mean_j q_j``,
    ``q_j = σ(logit w + difference_j)``, of the mixture's evidence ``Σ_j log(w Z_sym,j +
    (1 − w) Z_free,j)`` (module docstring), started at ``share`` (the last iteration's ``w``:
    a warm start), kept within :data:`SHARE_BOUNDS`, stopped when a step moves ``w`` by less
    than 1e-10 (at most 200 steps).

    Args:
        difference: ``log Z_sym − log Z_free`` of the workers with a count, shape (J',).
        share: the start; returned (clipped) when no worker has a count.

    Returns:
        ``w``.
    """
    low, high = SHARE_BOUNDS
    w = min(max(float(share), low), high)
    if difference.size == 0:
        return w
    values = np.ascontiguousarray(difference, dtype=np.float64)
    return float(_share_fixed_point(values, w, low, high, NUMPY_SUM_CHUNK))


@njit(cache=True, nogil=True)
def _share_fixed_point(
    difference: FloatArray, w: float, low: float, high: float, sum_chunk: int
) -> float:  # pragma: no cover (compiled; tests/test_worker_asymmetry.py checks it bit for bit)
    """The loop of :func:`fit_share`, compiled: each step is the NumPy expression
    ``min(max(np.add.reduce(expit(logit(w) + difference)) / J, low), high)`` with the same
    bits — SciPy's own ``logit`` and ``expit`` (:mod:`crowdbudget._compiled_special`), the
    sum in NumPy's pairwise order (:func:`~crowdbudget.posteriors._logistic_kernel.
    pairwise_sum`) — without the ~3 µs of NumPy's dispatch per array operation, which made
    this loop (up to 200 steps at each VB iteration) most of a fit's time on small crowds."""
    size = difference.shape[0]
    q = np.empty(size)
    for _ in range(200):
        shift = _compiled_special.logit(w, 0)
        for j in range(size):
            q[j] = _compiled_special.expit(shift + difference[j], 0)
        new_w = min(max(pairwise_sum(q, 0, size, sum_chunk) / size, low), high)
        if abs(new_w - w) < 1e-10:
            return new_w
        w = new_w
    return w


def _row_sums(x: FloatArray) -> FloatArray:
    """``x.sum(axis=-1)`` as a product with ones: several times faster on (J, C) or
    (J, C, C) arrays whose last axis is short (and on the verdict's transposed layout)."""
    return np.asarray(x @ np.ones(x.shape[-1]))


def evidence_difference(prior: FloatArray, n_jc: FloatArray, right: FloatArray) -> FloatArray:
    """``log Z_sym − log Z_free`` per worker, shape (J,), under ``prior`` (C, C), from the
    workers' expected counts' row sums ``n_jc = Σ_l N_jcl`` and diagonals ``right = N_jcc``,
    each (J, C).

    The off-diagonal cells' terms ``lnΓ(α₀_cl + N_jcl) − lnΓ(α₀_cl)`` are the same in both
    evidences (module docstring) and cancel, so only (J, C) arguments remain::

        ln B(a + g_j, b + d_j) − ln B(a, b) + Σ_c [lnΓ(B_c) − lnΓ(B_c + d_jc)
            − lnΓ(A_c) + lnΓ(A_c + n_jc) − lnΓ(α₀_cc + N_jcc) + lnΓ(α₀_cc)]

    — C times fewer lnΓ than :func:`log_evidence`, and no difference of two large sums.
    """
    a, b = _one_coin_summary(prior)
    diagonal_prior = np.diag(prior)  # α₀_cc, (C,)
    totals = prior.sum(axis=1)  # A_c, (C,)
    off_totals = totals - diagonal_prior  # B_c, (C,)
    agree, n_j = _row_sums(right), _row_sums(n_jc)  # (J,)
    # the prior's own terms: one number for every worker
    constant = float(np.sum(gammaln(off_totals) - gammaln(totals) + gammaln(diagonal_prior)))
    # every Γ argument is >= a prior pseudo-count > 0 (counts >= 0): every term is finite
    per_class = (
        gammaln(totals + n_jc)
        - gammaln(off_totals + (n_jc - right))
        - gammaln(diagonal_prior + right)
    )
    symmetric_accuracy = betaln(a + agree, b + (n_j - agree)) - (betaln(a, b) - constant)
    return np.asarray(symmetric_accuracy + _row_sums(per_class))


def _worker_terms(prior: FloatArray, n_jc: FloatArray, right: FloatArray) -> Evidence:
    """Every per-worker number of the mixture that depends on the counts only through
    ``n_jc`` and ``right`` (J, C): the evidence and the ψ of the row and one-coin totals."""
    a, b = _one_coin_summary(prior)
    agree, n_j = _row_sums(right), _row_sums(n_jc)  # (J,)
    totals = prior.sum(axis=1)  # A_c
    total = digamma(a + b + n_j)
    # ψ arguments: A_c + n_jc and B_c + d_jc are >= the prior's row masses > 0
    return Evidence(
        prior=prior,
        n_jc=n_jc,
        right=right,
        difference=evidence_difference(prior, n_jc, right),
        free_total=digamma(totals + n_jc),
        wrong_total=digamma(totals - np.diag(prior) + (n_jc - right)),
        on=digamma(a + agree) - total,
        off=digamma(b + (n_j - agree)) - total,
        seen=n_j > 1e-9,
    )


def updated_evidence(
    prior: FloatArray, n_jc: FloatArray, right: FloatArray, previous: Evidence | None
) -> Evidence:
    """The workers' :class:`Evidence` at the counts ``n_jc``, ``right`` (J, C), re-using
    ``previous`` for every worker whose counts moved by at most :data:`STALE_COUNTS` in
    total since its terms were computed (a change below 1e-10 nats in its evidence, as
    ``∂ lnΓ(x) / ∂x = ψ(x)`` is small). All anew when the prior or the workers changed."""
    if (
        previous is None
        or previous.n_jc.shape != n_jc.shape
        or not np.array_equal(previous.prior, prior)
    ):
        return _worker_terms(prior, n_jc, right)
    moved = _row_sums(np.abs(n_jc - previous.n_jc) + np.abs(right - previous.right))
    stale = moved > STALE_COUNTS  # (J,)
    if stale.all():
        return _worker_terms(prior, n_jc, right)
    fresh = _worker_terms(prior, n_jc[stale], right[stale])
    fields = {}
    for name in ("n_jc", "right", "difference", "free_total", "wrong_total", "on", "off", "seen"):
        kept = getattr(previous, name).copy()
        kept[stale] = getattr(fresh, name)
        fields[name] = kept
    return Evidence(prior=prior, **fields)


def _evidence_model(
    counts: FloatArray, prior: FloatArray, share: float, means: bool, previous: Evidence | None
) -> WorkerModel:
    """The mixture of :func:`worker_model` (``"evidence"``), built from (J, C) pieces.

    Off the diagonal ``q E_sym + (1 − q) E_free`` is ``ψ(α_jcl) + r_jc`` with
    ``r_jc = q_j (ψ(b + d_j) − ψ(a + b + n_j) − ψ(B_c + d_jc)) − (1 − q_j) ψ(A_c + n_jc)``
    (the ``ψ(α_jcl)`` of both models is the same number), so one (J, C, C) pass builds it;
    the diagonal (J, C) is then written as ``q_j E_sym[log e_jcc] + (1 − q_j) E_free[…]``.
    """
    C = prior.shape[0]
    alpha = prior[None, :, :] + counts
    digamma_alpha = digamma(alpha)  # (J, C, C)
    right = np.array(np.diagonal(counts, axis1=1, axis2=2))  # N_jcc, (J, C)
    terms = updated_evidence(prior, _row_sums(counts), right, previous)
    w = fit_share(terms.difference[terms.seen], share)
    q = expit(logit(w) + terms.difference)  # (J,)
    q_c, p_c = q[:, None], (1.0 - q)[:, None]
    shift = q_c * (terms.off[:, None] - terms.wrong_total) - p_c * terms.free_total  # (J, C)
    expected = digamma_alpha + shift[:, :, None]
    classes = np.arange(C)
    # E_free on the diagonal: ψ(α_jcc) − ψ(A_c + n_jc), (J, C)
    diagonal_log = np.diagonal(digamma_alpha, axis1=1, axis2=2) - terms.free_total
    expected[:, classes, classes] = q_c * terms.on[:, None] + p_c * diagonal_log
    errors = None
    if means:
        a, b = _one_coin_summary(prior)
        agree, n_j = _row_sums(right), _row_sums(terms.n_jc)
        row_totals = alpha.sum(axis=2, keepdims=True)
        beta = np.where(np.eye(C, dtype=bool), 0.0, alpha)
        beta_totals = beta.sum(axis=2, keepdims=True)
        accuracy = ((a + agree) / (a + b + n_j))[:, None, None]
        sym_mean = np.where(np.eye(C, dtype=bool), accuracy, (1.0 - accuracy) * beta / beta_totals)
        errors = q[:, None, None] * sym_mean + (1.0 - q[:, None, None]) * alpha / row_totals
    return WorkerModel(expected, errors, q, w, terms)


def worker_model(
    counts: FloatArray,
    prior: FloatArray,
    asymmetry: str,
    share: float,
    means: bool = True,
    previous: Evidence | None = None,
) -> WorkerModel:
    """The workers' expected log confusion under ``asymmetry`` (one of :data:`ASYMMETRY`).

    Args:
        counts: the workers' expected counts ``N_jcl``, shape (J, C, C).
        prior: the Dirichlet prior rows ``α₀`` (C, C), all > 0.
        asymmetry: ``"free"`` (every worker free: the Dawid–Skene worker), ``"none"`` (every
            worker symmetric), ``"evidence"`` (the mixture; ``share`` re-fitted) or
            ``"evidence-blind"`` (with class-blind workers: :mod:`.worker_blind`) or
            ``"evidence-blind-own"`` (blind only on a worker's own strong evidence).
        share: the current ``w`` (the start of its fixed point with ``"evidence"``).
        means: whether to compute the posterior means ``errors`` too.
        previous: the last call's :attr:`WorkerModel.evidence` (``"evidence"``: the workers
            whose counts did not move keep theirs).

    Returns:
        The :class:`WorkerModel`.
    """
    if asymmetry == "evidence":
        return _evidence_model(counts, prior, share, means, previous)
    if asymmetry in ("evidence-blind", "evidence-blind-own"):
        # imported here: worker_blind builds on this module's evidence
        from crowdbudget.aggregation.worker_blind import blind_model

        return blind_model(counts, prior, means, previous, asymmetry == "evidence-blind-own")
    C = prior.shape[0]
    alpha = prior[None, :, :] + counts
    row_totals = alpha.sum(axis=2, keepdims=True)
    digamma_alpha = digamma(alpha)
    free_log = digamma_alpha - digamma(row_totals)
    free_mean = alpha / row_totals if means else None
    J = counts.shape[0]
    if asymmetry == "free":
        return WorkerModel(free_log, free_mean, np.zeros(J), 0.0)
    a, b = _one_coin_summary(prior)
    eye = np.eye(C, dtype=bool)
    agree = np.trace(counts, axis1=1, axis2=2)  # (J,)
    n_j = counts.sum(axis=(1, 2))
    disagree = n_j - agree
    # the wrong label's distribution φ_jc: Dir(β_c + row c's error counts), (J, C, C) off
    # the diagonal (the diagonal entries are unused: masked by ``eye`` below)
    beta = np.where(eye, 0.0, alpha)
    beta_totals = beta.sum(axis=2, keepdims=True)  # B_c + d_jc > 0 (prior >= floor > 0)
    total = digamma(a + b + n_j)
    on = (digamma(a + agree) - total)[:, None, None]
    off = (digamma(b + disagree) - total)[:, None, None]
    # ψ(β) off the diagonal is ψ(α) there (the same numbers); the diagonal is masked
    sym_log = np.where(eye, on, off + (digamma_alpha - digamma(beta_totals)))
    sym_mean = None
    if means:
        right = ((a + agree) / (a + b + n_j))[:, None, None]
        sym_mean = np.where(eye, right, (1.0 - right) * beta / beta_totals)
    return WorkerModel(sym_log, sym_mean, np.ones(J), 1.0)  # "none"


# the share fit's cached kernel loads without Numba's whole target set-up (crowdbudget._lean_load)
lean_loads(sys.modules[__name__])
