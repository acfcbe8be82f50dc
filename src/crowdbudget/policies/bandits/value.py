"""Value contributions and their online estimation (Rangi, Franceschetti 2018, §5).

Inference (eqs. 9-10): a weighted vote ``s_l = sum_n f_{k(n)}(l, y_n)`` with
``f_k(l, y) = weight_k * 1{y = l}`` and ``l_hat = argmax_l s_l``; majority vote (MV, §6) is
``weight_k = 1``. Theorem 5.1, eq. (11): ``v_k = min_{l != l*} E[f_k(l*, Y) - f_k(l, Y)]``;
for the symmetric worker model of §2 (correct with ``p_k``, each wrong label with
``(1 - p_k)/(L - 1)``) this is ``weight_k * (p_k - (1 - p_k)/(L - 1))``, i.e. ``2 p_k - 1`` for
binary MV.

Online estimation (§5): after the m-th evaluation of task i, made by worker k, the current
estimate ``l_hat_i`` (eq. 10 over the m labels so far, *including* this one) stands in for the
truth and ``p_hat_k`` becomes the fraction of k's evaluations that agreed with the estimate at
the time they were made. Decisions of ours, not stated in the paper:

* a tie in eq. (10) is broken uniformly at random with the run's generator (binary MV ties at
  every even count);
* before a worker's first evaluation ``p_hat_k = 1/L`` (``v_hat_k = 0``); B-KUBE's
  initialisation phase evaluates every worker once, so this prior never drives its choices.

The first label of a task always agrees with the estimate formed from it alone, so
``p_hat_k`` is biased upwards; this is the paper's estimator and we keep it.
"""

from __future__ import annotations

import numpy as np

from crowdbudget.exceptions import InvalidParameterError


def weighted_vote(votes: np.ndarray, rng: np.random.Generator) -> int:
    """eq. (10): argmax of the accumulated contributions ``votes`` (shape (L,)), ties at random."""
    best = np.flatnonzero(votes == votes.max())
    if best.size == 1:
        return int(best[0])
    return int(best[rng.integers(best.size)])


class OnlineValueEstimator:
    """Running ``p_hat_k`` and ``v_hat_k`` of K workers (§5), arrays of shape (K,).

    Args:
        n_workers: K.
        n_classes: L >= 2.
        weights: shape (K,) weights of the weighted vote; None means MV (all ones).
    """

    def __init__(self, n_workers: int, n_classes: int = 2, weights: np.ndarray | None = None):
        if n_workers < 1 or n_classes < 2:
            raise InvalidParameterError(
                f"need n_workers >= 1 and n_classes >= 2, got {n_workers}, {n_classes}"
            )
        self.n_workers = n_workers
        self.n_classes = n_classes
        self.weights = np.ones(n_workers) if weights is None else np.asarray(weights, float)
        if self.weights.shape != (n_workers,) or np.any(self.weights < 0):
            raise InvalidParameterError("weights must have shape (n_workers,) and be >= 0")
        self.agreements_ = np.zeros(n_workers)
        self.evaluations_ = np.zeros(n_workers, dtype=np.int64)

    def update(self, worker: int, agreed: bool) -> None:
        """Record one evaluation of ``worker`` that did (not) match the current estimate."""
        self.agreements_[worker] += float(agreed)
        self.evaluations_[worker] += 1

    def adjust(self, worker: int, agreement_change: float, evaluations_change: int) -> None:
        """Re-score one of ``worker``'s evaluations (leave-one-out feedback, see
        :func:`~crowdbudget.simulation.priced_workers.run_per_task`): add the change of its
        agreement (in [−1, 1]) and of the number of scored evaluations (0 or 1)."""
        self.agreements_[worker] += agreement_change
        self.evaluations_[worker] += evaluations_change

    @property
    def accuracy_(self) -> np.ndarray:
        """``p_hat_k``; ``1/L`` for a worker with no evaluation yet."""
        seen = self.evaluations_ > 0
        # division only where evaluations_ > 0, so it is safe
        out = np.full(self.n_workers, 1.0 / self.n_classes)
        out[seen] = self.agreements_[seen] / self.evaluations_[seen]
        return out

    @property
    def value_(self) -> np.ndarray:
        """``v_hat_k = weight_k (p_hat_k - (1 - p_hat_k)/(L - 1))`` (eq. 11)."""
        p = self.accuracy_
        return self.weights * (p - (1.0 - p) / (self.n_classes - 1))
