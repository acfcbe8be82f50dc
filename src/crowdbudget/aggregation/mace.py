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
- Empirical-Bayes priors (``prior_fit``; ``mace-eb`` is ``prior_fit="competence"``). Hovy et
  al. and crowd-kit hand-set the priors (Beta(0.5, 0.5) on (spam, know), a symmetric
  Dirichlet(10) on every ξ_j), the same for every crowd: a worker seen a few times is read
  through a prior that says "spams half of the time" whatever the crowd is like. With
  ``prior_fit="competence"`` the Beta prior is the upper level of a hierarchical model, set
  from the crowd itself as in
  :mod:`~crowdbudget.aggregation.bayesian_dawid_skene` (two-stage empirical Bayes): the
  expected ``(spamming, knowing)`` counts of every worker at the symmetric start's E-step (the
  majority vote), shape (n_workers, 2), are read as Dirichlet-multinomial (Pólya) draws and
  ``(alpha, beta)`` is their type-II maximum likelihood (Minka's fixed point,
  :func:`~crowdbudget.aggregation.bayesian_dawid_skene.polya_prior`, 20 steps from the
  hand-set values); then it stays fixed while the variational updates run. What it sets is
  mostly the prior's *strength*, from how much the workers' start counts spread: on the
  bundled sets Beta(≈2.2, ≈2.6), worth ≈ 5 labels instead of 1, so a worker seen a few times
  moves less from the crowd's level. Its *mean* is biased toward spamming: at the symmetric
  start a label that agrees with the majority counts as "knowing" with probability at most
  C/(C + 1), so the fitted spamming share stays ≥ about 1/(C + 1) however good the crowd (it
  still orders crowds: 0.34 for workers who know 95 % of the answers, 0.47 at 40 %). The
  unbiased alternatives were measured and are worse: re-fitting at every iteration (the joint
  type-II maximisation) collapses on adaptive wsd campaigns (0.919 ± 0.201 at 1 label per item
  over 20 replays, against 0.985) and on uniform 2-label rte subsamples (0.785 against MACE's
  0.810), as the joint fit collapsed BDS on trec; fitting once after hand-set MACE has
  converged is level with hand-set MACE at best (rte's 3,200-label campaigns 0.9216, all labels
  0.9288; temp all labels 0.9394). ``prior_fit="all"`` also fits the strategy prior (an
  asymmetric Dirichlet, shape (C,), from the spamming counts per label). It is not the
  default: MACE's true class is uniform a priori, so at the majority-vote start the spamming
  counts per label follow the classes' frequencies, and the fitted "spammers favour the
  common class" makes a split item lean to the rare class — measured on uniform 2-label
  subsamples, adult 0.7322 → 0.7127 and wsd 0.9870 → 0.9768 (``competence``: 0.7367,
  0.9847), though of the three it is the most accurate on all labels of every set
  (docs/calibration.md). The fit reads no worker's or item's name, so the verdict stays
  invariant to renaming. Measured against hand-set MACE: docs/reproductions.md ("An
  empirical-Bayes MACE") and docs/calibration.md.
  Needs ``method="vb"`` (EM has no priors).
- Class prior (``class_prior``). In Hovy et al.'s model the true class is uniform a priori,
  which is wrong for an imbalanced crowd: a split item leans to the rare class, and with three
  labels per item and 12 % positives that costs accuracy below majority vote
  (docs/stress-bed.md). ``class_prior="learned"`` gives ``T_i`` a categorical prior π learned
  with the workers' parameters (one more M-step line: π the posterior mean under a uniform
  Dirichlet, from the posterior of every labelled item), as Dawid–Skene's π.
