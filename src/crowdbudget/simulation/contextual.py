"""Heterogeneous crowdsourcing: tasks with contexts (types) and workers whose reliability
depends on the context (Zhang, Ma, Sugiyama, "Bandit-Based Task Assignment for Heterogeneous
Crowdsourcing", Neural Computation 2015, §2.1 and §5).

- ``Problem.contexts`` carries the context of every task (int64, shape (n_items,), values
  0..S−1). Policies read it with :func:`~crowdbudget.types.task_contexts`, which answers
  "one context" for a ``Problem`` without contexts.
- :class:`ContextualWorkers` holds ``accuracy[j, s]`` = P(worker j gives the true label on a
  task of context s), shape (n_workers, n_contexts), binary labels. The three §5.1 models:

  * **spammer-hammer**: worker j is a hammer (accuracy 1) on one context and a spammer
    (accuracy 0.5: a uniformly random label) on the others;
  * **one-coin**: accuracy 0.9 on one context, 0.6 on the others;
  * **one-coin malicious**: 0.9 on one context, 0.3 on another, 0.6 on the rest.

  The paper does not say how the "one subset" of a worker is chosen; as in the authors' own
  demo code (github.com/justhao/bbta, ``demo.py``: ``familiar = randint(n_ctx)``) each worker's
  good context is drawn uniformly at random, afresh for every simulated world; the malicious
  context is drawn uniformly among the other contexts.
- :class:`ContextualWorkerEnvironment` is the simulated world of §5.1: true labels of a real
  data set, contexts, and a full answer matrix drawn at ``reset`` (common random numbers: the
  answer of worker j on task i is fixed for the replication, whoever asks and whenever). Each
  worker labels a task at most once (the paper: "tasks leave once every worker has labeled
  them"); ``pairs`` tells policies which (task, worker) pairs are still free.
- :func:`uci_contexts` clusters a UCI feature set (ionosphere, breast_cancer, pima from
  the package data) into S contexts with k-means (§5.1: S = 3, 4, 5 with K = 30, 40, 50
  workers). The paper does not say whether features are scaled; we standardise every feature
  (z-score) first, because raw pima features range from 0–2.4 (pedigree) to 0–846 (insulin)
  and k-means would otherwise cluster on one feature. k-means uses ``n_init=10`` and a fixed
  ``random_state``: the contexts are a property of the data set, the same in every replication.
- :class:`ContextualReplayEnvironment` replays a real data set whose tasks have types (RTE with
  the RTE-1 application settings of ``rte/contexts.csv``): replay semantics (a label exists
  only if recorded, each used once); a task listed under several contexts takes the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike

from crowdbudget._random import as_seed_sequence, child_seed
from crowdbudget.exceptions import (
    BudgetError,
    DataFormatError,
    IneligibleAssignmentError,
    InvalidParameterError,
)
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import (
    Assignment,
    FloatArray,
    IntArray,
    LabelEvent,
    PairAvailability,
    Problem,
    StepResult,
    task_contexts,  # noqa: F401  (its old home)
)

WORKER_MODELS = ("spammer-hammer", "one-coin", "malicious")

#: §5.1: data set → (number of contexts S, number of workers K).
UCI_SETTINGS: dict[str, tuple[int, int]] = {
    "ionosphere": (3, 30),
    "breast_cancer": (4, 40),
    "pima": (5, 50),
}


@dataclass(frozen=True)
class ContextualWorkers:
    """Context-dependent one-coin workers: ``accuracy[j, s]``, shape (n_workers, n_contexts).

    Use :meth:`draw` for the §5.1 models (good context per worker drawn at random).
    """

    accuracy: FloatArray
    name: str = "contextual"

    def __post_init__(self) -> None:
        acc = np.asarray(self.accuracy, dtype=float)
        if acc.ndim != 2 or np.any((acc < 0) | (acc > 1)):
            raise InvalidParameterError(
                "accuracy must be a (n_workers, n_contexts) array of probabilities, got "
                f"{acc.shape}"
            )
        object.__setattr__(self, "accuracy", acc)

    @property
    def n_workers(self) -> int:
        return int(self.accuracy.shape[0])

    @property
    def n_contexts(self) -> int:
        return int(self.accuracy.shape[1])

    @classmethod
    def draw(
        cls, model: str, n_workers: int, n_contexts: int, rng: np.random.Generator
    ) -> ContextualWorkers:
        """A pool of the §5.1 ``model`` (``spammer-hammer``, ``one-coin``, ``malicious``):
        worker j's good context is uniform on 0..S−1; the malicious model's bad context is
        uniform among the others (needs S >= 2)."""
        if model not in WORKER_MODELS:
            raise InvalidParameterError(
                f"unknown worker model {model!r}; allowed: {', '.join(WORKER_MODELS)}"
            )
        if n_workers < 1 or n_contexts < 1:
            raise InvalidParameterError("n_workers and n_contexts must be >= 1")
        good = rng.integers(n_contexts, size=n_workers)
        rows = np.arange(n_workers)
        if model == "spammer-hammer":
            acc = np.full((n_workers, n_contexts), 0.5)
            acc[rows, good] = 1.0
        elif model == "one-coin":
            acc = np.full((n_workers, n_contexts), 0.6)
            acc[rows, good] = 0.9
        else:
            if n_contexts < 2:
                raise InvalidParameterError("the malicious model needs at least 2 contexts")
            acc = np.full((n_workers, n_contexts), 0.6)
            shift = 1 + rng.integers(n_contexts - 1, size=n_workers)
            acc[rows, (good + shift) % n_contexts] = 0.3
            acc[rows, good] = 0.9
        return cls(acc, name=model)


class ContextualWorkerEnvironment(LabelingEnvironment):
    """Simulated heterogeneous crowd on fixed true labels (§5.1).

    At ``reset(seed)``: the worker pool (if given as a model name, drawn from child 0 of the
    seed), then the answer matrix ``answers`` (n_items, n_workers) from child 1: worker j answers
    the true label with probability ``accuracy[j, contexts[i]]``, else the other label. An
    assignment without a worker goes to a uniformly random worker who has not labeled the task
    (a per-task random order, child 2); pull-mode arrivals are uniform (child 3).

    Args:
        true_labels: true classes 0/1, shape (n_items,).
        contexts: context per task, shape (n_items,), values 0..S−1.
        workers: a :class:`ContextualWorkers` pool (fixed for every replication) or a model
            name of :data:`WORKER_MODELS` (pool drawn afresh per replication).
        n_workers: K, needed with a model name.
        name: data set name (reports).
    """

    _BLOCK = 8192  # rows of the answer matrix drawn at once

    def __init__(
        self,
        true_labels: ArrayLike,
        contexts: ArrayLike,
        workers: ContextualWorkers | str,
        *,
        n_workers: int | None = None,
        name: str = "contextual",
    ) -> None:
        self.true_labels = np.asarray(true_labels, dtype=np.int64)
        self.contexts = np.asarray(contexts, dtype=np.int64)
        if self.true_labels.ndim != 1 or self.contexts.shape != self.true_labels.shape:
            raise DataFormatError("true_labels and contexts must be 1-D arrays of one length")
        if np.any((self.true_labels < 0) | (self.true_labels > 1)):
            raise DataFormatError("contextual worlds are binary: true labels must be 0 or 1")
        self.n_items = int(self.true_labels.shape[0])
        self.n_contexts = int(self.contexts.max()) + 1
        if isinstance(workers, str):
            if workers not in WORKER_MODELS:
                raise InvalidParameterError(
                    f"unknown worker model {workers!r}; allowed: {', '.join(WORKER_MODELS)}"
                )
            if n_workers is None or n_workers < 1:
                raise InvalidParameterError("a worker model name needs n_workers >= 1")
            self.n_workers = int(n_workers)
        else:
            if workers.n_contexts < self.n_contexts:
                raise InvalidParameterError(
                    f"the pool knows {workers.n_contexts} contexts, the tasks have "
                    f"{self.n_contexts}"
                )
            self.n_workers = workers.n_workers
        self.workers = workers
        self.name = name
        self.pool: ContextualWorkers | None = None
        self.evaluation_mask = None

    # ---- world ------------------------------------------------------------------------------
    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> dict[str, Any]:
        seq = as_seed_sequence(seed)
        if isinstance(self.workers, str):
            self.pool = ContextualWorkers.draw(
                self.workers,
                self.n_workers,
                self.n_contexts,
                np.random.default_rng(child_seed(seq, 0)),
            )
        else:
            self.pool = self.workers
        acc_rows = self.pool.accuracy.T[self.contexts]  # (n_items, n_workers)
        answer_rng = np.random.default_rng(child_seed(seq, 1))
        n, k = self.n_items, self.n_workers
        self.answers = np.empty((n, k), dtype=np.int8)
        for lo in range(0, n, self._BLOCK):
            hi = min(n, lo + self._BLOCK)
            correct = answer_rng.random((hi - lo, k)) < acc_rows[lo:hi]
            truth = self.true_labels[lo:hi, None]
            self.answers[lo:hi] = np.where(correct, truth, 1 - truth)
        order_rng = np.random.default_rng(child_seed(seq, 2))
        self._order = order_rng.permuted(np.tile(np.arange(k, dtype=np.int64), (n, 1)), axis=1)
        self._order_next = np.zeros(n, dtype=np.int64)
        self._arrivals = np.random.default_rng(child_seed(seq, 3))
        self._remaining = np.ones(n * k, dtype=np.int64)
        self._asked = np.zeros(n, dtype=np.int64)
        self._eligible = np.ones(n, dtype=bool)
        self._n_open = n  # tasks some worker has not labeled: the campaign ends at 0
        self.eligible = self._eligible
        self.pairs = PairAvailability(
            items=np.repeat(np.arange(n, dtype=np.int64), k),
            workers=np.tile(np.arange(k, dtype=np.int64), n),
            remaining=self._remaining,
        )
        return {"accuracy": self.pool.accuracy, "worker_accuracy": self.worker_accuracy()}

    def worker_accuracy(self) -> FloatArray:
        """Empirical accuracy of every worker against the truth on all tasks (the paper's
        Fig. 1 histogram), shape (n_workers,)."""
        return np.asarray(np.mean(self.answers == self.true_labels[:, None], axis=0), dtype=float)

    def check_budget(self, budget: float) -> None:
        cap = self.n_items * self.n_workers
        if budget > cap:
            raise BudgetError(
                f"budget {budget:g} exceeds the {cap} (task, worker) pairs of {self.name!r}; "
                f"each worker labels a task at most once, so the maximum is {cap}"
            )

    def step(self, assignment: Assignment) -> StepResult:
        item = assignment.item
        if not 0 <= item < self.n_items or not self._eligible[item]:
            raise IneligibleAssignmentError(f"task {item} has been labeled by every worker")
        k = self.n_workers
        if assignment.worker is None:
            nxt = int(self._order_next[item])
            while self._remaining[item * k + int(self._order[item, nxt])] == 0:
                nxt += 1
            worker = int(self._order[item, nxt])
            self._order_next[item] = nxt + 1
        else:
            worker = int(assignment.worker)
            if not 0 <= worker < k:
                raise InvalidParameterError(
                    f"worker {worker} does not exist; workers are 0..{k - 1}"
                )
            if self._remaining[item * k + worker] == 0:
                raise IneligibleAssignmentError(f"worker {worker} has already labeled task {item}")
        self._remaining[item * k + worker] = 0
        self._asked[item] += 1
        if self._asked[item] == k:
            self._eligible[item] = False
            self._n_open -= 1
        event = LabelEvent(
            item=item, worker=worker, label=int(self.answers[item, worker]), cost=assignment.price
        )
        return StepResult(event, terminated=self._n_open == 0)

    def arriving_worker(self) -> int:
        return int(self._arrivals.integers(self.n_workers))

    def problem(self, budget: float) -> Problem:
        return Problem(
            n_items=self.n_items,
            budget=budget,
            n_workers=self.n_workers,
            contexts=self.contexts,
            n_contexts=self.n_contexts,
        )

    @classmethod
    def from_uci(
        cls,
        name: str,
        workers: str,
        *,
        n_contexts: int | None = None,
        n_workers: int | None = None,
        data_dir: str | None = None,
    ) -> ContextualWorkerEnvironment:
        """The §5.1 world on UCI set ``name`` with worker model ``workers``; S and K default to
        the paper's (:data:`UCI_SETTINGS`)."""
        if name not in UCI_SETTINGS:
            raise InvalidParameterError(
                f"unknown UCI set {name!r}; allowed: {', '.join(UCI_SETTINGS)}"
            )
        s_default, k_default = UCI_SETTINGS[name]
        labels, contexts = uci_contexts(name, n_contexts or s_default, data_dir=data_dir)
        return cls(labels, contexts, workers, n_workers=n_workers or k_default, name=name)


