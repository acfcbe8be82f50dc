"""Labeling environments (Gymnasium-like): ``reset(seed=...)``, ``step(assignment)``.

An environment holds the hidden truth (``true_labels``, for evaluation only — policies never see
it) and answers assignments with labels. ``step`` returns a :class:`StepResult` whose
``terminated`` flag says the world has nothing more to give and ``truncated`` that it was
stopped from outside (a time horizon).

Common random numbers: a synthetic world draws, at ``reset``, the items' soft labels and a fixed
stream of answers per item (the k-th label of item i is the same whichever policy asks for it and
whenever), so policies compared on one seed face the same world.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from crowdbudget._random import as_seed_sequence, child_seed
from crowdbudget._validation import check_positive_int, check_prior, check_thresholds
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.simulation.workers import WorkerPool, WorkerPrior
from crowdbudget.types import (
    Assignment,
    BoolArray,
    FloatArray,
    IntArray,
    LabelEvent,
    PairAvailability,
    Problem,
    StepResult,
)

#: what SyntheticBernoulliEnvironment.answers_follow_tiles needs a subclass to inherit unchanged
_TILE_STREAM_METHODS = (
    "reset",
    "step",
    "_uniform",
    "_tile_uniform",
    "noiseless_answer_tile",
    "set_answers_given",
)


class LabelingEnvironment(ABC):
    """Base class of simulated labeling worlds.

    Attributes (after ``reset``):
        true_labels: the items' true classes, shape (n_items,) — evaluation only.
        eligible: items that can still produce a label, shape (n_items,) (None: all, always).
        evaluation_mask: items whose true class is known, shape (n_items,) (None: all);
            accuracy is measured over these (real data sets have gold for some items only).
        pairs: the (item, worker) pairs that can still be asked (None: any pair); the runner
            hands it to policies as ``state.pairs``.
    """

    n_items: int
    n_classes: int = 2
    true_labels: IntArray
    eligible: BoolArray | None = None
    evaluation_mask: BoolArray | None = None
    pairs: PairAvailability | None = None

    def check_budget(self, budget: float) -> None:  # noqa: B027 - optional hook
        """Raise :class:`~crowdbudget.exceptions.BudgetError` when this world cannot supply
        ``budget`` labels (replay of a finite data set); synthetic worlds accept any budget."""

    @abstractmethod
    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> dict[str, Any]:
        """Draw a new world; returns an info dict."""

    @abstractmethod
    def step(self, assignment: Assignment) -> StepResult:
        """Answer one assignment with a label."""

    def arriving_worker(self) -> int:
        """Pull mode: the id of the next worker who asks for work (anonymous: 0)."""
        return 0

    def problem(self, budget: float) -> Problem:
        """The problem a policy should be given in this world (prior, thresholds, workers)."""
        return Problem(n_items=self.n_items, budget=budget, n_classes=self.n_classes)


class SyntheticBernoulliEnvironment(LabelingEnvironment):
    """Items with soft labels θ_i answered by noiseless or noisy workers (Chen et al. 2013,
    §2 and §4).

    At ``reset`` each θ_i is drawn from Beta(a_i, b_i) (or taken from ``theta``); the true class
    is ``1{θ_i >= d_i}``; the k-th label of item i is ``1{u_ik < θ_i}`` with ``u_ik`` uniform,
    drawn in tiles of (65,536 items × 16 labels) from the reset seed on first use, so memory is
    O(labels asked for) and the answers do not depend on the order of the questions.

    Args:
        n_items: K.
        prior: Beta pseudo-counts for drawing θ, shape (2,) or (n_items, 2), columns (b, a) as
            in :class:`~crowdbudget.types.Problem` (class 0 count, class 1 count).
        theta: fixed soft labels, shape (n_items,) (then ``prior`` is only the policies' prior).
        thresholds: d per item (default 0.5).
        workers: None for anonymous noiseless workers (§2), or a
            :class:`~crowdbudget.simulation.workers.WorkerPool` / ``WorkerPrior`` (drawn
            afresh at each reset). A worker answers the noiseless label ``1{u_ik < θ_i}``
            through its confusion matrix, with a second uniform stream per (item, k); an
            assignment without a worker goes to a worker drawn uniformly by a third stream;
            in pull mode workers arrive uniformly at random.
    """

    _TILE_ITEMS = 65_536
    _TILE_LABELS = 16

    def __init__(
        self,
        n_items: int,
        prior: ArrayLike = (1.0, 1.0),
        theta: ArrayLike | None = None,
        thresholds: ArrayLike | None = None,
        workers: WorkerPool | WorkerPrior | None = None,
    ) -> None:
        self.n_items = check_positive_int(n_items, "n_items")
        self.workers = workers
        self.pool: WorkerPool | None = None
        self.prior = check_prior(prior, self.n_items, 2)
        self.thresholds = check_thresholds(thresholds, self.n_items)
        if theta is not None:
            theta_arr = np.asarray(theta, dtype=float)
            if theta_arr.shape != (self.n_items,) or np.any((theta_arr < 0) | (theta_arr > 1)):
                raise InvalidParameterError(
                    f"theta must be {self.n_items} numbers in [0, 1], got shape {theta_arr.shape}"
                )
            self.fixed_theta: FloatArray | None = theta_arr
        else:
            self.fixed_theta = None
        self.theta: FloatArray = np.full(self.n_items, np.nan)
        self.true_labels = np.zeros(self.n_items, dtype=np.int64)

    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> dict[str, Any]:
        seq = as_seed_sequence(seed)
        # pure derivation, not seq.spawn(): resetting twice with one seed gives one world
        theta_seq, self._stream_seq = child_seed(seq, 0), child_seed(seq, 1)
        if self.fixed_theta is None:
            rng = np.random.default_rng(theta_seq)
            self.theta = rng.beta(self.prior[:, 1], self.prior[:, 0])
        else:
            self.theta = self.fixed_theta.copy()
        self.true_labels = (self.theta >= self.thresholds).astype(np.int64)
        self._asked = np.zeros(self.n_items, dtype=np.int64)
        self._tiles: dict[tuple[int, int], FloatArray] = {}
        info: dict[str, Any] = {"theta": self.theta}
        if self.workers is not None:
            self.pool = self.workers.draw(np.random.default_rng(child_seed(seq, 2)))
            self._noise_seq, self._choice_seq = child_seed(seq, 3), child_seed(seq, 4)
            self._noise_tiles: dict[tuple[int, int], FloatArray] = {}
            self._choice_tiles: dict[tuple[int, int], FloatArray] = {}
            self._arrivals = np.random.default_rng(child_seed(seq, 5))
            info["reliability"] = self.pool.accuracy()
        return info

    def _tile_uniform(
        self,
        parent: np.random.SeedSequence,
        tiles: dict[tuple[int, int], FloatArray],
        item: int,
        k: int,
    ) -> float:
        key = (item // self._TILE_ITEMS, k // self._TILE_LABELS)
        tile = tiles.get(key)
        if tile is None:
            rows = min(self._TILE_ITEMS, self.n_items - key[0] * self._TILE_ITEMS)
            tile = np.random.default_rng(child_seed(parent, *key)).random((rows, self._TILE_LABELS))
            tiles[key] = tile
        return float(tile[item % self._TILE_ITEMS, k % self._TILE_LABELS])

    def _uniform(self, item: int, k: int) -> float:
        """The uniform number behind the k-th noiseless answer of ``item``."""
        return self._tile_uniform(self._stream_seq, self._tiles, item, k)

    def label_stream(self, item: int, n: int) -> IntArray:
        """The first ``n`` answers item ``item`` gives in this world (for tests)."""
        return np.array(
            [int(self._uniform(item, k) < self.theta[item]) for k in range(n)], dtype=np.int64
        )

    # ---- the compiled engine's hooks (crowdbudget.engine.fast) -------------------------------
    @property
    def answer_tile_shape(self) -> tuple[int, int]:
        """(items, labels) of one tile of the answer stream: the k-th answer of item i is in
        tile ``(i // items, k // labels)`` — the compiled engine's hook."""
        return self._TILE_ITEMS, self._TILE_LABELS

    @property
    def answers_follow_tiles(self) -> bool:
        """Whether :meth:`step` answers the k-th assignment of item i with
        :meth:`noiseless_answer_tile`'s entry for it: anonymous noiseless workers
        (``workers=None``) and this class's ``reset``, ``step`` and answer stream, not
        overridden — the compiled engine's hook."""
        base = SyntheticBernoulliEnvironment
        return self.workers is None and all(
            getattr(type(self), name) is getattr(base, name) for name in _TILE_STREAM_METHODS
        )

    def noiseless_answer_tile(self, item_block: int, label_block: int) -> NDArray[np.int8]:
        """The noiseless answers ``1{u_ik < θ_i}`` of one tile (after ``reset``): items
        ``item_block * items ...`` (as many as exist), answers ``label_block * labels ...``,
        shape (rows, labels), 0/1 as int8 (``answer_tile_shape`` = (items, labels)).

        The very numbers :meth:`step` gives, from the same cached uniforms — the compiled
        engine's hook: it reads the answers in tiles instead of one ``step`` at a time.
        """
        first = item_block * self._TILE_ITEMS
        self._tile_uniform(self._stream_seq, self._tiles, first, label_block * self._TILE_LABELS)
        uniforms = self._tiles[(item_block, label_block)]
        rows = uniforms.shape[0]
        return (uniforms < self.theta[first : first + rows, None]).astype(np.int8)

    @property
    def answers_given(self) -> IntArray:
        """How many answers each item has given since ``reset``, shape (n_items,) (a copy)."""
        return self._asked.copy()

    def set_answers_given(self, counts: ArrayLike) -> None:
        """Set how many answers each item has given, as if :meth:`step` had been called that
        many times per item: the next answer of item i is its ``counts[i]``-th — the
        compiled engine's hook, after it has read the answers from the tiles itself."""
        asked = np.asarray(counts)
        if asked.shape != (self.n_items,) or np.any(asked < 0):
            raise InvalidParameterError(
                f"counts must be {self.n_items} numbers >= 0, got shape {asked.shape}"
            )
        self._asked = asked.astype(np.int64)

    def step(self, assignment: Assignment) -> StepResult:
        item = assignment.item
        k = int(self._asked[item])
        self._asked[item] = k + 1
        label = int(self._uniform(item, k) < self.theta[item])
        if self.pool is None:
            worker = assignment.worker if assignment.worker is not None else 0
        else:
            if assignment.worker is None:
                u = self._tile_uniform(self._choice_seq, self._choice_tiles, item, k)
                worker = min(int(u * self.pool.n_workers), self.pool.n_workers - 1)
            else:
                worker = assignment.worker
            if not 0 <= worker < self.pool.n_workers:
                raise InvalidParameterError(
                    f"worker {worker} does not exist; workers are 0..{self.pool.n_workers - 1}"
                )
            noise = self._tile_uniform(self._noise_seq, self._noise_tiles, item, k)
            label = self.pool.answer(worker, label, noise)
        return StepResult(LabelEvent(item=item, worker=worker, label=label, cost=assignment.price))

    def arriving_worker(self) -> int:
        if self.pool is None:
            return 0
        return int(self._arrivals.integers(self.pool.n_workers))

    def problem(self, budget: float) -> Problem:
        pool = self.pool
        if pool is None and self.workers is not None:  # before the first reset
            pool = self.workers.draw(np.random.default_rng(0))
        return Problem(
            n_items=self.n_items,
            budget=budget,
            prior=self.prior,
            thresholds=self.thresholds,
            n_workers=None if pool is None else pool.n_workers,
            worker_prices=None if pool is None else pool.prices,
        )


class FeatureEnvironment(SyntheticBernoulliEnvironment):
    """Items with instance features (Chen, Lin, Zhou 2013, §5), in one of two worlds.

    - ``world="logistic"`` — the paper's feature model itself: at each reset
      w ~ N(0, ``weight_var`` · I) is drawn over the prepared features (standardised, with an
      intercept: :func:`crowdbudget.posteriors.logistic.prepare_features`), θ_i = σ(wᵀx_i), the
      true class is 1{θ_i ≥ 1/2} and an anonymous worker answers 1 with probability θ_i. With
      ``weight_var`` equal to a policy's ``prior_var`` the policy's model is the world's.
    - ``world="gold"`` — real gold labels (``gold``, 0/1 per item): the noiseless answer is the
      gold label and the workers (``workers``, e.g. ``WorkerPrior(10)``: one-coin ρ_j ~ Beta(4, 1)
      drawn at each reset) make their mistakes; the logistic model is then misspecified (a real
      class boundary is not linear), which is the honest test of the feature model.

    :meth:`problem` hands the raw features to policies (``Problem.features``); everything else
    (answer streams, common random numbers) is :class:`SyntheticBernoulliEnvironment`'s.

    Args:
        features: shape (n_items, n_features), raw.
        world: ``"logistic"`` or ``"gold"``.
        gold: 0/1 per item (``world="gold"``).
        weight_var: prior variance of the world's w (``world="logistic"``).
        workers: worker pool or prior (None: anonymous workers as in §2).
    """

    def __init__(
        self,
        features: ArrayLike,
        *,
        world: str = "logistic",
        gold: ArrayLike | None = None,
        weight_var: float = 1.0,
        workers: WorkerPool | WorkerPrior | None = None,
    ) -> None:
        from crowdbudget.posteriors.logistic import prepare_features

        x = np.asarray(features, dtype=float)
        self.design = prepare_features(x)  # validates the shape and finiteness
        self.features = x
        if world not in ("logistic", "gold"):
            raise InvalidParameterError(f"world must be 'logistic' or 'gold', got {world!r}")
        self.world = world
        self.weight_var = float(weight_var)
        if not self.weight_var > 0:
            raise InvalidParameterError(f"weight_var must be > 0, got {weight_var}")
        theta = None
        if world == "gold":
            if gold is None:
                raise InvalidParameterError("world='gold' needs the gold labels (gold=)")
            g = np.asarray(gold)
            if g.shape != (x.shape[0],) or not np.all((g == 0) | (g == 1)):
                raise InvalidParameterError(f"gold must be {x.shape[0]} labels 0 or 1")
            theta = g.astype(float)
        super().__init__(x.shape[0], theta=theta, workers=workers)

    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> dict[str, Any]:
        if self.world == "logistic":
            from scipy import special

            # the weights come from their own child stream (6), so the answer streams of the
            # parent (0–5) are the same as in a world without features
            seq = as_seed_sequence(seed)
            rng = np.random.default_rng(child_seed(seq, 6))
            w = rng.normal(0.0, np.sqrt(self.weight_var), size=self.design.shape[1])
            self.fixed_theta = special.expit(self.design @ w)
            # the parent re-derives its streams from the same seed: pass the sequence on
            return super().reset(seed=seq)
        return super().reset(seed=seed)

    def problem(self, budget: float) -> Problem:
        return dataclasses.replace(super().problem(budget), features=self.features)