- ``n_restarts`` runs of ``n_iter`` iterations, keeping the run with the highest log marginal
  likelihood (§2.1: random restarts). The first run starts at the symmetric point (every
  worker spams half of the time, uniform strategies: the first E-step is a majority vote),
  which depends on no worker's or item's name — so the default single run is invariant to
  renaming and reordering, as the aggregator contract asks; further runs start at random
  points (``ξ, (1 − θ, θ) ∝ 1 + (1 + default_noise) · U(0, 1)``, crowd-kit's draw) from the
  generator of ``rng``. crowd-kit's default is 10 restarts, but it re-seeds each one with the
  same ``random_state``, so its restarts all start at the same point: one run.

- Known truth (``fit(..., known_truth=...)``: control items): a known item's ``T_i`` is its
  one-hot truth in every E-step (and in the fit of the priors), so a worker's control
  answers count as definite knowing (a right answer, weighted by how likely knowing is
  against a lucky spam draw) or spamming (a wrong one); the learned class prior counts them
  at their class; the log marginal likelihood that picks the restart is that of the labels
  with the known classes fixed.

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
from crowdbudget.aggregation.base import FloatArray, KnownTruth, KnownTruthAggregator
from crowdbudget.aggregation.bayesian_dawid_skene import polya_prior
from crowdbudget.aggregation.dawid_skene import check_iterations
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError

METHODS = ("vb", "em")

#: which of MACE's priors are fitted to the crowd, once, on the majority-vote start
#: (``prior_fit``): none (Hovy et al.'s and crowd-kit's hand-set values), the competence
#: prior, or all (competence and strategy priors)
PRIOR_FITS = ("none", "competence", "all")

#: the prior of the true class (``class_prior``): uniform (Hovy et al.'s model) or learned
#: from the data with the workers' parameters (a Dirichlet(1) prior, updated like them)
CLASS_PRIORS = ("uniform", "learned")


def _variational_normalize(counts: FloatArray, prior: FloatArray | float) -> FloatArray:
    """``exp(ψ(c + prior) − ψ(Σ (c + prior)))`` row-wise (the §2.2 variational M-step)."""
    total = counts + prior
    return np.asarray(
        np.exp(digamma(total) - digamma(total.sum(axis=1, keepdims=True))), dtype=float
    )


class MACE(KnownTruthAggregator):
    """MACE (Hovy et al. 2013; module docstring).

    Args:
        n_restarts: runs (>= 1); the first from the symmetric start, the others random.
        n_iter: EM / VB iterations per restart (>= 1).
        method: ``"vb"`` (variational Bayes, default) or ``"em"``.
        alpha, beta: Beta prior on (spamming, knowing) for ``"vb"``.
        strategy_prior: symmetric Dirichlet prior on each worker's strategy ξ_j (``"vb"``).
        default_noise: width of the random start (see the module docstring).
        prior_fit: ``"none"`` (default: the hand-set ``alpha``, ``beta``, ``strategy_prior``),
            ``"competence"`` (the Beta prior of (spamming, knowing) by empirical Bayes on the
            majority-vote start, ``alpha``, ``beta`` its starting point; ``mace-eb``) or
            ``"all"`` (the strategy prior too) — module docstring.
        class_prior: ``"uniform"`` (default: Hovy et al.'s ``T_i`` uniform over the classes)
            or ``"learned"`` (``P(T_i = t) = π_t`` with π re-estimated after every M-step as
            the posterior mean under a Dirichlet(1) prior, ``(Σ_i T_it + 1) / (n + C)`` over
            the labelled items; ``mace-eb-cp``).
        rng: seed or generator for the random starts and ties.

    Fitted: ``probas_`` (n_items, C), ``labels_`` (n_items,), ``competence_`` θ_j = P(worker
    j is not spamming), shape (n_workers,), ``strategies_`` ξ, shape (n_workers, C),
    ``log_marginal_likelihood_`` of the kept restart, and the priors used:
    ``competence_prior_`` (Beta pseudo-counts of (spamming, knowing), shape (2,)) and
    ``strategy_prior_`` (Dirichlet pseudo-counts of a spammer's labels, shape (C,)) — the
    hand-set values, or the fitted ones (``prior_fit``) — and ``class_prior_`` (the class
    prior read by the final E-step, shape (C,): uniform, or the learned one).
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
        prior_fit: str = "none",
        class_prior: str = "uniform",
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
        self.prior_fit = prior_fit
        self.class_prior = class_prior

    def _check(self) -> None:
        check_iterations(self.n_restarts, 0.0, "MACE (n_restarts)")
        check_iterations(self.n_iter, 0.0, "MACE")
        if self.method not in METHODS:
            raise InvalidParameterError(
                f"MACE: method must be one of {', '.join(METHODS)}, got {self.method!r}"
            )
        if self.prior_fit not in PRIOR_FITS:
            raise InvalidParameterError(
                f"MACE: prior_fit must be one of {', '.join(PRIOR_FITS)}, got {self.prior_fit!r}"
            )
        if self.class_prior not in CLASS_PRIORS:
            raise InvalidParameterError(
                f"MACE: class_prior must be one of {', '.join(CLASS_PRIORS)}, "
                f"got {self.class_prior!r}"
            )
        if self.prior_fit != "none" and self.method != "vb":
            raise InvalidParameterError(
                f"MACE: prior_fit={self.prior_fit!r} fits the variational priors; it needs "
                f"method='vb', got {self.method!r}"
            )
        for key in ("alpha", "beta", "strategy_prior"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise InvalidParameterError(f"MACE: {key} must be a number > 0, got {value!r}")

    def _e_step(
        self,
        data: LabelData,
        spam: FloatArray,
        know: FloatArray,
        strategies: FloatArray,
        log_class_prior: FloatArray | None = None,
        known: KnownTruth | None = None,
    ) -> tuple[float, FloatArray, FloatArray, FloatArray, FloatArray]:
        """Log marginal likelihood, posterior T (n_items, C), and the expected counts:
        spamming per (worker, label) (n_workers, C), spamming and knowing per worker.
        ``log_class_prior``: log P(T_i = t), shape (C,); None is uniform. ``known``: items
        whose T_i is their one-hot truth (and whose evidence is that of their class)."""
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
        scores += -np.log(C) if log_class_prior is None else log_class_prior[None, :]
        log_evidence = logsumexp(scores, axis=1, keepdims=True)
        T = np.asarray(np.exp(scores - log_evidence), dtype=float)
        if known is not None:
            T = known.clamp(T)
            log_evidence[known.items, 0] = scores[known.items, known.classes]
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
        # items without labels have evidence exactly Σ_t P(t) = 1 (log 0): they add nothing
        return float(log_evidence.sum()), T, spam_by_label, spam_count, know_count

    def _m_step(
        self,
        spam_by_label: FloatArray,
        spam_count: FloatArray,
        know_count: FloatArray,
        priors: tuple[FloatArray, FloatArray],
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Spam and know probabilities (n_workers,) and strategies (n_workers, C) from the
        expected counts; ``priors``: (Beta pseudo-counts (2,), strategy pseudo-counts (C,))."""
        C = spam_by_label.shape[1]
        pair = np.column_stack([spam_count, know_count])
        if self.method == "vb":
            competence_prior, strategy_prior = priors
            pair = _variational_normalize(pair, competence_prior[None, :])
            strategies = _variational_normalize(spam_by_label, strategy_prior[None, :])
        else:
            smoothing = 0.01 / C  # crowd-kit's smoothing
            pair = (pair + smoothing) / (pair + smoothing).sum(axis=1, keepdims=True)
            strategies = (spam_by_label + smoothing) / (spam_by_label + smoothing).sum(
                axis=1, keepdims=True
            )
        return pair[:, 0], pair[:, 1], strategies

    def _priors(
        self, data: LabelData, known: KnownTruth | None = None
    ) -> tuple[FloatArray, FloatArray]:
        """The Beta pseudo-counts of (spamming, knowing), shape (2,), and the strategy
        pseudo-counts, shape (C,): hand-set, or (``prior_fit``) fitted to the expected counts
        of the symmetric start's E-step (module docstring)."""
        C, n_w = data.n_classes, data.n_workers
        competence = np.array([float(self.alpha), float(self.beta)])
        strategy = np.full(C, float(self.strategy_prior))
        if self.prior_fit != "none":
            half, uniform = np.full(n_w, 0.5), np.full((n_w, C), 1.0 / C)
            _, _, by_label, n_spam, n_know = self._e_step(data, half, half, uniform, known=known)
            # each worker's counts are one Pólya draw (a 1 × k "confusion row"); a worker with
            # no labels has zero counts and is left out of the fit by polya_prior
            pair_counts = np.column_stack([n_spam, n_know])[:, None, :]
            competence = polya_prior(pair_counts, competence[None, :])[0]
            if self.prior_fit == "all":
                strategy = polya_prior(by_label[:, None, :], strategy[None, :])[0]
        return competence, strategy

    @staticmethod
    def _log_class_prior(T: FloatArray) -> FloatArray:
        """log of the posterior mean of the class prior under a Dirichlet(1) prior, from the
        posteriors of the labelled items ``T`` (n_labelled, C): ``(Σ_i T_i + 1) / (n + C)``,
        every entry > 0, so the log is finite."""
        C = T.shape[1]
        return np.asarray(np.log((T.sum(axis=0) + 1.0) / (T.shape[0] + C)), dtype=float)

    def _fit(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        """The restarts of the module docstring; ``known`` items keep their one-hot truth."""
        self._check()
        rng = as_generator(self.rng)
        C, n_w = data.n_classes, data.n_workers
        priors = self._priors(data, known)
        best: tuple[float, FloatArray, FloatArray, FloatArray, FloatArray | None] | None = None
        labelled = np.bincount(data.items, minlength=data.n_items) > 0
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
            log_prior: FloatArray | None = None  # every run starts from the uniform prior
            for _ in range(int(self.n_iter)):
                _, T, by_label, n_spam, n_know = self._e_step(
                    data, spam, know, strategies, log_prior, known
                )
                spam, know, strategies = self._m_step(by_label, n_spam, n_know, priors)
                if self.class_prior == "learned":
                    log_prior = self._log_class_prior(T[labelled])
            log_lik = self._e_step(data, spam, know, strategies, log_prior, known)[0]
            if best is None or log_lik > best[0]:
                best = (log_lik, spam, know, strategies, log_prior)
        assert best is not None
        log_lik, spam, know, strategies, log_prior = best
        _, T, *_ = self._e_step(data, spam, know, strategies, log_prior, known)
        self.class_prior_ = (
            np.full(C, 1.0 / C) if log_prior is None else np.asarray(np.exp(log_prior))
        )
        self.competence_ = know / (spam + know)
        self.strategies_ = strategies
        self.log_marginal_likelihood_ = log_lik
        self.competence_prior_, self.strategy_prior_ = priors
        return T
