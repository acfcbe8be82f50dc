"""Simulated workers: perfect, one-coin, two-coin, full confusion matrix, spammer-hammer.

Every model is a per-worker confusion matrix ``confusion[j, y, l] = P(worker j says l |
reference label y)``, shape (n_workers, n_classes, n_classes). The reference label y is what a
perfectly reliable worker would say: in Chen, Lin, Zhou (2013, §4) that is the *noiseless*
label ``Y_i ~ Bernoulli(θ_i)`` drawn afresh for each question, and ρ_j = P(Z_ij = Y_i); with
θ_i ∈ {0, 1} it is the true class, which is the Dawid–Skene setting.

- perfect: the identity;
- one-coin (accuracy ρ_j): ``ρ`` on the diagonal, ``(1 − ρ)/(C − 1)`` elsewhere;
- two-coin (sensitivity, specificity; binary): rows ``[spec, 1 − spec]``, ``[1 − sens, sens]``;
- full confusion matrix (Dawid–Skene): given;
- spammer-hammer (Karger, Oh, Shah): a hammer is perfect, a spammer answers uniformly.

Workers may have prices (per label). ``WorkerPrior`` draws a pool afresh for every simulated
world (e.g. ρ_j ~ Beta(4, 1) for 10 workers, paper §7.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from crowdbudget._validation import check_positive_int, check_probability
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.types import FloatArray


@dataclass(frozen=True)
class WorkerPool:
    """A fixed set of simulated workers.

    Attributes:
        confusion: shape (n_workers, n_classes, n_classes); rows sum to 1.
        prices: price of one label per worker, shape (n_workers,), or None (1 each).
        name: a short description (for reports).
    """

    confusion: FloatArray
    prices: FloatArray | None = None
    name: str = "workers"

    def __post_init__(self) -> None:
        conf = np.asarray(self.confusion, dtype=float)
        if conf.ndim != 3 or conf.shape[1] != conf.shape[2] or conf.shape[1] < 2:
            raise InvalidParameterError(
                f"confusion must have shape (n_workers, C, C) with C >= 2, got {conf.shape}"
            )
        if np.any(conf < 0) or not np.allclose(conf.sum(axis=2), 1.0, atol=1e-9):
            raise InvalidParameterError(
                "every confusion-matrix row must be probabilities summing to 1"
            )
        object.__setattr__(self, "confusion", conf)
        if self.prices is not None:
            prices = np.asarray(self.prices, dtype=float)
            if prices.shape != (conf.shape[0],) or np.any(prices <= 0):
                raise InvalidParameterError(
                    f"prices must be {conf.shape[0]} numbers > 0, got shape {prices.shape}"
                )
            object.__setattr__(self, "prices", prices)
        self._cumulative: FloatArray  # set below
        object.__setattr__(self, "_cumulative", np.cumsum(conf, axis=2))

    @property
    def n_workers(self) -> int:
        return int(self.confusion.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.confusion.shape[1])

    def draw(self, rng: np.random.Generator) -> WorkerPool:
        """A fixed pool draws itself (same interface as :class:`WorkerPrior`)."""
        return self

    def answer(self, worker: int, reference: int, u: float) -> int:
        """The label worker ``worker`` gives when the reference label is ``reference``,
        using the uniform number ``u`` (inverse-CDF sampling, so one ``u`` stream serves
        every worker: common random numbers across policies)."""
        row = self._cumulative[worker, reference]
        return min(int(np.searchsorted(row, u, side="right")), self.n_classes - 1)

    def accuracy(self, class_weights: ArrayLike | None = None) -> FloatArray:
        """P(correct) per worker, averaging the diagonal with ``class_weights`` (uniform)."""
        diag = np.diagonal(self.confusion, axis1=1, axis2=2)
        w = (
            np.full(self.n_classes, 1.0 / self.n_classes)
            if class_weights is None
            else class_weights
        )
        return np.asarray(diag @ np.asarray(w, dtype=float), dtype=float)

    # ---- constructors ------------------------------------------------------------------------
    @classmethod
    def perfect(cls, n_workers: int, n_classes: int = 2) -> WorkerPool:
        n = check_positive_int(n_workers, "n_workers")
        return cls(
            np.broadcast_to(np.eye(n_classes), (n, n_classes, n_classes)).copy(), name="perfect"
        )

    @classmethod
    def one_coin(
        cls, reliability: ArrayLike, n_classes: int = 2, prices: ArrayLike | None = None
    ) -> WorkerPool:
        rho = np.asarray(reliability, dtype=float).reshape(-1)
        if np.any((rho < 0) | (rho > 1)):
            raise InvalidParameterError("one-coin reliabilities must lie in [0, 1]")
        off = (1.0 - rho) / (n_classes - 1)
        conf = off[:, None, None] * (1.0 - np.eye(n_classes)) + rho[:, None, None] * np.eye(
            n_classes
        )
        return cls(
            conf, None if prices is None else np.asarray(prices, dtype=float), name="one-coin"
        )

    @classmethod
    def two_coin(
        cls, sensitivity: ArrayLike, specificity: ArrayLike, prices: ArrayLike | None = None
    ) -> WorkerPool:
        sens = np.asarray(sensitivity, dtype=float).reshape(-1)
        spec = np.asarray(specificity, dtype=float).reshape(-1)
        if sens.shape != spec.shape:
            raise InvalidParameterError("sensitivity and specificity need the same length")
        conf = np.stack(
            [np.column_stack([spec, 1.0 - spec]), np.column_stack([1.0 - sens, sens])], axis=1
        )
        return cls(
            conf, None if prices is None else np.asarray(prices, dtype=float), name="two-coin"
        )

    @classmethod
    def spammer_hammer(
        cls, n_workers: int, hammer_fraction: float, rng: np.random.Generator, n_classes: int = 2
    ) -> WorkerPool:
        """Each worker is a hammer with probability ``hammer_fraction``, else a spammer."""
        n = check_positive_int(n_workers, "n_workers")
        q = check_probability(hammer_fraction, "hammer_fraction")
        hammer = rng.random(n) < q
        rho = np.where(hammer, 1.0, 1.0 / n_classes)
        return cls.one_coin(rho, n_classes).with_name("spammer-hammer")

    def with_name(self, name: str) -> WorkerPool:
        return WorkerPool(self.confusion, self.prices, name)


@dataclass(frozen=True)
class WorkerPrior:
    """Draw a fresh one-coin (or two-coin) pool for each world.

    Args:
        n_workers: pool size.
        reliability_prior: Beta(c, d) of ρ_j (default (4, 1), the paper's §7.1 choice).
        model: ``"one-coin"`` or ``"two-coin"`` (sensitivity and specificity drawn
            independently from the same Beta).
        n_classes: number of classes.
        prices: fixed prices per worker, or None.
    """

    n_workers: int
    reliability_prior: tuple[float, float] = (4.0, 1.0)
    model: str = "one-coin"
    n_classes: int = 2
    prices: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        check_positive_int(self.n_workers, "n_workers")
        c, d = self.reliability_prior
        if c <= 0 or d <= 0:
            raise InvalidParameterError("reliability_prior must be two numbers > 0")
        if self.model not in ("one-coin", "two-coin"):
            raise InvalidParameterError(
                f"model must be 'one-coin' or 'two-coin', got {self.model!r}"
            )

    def draw(self, rng: np.random.Generator) -> WorkerPool:
        c, d = self.reliability_prior
        prices = None if self.prices is None else np.asarray(self.prices, dtype=float)
        if self.model == "one-coin":
            return WorkerPool.one_coin(rng.beta(c, d, self.n_workers), self.n_classes, prices)
        sens = rng.beta(c, d, self.n_workers)
        spec = rng.beta(c, d, self.n_workers)
        return WorkerPool.two_coin(sens, spec, prices)
