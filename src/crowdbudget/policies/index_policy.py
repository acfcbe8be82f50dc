"""Policies whose decision is the argmax of a per-item score (index policies).

Subclasses give a vectorised score of the Beta states; the base class keeps the scores in a
:class:`~crowdbudget.policies._index.ScoreBuckets` structure and, after each label, recomputes
the score of the one item that changed — with a memo keyed by the item's state, so a state seen
before costs one dictionary look-up. A decision therefore costs O(log n_distinct_scores), not
O(n_items).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import numpy as np

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies._index import (
    DEFAULT_TIE_BREAK,
    PAPER_TIE_BREAK,
    ScoreBuckets,
    TieBreak,
    canonical_scores,
    check_tie_break,
)
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.posteriors.beta_bernoulli import BetaBernoulliPosterior
from crowdbudget.posteriors.dirichlet import DirichletPosterior
from crowdbudget.types import Assignment, CampaignState, FloatArray, IntArray, LabelEvent, Problem


class BetaIndexPolicy(AllocationPolicy):
    """Label the eligible item of largest score ``f(a_i, b_i, d_i)``.

    Args:
        tie_break: ``"random"`` — uniformly among the best (the default of the subclasses,
            bar deterministic KG); ``"first"`` — smallest item index among
            the best (deterministic; the papers' rule, ``tie-break=first``).

    Fitted attributes:
        posterior_: the :class:`BetaBernoulliPosterior` of the items (a
            :class:`DirichletPosterior` for more than two classes, when supported).
    """

    tie_break_default: ClassVar[TieBreak] = DEFAULT_TIE_BREAK
    #: the papers' rule among tied items, which the faithful reproductions pin
    #: (:func:`crowdbudget.registry.pin_paper_ties`)
    paper_tie_break: ClassVar[TieBreak] = PAPER_TIE_BREAK
    posterior_: BetaBernoulliPosterior | DirichletPosterior
    replay_pull: ClassVar[bool] = True

    def __init__(self, tie_break: TieBreak = DEFAULT_TIE_BREAK) -> None:
        self.tie_break = tie_break

    @abstractmethod
    def score_states(self, a: FloatArray, b: FloatArray, threshold: FloatArray) -> FloatArray:
        """Scores of Beta states, elementwise over arrays of one shape."""

    def validate_params(self) -> None:
        check_tie_break(self.tie_break)

    def score_dirichlet_states(self, alpha: FloatArray) -> FloatArray:
        """Scores of Dirichlet states, one per row of ``alpha`` (shape (n, C), C > 2), for
        policies that handle more than two classes (Chen et al. §5). Subclasses that define
        it set ``binary_only = False``; the default refuses."""
        raise InvalidParameterError(f"{type(self).__name__} handles binary problems only")

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        self._memo: dict[tuple[float, ...], float] = {}
        if problem.n_classes > 2:
            # §5: Dirichlet posterior per item; the same score structure, memoised by the
            # item's pseudo-count vector (thresholds do not apply to C > 2)
            self.posterior_ = DirichletPosterior(problem.prior_array, problem.n_items)
            alpha = self.posterior_.alpha
            states, inverse = np.unique(alpha, axis=0, return_inverse=True)
            scores = canonical_scores(self.score_dirichlet_states(states))
            for row, score in zip(states, scores, strict=True):
                self._memo[tuple(row.tolist())] = float(score)
            self._index = ScoreBuckets(scores[inverse.reshape(-1)], self.tie_break)
            return
        self.posterior_ = BetaBernoulliPosterior.from_problem(problem)
        self._index = ScoreBuckets(self._initial_scores(), self.tie_break)

    def _initial_scores(self) -> FloatArray:
        """Scores of all items at reset, computing each distinct (a, b, d) state once (with a
        shared prior that is one special-function call, not n_items)."""
        post = self.posterior_
        assert isinstance(post, BetaBernoulliPosterior)
        a, b, d = post.a, post.b, post.thresholds
        if a.shape[0] and np.all(a == a[0]) and np.all(b == b[0]) and np.all(d == d[0]):
            one = canonical_scores(self.score_states(a[:1], b[:1], d[:1]))
            return np.full(a.shape[0], one[0])
        states, inverse = np.unique(np.stack([a, b, d], axis=1), axis=0, return_inverse=True)
        unique_scores = canonical_scores(
            self.score_states(states[:, 0], states[:, 1], states[:, 2])
        )
        return unique_scores[inverse.reshape(-1)]

    def item_score(self, item: int) -> float:
        """The canonical score of ``item``'s current state (memoised by state)."""
        post = self.posterior_
        if isinstance(post, DirichletPosterior):
            row = post.alpha[item]
            dkey = tuple(row.tolist())
            cached = self._memo.get(dkey)
            if cached is None:
                cached = float(canonical_scores(self.score_dirichlet_states(row[None, :]))[0])
                self._memo[dkey] = cached
            return cached
        key = (float(post.a[item]), float(post.b[item]), float(post.thresholds[item]))
        score = self._memo.get(key)
        if score is None:
            raw = self.score_states(np.array([key[0]]), np.array([key[1]]), np.array([key[2]]))
            score = float(canonical_scores(raw)[0])
            self._memo[key] = score
        return score

    def scores(self) -> FloatArray:
        """Current canonical scores of all items, shape (n_items,) (O(n_items): for inspection)."""
        post = self.posterior_
        if isinstance(post, DirichletPosterior):
            return canonical_scores(self.score_dirichlet_states(post.alpha))
        return canonical_scores(self.score_states(post.a, post.b, post.thresholds))

    # ---- the compiled engine's hooks (crowdbudget.engine.fast) -------------------------------
    @property
    def pure_index(self) -> bool:
        """Whether every decision is the argmax of :meth:`index_scores` over the eligible items
        (ties as ``tie_break``) and ``posterior_`` is the policy's only state: the subclass
        defines its scores only (this class's ``reset``, ``select``, ``observe``,
        ``item_score`` and ``final_labels`` unchanged) — the compiled engine's hook."""
        names = ("_reset", "select", "observe", "item_score", "final_labels")
        return all(getattr(type(self), n) is getattr(BetaIndexPolicy, n) for n in names)

    def index_scores(self, a: FloatArray, b: FloatArray, threshold: FloatArray) -> FloatArray:
        """The scores the index compares for Beta states (``score_states`` made canonical, as
        ``select`` sees them) — the compiled engine's hook."""
        return canonical_scores(self.score_states(a, b, threshold))

    def restore_scores(self, scores: FloatArray, order: IntArray | None = None) -> None:
        """Rebuild the score index from the items' current :meth:`index_scores`, shape
        (n_items,) — the compiled engine's hook: it advances ``posterior_`` in place and hands
        the final scores back, so the policy goes on exactly as after the reference loop.
        ``order`` (random ties): the items in the order of the members of each tied group
        (:class:`ScoreBuckets`), as the compiled loop left them."""
        self._index = ScoreBuckets(np.asarray(scores, dtype=float), self.tie_break, order)

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        return state.availability.offer(worker, lambda price: self._best(state, worker, price))

    def _best(self, state: CampaignState, worker: int | None, price: float) -> Assignment | None:
        """The best open item (of ``worker``'s recorded pairs, on a replay)."""
        if worker is not None and state.pairs is not None:
            return self._select_for_worker(state, worker, price)
        closed = state.availability.closed
        if closed:  # live: the best item outside them, nothing removed
            item = self._index.best_excluding(closed, lambda i: bool(state.eligible[i]), self.rng_)
            return None if item is None else Assignment(item=item, worker=worker, price=price)
        while True:
            item = self._index.best(self.rng_)
            if item is None:
                return None
            if state.eligible[item]:
                return Assignment(item=item, worker=worker, price=price)
            self._index.remove(item)  # items never become eligible again (CampaignState)

    def _select_for_worker(
        self, state: CampaignState, worker: int, price: float
    ) -> Assignment | None:
        """Pull mode on a replay: the best of the items the arriving worker can label (scores
        read from the score structure; ties as ``tie_break``)."""
        items = state.availability.items_for_worker(worker)
        assert items is not None
        if items.shape[0] == 0:
            return None
        scores = self._index.scores_of(items)
        best = np.flatnonzero(scores == scores.max())
        pick = int(self.rng_.integers(best.shape[0])) if self.tie_break == "random" else 0
        return Assignment(item=int(items[best[pick]]), worker=worker, price=price)

    def observe(self, event: LabelEvent) -> None:
        self.posterior_.update(event)
        self._index.update(event.item, self.item_score(event.item))

    def final_labels(self, state: CampaignState) -> IntArray:
        return self.posterior_.predict()
