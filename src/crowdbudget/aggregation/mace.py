"""MACE: Multi-Annotator Competence Estimation (Hovy, Berg-Kirkpatrick, Vaswani, Hovy,
"Learning Whom to Trust with MACE", NAACL-HLT 2013; crowd-kit's ``MACE``).

Model (§2, Fig. 1): item i has a true class ``T_i`` uniform over the C classes; on each label,
worker j is spamming with probability ``1 − θ_j`` (``S_ij = 1``); not spamming, j gives the
true class; spamming, j draws the label from its own strategy ``ξ_j`` (a distribution over
classes). So ``P(l | T_i = t) = (1 − θ_j) ξ_jl + θ_j [l = t]``.

Inference (§2.1 EM, §2.2 variational Bayes — the default, as in the paper and crowd-kit):

- E-step: ``log P(T_i = t, labels) = −log C + Σ_{labels (i, j, l)} log((1 − θ_j) ξ_jl +
  θ_j [l = t])`` (in log space: crowd-kit multiplies the factors, which underflows on items
  with hundreds of labels); posterior ``T`` by normalising over t. Per label, the posterior
  probability of spamming is ``P(S = 1 | ·) = (1 − T_il) + T_il · a / (a + θ_j)`` with
  ``a = (1 − θ_j) ξ_jl``, and of knowing ``T_il · θ_j / (a + θ_j)``; their sums per worker
  (and per worker and label, for spamming) are the expected counts.
- M-step (``method="em"``): counts plus ``smoothing`` (0.01 / C, crowd-kit's value),
  normalised. Variational M-step (``method="vb"``): with Beta(``alpha``, ``beta``) on
  (spam, know) and a symmetric Dirichlet(``strategy_prior``) on ξ_j, the mean-field factors
  are Beta/Dirichlet with the counts added, and the E-step uses ``exp E[log ·]``:
  ``θ̃ ∝ exp(ψ(count + prior) − ψ(Σ (count + prior)))`` (not normalised — §2.2: "the
  parameters no longer sum to one", which is what shrinks rarely-seen workers).
  Defaults are crowd-kit's: ``alpha = beta = 0.5``, ``strategy_prior = 10``.
- ``n_restarts`` runs of ``n_iter`` iterations, keeping the run with the highest log marginal
  likelihood (§2.1: random restarts). The first run starts at the symmetric point (every
  worker spams half of the time, uniform strategies: the first E-step is a majority vote),
  which depends on no worker's or item's name — so the default single run is invariant to
  renaming and reordering, as the aggregator contract asks; further runs start at random
  points (``ξ, (1 − θ, θ) ∝ 1 + (1 + default_noise) · U(0, 1)``, crowd-kit's draw) from the
  generator of ``rng``. crowd-kit's default is 10 restarts, but it re-seeds each one with the
  same ``random_state``, so its restarts all start at the same point: one run.

Example:
    >>> from crowdbudget.datasets import load_dataset
    >>> mace = MACE().fit(load_dataset("rte"))
    >>> mace.competence_.shape
    (164,)
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, logsumexp

from crowdbudget._random import as_generator
from crowdbudget.aggregation.base import Aggregator, FloatArray
from crowdbudget.aggregation.dawid_skene import check_iterations
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError

METHODS = ("vb", "em")


def _variational_normalize(counts: FloatArray, prior: FloatArray | float) -> FloatArray:
    """``exp(ψ(c + prior) − ψ(Σ (c + prior)))`` row-wise (the §2.2 variational M-step)."""
    total = counts + prior
    return np.asarray(
        np.exp(digamma(total) - digamma(total.sum(axis=1, keepdims=True))), dtype=float
    )


class MACE(Aggregator):
    """MACE (Hovy et al. 2013; module docstring).

    Args:
        n_restarts: runs (>= 1); the first from the symmetric start, the others random.
        n_iter: EM / VB iterations per restart (>= 1).
        method: ``"vb"`` (variational Bayes, default) or ``"em"``.
        alpha, beta: Beta prior on (spamming, knowing) for ``"vb"``.
        strategy_prior: symmetric Dirichlet prior on each worker's strategy ξ_j (``"vb"``).
        default_noise: width of the random start (see the module docstring).
        rng: seed or generator for the random starts and ties.

    Fitted: ``probas_`` (n_items, C), ``labels_`` (n_items,), ``competence_`` θ_j = P(worker
    j is not spamming), shape (n_workers,), ``strategies_`` ξ, shape (n_workers, C),
    ``log_marginal_likelihood_`` of the kept restart.
    """

    def __init__(
        self,
        n_restarts: int = 1,
        n_iter: int = 50,
        method: str = "vb",
        alpha: float = 0.5,
        beta: float = 0.5,
        strategy_prior: float = 10.0,
        default_noise: float = 0.5,
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(rng=rng)
        self.n_restarts = n_restarts
        self.n_iter = n_iter
        self.method = method
        self.alpha = alpha
        self.beta = beta
        self.strategy_prior = strategy_prior
        self.default_noise = default_noise

    def _check(self) -> None:
        check_iterations(self.n_restarts, 0.0, "MACE (n_restarts)")
        check_iterations(self.n_iter, 0.0, "MACE")
        if self.method not in METHODS:
            raise InvalidParameterError(
                f"MACE: method must be one of {', '.join(METHODS)}, got {self.method!r}"
            )
        for key in ("alpha", "beta", "strategy_prior"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise InvalidParameterError(f"MACE: {key} must be a number > 0, got {value!r}")

    def _e_step(
        self, data: LabelData, spam: FloatArray, know: FloatArray, strategies: FloatArray
    ) -> tuple[float, FloatArray, FloatArray, FloatArray, FloatArray]:
        """Log marginal likelihood, posterior T (n_items, C), and the expected counts:
        spamming per (worker, label) (n_workers, C), spamming and knowing per worker."""
        items, workers, labels = data.items, data.workers, data.labels
        C = data.n_classes
        # a = P(spam) ξ_jl > 0 (ξ and the spam probability are kept positive by the priors /
        # smoothing), so both logs are finite
        a = spam[workers] * strategies[workers, labels]
        k = know[workers]
        log_a, log_ak = np.log(a), np.log(a + k)
        scores = np.zeros((data.n_items, C))
        scores += np.bincount(items, weights=log_a, minlength=data.n_items)[:, None]
        np.add.at(scores, (items, labels), log_ak - log_a)
        scores -= np.log(C)
        log_evidence = logsumexp(scores, axis=1, keepdims=True)
        T = np.asarray(np.exp(scores - log_evidence), dtype=float)
        t_label = T[items, labels]
        knowing = t_label * k / (a + k)
        spamming = 1.0 - knowing
        n_w = data.n_workers
        spam_by_label = (
            np.bincount(workers * C + labels, weights=spamming, minlength=n_w * C)
            .reshape(n_w, C)
            .astype(float)
        )
        spam_count = np.bincount(workers, weights=spamming, minlength=n_w).astype(float)
        know_count = np.bincount(workers, weights=knowing, minlength=n_w).astype(float)
        # items without labels have evidence exactly 1/C·C = 1 (log 0): they add nothing
        return float(log_evidence.sum()), T, spam_by_label, spam_count, know_count

    def _m_step(
        self, spam_by_label: FloatArray, spam_count: FloatArray, know_count: FloatArray, C: int
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        pair = np.column_stack([spam_count, know_count])
        if self.method == "vb":
            prior = np.array([float(self.alpha), float(self.beta)])
            pair = _variational_normalize(pair, prior)
            strategies = _variational_normalize(spam_by_label, float(self.strategy_prior))
        else:
            smoothing = 0.01 / C  # crowd-kit's smoothing
            pair = (pair + smoothing) / (pair + smoothing).sum(axis=1, keepdims=True)
            strategies = (spam_by_label + smoothing) / (spam_by_label + smoothing).sum(
                axis=1, keepdims=True
            )
        return pair[:, 0], pair[:, 1], strategies

    def _fit_probas(self, data: LabelData) -> FloatArray:
        self._check()
        rng = as_generator(self.rng)
        C, n_w = data.n_classes, data.n_workers
        best: tuple[float, FloatArray, FloatArray, FloatArray] | None = None
        width = 1.0 + float(self.default_noise)
        for restart in range(int(self.n_restarts)):
            if restart == 0:
                pair, strategies = np.full((n_w, 2), 0.5), np.full((n_w, C), 1.0 / C)
            else:
                pair = 1.0 + width * rng.random((n_w, 2))
                pair /= pair.sum(axis=1, keepdims=True)
                strategies = 1.0 + width * rng.random((n_w, C))
                strategies /= strategies.sum(axis=1, keepdims=True)
            spam, know = pair[:, 0], pair[:, 1]
            for _ in range(int(self.n_iter)):
                _, _, by_label, n_spam, n_know = self._e_step(data, spam, know, strategies)
                spam, know, strategies = self._m_step(by_label, n_spam, n_know, C)
            log_lik = self._e_step(data, spam, know, strategies)[0]
            if best is None or log_lik > best[0]:
                best = (log_lik, spam, know, strategies)
        assert best is not None
        log_lik, spam, know, strategies = best
        _, T, *_ = self._e_step(data, spam, know, strategies)
        self.competence_ = know / (spam + know)
        self.strategies_ = strategies
        self.log_marginal_likelihood_ = log_lik
        return T
