"""The crowd's accuracy distribution as the prior of a worker's accuracy (empirical Bayes).

A control rule that reads each worker's control answers against a fixed prior (Beta(1, 1):
any accuracy equally likely) treats a worker's first answers as if nothing were known about
the crowd; 2 of 2 right then looks like a good worker, though in a crowd with 30 % spammers
a spammer does that one time in four. Here the prior of worker j's accuracy ``a_j`` is the
crowd's accuracy distribution ``g``, estimated from every other worker's control answers
(Robbins' empirical Bayes; the nonparametric maximum likelihood estimate of a mixing
distribution, Laird 1978, computed by EM on a grid as in Koenker & Mizera 2014):

- **Grid.** ``a`` takes the values ``a_i = (i + ½) / G``, i = 0..G−1 (G = :data:`GRID`);
  ``g`` is a vector of weights on them, shape (G,). No parametric form is imposed: a crowd
  of good workers and spammers gets a mode near ½ and one near its good accuracies, a crowd
  of always-one-class workers one near the class share, a crowd of good workers none below.
- **Likelihood.** Worker j with ``c_j`` right of ``n_j`` control answers (independent
  Bernoulli(a_j) draws): ``L_j(a) = a^{c_j} (1 − a)^{n_j − c_j}``.
- **Fit.** ``g`` maximises ``Σ_j log Σ_i g_i L_j(a_i)`` plus a pull toward the requester's
  prior ``b`` (the Beta(α, β) density on the grid, normalised) worth ``n₀`` workers
  (``strength``): the EM step ``g ← (n₀ b + Σ_j π_j) / (n₀ + N)``, ``π_j ∝ g · L_j`` the
  posterior of worker j (shape (G,)), N the workers with answers. With few workers ``g``
  stays near ``b`` (no answers: ``g = b``, the fixed prior's test up to the grid); each
  iteration raises the penalised likelihood (EM's monotonicity), :data:`ITERATIONS` of them
  from ``b``.
- **Leave one out.** Worker j is read against the crowd *without* j: at the fit,
  ``g = (n₀ b + Σ_i π_i) / (n₀ + N)``, so ``g_{−j} = ((n₀ + N) g − π_j) / (n₀ + N − 1)``
  removes j's own contribution exactly (without a refit): a worker's answers do not make a
  mode of the prior that then excuses them. Clipped at 0 (round-off only).
- **Reading a worker.** The posterior of ``a_j`` is ``g_{−j} · L_j`` normalised; the block
  test is ``P(a_j < level) = Σ_{a_i < level} π_i`` and a label's worth is
  ``E[w(a_j)] = Σ_i π_i max(0, 2a_i − 1)²`` (:func:`crowdbudget.engine.control.
  positive_information` for a Beta).

Everything is in log space where products of many likelihoods meet (no underflow at any
``n``). Cost: O(ITERATIONS · N · G) per fit.

Also here: :class:`SharePrior` (the crowd as two kinds of worker and the posterior of its
share of bad ones, the value rule's ``prior_fit="share"``), peer agreement as evidence
(:func:`peer_log_likelihood`), and the value rule's arithmetic on the Beta and on the grid
(:func:`positive_information`, :func:`grid_net_values`, ``_net_values``) and the verdict's
soft counts (:func:`expected_right`), which :mod:`crowdbudget.engine.control` re-exports.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import special

from crowdbudget.types import BoolArray, FloatArray, IntArray

__all__ = [
    "GRID",
    "ITERATIONS",
    "NO_BAD_PRIOR",
    "CrowdPrior",
    "SharePrior",
    "expected_right",
    "grid_net_values",
    "peer_log_likelihood",
    "positive_information",
]

#: grid points of the accuracy (a level such as 0.7 falls between two of them)
GRID = 100
#: EM iterations of a fit, from the requester's prior
ITERATIONS = 40

#: the accuracy grid, shape (GRID,)
POINTS = (np.arange(GRID) + 0.5) / GRID
#: what a label of a worker of accuracy a_i is worth, max(0, 2a_i − 1)², shape (GRID,)
WORTH = np.maximum(0.0, 2.0 * POINTS - 1.0) ** 2
_LOG_A, _LOG_1MA = np.log(POINTS), np.log1p(-POINTS)


def _normalised_log(log_weights: FloatArray) -> FloatArray:
    """exp of log weights (…, G) normalised on the last axis (max-shifted: no overflow)."""
    shifted = np.exp(log_weights - log_weights.max(axis=-1, keepdims=True))
    return np.asarray(shifted / shifted.sum(axis=-1, keepdims=True), dtype=float)


def log_likelihood(correct: IntArray | FloatArray, answered: IntArray | FloatArray) -> FloatArray:
    """``log L_j(a_i)`` for workers with ``correct`` right of ``answered`` (shape (N,);
    soft counts allowed), shape (N, GRID)."""
    c = np.asarray(correct, dtype=float)[:, None]
    n = np.asarray(answered, dtype=float)[:, None]
    return np.asarray(c * _LOG_A + (n - c) * _LOG_1MA, dtype=float)


class CrowdPrior:
    """The fitted crowd distribution ``g`` and each worker's posterior (module docstring).

    Attributes:
        base: the requester's prior on the grid, shape (GRID,).
        strength: ``n₀``, the workers' worth of ``base`` in the fit.
        weights: ``g``, shape (GRID,).
        posteriors: worker -> their posterior π_j (shape (GRID,)) of the last EM step
            (``g = (n₀ b + Σ_j π_j) / (n₀ + N)`` exactly).
    """

    def __init__(self, prior: tuple[float, float], strength: float) -> None:
        alpha, beta = prior
        self.base = _normalised_log((alpha - 1.0) * _LOG_A + (beta - 1.0) * _LOG_1MA)
        self.strength = float(strength)
        self.weights = self.base
        self.posteriors: dict[int, FloatArray] = {}

    def fit(self, evidence: dict[int, tuple[float, float]]) -> CrowdPrior:
        """Fit ``g`` to ``evidence`` (worker -> (right, answered)); workers without answers
        carry no information and are left out."""
        workers = [w for w, (_, n) in evidence.items() if n > 0]
        weights = self.base
        if workers:
            right = np.array([evidence[w][0] for w in workers], dtype=float)
            answered = np.array([evidence[w][1] for w in workers], dtype=float)
            log_lik = log_likelihood(right, answered)  # (N, G)
            total = self.strength + len(workers)
            for _ in range(ITERATIONS):
                # log(0) of a grid point without weight is -inf: its posterior is 0, safe
                with np.errstate(divide="ignore"):
                    posts = _normalised_log(np.log(weights) + log_lik)
                weights = (self.strength * self.base + posts.sum(axis=0)) / total
            # the posteriors that made the weights (one EM step behind them): g is exactly
            # (n₀ b + Σ_j π_j) / (n₀ + N) of these, so leaving one out is exact
            self.posteriors = dict(zip(workers, posts, strict=True))
        else:
            self.posteriors = {}
        self.weights = weights
        return self

    def without(self, worker: int | None) -> FloatArray:
        """``g_{−j}``: the crowd without ``worker``'s answers (module docstring), (GRID,)."""
        own = self.posteriors.get(worker) if worker is not None else None
        if own is None:
            return self.weights
        total = self.strength + len(self.posteriors)
        rest = np.maximum(total * self.weights - own, 0.0)  # ≥ 0 up to round-off
        return np.asarray(rest / rest.sum(), dtype=float)

    def posterior(self, worker: int | None, correct: float, answered: float) -> FloatArray:
        """``worker``'s accuracy posterior from ``correct`` of ``answered`` answers (soft
        counts allowed) read against the crowd without them, shape (GRID,)."""
        prior = self.without(worker)
        loglik = log_likelihood(np.array([correct]), np.array([answered]))[0]
        with np.errstate(divide="ignore"):
            return _normalised_log(np.log(prior) + loglik)

    @staticmethod
    def below(posterior: FloatArray, level: float) -> float:
        """``P(a < level)`` under a grid posterior."""
        return float(posterior[level > POINTS].sum())

    @staticmethod
    def worth(posterior: FloatArray) -> float:
        """``E[max(0, 2a − 1)²]`` under a grid posterior."""
        return float(posterior @ WORTH)


