"""Wawa and Zero-Based Skill: weighted majority votes with skills learned from agreement.

Both are crowd-kit aggregators without a paper of their own; crowd-kit's documentation
defines them, and these follow that definition (crowd-kit's defaults are the defaults):

- **Wawa** ("worker agreement with aggregate"): majority vote; worker j's skill ``s_j`` is the
  share of j's labels equal to the majority label of the item; the verdict is the vote
  weighted by the skills — exactly :class:`~crowdbudget.aggregation.WeightedMajorityVote` with
  ``weights=None``, which :class:`Wawa` is (under crowd-kit's name).
- **Zero-Based Skill** (ZBS): skills start at ``1/C + eps`` for every worker; then, ``n_iter``
  times, the skill-weighted vote gives labels ``ŷ`` and each skill takes a gradient step on
  ``½ (s_j − acc_j(ŷ))²``: ``s_j ← s_j + η (acc_j(ŷ) − s_j)``, where ``acc_j(ŷ)`` is the
  share of j's labels equal to ``ŷ``; the step ``η`` starts at ``lr_init`` and is multiplied by
  ``lr_reduce_factor`` at every ``lr_steps_to_reduce``-th iteration. The verdict is the vote
  weighted by the final skills; ``probas_`` are the normalised weighted votes.

Ties of the inner votes (Wawa's majority vote, every ZBS iteration's weighted vote) change the
skills, so they are a parameter: ``ties="random"`` (default) breaks them with the generator of
``rng`` like every aggregator here; ``ties="first"`` takes the first class in class order —
crowd-kit's rule (pandas ``idxmax``), used by the crowd-kit agreement tests. The final
``labels_`` break exact ties of ``probas_`` at random either way.

Known truth (``fit(..., known_truth=...)``: control items): both read a known item's label as
its truth wherever the skills compare a worker with the aggregate (Wawa's majority label,
every ZBS iteration's ``ŷ``), so a worker's control answers count as definite agreements or
disagreements; ``probas_`` of a known item is its one-hot truth.

Example:
    >>> from crowdbudget.datasets import load_dataset
    >>> zbs = ZeroBasedSkill().fit(load_dataset("rte"))
    >>> zbs.skills_.shape
    (164,)
"""

from __future__ import annotations

import numpy as np

from crowdbudget._random import as_generator
from crowdbudget.aggregation.base import (
    FloatArray,
    IntArray,
    KnownTruth,
    KnownTruthAggregator,
    argmax_random_ties,
    vote_counts,
)
from crowdbudget.aggregation.weighted_majority_vote import WeightedMajorityVote
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError


