"""KG and Opt-KG with instance features: θ_i = σ(wᵀx_i), w ~ N(μ, Σ) (Chen, Lin, Zhou 2013, §5).

The belief and its Laplace update are :mod:`crowdbudget.posteriors.logistic` (derivation there).
The MDP is the paper's with that state: the expected final accuracy is ``Σ_k h(P_k)`` with
``P_k = P(θ_k ≥ d_k) = Φ((m_k − logit d_k)/√v_k)``, and the stage reward of labeling item i with
outcome z is the change of that sum,

    R_z(i) = Σ_k [ h(P_k after (i, z)) − h(P_k) ],   z ∈ {0, 1}.

Unlike the Beta–Bernoulli model (and the one-coin model, whose reward counts item i only),
one label moves w and so every item's belief: the sum is over **all** items — that is what
the MDP's reward is, and it is what lets the policy label items it never asked about (a
classifier's prediction). Opt-KG takes the item of largest ``max(R_1, R_0)``, KG the largest
``p_1 R_1 + (1 − p_1) R_0`` (p_1 = E[σ(s_i)]).

``reward="local"`` is our cheaper variant (not in the paper): only the labeled item's own term
``h(P_i after) − h(P_i)`` counts, as in the other models of the paper. It needs O(n_items ·
n_features) per decision instead of O(n_items²) and no n_items² matrix, for large item sets.

Cost of the global reward, per decision: evaluating R_z for every candidate i is an
(n_items × n_items) array of Φ's (through C = XΣXᵀ, kept by rank-one updates, see the
posterior), O(n_items²) time and memory. That is the price of the paper's coupling: every item's
reward depends on every other item. Practical up to a few thousand items (pima, 768 items:
about 15 ms per decision); above ``max_global_items`` (default 5,000) the policy refuses
``reward="global"`` with a clear error rather than allocating gigabytes.

Features: ``Problem.features`` (n_items, n_features); by default standardised per column and
given an intercept column (:func:`crowdbudget.posteriors.logistic.prepare_features`); prior
w ~ N(0, ``prior_var`` · I).

Ties (every item starts at m = 0): the first item by index, or uniformly at random with
``tie_break="random"``. Push or pull mode alike: the worker is not modelled (labels are the
model's noisy answers, the homogeneous-worker setting of §2 extended by features).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies._index import (
    DEFAULT_TIE_BREAK,
    PAPER_TIE_BREAK,
    TieBreak,
    canonical_scores,
    check_tie_break,
)
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.posteriors.logistic import (
    LogisticGaussianPosterior,
    laplace_step,
    logistic_error,
    prepare_features,
)
from crowdbudget.types import Assignment, CampaignState, FloatArray, IntArray, LabelEvent, Problem

Reward = Literal["global", "local"]


class FeatureKnowledgeGradient(AllocationPolicy):
    """(Optimistic) knowledge gradient on the logistic feature model of §5 (module docstring).

    Args:
        optimistic: True for Opt-KG (max of the two rewards), False for KG (expectation).
        prior_var: σ² of the prior w ~ N(0, σ²I) (on the standardised features).
        reward: ``"global"`` (the MDP's reward, every item's accuracy; the paper) or ``"local"``
            (the labeled item's only; cheaper).
        standardize, intercept: feature preparation (module docstring).
        tie_break: ``"random"`` (default: a result does not depend on the item order) or
            ``"first"`` (smallest index, the papers' rule, ``tie-break=first``;
            ``kg:features=logistic`` keeps it, as deterministic KG).
        max_global_items: largest n_items for ``reward="global"`` (memory O(n_items²)).

    Fitted attributes:
        posterior_: the :class:`~crowdbudget.posteriors.logistic.LogisticGaussianPosterior`.
    """

    replay_pull = True
    needs_features = True
    #: the papers' rule among tied items (:func:`crowdbudget.registry.pin_paper_ties`)
    paper_tie_break: ClassVar[TieBreak] = PAPER_TIE_BREAK

    def __init__(
        self,
        optimistic: bool = True,
        prior_var: float = 1.0,
        reward: Reward = "global",
        standardize: bool = True,
        intercept: bool = True,
        tie_break: TieBreak = DEFAULT_TIE_BREAK,
        max_global_items: int = 5000,
        refit: int = 0,
    ) -> None:
        self.optimistic = optimistic
        self.prior_var = prior_var
        self.reward = reward
        self.standardize = standardize
        self.intercept = intercept
        self.tie_break = tie_break
        self.max_global_items = max_global_items
        self.refit = refit

    def validate_params(self) -> None:
        if not (np.isfinite(self.prior_var) and self.prior_var > 0):
            raise InvalidParameterError(f"prior_var must be a number > 0, got {self.prior_var}")
        if self.reward not in ("global", "local"):
            raise InvalidParameterError(f"reward must be 'global' or 'local', got {self.reward!r}")
        check_tie_break(self.tie_break)
        if not (isinstance(self.refit, int) and self.refit >= 0):
            raise InvalidParameterError(
                f"refit must be an integer >= 0 (0: never), got {self.refit!r}"
            )

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        if problem.features is None:
            raise InvalidParameterError(
                "a feature-based policy needs a problem with features (Problem.features of "
                "shape (n_items, n_features)); use opt-kg for items without features"
            )
        if self.reward == "global" and problem.n_items > self.max_global_items:
            raise InvalidParameterError(
                f"reward=global needs an n_items² matrix; {problem.n_items} items exceed "
                f"max_global_items={self.max_global_items}: use reward=local"
            )
        x = prepare_features(
            problem.features, standardize=self.standardize, intercept=self.intercept
        )
        self.posterior_ = LogisticGaussianPosterior(
            x,
            0.0,
            self.prior_var,
            problem.threshold_array,
            keep_cross=self.reward == "global",
        )
        self._rng = rng
        self._items: list[int] = []
        self._labels: list[int] = []

    # ---- rewards ---------------------------------------------------------------------------

    def _h_sum_after(self, cand: IntArray, label: int) -> FloatArray:
        """Σ_k h(P_k) − Σ_k h(P_k now) after label ``label`` on each candidate, shape (n_cand,).

        The NumPy statement of the global reward (SciPy's Φ); :meth:`_global_rewards` computes
        it (both labels at once, compiled, our Φ) and is tested equal to this within 1e-13 of
        the error sum."""
        post = self.posterior_
        m, v = post.score_mean, post.score_var
        alpha, beta, _ = laplace_step(m[cand], v[cand], label)
        assert post.cross is not None
        c = post.cross[:, cand]  # (n_items, n_cand): Cov(s_k, s_i)
        m_after = m[:, None] + c * alpha[None, :]
        v_after = v[:, None] - c * c * beta[None, :]
        # h = 1 − error; the change of Σ h is Σ error now − Σ error after
        err_now = float(np.sum(logistic_error(m, v, post.cuts)))
        err_after = logistic_error(m_after, v_after, post.cuts[:, None]).sum(axis=0)
        return np.asarray(err_now - err_after, dtype=float)

    def _global_rewards(self, cand: IntArray) -> tuple[FloatArray, FloatArray]:
        """``(_h_sum_after(cand, 1), _h_sum_after(cand, 0))`` in one compiled pass over C
        (:mod:`crowdbudget.posteriors._logistic_kernel`; within 1e-13 of the error sum,
        tested)."""
        from crowdbudget.posteriors._logistic_kernel import NUMPY_SUM_CHUNK, error_sums_after

        post = self.posterior_
        m, v = post.score_mean, post.score_var
        assert post.cross is not None
        steps = [laplace_step(m[cand], v[cand], label) for label in (1, 0)]
        alpha = np.stack([steps[0][0], steps[1][0]])
        beta = np.stack([steps[0][1], steps[1][1]])
        after = np.empty((2, cand.shape[0]))
        error_sums_after(m, v, post.cuts, post.cross, cand, alpha, beta, after, NUMPY_SUM_CHUNK)
        err_now = float(np.sum(logistic_error(m, v, post.cuts)))
        return np.asarray(err_now - after[0]), np.asarray(err_now - after[1])

    def _local_after(self, cand: IntArray, label: int) -> FloatArray:
        post = self.posterior_
        m, v, cut = post.score_mean[cand], post.score_var[cand], post.cuts[cand]
        alpha, beta, _ = laplace_step(m, v, label)
        # c_ii = v_i: the candidate's own score moves by α v_i, its variance by β v_i²
        after = logistic_error(m + alpha * v, v - beta * v * v, cut)
        return np.asarray(logistic_error(m, v, cut) - after, dtype=float)

    def scores(self, candidates: IntArray) -> FloatArray:
        """The policy's score of each candidate item (larger is better), shape (n_cand,)."""
        if self.reward == "global":
            r1, r0 = self._global_rewards(candidates)
        else:
            r1, r0 = self._local_after(candidates, 1), self._local_after(candidates, 0)
        if self.optimistic:
            return canonical_scores(np.maximum(r1, r0))
        post = self.posterior_
        p1 = post.label_probability(candidates)
        return canonical_scores(p1 * r1 + (1.0 - p1) * r0)

    # ---- contract --------------------------------------------------------------------------

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        return state.availability.offer(worker, lambda price: self._best(state, worker, price))

    def _best(self, state: CampaignState, worker: int | None, price: float) -> Assignment | None:
        """The open item (of ``worker``'s recorded pairs, on a replay) of largest score."""
        candidates = state.availability.items_for_worker(worker)
        if candidates is None:
            candidates = state.availability.open_items()
        if candidates.shape[0] == 0:
            return None
        scores = self.scores(candidates)
        best = int(np.argmax(scores))
        if self.tie_break == "random":
            tied = np.flatnonzero(scores == scores[best])
            if tied.shape[0] > 1:
                best = int(tied[self._rng.integers(tied.shape[0])])
        return Assignment(item=int(candidates[best]), worker=worker, price=price)

    def observe(self, event: LabelEvent) -> None:
        self.posterior_.update(event)
        if self.refit > 0:
            self._items.append(event.item)
            self._labels.append(event.label)
            if len(self._items) % self.refit == 0:
                dim = self.posterior_.features.shape[1]
                self.posterior_.refit(
                    np.asarray(self._items),
                    np.asarray(self._labels),
                    np.zeros(dim),
                    self.prior_var * np.eye(dim),
                )

    def final_labels(self, state: CampaignState) -> IntArray:
        return self.posterior_.predict()