@lru_cache(maxsize=8)
def _binomial_log_pmf(horizon: int) -> tuple[FloatArray, BoolArray]:
    """``log Binom(s; k, a_i)`` for k = 1..horizon, s = 0..horizon, shape (K, K + 1, GRID),
    and the mask ``s <= k``, shape (K, K + 1, 1) (masked entries: any finite number).
    Cached per horizon (read only)."""
    k = np.arange(1, horizon + 1, dtype=float)[:, None, None]
    s = np.arange(horizon + 1, dtype=float)[None, :, None]
    valid = s <= k
    failures = np.where(valid, k - s, 0.0)
    log_choose = (
        special.gammaln(k + 1.0) - special.gammaln(s + 1.0) - special.gammaln(failures + 1.0)
    )
    return np.asarray(log_choose + s * _LOG_A + failures * _LOG_1MA, dtype=float), valid


def grid_net_values(
    posterior: FloatArray,
    remaining: float,
    replacement: float,
    horizon: int,
    level: float,
    confidence: float,
    answers_to_block: int,
    worth: FloatArray = WORTH,
    block_beta: tuple[float, float] | None = None,
) -> FloatArray:
    """``V_k`` for k = 1..horizon (:mod:`crowdbudget.engine.control`'s value rule) under a
    grid posterior (shape (GRID,)), shape (horizon,).

    ``s`` right of ``k`` more answers has ``P(s) = Σ_i π_i Binom(s; k, a_i)``; after them the
    posterior is ``π_i Binom(s; k, a_i) / P(s)``, so the blocked mass and the expected worth
    are sums over the joint ``J = π · Binom`` (shape (K, K + 1, GRID)):
    ``Σ_s 1{block(s)} P(s) (v̄ − E[w | s]) = Σ_s 1{block(s)} Σ_i J_{k,s,i} (v̄ − w_i)``.
    ``worth``: a label's worth ``w(a_i)``, shape (GRID,) (default: :data:`WORTH`).
    ``block_beta``: None (the block test reads this posterior), or the Beta (α', β') the
    block test reads instead (the requester's prior and the answers so far): a block then
    happens after ``s`` of ``k`` when ``I_L(α' + s, β' + k − s) >= confidence``, while the
    answers are still predicted by ``posterior`` (:class:`SharePrior`)."""
    log_pmf, valid = _binomial_log_pmf(horizon)
    joint = np.where(valid, np.exp(log_pmf) * posterior, 0.0)  # (K, K + 1, G)
    mass = joint.sum(axis=2)
    below = joint[:, :, level > POINTS].sum(axis=2)
    k = np.arange(1, horizon + 1, dtype=float)
    # mass > 0 wherever s <= k (every a_i is inside (0, 1)); elsewhere the test is False
    if block_beta is None:
        decided = (below >= confidence * mass) & (mass > 0)
    else:
        s = np.arange(horizon + 1, dtype=float)[None, :]
        # s > k is masked by `valid` (the joint is 0 there): any positive shape is safe
        failures = np.maximum(k[:, None] - s, 0.0)
        after = special.betainc(block_beta[0] + s, block_beta[1] + failures, level)
        decided = after >= confidence
    blocks = decided & valid[:, :, 0] & (k[:, None] >= answers_to_block)
    gain = np.where(blocks, joint @ (replacement - worth), 0.0).sum(axis=1)
    worth_now = float(posterior @ worth)
    return np.asarray((remaining - k) * gain - k * worth_now, dtype=float)


