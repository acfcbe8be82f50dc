"""Synthetic worlds drawn whole from the reset seed, for the environment registry
(:mod:`crowdbudget.simulation.builtin`): every one is a :class:`LabelingEnvironment` that
``reset(seed=...)`` redraws, the same seed giving the same world.

- :class:`PricedWorkerEnvironment` — Rangi & Franceschetti (2018) §6: ``n_items`` binary tasks
  with uniform true labels, answered by worker set A or B (:func:`rangi_worker_sets`: ``p_k ~
  U[0.5, 1]``, ``c_k ~ U[v_k, 1 + v_k]``, ``M_k = floor(0.6 T)``; set B turns the last
  ``n_spammers`` workers into spammers), every label costing its worker's price. Unlike
  :class:`~crowdbudget.simulation.priced_workers.PricedWorkerWorld` (drawn at construction from
  a generator it shares with the policy, to reproduce the paper's single stream), this world
  owns its randomness: the pool, the truth and the answers come from children of the reset seed,
  so it runs under :func:`~crowdbudget.experiments.runner.run_experiment` like any other world.
- :class:`SyntheticContextualEnvironment` — Zhang, Ma, Sugiyama (2015) §5.1 without a data set:
  at each reset the true labels are uniform and every task's context uniform on 0..S−1, then
  :class:`~crowdbudget.simulation.contextual.ContextualWorkerEnvironment` draws the pool and
  the answers as it does on a real data set.
- :class:`SyntheticFeatureEnvironment` — Chen, Lin, Zhou (2013) §5's logistic world with
  features of its own: at each reset the features are drawn N(0, I), then
  :class:`~crowdbudget.simulation.environment.FeatureEnvironment` draws w ~ N(0, σ²I) and
  θ_i = σ(wᵀx_i) over them.

Common random numbers: the k-th answer asked of a task uses the same uniform number whichever
policy asks and whichever worker answers (a worker of accuracy p answers correctly iff u < p),
so policies compared on one seed face the same world.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from crowdbudget._random import as_seed_sequence, child_seed
from crowdbudget._validation import check_positive_int
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.simulation.contextual import ContextualWorkerEnvironment
from crowdbudget.simulation.environment import FeatureEnvironment, LabelingEnvironment
from crowdbudget.simulation.priced_workers import PricedWorkerPool, rangi_worker_sets
from crowdbudget.types import Assignment, FloatArray, LabelEvent, Problem, StepResult, WorkerSpec

#: Rangi & Franceschetti (2018) §6's two worker sets
WORKER_SETS = ("A", "B")

_TILE_ITEMS = 65_536
_TILE_LABELS = 16


class _UniformTiles:
    """Uniform numbers u(item, k) drawn in tiles of (65,536 items × 16 labels) from a seed on
    first use: O(labels asked for) memory, independent of the order of the questions."""

    def __init__(self, seed: np.random.SeedSequence, n_items: int) -> None:
        self.seed = seed
        self.n_items = n_items
        self.tiles: dict[tuple[int, int], FloatArray] = {}

    def __call__(self, item: int, k: int) -> float:
        key = (item // _TILE_ITEMS, k // _TILE_LABELS)
        tile = self.tiles.get(key)
        if tile is None:
            rows = min(_TILE_ITEMS, self.n_items - key[0] * _TILE_ITEMS)
            tile = np.random.default_rng(child_seed(self.seed, *key)).random((rows, _TILE_LABELS))
            self.tiles[key] = tile
        return float(tile[item % _TILE_ITEMS, k % _TILE_LABELS])


class PricedWorkerEnvironment(LabelingEnvironment):
    """Priced, capacity-limited workers of Rangi & Franceschetti (2018) §6, redrawn at every
    reset (see the module docstring).

    From the reset seed: child 0 draws the worker sets (:func:`rangi_worker_sets`; sets A and
    B of one seed share their accuracies and prices, B with spammers), child 1 the true labels,
    child 2 the answers' uniform numbers and child 3 the worker an assignment without one goes
    to (uniform). :meth:`problem` names the workers with their prices and capacities
    (``Problem.workers``), so the budget is money. Push mode only: the policy picks the worker.

    Args:
        n_items: T, the number of tasks (also sets the capacities ``M_k = floor(0.6 T)``).
        worker_set: ``"A"`` or ``"B"``.
        n_workers: K (20 in the paper).
        n_spammers: how many of set B's workers are spammers (5 in the paper).
    """

    n_classes = 2

    def __init__(
        self, n_items: int, worker_set: str = "A", *, n_workers: int = 20, n_spammers: int = 5
    ) -> None:
        self.n_items = check_positive_int(n_items, "n_items")
        if worker_set not in WORKER_SETS:
            raise InvalidParameterError(
                f"worker_set must be one of {', '.join(WORKER_SETS)}, got {worker_set!r}"
            )
        self.worker_set = worker_set
        self.n_workers = check_positive_int(n_workers, "n_workers")
        if not 0 <= n_spammers <= self.n_workers:
            raise InvalidParameterError(
                f"n_spammers must be between 0 and n_workers={self.n_workers}, got {n_spammers}"
            )
        self.n_spammers = int(n_spammers)
        self.pool: PricedWorkerPool | None = None
        self.true_labels = np.zeros(self.n_items, dtype=np.int64)

    def _draw_pool(self, seq: np.random.SeedSequence) -> PricedWorkerPool:
        set_a, set_b = rangi_worker_sets(
            self.n_items,
            np.random.default_rng(child_seed(seq, 0)),
            n_workers=self.n_workers,
            n_spammers=self.n_spammers,
        )
        return set_a if self.worker_set == "A" else set_b

    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> dict[str, Any]:
        seq = as_seed_sequence(seed)
        self.pool = self._draw_pool(seq)
        truth_rng = np.random.default_rng(child_seed(seq, 1))
        self.true_labels = truth_rng.integers(self.n_classes, size=self.n_items).astype(np.int64)
        self._answers = _UniformTiles(child_seed(seq, 2), self.n_items)
        self._choices = _UniformTiles(child_seed(seq, 3), self.n_items)
        self._asked = np.zeros(self.n_items, dtype=np.int64)
        return {"accuracy": self.pool.accuracy, "price": self.pool.price}

    def step(self, assignment: Assignment) -> StepResult:
        if self.pool is None:
            raise InvalidParameterError("reset the environment before the first step")
        item = assignment.item
        k = int(self._asked[item])
        self._asked[item] = k + 1
        if assignment.worker is None:
            u = self._choices(item, k)
            worker = min(int(u * self.n_workers), self.n_workers - 1)
        else:
            worker = int(assignment.worker)
            if not 0 <= worker < self.n_workers:
                raise InvalidParameterError(
                    f"worker {worker} does not exist; workers are 0..{self.n_workers - 1}"
                )
        truth = int(self.true_labels[item])
        correct = self._answers(item, k) < self.pool.accuracy[worker]
        label = truth if correct else 1 - truth  # binary: the one wrong label (§2)
        cost = float(self.pool.price[worker])
        return StepResult(LabelEvent(item=item, worker=worker, label=label, cost=cost))

    def arriving_worker(self) -> int:
        raise InvalidParameterError("priced workers are chosen by the policy (push mode only)")

    def problem(self, budget: float) -> Problem:
        # before the first reset: the pool of seed 0 (same prices and capacities' shape)
        pool = self.pool if self.pool is not None else self._draw_pool(as_seed_sequence(0))
        workers = WorkerSpec(pool.n_workers, prices=pool.price, capacities=pool.capacity)
        return Problem(
            n_items=self.n_items, budget=budget, n_classes=self.n_classes, workers=workers
        )


class SyntheticContextualEnvironment(ContextualWorkerEnvironment):
    """Tasks with contexts and context-dependent workers (Zhang, Ma, Sugiyama 2015, §5.1),
    without a data set: child 4 of the reset seed draws uniform true labels (0/1) and a
    uniform context per task; the parent then draws the pool (``workers``, a §5.1 model) and
    the answers from children 0–3 as on real data.

    Args:
        n_items: number of tasks.
        n_contexts: S.
        n_workers: K.
        workers: the worker model (``spammer-hammer``, ``one-coin`` or ``malicious``).
    """

    def __init__(
        self,
        n_items: int,
        *,
        n_contexts: int = 3,
        n_workers: int = 30,
        workers: str = "one-coin",
    ) -> None:
        n = check_positive_int(n_items, "n_items")
        s = check_positive_int(n_contexts, "n_contexts")
        if workers == "malicious" and s < 2:
            raise InvalidParameterError("the malicious model needs at least 2 contexts")
        # placeholders until reset: every context present so the pool knows all S of them
        contexts = np.arange(n, dtype=np.int64) % s
        super().__init__(
            np.zeros(n, dtype=np.int64), contexts, workers, n_workers=n_workers, name="synthetic"
        )
        self.n_contexts = s

    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> dict[str, Any]:
        seq = as_seed_sequence(seed)
        rng = np.random.default_rng(child_seed(seq, 4))
        self.true_labels = rng.integers(2, size=self.n_items).astype(np.int64)
        self.contexts = rng.integers(self.n_contexts, size=self.n_items).astype(np.int64)
        return super().reset(seed=seq)


class SyntheticFeatureEnvironment(FeatureEnvironment):
    """The logistic feature world (Chen, Lin, Zhou 2013, §5) on synthetic features: child 7
    of the reset seed draws the raw features, shape (n_items, n_features), i.i.d. N(0, 1);
    the parent (``world="logistic"``) then draws w ~ N(0, ``weight_var`` · I) from child 6 and
    the answers from children 0–1, θ_i = σ(wᵀx_i) over the standardised features with an
    intercept. Anonymous workers answer 1 with probability θ_i; the truth is 1{θ_i >= 1/2}.

    Args:
        n_items: number of items.
        n_features: number of raw features.
        weight_var: prior variance of the world's w.
    """

    def __init__(self, n_items: int, *, n_features: int = 5, weight_var: float = 1.0) -> None:
        n = check_positive_int(n_items, "n_items")
        self.n_features = check_positive_int(n_features, "n_features")
        super().__init__(np.zeros((n, self.n_features)), weight_var=weight_var)

    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> dict[str, Any]:
        from crowdbudget.posteriors.logistic import prepare_features

        seq = as_seed_sequence(seed)
        rng = np.random.default_rng(child_seed(seq, 7))
        self.features = rng.standard_normal((self.n_items, self.n_features))
        self.design = prepare_features(self.features)
        return super().reset(seed=seq)