def uci_contexts(
    name: str, n_contexts: int, *, data_dir: str | None = None, random_state: int = 0
) -> tuple[IntArray, IntArray]:
    """True labels (0/1, classes in sorted order of their names) and k-means contexts of UCI
    feature set ``name``, both shape (n_items,). Features are standardised (module docstring)."""
    from sklearn.cluster import KMeans

    from crowdbudget.datasets import load_feature_set

    data = load_feature_set(name, data_dir=data_dir)  # rows in task order, classes sorted
    labels = data.gold
    x = data.features
    scale = x.std(axis=0)
    x = (x - x.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    kmeans = KMeans(n_clusters=n_contexts, n_init=10, random_state=random_state)
    contexts = kmeans.fit_predict(x).astype(np.int64)
    return labels.astype(np.int64), contexts


class ContextualReplayEnvironment(ReplayEnvironment):
    """Replay of a real data set with task contexts (see :class:`ReplayEnvironment` for the
    replay rules); :meth:`problem` returns a :class:`Problem` with contexts.

    Args:
        contexts: context index per item, shape (n_items,); other arguments as for
            :class:`ReplayEnvironment`.
        context_names: the names of the contexts (reports).
    """

    def __init__(
        self,
        *args: Any,
        contexts: ArrayLike,
        context_names: tuple[str, ...] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.contexts = np.asarray(contexts, dtype=np.int64)
        if self.contexts.shape != (self.n_items,) or self.contexts.min() < 0:
            raise DataFormatError(f"contexts must be {self.n_items} integers >= 0")
        self.context_names = context_names
        self.n_contexts = int(self.contexts.max()) + 1

    @classmethod
    def from_label_data(cls, data: Any, prior: ArrayLike | None = None, **extra: Any) -> Self:
        """Build from a :class:`~crowdbudget.datasets.LabelData` with gold and ``contexts``
        (a task under several contexts takes the first; a task without one gets its own
        ``"none"`` context)."""
        if data.gold is None:  # checked before the contexts, as the replay checks it
            raise DataFormatError(f"data set {data.name!r} has no gold labels to evaluate against")
        if data.contexts is None:
            raise DataFormatError(f"data set {data.name!r} has no task contexts")
        first = [c[0] if c else "none" for c in data.contexts]
        names = tuple(sorted(set(first)))
        index = {n: k for k, n in enumerate(names)}
        contexts = np.array([index[c] for c in first], dtype=np.int64)
        return super().from_label_data(data, prior, contexts=contexts, context_names=names, **extra)

    def problem(self, budget: float) -> Problem:
        base = super().problem(budget)
        return Problem(
            n_items=base.n_items,
            budget=base.budget,
            n_classes=base.n_classes,
            prior=base.prior,
            n_workers=base.n_workers,
            contexts=self.contexts,
            n_contexts=self.n_contexts,
        )