#: grid points of the crowd's share of bad workers π (0, 1/SHARES, …, 1)
SHARES = 100
#: the prior probability that the crowd has no bad worker at all (π = 0)
NO_BAD_PRIOR = 0.5


def peer_log_likelihood(agree: float, pairs: float, signal: float) -> FloatArray:
    """``log L(a_i)`` of a worker whose labels agree with ``agree`` of ``pairs`` other
    workers' labels on the same items, shape (GRID,).

    Two one-coin workers of accuracies ``a`` and ``b`` agree with probability
    ``ab + (1 − a)(1 − b) = ½ + (2a − 1)(2b − 1)/2``; over the crowd's other workers (drawn
    independently of j) that is ``p(a) = ½ + (2a − 1) s̄ / 2`` with ``s̄ = E[2b − 1]``, the
    crowd's mean signal (``signal``, in [0, 1]). The worker's own label is never compared with
    itself, so no verdict's pull toward it enters (unlike the verdict's soft counts).
    ``p(a)`` lies in [0, 1] for every ``a`` and ``s̄`` in [0, 1]; clipped away from 0 and 1
    so the logs stay finite (a pair count of 0 then adds exactly 0)."""
    p = np.clip(0.5 + (2.0 * POINTS - 1.0) * signal / 2.0, 1e-12, 1.0 - 1e-12)
    return np.asarray(agree * np.log(p) + (pairs - agree) * np.log1p(-p), dtype=float)


