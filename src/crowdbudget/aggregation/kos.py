"""KOS: the iterative inference of Karger, Oh, Shah (2012), with normalised messages.

Model: binary labels coded ``A_ij = +1`` (class 1) or ``−1`` (class 0) on the edges of the
item–worker bipartite graph; workers are one-coin (spammer–hammer in the analysis).

Algorithm (Karger, Oh, Shah, "Budget-optimal task allocation for reliable crowdsourcing
systems", Algorithm "Iterative inference"), one message per edge e = (i, j), arrays of shape
(n_labels,):

- initialise the worker→item messages ``y_{j→i} ~ N(1, 1)`` independently (from ``rng``);
- repeat ``n_iter`` times:

  ``x_{i→j} = Σ_{j' ∈ ∂i \\ j} A_ij' y_{j'→i}``  (item→worker),
  ``y_{j→i} = Σ_{i' ∈ ∂j \\ i} A_i'j x_{i'→j}``  (worker→item);

  each sum is one ``np.bincount`` over the edges minus the edge's own term;
- final score ``s_i = Σ_{j ∈ ∂i} A_ij y_{j→i}``, label 1 iff ``s_i > 0`` (0 iff < 0; a tie at
  0 is broken at random).

Normalisation (Chen, Lin, Zhou 2013 §7: "Unlike the original algorithm ... we normalized the
messages. Without the normalization, KOS could perform incredibly poor (Liu et al., 2012)"):
the raw messages grow like ((l − 1)(r − 1))^k and overflow; after every half-step the message
vector is divided by its root mean square. Scaling every message of a half-step by one
positive constant changes no sign and no later ratio, so this is the paper's algorithm
without the overflow. Iteration stops early when the normalised messages change by less than
``tol`` (max absolute change).

Repeated (item, worker) pairs are separate edges (each excludes only itself).

Worker-side scaling (``worker_messages``). The paper's worker message is a *sum* over the
worker's other items, so on a graph with very unequal worker degrees the messages of the
busiest workers dominate and the iteration converges to a vector localised on them. On RTE the
five busiest workers (800, 760, 700, 540, 420 labels) answer at chance (accuracy 0.51, 0.50,
0.58, 0.51, 0.85) and KOS as written ends at chance accuracy (0.4975) although its first
iteration is at 0.78. On the (l, r)-regular graphs KOS was designed for every worker has the
same degree, so dividing the worker message by ``|∂j| − 1`` changes nothing there;
``worker_messages="mean"`` (registry id ``kos-mean``) does that division and reaches 0.914
on RTE. ``"sum"`` (the default, id ``kos``) is the paper's algorithm.

KOS computes scores, not probabilities: ``probas_[i] = [1 − σ(s_i / rms(s)), σ(s_i / rms(s))]``
is a monotone squashing of the score (its sign and order are meaningful, its values are not
calibrated). Binary only.

Example:
    >>> from crowdbudget.datasets import load_dataset
    >>> KOS(n_iter=20).fit(load_dataset("rte")).labels_.shape
    (800,)
"""

from __future__ import annotations

import numpy as np

from crowdbudget._random import as_generator
from crowdbudget.aggregation.base import Aggregator, FloatArray
from crowdbudget.aggregation.dawid_skene import check_iterations
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError


def _normalise(messages: FloatArray) -> tuple[FloatArray, bool]:
    rms = float(np.sqrt(np.mean(messages * messages))) if messages.size else 0.0
    if rms == 0.0 or not np.isfinite(rms):
        return messages, False
    return messages / rms, True


class KOS(Aggregator):
    """Karger–Oh–Shah iterative inference with normalised messages (binary only).

    Args:
        n_iter: maximum number of message-passing iterations (>= 1).
        tol: stop when the normalised worker→item messages change by less than this.
        init: ``"random"`` (y ~ N(1, 1), the paper's) or ``"ones"`` (y = 1: the first
            item→worker messages are leave-one-out majority votes).
        worker_messages: ``"sum"`` (the paper's) or ``"mean"`` (divided by the worker's
            other-edge count; see the module docstring).
        rng: seed or generator for the random initialisation and for ties.

    Fitted: ``probas_`` (n_items, 2) (see the module docstring), ``labels_``, ``scores_``
    the final scores s_i, shape (n_items,), ``n_iter_`` iterations run.
    """

    def __init__(
        self,
        n_iter: int = 100,
        tol: float = 1e-9,
        init: str = "random",
        worker_messages: str = "sum",
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(rng=rng)
        self.n_iter = n_iter
        self.tol = tol
        self.init = init
        self.worker_messages = worker_messages

    def _fit_probas(self, data: LabelData) -> FloatArray:
        n_iter, tol = check_iterations(self.n_iter, self.tol, "KOS")
        if data.n_classes != 2:
            raise InvalidParameterError(
                f"KOS handles two classes only, got {data.n_classes}; use ds or one-coin-em"
            )
        if self.init not in ("random", "ones"):
            raise InvalidParameterError(f"KOS: init must be 'random' or 'ones', got {self.init!r}")
        if self.worker_messages not in ("sum", "mean"):
            raise InvalidParameterError(
                f"KOS: worker_messages must be 'sum' or 'mean', got {self.worker_messages!r}"
            )
        items, workers = data.items, data.workers
        degree = np.bincount(workers, minlength=data.n_workers)[workers]
        worker_scale = (
            1.0 / np.maximum(degree - 1, 1) if self.worker_messages == "mean" else np.ones(1)
        )
        signs = (2 * data.labels - 1).astype(float)  # A_ij
        if self.init == "random":
            y = as_generator(self.rng).normal(1.0, 1.0, size=data.n_labels)
        else:
            y = np.ones(data.n_labels)
        iteration = 0
        for iteration in range(1, n_iter + 1):  # noqa: B007 - n_iter_ below
            ay = signs * y
            x = np.bincount(items, weights=ay, minlength=data.n_items)[items] - ay
            x, ok = _normalise(x)
            if not ok:
                break
            ax = signs * x
            y_new = np.bincount(workers, weights=ax, minlength=data.n_workers)[workers] - ax
            y_new = y_new * worker_scale
            y_new, ok = _normalise(y_new)
            if not ok:
                break
            change = float(np.max(np.abs(y_new - y))) if y.size else 0.0
            y = y_new
            if change < tol:
                break
        scores = np.bincount(items, weights=signs * y, minlength=data.n_items)
        self.scores_ = scores
        self.n_iter_ = iteration
        rms = float(np.sqrt(np.mean(scores * scores)))
        z = scores / rms if rms > 0 else scores
        p1 = 1.0 / (1.0 + np.exp(-np.clip(z, -700, 700)))
        p1 = np.where(scores == 0, 0.5, p1)
        return np.column_stack([1.0 - p1, p1])
