"""KG and Opt-KG over (item, worker) pairs with one-coin worker reliability.

Chen, Lin, Zhou (2013), §4: each worker j has a reliability ρ_j ~ Beta(c_j, d_j); the action is a
pair (i, j); the posterior of (θ_i, ρ_j) after a label is approximated by independent Betas
by moment matching (:mod:`crowdbudget.posteriors.one_coin`). The stage rewards of asking j about
i are ``R_z = h(I(a'_z, b'_z)) − h(I(a_i, b_i))`` for the two labels z; Opt-KG takes the pair of
largest ``max(R_1, R_0)``, KG the largest ``P(1) R_1 + P(0) R_0``.

Push mode chooses the pair; pull mode (``select(state, worker=j)``) chooses the item for the
arriving worker. On a replay only pairs with an unused recorded label are candidates
(``state.pairs``).

Cost: a label changes item i and worker j, so the scores of every pair of item i and of worker j
are recomputed (vectorised): O(n_workers + n_items_of_worker). The choice is an argmax over the
candidate pairs (vectorised, O(n_pairs)). For the paper's sizes (RTE: 8,000 pairs) a decision
takes tens of microseconds; the scale issue will replace the argmax by a bucketed structure.
"""

from __future__ import annotations

import numpy as np

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.posteriors.one_coin import OneCoinPosterior, one_coin_rewards
from crowdbudget.types import Assignment, CampaignState, FloatArray, IntArray, LabelEvent, Problem


def _csr(keys: IntArray, n: int) -> tuple[IntArray, IntArray]:
    """Offsets and order grouping the indices of ``keys`` by key value 0..n−1."""
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, order


class OneCoinKnowledgeGradient(AllocationPolicy):
    """(Optimistic) knowledge gradient over (item, worker) pairs, one-coin workers (§4).

    Args:
        optimistic: True for Opt-KG (max of the two rewards), False for KG (expectation).
        worker_prior: Beta(c, d) prior of every worker's reliability ρ_j (paper: (4, 1)).

    Fitted attributes:
        posterior_: the :class:`OneCoinPosterior` (item and worker Betas).
    """

    chooses_workers = True

    def __init__(
        self, optimistic: bool = True, worker_prior: tuple[float, float] = (4.0, 1.0)
    ) -> None:
        self.optimistic = optimistic
        self.worker_prior = worker_prior

    def validate_params(self) -> None:
        c, d = self.worker_prior
        if not (c > 0 and d > 0):
            raise InvalidParameterError(
                f"worker_prior must be two numbers > 0, got {self.worker_prior}"
            )

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        if problem.n_workers is None:
            raise InvalidParameterError(
                "a worker-aware policy needs a problem with workers (n_workers); "
                "use a homogeneous policy such as opt-kg for anonymous workers"
            )
        c, d = self.worker_prior
        self.posterior_ = OneCoinPosterior(
            problem.prior_array, (d, c), problem.n_items, problem.n_workers, problem.threshold_array
        )
        self._pairs_built = False

    def _build_pairs(self, state: CampaignState) -> None:
        problem = state.problem
        assert problem.n_workers is not None
        if state.pairs is None:
            k, m = problem.n_items, problem.n_workers
            self._pair_items = np.repeat(np.arange(k, dtype=np.int64), m)
            self._pair_workers = np.tile(np.arange(m, dtype=np.int64), k)
            self._remaining: IntArray | None = None
        else:
            self._pair_items = state.pairs.items
            self._pair_workers = state.pairs.workers
            self._remaining = state.pairs.remaining
        self._item_ptr, self._item_order = _csr(self._pair_items, problem.n_items)
        self._worker_ptr, self._worker_order = _csr(self._pair_workers, problem.n_workers)
        self._scores = self._score_pairs(np.arange(self._pair_items.shape[0]))
        self._pairs_built = True

    def _score_pairs(self, pairs: IntArray) -> FloatArray:
        post = self.posterior_
        i = self._pair_items[pairs]
        j = self._pair_workers[pairs]
        r1, r0, p1 = one_coin_rewards(
            post.a[i], post.b[i], post.c[j], post.d[j], post.thresholds[i]
        )
        if self.optimistic:
            return np.maximum(r1, r0)
        return p1 * r1 + (1.0 - p1) * r0

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        if not self._pairs_built:
            self._build_pairs(state)
        if worker is not None:
            lo, hi = self._worker_ptr[worker], self._worker_ptr[worker + 1]
            candidates = self._worker_order[lo:hi]
        else:
            candidates = None
        scores = self._scores if candidates is None else self._scores[candidates]
        items = self._pair_items if candidates is None else self._pair_items[candidates]
        ok = state.eligible[items]
        if self._remaining is not None:
            ok &= (self._remaining if candidates is None else self._remaining[candidates]) > 0
        if not np.any(ok):
            return None
        best = int(np.argmax(np.where(ok, scores, -np.inf)))
        pair = best if candidates is None else int(candidates[best])
        chosen_worker = int(self._pair_workers[pair])
        price = state.problem.price_of(chosen_worker)
        if not state.can_afford(price):
            return None
        return Assignment(item=int(self._pair_items[pair]), worker=chosen_worker, price=price)

    def observe(self, event: LabelEvent) -> None:
        self.posterior_.update(event)
        if not self._pairs_built:
            return
        i, j = event.item, event.worker
        changed = np.concatenate(
            [
                self._item_order[self._item_ptr[i] : self._item_ptr[i + 1]],
                self._worker_order[self._worker_ptr[j] : self._worker_ptr[j + 1]],
            ]
        )
        self._scores[changed] = self._score_pairs(changed)

    def final_labels(self, state: CampaignState) -> IntArray:
        return self.posterior_.predict()