class SharePrior:
    """The crowd as two kinds of worker, and the posterior of its share of bad ones.

    Worker j is *bad* (accuracy below the block level ``L``) with probability π, else good;
    within each kind the accuracy follows the requester's Beta prior restricted to that side
    of ``L`` (``bad``, ``good``: shape (GRID,), each normalised). π has the prior
    :data:`NO_BAD_PRIOR` at 0 (a crowd without bad workers is a hypothesis the evidence can
    confirm: with a continuous prior alone ``E[π]`` never falls below ~1/(N + 2)) and the rest
    uniform on the grid ``π_p = p / SHARES``, p = 1..SHARES. With worker j's evidence as a
    log-likelihood on the accuracy grid ``ℓ_j`` (control answers, peer agreement:
    :func:`log_likelihood`, :func:`peer_log_likelihood`) and its marginals
    ``B_j = Σ_i bad_i e^{ℓ_j(a_i)}``, ``G_j = Σ_i good_i e^{ℓ_j(a_i)}``, the posterior is

        log p(π | evidence) = log p(π) + Σ_j log(π B_j + (1 − π) G_j) + const,

    and worker j is read against the crowd *without* j (their term subtracted: a worker's
    evidence does not argue for their own kind): their accuracy prior is
    ``q_j · bad + (1 − q_j) · good`` with ``q_j = E[π | the others]`` (exact: the prior
    predictive of a worker's accuracy under the mixture). When the evidence says the crowd
    has no bad workers ``q_j → 0``, and with it the value of testing anyone
    (:func:`grid_net_values`). Cost: O(N · (GRID + SHARES)) per fit, O(SHARES + GRID) per
    worker read; logs throughout (no underflow at any amount of evidence).

    Attributes:
        level: ``L``.
        bad, good: the two kinds' accuracy priors on the grid, shape (GRID,) each.
        log_post: ``log p(π | every worker)`` unnormalised, shape (SHARES + 1,).
        terms: worker -> their term ``log(π B_j + (1 − π) G_j)``, shape (SHARES + 1,).
        weights: the prior of an unseen worker's accuracy, shape (GRID,).
    """

    def __init__(
        self, prior: tuple[float, float], level: float, no_bad: float = NO_BAD_PRIOR
    ) -> None:
        alpha, beta = prior
        base = _normalised_log((alpha - 1.0) * _LOG_A + (beta - 1.0) * _LOG_1MA)
        below = level > POINTS
        # the level lies inside (0, 1) (ControlTasks checks it): both sides hold grid points
        self.level = float(level)
        self.bad = np.where(below, base, 0.0) / base[below].sum()
        self.good = np.where(below, 0.0, base) / base[~below].sum()
        self.shares = np.arange(SHARES + 1) / SHARES
        prior_share = np.full(SHARES + 1, (1.0 - no_bad) / SHARES)
        prior_share[0] = no_bad
        with np.errstate(divide="ignore"):  # no_bad = 0: log 0 = -inf, a point of no mass
            self.log_prior = np.log(prior_share)
        self.log_post = self.log_prior.copy()
        self.terms: dict[int, FloatArray] = {}
        self.weights = self._mixture(self._mean_share(self.log_post))

    def fit(self, evidence: dict[int, FloatArray]) -> SharePrior:
        """The posterior of π from ``evidence`` (worker -> their log-likelihood on the
        accuracy grid, shape (GRID,))."""
        workers = sorted(evidence)
        self.terms = {}
        self.log_post = self.log_prior.copy()
        if workers:
            log_lik = np.vstack([evidence[w] for w in workers])  # (N, G)
            # max-shift each worker's log-likelihood: B_j, G_j up to a factor common to both
            lik = np.exp(log_lik - log_lik.max(axis=1, keepdims=True))
            with np.errstate(divide="ignore"):
                log_b = np.log(lik @ self.bad)[:, None]
                log_g = np.log(lik @ self.good)[:, None]
                # π = 0 or 1 makes one branch log 0 = -inf: logaddexp keeps the other
                terms = np.logaddexp(
                    np.log(self.shares)[None, :] + log_b,
                    np.log1p(-self.shares)[None, :] + log_g,
                )  # (N, SHARES + 1)
            self.terms = dict(zip(workers, terms, strict=True))
            self.log_post = self.log_prior + terms.sum(axis=0)
        self.weights = self._mixture(self._mean_share(self.log_post))
        return self

    def _mean_share(self, log_post: FloatArray) -> float:
        """``E[π]`` under an unnormalised log posterior on the share grid."""
        return float(_normalised_log(log_post) @ self.shares)

    def _mixture(self, share: float) -> FloatArray:
        return np.asarray(share * self.bad + (1.0 - share) * self.good, dtype=float)

    def share_without(self, worker: int | None) -> float:
        """``q_j = E[π | every worker but j]``."""
        own = self.terms.get(worker) if worker is not None else None
        if own is None:
            return self._mean_share(self.log_post)
        # a term is -inf only at an end of the grid where its branch vanishes; there the
        # posterior is -inf too, and stays so without j
        rest = np.where(np.isfinite(own), self.log_post - own, -np.inf)
        return self._mean_share(rest)

    def without(self, worker: int | None) -> FloatArray:
        """Worker j's accuracy prior (the crowd without them), shape (GRID,)."""
        return self._mixture(self.share_without(worker))

    def read(self, worker: int | None, log_lik: FloatArray) -> FloatArray:
        """``worker``'s accuracy posterior from their log-likelihood on the grid (shape
        (GRID,)), read against the crowd without them, shape (GRID,)."""
        with np.errstate(divide="ignore"):
            return _normalised_log(np.log(self.without(worker)) + log_lik)

    def posterior(self, worker: int | None, correct: float, answered: float) -> FloatArray:
        """:meth:`read` of ``correct`` right of ``answered`` answers, shape (GRID,)."""
        return self.read(worker, log_likelihood(np.array([correct]), np.array([answered]))[0])

    below = staticmethod(CrowdPrior.below)
    worth = staticmethod(CrowdPrior.worth)