class Wawa(WeightedMajorityVote):
    """Worker Agreement With Aggregate (crowd-kit's ``Wawa``): the weighted majority vote with
    each worker's agreement with the majority vote as weight (module docstring).

    Fitted: ``probas_``, ``labels_``, ``weights_`` (= ``skills_``), shape (n_workers,).
    """

    def __init__(self, ties: str = "random", rng: int | np.random.Generator | None = 0) -> None:
        super().__init__(weights=None, rng=rng)
        self.ties = ties

    def get_params(self) -> dict[str, object]:
        return {"ties": self.ties, "rng": self.rng}

    def _worker_weights(self, data: LabelData, known: KnownTruth | None = None) -> FloatArray:
        shares = weighted_shares(data, np.ones(data.n_workers))
        majority = break_ties(shares, self.ties, as_generator(self.rng))
        return agreement(data, majority if known is None else with_truth(majority, known))

    def _fit(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        probas = super()._fit(data, known)
        self.skills_ = self.weights_
        return probas


TIES = ("random", "first")


def break_ties(shares: FloatArray, ties: str, rng: np.random.Generator) -> IntArray:
    """Row-wise argmax of ``shares``: ties at random (``"random"``) or the first class."""
    if ties == "first":
        return np.argmax(shares, axis=1).astype(np.int64)
    if ties == "random":
        return argmax_random_ties(shares, rng)
    raise InvalidParameterError(f"ties must be one of {', '.join(TIES)}, got {ties!r}")


def with_truth(labels: IntArray, known: KnownTruth) -> IntArray:
    """``labels`` (n_items,) with every known item's label replaced by its truth (a copy)."""
    out = np.array(labels, dtype=np.int64, copy=True)
    out[known.items] = known.classes
    return out


def weighted_shares(data: LabelData, weights: FloatArray) -> FloatArray:
    """Weighted vote shares (n_items, C) with per-worker ``weights`` (n_workers,); an item
    whose labels all weigh 0 gets the uniform row."""
    votes = vote_counts(data, weights[data.workers])
    totals = votes.sum(axis=1, keepdims=True)
    return np.where(totals > 0, votes / np.where(totals > 0, totals, 1.0), 1.0 / data.n_classes)


def agreement(data: LabelData, labels: IntArray) -> FloatArray:
    """Share of each worker's labels equal to ``labels[item]``, shape (n_workers,)."""
    hit = (labels[data.items] == data.labels).astype(float)
    n = np.bincount(data.workers, minlength=data.n_workers)
    return np.bincount(data.workers, weights=hit, minlength=data.n_workers) / np.maximum(n, 1)


class ZeroBasedSkill(KnownTruthAggregator):
    """Zero-Based Skill (crowd-kit's ``ZeroBasedSkill``; module docstring).

    Args:
        n_iter: skill updates (>= 1; all are run, as in crowd-kit).
        lr_init: first step size η (> 0).
        lr_steps_to_reduce: η is multiplied by ``lr_reduce_factor`` at every iteration
            number divisible by this (>= 1).
        lr_reduce_factor: in (0, 1].
        eps: added to the initial skill ``1/C``.
        ties: ``"random"`` or ``"first"`` (crowd-kit's): ties of the inner votes.
        rng: seed or generator for ties.

    Fitted: ``probas_`` (n_items, C), ``labels_`` (n_items,), ``skills_`` (n_workers,).
    """

    def __init__(
        self,
        n_iter: int = 100,
        lr_init: float = 1.0,
        lr_steps_to_reduce: int = 20,
        lr_reduce_factor: float = 0.5,
        eps: float = 1e-5,
        ties: str = "random",
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(rng=rng)
        self.n_iter = n_iter
        self.lr_init = lr_init
        self.lr_steps_to_reduce = lr_steps_to_reduce
        self.lr_reduce_factor = lr_reduce_factor
        self.eps = eps
        self.ties = ties

    def _check(self) -> None:
        name = type(self).__name__
        for key in ("n_iter", "lr_steps_to_reduce"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise InvalidParameterError(f"{name}: {key} must be an integer >= 1, got {value!r}")
        if not (isinstance(self.lr_init, int | float) and self.lr_init > 0):
            raise InvalidParameterError(f"{name}: lr_init must be > 0, got {self.lr_init!r}")
        factor = self.lr_reduce_factor
        if not (isinstance(factor, int | float) and 0 < factor <= 1):
            raise InvalidParameterError(
                f"{name}: lr_reduce_factor must be in (0, 1], got {factor!r}"
            )

    def _fit(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        """The skill steps of the module docstring; ``known`` items' ``ŷ`` is their truth."""
        self._check()
        rng = as_generator(self.rng)
        skills = np.full(data.n_workers, 1.0 / data.n_classes + float(self.eps))
        step = float(self.lr_init)
        for iteration in range(1, int(self.n_iter) + 1):
            if iteration % int(self.lr_steps_to_reduce) == 0:
                step *= float(self.lr_reduce_factor)
            labels = break_ties(weighted_shares(data, skills), self.ties, rng)
            if known is not None:
                labels = with_truth(labels, known)
            skills = skills + step * (agreement(data, labels) - skills)
        self.skills_ = skills
        return weighted_shares(data, skills)
