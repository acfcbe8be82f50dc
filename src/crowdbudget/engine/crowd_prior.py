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
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import special

from crowdbudget.types import BoolArray, FloatArray, IntArray

__all__ = ["GRID", "ITERATIONS", "CrowdPrior", "grid_net_values"]

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
) -> FloatArray:
    """``V_k`` for k = 1..horizon (:mod:`crowdbudget.engine.control`'s value rule) under a
    grid posterior (shape (GRID,)), shape (horizon,).

    ``s`` right of ``k`` more answers has ``P(s) = Σ_i π_i Binom(s; k, a_i)``; after them the
    posterior is ``π_i Binom(s; k, a_i) / P(s)``, so the blocked mass and the expected worth
    are sums over the joint ``J = π · Binom`` (shape (K, K + 1, GRID)):
    ``Σ_s 1{block(s)} P(s) (v̄ − E[w | s]) = Σ_s 1{block(s)} Σ_i J_{k,s,i} (v̄ − w_i)``.
    ``worth``: a label's worth ``w(a_i)``, shape (GRID,) (default: :data:`WORTH`)."""
    log_pmf, valid = _binomial_log_pmf(horizon)
    joint = np.where(valid, np.exp(log_pmf) * posterior, 0.0)  # (K, K + 1, G)
    mass = joint.sum(axis=2)
    below = joint[:, :, level > POINTS].sum(axis=2)
    k = np.arange(1, horizon + 1, dtype=float)
    # mass > 0 wherever s <= k (every a_i is inside (0, 1)); elsewhere the test is False
    blocks = (below >= confidence * mass) & (mass > 0) & (k[:, None] >= answers_to_block)
    gain = np.where(blocks, joint @ (replacement - worth), 0.0).sum(axis=1)
    worth_now = float(posterior @ worth)
    return np.asarray((remaining - k) * gain - k * worth_now, dtype=float)