def expected_right(
    probabilities: FloatArray,
    items: IntArray,
    labels: IntArray,
    workers: IntArray,
    n_workers: int,
) -> tuple[FloatArray, FloatArray]:
    """The verdict's soft count of each worker's right labels: ``Σ P(class_i = label)`` over
    their labels, and their number of labels; shapes (n_workers,) each.

    ``probabilities``: the verdict's class probabilities, shape (n_items, n_classes);
    ``items``, ``labels``, ``workers``: the labels read, shape (n_labels,) each (workers
    below 0, no named worker, are left out). The expected number of right answers given
    everything the verdict holds; a worker's own label moves the verdict toward it, so the
    count errs on their side (a conservative block test)."""
    named = np.asarray(workers) >= 0
    right = np.asarray(probabilities)[np.asarray(items)[named], np.asarray(labels)[named]]
    who = np.asarray(workers)[named]
    expected = np.bincount(who, weights=right, minlength=n_workers).astype(float)
    return expected, np.bincount(who, minlength=n_workers).astype(float)


def positive_information(alpha: float | FloatArray, beta: float | FloatArray) -> FloatArray:
    """``E[max(0, 2a − 1)²]`` for ``a ~ Beta(alpha, beta)`` (arrays broadcast): what a label
    of such a worker is worth (:mod:`crowdbudget.engine.control`'s module docstring; Karger,
    Oh & Shah 2014).

    ``E[a^r 1{a > ½}] = E[a^r] · P_{Beta(α + r, β)}(a > ½) = E[a^r] · I_½(β, α + r)``
    (``1 − I_x(a, b) = I_{1−x}(b, a)``), and
    ``(2a − 1)² = 4a² − 4a + 1``; the sum of three terms of similar size can round a hair
    below 0, hence the clip."""
    a = np.asarray(alpha, dtype=float)
    b = np.asarray(beta, dtype=float)
    mean = a / (a + b)
    second = mean * (a + 1.0) / (a + b + 1.0)
    above = special.betainc(b, a, 0.5)
    value = (
        4.0 * second * special.betainc(b, a + 2.0, 0.5)
        - 4.0 * mean * special.betainc(b, a + 1.0, 0.5)
        + above
    )
    return np.maximum(value, 0.0)


