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
whole crowd as a two-component mixture — by its EM fixed point ``w ← mean_j q(s_j = 1)`` over
the workers with a count, re-run (warm-started) at every iteration of the verdict; kept in
[1e-6, 1 − 1e-6] so that the logit stays finite. It is type-II ML like the verdict's prior,
so nothing here is tuned: the data sets how asymmetric the workers may be.

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

Cost: O(J · C²) lnΓ / ψ per iteration and the fixed point of ``w`` on J numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import betaln, digamma, expit, gammaln, logit

from crowdbudget.aggregation.base import FloatArray

#: bounds of the crowd's share of symmetric workers ``w`` (module docstring)
SHARE_BOUNDS = (1e-6, 1.0 - 1e-6)

#: whether a worker's confusion matrix is free (``"free"``), symmetric (``"none"``) or chosen
#: by the evidence (``"evidence"``; module docstring)
ASYMMETRY = ("free", "none", "evidence")


@dataclass(frozen=True)
class WorkerModel:
    """The workers' posterior under the mixture (module docstring).

    Attributes:
        expected_log_e: ``E[log e_jcl]``, shape (J, C, C).
        errors: posterior mean ``E[e_jcl]``, shape (J, C, C); None when not asked for
            (``worker_model(..., means=False)``: the verdict's iterations read only the logs).
        symmetric: ``q(s_j = 1)``, shape (J,).
        share: the crowd's share of symmetric workers ``w``.
    """

    expected_log_e: FloatArray
    errors: FloatArray | None
    symmetric: FloatArray
    share: float


def _one_coin_summary(prior: FloatArray) -> tuple[float, float]:
    """``(a, b)``: the prior's mean diagonal pseudo-count and mean off-diagonal row mass."""
    diagonal = float(np.mean(np.diag(prior)))
    return diagonal, float(np.mean(prior.sum(axis=1))) - diagonal


def _log_evidence(
    counts: FloatArray, prior: FloatArray, log_gamma_alpha: FloatArray, agree: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """:func:`log_evidence` given ``lnΓ(α₀ + N)`` (J, C, C) and the agreeing counts (J,)."""
    C = prior.shape[0]
    eye = np.eye(C, dtype=bool)
    a, b = _one_coin_summary(prior)
    totals = prior.sum(axis=1)  # A_c, (C,)
    off_totals = totals - np.diag(prior)  # B_c, (C,)
    n_jc = counts.sum(axis=2)  # (J, C)
    d_jc = n_jc - np.diagonal(counts, axis1=1, axis2=2)  # row c's errors, (J, C)
    # all Γ arguments are >= the prior's pseudo-counts > 0: every term is finite
    cells = log_gamma_alpha - gammaln(prior)  # (J, C, C)
    free = np.sum(gammaln(totals) - gammaln(totals + n_jc), axis=1) + np.sum(cells, axis=(1, 2))
    disagree = d_jc.sum(axis=1)
    wrong_label = np.sum(gammaln(off_totals) - gammaln(off_totals + d_jc), axis=1) + np.sum(
        np.where(eye, 0.0, cells), axis=(1, 2)
    )
    symmetric = betaln(a + agree, b + disagree) - betaln(a, b) + wrong_label
    return symmetric, free


def log_evidence(counts: FloatArray, prior: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(log Z_sym, log Z_free)`` per worker, each shape (J,), of the expected counts
    ``counts[j, c, l]`` (J, C, C) under the prior ``prior`` (C, C) (module docstring)."""
    agree = np.trace(counts, axis1=1, axis2=2)
    return _log_evidence(counts, prior, gammaln(prior + counts), agree)


def fit_share(difference: FloatArray, share: float) -> float:
    """The crowd's share ``w`` of symmetric workers: the EM fixed point of the two-component
    mixture (module docstring), started at ``share``.

    Args:
        difference: ``log Z_sym − log Z_free`` of the workers with a count, shape (J',).
        share: the start (the last iteration's ``w``: a warm start).

    Returns:
        ``w`` within :data:`SHARE_BOUNDS`; ``share`` (clipped) when no worker has a count.
    """
    low, high = SHARE_BOUNDS
    w = min(max(float(share), low), high)
    if difference.size == 0:
        return w
    size = difference.size
    for _ in range(200):
        # q_j at the current w, then their mean (np.mean's own sum and division)
        new_w = min(max(float(np.add.reduce(expit(logit(w) + difference))) / size, low), high)
        if abs(new_w - w) < 1e-10:
            return new_w
        w = new_w
    return w


def worker_model(
    counts: FloatArray, prior: FloatArray, asymmetry: str, share: float, means: bool = True
) -> WorkerModel:
    """The workers' expected log confusion under ``asymmetry`` (one of :data:`ASYMMETRY`).

    Args:
        counts: the workers' expected counts ``N_jcl``, shape (J, C, C).
        prior: the Dirichlet prior rows ``α₀`` (C, C), all > 0.
        asymmetry: ``"free"`` (every worker free: the Dawid–Skene worker), ``"none"`` (every
            worker symmetric) or ``"evidence"`` (the mixture; ``share`` re-fitted).
        share: the current ``w`` (the start of its fixed point with ``"evidence"``).
        means: whether to compute the posterior means ``errors`` too.

    Returns:
        The :class:`WorkerModel`.
    """
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
    if asymmetry == "none":
        return WorkerModel(sym_log, sym_mean, np.ones(J), 1.0)
    log_sym, log_free = _log_evidence(counts, prior, gammaln(alpha), agree)
    difference = log_sym - log_free  # (J,)
    w = fit_share(difference[n_j > 1e-9], share)
    q = expit(logit(w) + difference)[:, None, None]
    mixed_mean = None
    if sym_mean is not None and free_mean is not None:
        mixed_mean = q * sym_mean + (1.0 - q) * free_mean
    return WorkerModel(q * sym_log + (1.0 - q) * free_log, mixed_mean, q[:, 0, 0], w)