def _net_values(
    alpha: float,
    beta: float,
    remaining: float,
    replacement: float,
    horizon: int,
    level: float,
    confidence: float,
    answers_to_block: int,
) -> FloatArray:
    """``V_k`` for k = 1..horizon (:mod:`crowdbudget.engine.control`'s value rule), shape
    (horizon,).

    ``s`` correct of ``k`` more answers has the Beta-binomial probability
    ``C(k, s) B(α + s, β + k − s) / B(α, β)`` (computed in logs: no overflow for any k);
    entries with ``s > k`` are masked (their log-terms are never used). ``answers_to_block``:
    answers still missing before a block may happen (``min_answers`` − answered)."""
    k = np.arange(1, horizon + 1, dtype=float)[:, None]  # (K, 1)
    s = np.arange(horizon + 1, dtype=float)[None, :]  # (1, K + 1)
    valid = s <= k
    failures = np.where(valid, k - s, 0.0)  # masked entries: any positive shape parameter
    log_pmf = (
        special.gammaln(k + 1.0)
        - special.gammaln(s + 1.0)
        - special.gammaln(failures + 1.0)
        + special.betaln(alpha + s, beta + failures)
        - special.betaln(alpha, beta)
    )
    posterior_alpha, posterior_beta = alpha + s, beta + failures
    blocks = (
        valid
        & (k >= answers_to_block)
        & (special.betainc(posterior_alpha, posterior_beta, level) >= confidence)
    )
    value_after = positive_information(posterior_alpha, posterior_beta)
    gain = np.where(blocks, np.exp(log_pmf) * (replacement - value_after), 0.0).sum(axis=1)
    steps = k[:, 0]
    return np.asarray(
        (remaining - steps) * gain - steps * positive_information(alpha, beta), dtype=float
    )
