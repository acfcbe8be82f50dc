"""The allocation baselines of Chen, Lin, Zhou (2013) §7 that end with an aggregator.

- ``kos`` (:class:`KOSAllocation`): "the randomized budget allocation algorithm by (Karger et
  al., 2012)" — a random (l, r)-regular bipartite graph of items and workers is drawn once for
  the budget, every edge is asked once, and the final labels are KOS iterative inference
  (normalised messages, :class:`~crowdbudget.aggregation.KOS`) on the labels received.
- ``random-bp`` (:class:`RandomBP`): "random sampling with the labeling aggregation method
  based on the belief propagation (BP) in (Liu et al., 2012)" — each label goes to a uniformly
  random eligible item; final labels by :class:`~crowdbudget.aggregation.BeliefPropagation`.

Both override ``final_labels(state)`` to run their aggregator on the campaign's label log
(``state.label_log``; items without a label get the aggregator's prior answer: a tie, broken by
a seed drawn from the policy's generator at ``reset``).

The KOS graph (built at the first ``select``, from the policy's generator):

- **Edges.** E = floor(B / p̄) labels for the budget B left at that moment (p̄: the mean worker
  price, 1 without prices). Item degrees l_i ∈ {⌊E/K⌋, ⌈E/K⌉} (a non-integer T/K gives
  ⌈T/K⌉ labels to a uniformly random E mod K items; E < K leaves K − E items without a label).
- **Workers.** With a finite pool of M workers (``problem.n_workers``), worker degrees are
  r_j ∈ {⌊E/M⌋, ⌈E/M⌉}; without one (anonymous workers), E/r fresh virtual workers with
  r = ``labels_per_worker`` labels each (default r = ⌈E/K⌉, KOS's l = r), ids 0, 1, ….
  Edges pair a random permutation of item stubs with one of worker stubs (configuration
  model), then edges repeating an (item, worker) pair more than ⌈l_max/M⌉ times are removed by
  swapping their worker stub with a random other edge's (≤ 200 vectorised rounds; repeats are
  unavoidable only when l > M). Degrees are exactly kept.
- **Replay (``state.pairs``).** Only recorded pairs exist, so the graph is a subgraph of the
  data graph: every unused record is a candidate stub; inside each item the stubs get a random
  order and the E stubs of lowest within-item rank are taken (random water-filling): item
  degrees differ by at most one among items with enough records, an item with fewer records
  gives them all and its share goes to the others. Worker degrees then follow the data (a
  worker with more records of the chosen items gets more edges): the data graph admits no
  (l, r)-regular subgraph in general (RTE: worker degrees 20…800).
- **Order.** Edges are asked in a random order (KOS is non-adaptive; the order only matters
  for pending assignments and checkpoints).
- **Pull mode.** The arriving worker gets its next planned edge whose item still has quota
  (labels left to reach l_i) and is eligible; if it has none, it takes one unit of quota of
  another eligible item it can label (synthetic: any; replay: one of its unused pairs), so the
  item side stays l-regular while worker degrees follow arrivals. In a replay a worker may
  reach no item with quota (its records are all on full items); it then gets its open item
  with the fewest labels (received + pending), so the budget is still spent (the item side is
  then only approximately regular). ``None`` only when the worker has no open pair (or, in a
  synthetic world, when no quota is left: the plan is exhausted).
- **Push mode** returns None (stop) when the plan is exhausted or its next edge is not
  affordable; a planned edge whose item became ineligible is skipped (its label is not
  re-planned). Under the live rules an edge whose worker is blocked (or holds the item
  already) goes to the open worker given the fewest edges so far, so blocking does not
  leave the budget unspent; the item keeps its degree.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from crowdbudget.aggregation.base import Aggregator
from crowdbudget.aggregation.belief_propagation import BeliefPropagation
from crowdbudget.aggregation.kos import KOS
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.policies.verdict import log_label_data
from crowdbudget.types import (
    Assignment,
    CampaignState,
    FloatArray,
    IntArray,
    Problem,
)

#: most passes of the configuration graph's rewiring (each over every edge): the bound its
#: declared cost reads (policies/builtin.py)
KOS_REWIRING_PASSES = 200


class AggregatingPolicy(AllocationPolicy):
    """Base: labels items with :meth:`make_aggregator` fitted on the campaign's label log
    (``state.label_log``; the policy keeps no copy of the labels)."""

    def make_aggregator(self, seed: int) -> Aggregator:  # pragma: no cover - abstract-ish
        raise NotImplementedError

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        # the aggregator's tie-breaking seed: the first draw of the policy's generator
        self._aggregator_seed = int(rng.integers(2**62))
        self._final_fit: tuple[int, IntArray, FloatArray] | None = None
        self._reset_policy(problem, rng)

    def _reset_policy(self, problem: Problem, rng: np.random.Generator) -> None:
        """Subclass hook."""

    def _fitted(self, state: CampaignState) -> tuple[IntArray, FloatArray]:
        # one fit per number of labels: the runner asks for labels and probabilities at
        # every checkpoint
        n = len(state.label_log)
        if self._final_fit is None or self._final_fit[0] != n:
            aggregator = self.make_aggregator(self._aggregator_seed).fit(log_label_data(state))
            self._final_fit = (
                n,
                np.asarray(aggregator.labels_, dtype=np.int64),
                np.asarray(aggregator.probas_, dtype=float),
            )
        return self._final_fit[1], self._final_fit[2]

    def final_labels(self, state: CampaignState) -> IntArray:
        if len(state.label_log) == 0:
            return super().final_labels(state)
        return self._fitted(state)[0]

    def final_probabilities(self, state: CampaignState) -> FloatArray:
        """The aggregator's class probabilities (``probas_``), the model of
        :meth:`final_labels`."""
        if len(state.label_log) == 0:
            return super().final_probabilities(state)
        return self._fitted(state)[1]


def _check_positive(value: Any, name: str, owner: str, *, integer: bool = False) -> None:
    kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:
        what = "an integer >= 1" if integer else "a number > 0"
        raise InvalidParameterError(f"{owner}: {name} must be {what}, got {value!r}")


class KOSAllocation(AggregatingPolicy):
    """Random (l, r)-regular assignment + KOS inference (Chen et al. §7 baseline "KOS").

    See the module docstring for how the graph is built (budget, finite pools, replay pairs,
    pull mode).

    Args:
        labels_per_worker: r for anonymous workers (virtual workers with r labels each);
            None: r = ⌈T/K⌉. Ignored with a finite worker pool (degrees ⌊E/M⌋ or ⌈E/M⌉).
        n_iter: KOS iterations.
        inference: ``"sum"`` (the paper's KOS messages) or ``"mean"`` (degree-normalised
            worker messages, :class:`~crowdbudget.aggregation.KOS` ``worker_messages``).

    Fitted at the first ``select``: ``plan_items_``, ``plan_workers_`` (n_edges,), the graph
    in asking order.
    """

    budget_aware = True
    chooses_workers = True
    binary_only = True
    keeps_select_state = True  # the graph is drawn at the first select, then walked in it

    def __init__(
        self, labels_per_worker: int | None = None, n_iter: int = 100, inference: str = "sum"
    ) -> None:
        self.labels_per_worker = labels_per_worker
        self.n_iter = n_iter
        self.inference = inference

    def validate_params(self) -> None:
        if self.labels_per_worker is not None:
            _check_positive(self.labels_per_worker, "labels_per_worker", "kos", integer=True)
        _check_positive(self.n_iter, "n_iter", "kos", integer=True)
        if self.inference not in ("sum", "mean"):
            raise InvalidParameterError(
                f"kos: inference must be 'sum' or 'mean', got {self.inference!r}"
            )

    def make_aggregator(self, seed: int) -> Aggregator:
        return KOS(n_iter=self.n_iter, worker_messages=self.inference, rng=seed)

    def _reset_policy(self, problem: Problem, rng: np.random.Generator) -> None:
        self._planned = False

    # ---- the graph ------------------------------------------------------------------------
    def _n_edges(self, state: CampaignState) -> int:
        prices = state.problem.worker_prices
        mean_price = 1.0 if prices is None else float(np.mean(prices))
        return max(int(np.floor(state.remaining / mean_price + 1e-9)), 0)

    def _item_degrees(
        self,
        n_edges: int,
        n_items: int,
        rng: np.random.Generator,
        state: CampaignState,
        worker: int | None,
    ) -> IntArray:
        """Labels per item: the edges spread evenly; over the open items only when the
        question closes items to every worker (live rules: the control items, closed to the
        policy for good; ``worker``'s own items do not count)."""
        availability = state.availability
        # the asking worker's own items (pull mode) are closed to them only
        own = availability.worker_items.get(worker, ()) if worker is not None else ()
        shut = [item for item in availability.closed if item not in own]
        open_items = None
        if shut:
            open_items = np.flatnonzero(state.eligible)
            open_items = open_items[~np.isin(open_items, shut)]
        if open_items is None or open_items.shape[0] == 0:
            degrees = np.full(n_items, n_edges // n_items, dtype=np.int64)
            extra = rng.choice(n_items, size=n_edges % n_items, replace=False)
            degrees[extra] += 1
            return degrees
        n_open = open_items.shape[0]
        degrees = np.zeros(n_items, dtype=np.int64)
        degrees[open_items] = n_edges // n_open
        extra = rng.choice(n_open, size=n_edges % n_open, replace=False)
        degrees[open_items[extra]] += 1
        return degrees

    def _configuration_graph(
        self, state: CampaignState, n_edges: int, rng: np.random.Generator, worker: int | None
    ) -> tuple[IntArray, IntArray]:
        K = state.n_items
        item_deg = self._item_degrees(n_edges, K, rng, state, worker)
        l_max = int(item_deg.max()) if n_edges else 0
        n_workers = state.problem.n_workers
        if n_workers is None:
            r = self.labels_per_worker or max(l_max, 1)
            n_virtual = -(-n_edges // r)
            worker_deg = np.full(n_virtual, r, dtype=np.int64)
            if n_virtual:
                worker_deg[-1] = n_edges - r * (n_virtual - 1)
        else:
            worker_deg = np.full(n_workers, n_edges // n_workers, dtype=np.int64)
            worker_deg[rng.choice(n_workers, size=n_edges % n_workers, replace=False)] += 1
        M = worker_deg.shape[0]
        items = rng.permutation(np.repeat(np.arange(K), item_deg))
        workers = rng.permutation(np.repeat(np.arange(M), worker_deg))
        cap = max(-(-l_max // max(M, 1)), 1)
        for _ in range(KOS_REWIRING_PASSES):
            keys = items * M + workers
            order = np.argsort(keys, kind="stable")
            sorted_keys = keys[order]
            start = np.r_[0, np.flatnonzero(np.diff(sorted_keys)) + 1]
            run = np.repeat(start, np.diff(np.r_[start, sorted_keys.shape[0]]))
            bad = order[(np.arange(sorted_keys.shape[0]) - run) >= cap]
            if bad.size == 0 or bad.size >= n_edges:
                break
            good = np.setdiff1d(np.arange(n_edges), bad)
            partners = rng.choice(good, size=min(bad.size, good.size), replace=False)
            bad = bad[: partners.size]
            workers[bad], workers[partners] = workers[partners], workers[bad].copy()
        return items, workers

    def _replay_graph(
        self, state: CampaignState, n_edges: int, rng: np.random.Generator
    ) -> tuple[IntArray, IntArray]:
        pairs = state.pairs
        assert pairs is not None
        usable = (pairs.remaining > 0) & state.eligible[pairs.items]
        stub_pair = np.repeat(np.flatnonzero(usable), pairs.remaining[usable])
        stub_items = pairs.items[stub_pair]
        # random order inside each item, then rank within the item
        order = np.lexsort((rng.random(stub_pair.shape[0]), stub_items))
        sorted_items = stub_items[order]
        start = np.r_[0, np.flatnonzero(np.diff(sorted_items)) + 1]
        run = np.repeat(start, np.diff(np.r_[start, sorted_items.shape[0]]))
        rank = np.empty(order.shape[0], dtype=np.int64)
        rank[order] = np.arange(order.shape[0]) - run
        # lowest ranks first, random among equal ranks (items with ⌈T/K⌉ chosen at random)
        chosen = np.lexsort((rng.random(rank.shape[0]), rank))[:n_edges]
        return pairs.items[stub_pair[chosen]], pairs.workers[stub_pair[chosen]]

    def _build_plan(self, state: CampaignState, worker: int | None) -> None:
        rng = self.rng_
        n_edges = self._n_edges(state)
        if state.pairs is not None:
            items, workers = self._replay_graph(state, n_edges, rng)
        else:
            items, workers = self._configuration_graph(state, n_edges, rng, worker)
        order = rng.permutation(items.shape[0])
        self.plan_items_ = np.asarray(items[order], dtype=np.int64)
        self.plan_workers_ = np.asarray(workers[order], dtype=np.int64)
        self._quota = np.bincount(self.plan_items_, minlength=state.n_items)
        self._cursor = 0
        # per-worker queues of planned edges (pull mode)
        n_slots = int(max(self.plan_workers_.max(initial=-1) + 1, state.problem.n_workers or 0))
        self._worker_order = np.argsort(self.plan_workers_, kind="stable")
        self._worker_ptr = np.zeros(n_slots + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.plan_workers_, minlength=n_slots), out=self._worker_ptr[1:])
        self._worker_next = self._worker_ptr[:-1].copy()
        self._given = np.zeros(n_slots, dtype=np.int64)  # edges handed to each worker
        self._steal_order = rng.permutation(state.n_items)
        self._steal_next = 0
        self._pair_ptr: IntArray | None = None
        if state.pairs is not None:
            self._pair_lookup = {
                int(k): p
                for p, k in enumerate(
                    (state.pairs.items * max(n_slots, 1) + state.pairs.workers).tolist()
                )
            }
            self._pair_slots = max(n_slots, 1)
            self._pair_order = np.argsort(state.pairs.workers, kind="stable")
            self._pair_ptr = np.zeros(n_slots + 1, dtype=np.int64)
            np.cumsum(np.bincount(state.pairs.workers, minlength=n_slots), out=self._pair_ptr[1:])
        self._planned = True

    # ---- decisions ------------------------------------------------------------------------
    def _pair_open(self, state: CampaignState, item: int, worker: int) -> bool:
        if state.pairs is None:
            return True
        pair = self._pair_lookup.get(item * self._pair_slots + worker)
        return pair is not None and state.pairs.remaining[pair] > 0

    def _usable(self, state: CampaignState, item: int, worker: int) -> bool:
        # open to this question (live rules: not the worker's own, not a control item)
        return bool(
            self._quota[item] > 0
            and state.availability.is_open(item)
            and self._pair_open(state, item, worker)
        )

    def _take(self, state: CampaignState, item: int, worker: int) -> Assignment | None:
        price = state.problem.price_of(worker)
        if not state.can_afford(price):
            return None
        self._quota[item] -= 1
        if worker < self._given.shape[0]:
            self._given[worker] += 1
        return Assignment(item=item, worker=worker, price=price)

    def _stand_in(self, state: CampaignState, item: int) -> int:
        """Push under the live rules: the worker who takes a planned edge of ``item`` whose
        own worker is blocked or holds the item — among the workers the question leaves
        open for ``item`` (not blocked, not holding it, their pair unused, capacity left),
        the one given the fewest edges so far (ties: the lowest index); −1 when none.
        O(n_workers), only when an edge is re-planned (never offline)."""
        availability = state.availability
        best, best_load = -1, 0
        for w in range(self._given.shape[0]):
            if (
                (best < 0 or self._given[w] < best_load)
                and availability.pair_open(item, w)
                and self._pair_open(state, item, w)
                and state.has_capacity(w)
            ):
                best, best_load = w, int(self._given[w])
        return best

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        if not self._planned:
            self._build_plan(state, worker)
        if worker is None:
            availability = state.availability
            while self._cursor < self.plan_items_.shape[0]:
                k = self._cursor
                item, who = int(self.plan_items_[k]), int(self.plan_workers_[k])
                if self._quota[item] <= 0 or not availability.is_open(item):
                    self._cursor += 1
                    continue
                if who in availability.blocked or not availability.pair_open(item, who):
                    # live rules: the edge's worker is blocked or holds the item; another
                    # worker takes the edge (the item keeps its degree), else it is passed
                    who = self._stand_in(state, item)
                if who < 0 or not self._pair_open(state, item, who):
                    self._cursor += 1
                    continue
                assignment = self._take(state, item, who)
                if assignment is not None:
                    self._cursor += 1
                return assignment
            return None
        # pull mode: the worker's own planned edges first
        if worker + 1 < self._worker_ptr.shape[0]:
            end = int(self._worker_ptr[worker + 1])
            while self._worker_next[worker] < end:
                edge = int(self._worker_order[self._worker_next[worker]])
                self._worker_next[worker] += 1
                item = int(self.plan_items_[edge])
                if self._usable(state, item, worker):
                    return self._take(state, item, worker)
        # then quota of another item this worker can label
        if state.pairs is None:
            # the pointer passes items without quota for good; one closed to this worker
            # (live rules) is passed over for this question only
            k = self._steal_next
            while k < state.n_items:
                item = int(self._steal_order[k])
                if self._quota[item] > 0 and state.eligible[item]:
                    if state.availability.is_open(item):
                        return self._take(state, item, worker)
                elif k == self._steal_next:
                    self._steal_next += 1
                k += 1
            return None
        assert self._pair_ptr is not None
        if worker + 1 >= self._pair_ptr.shape[0]:
            return None
        lo, hi = int(self._pair_ptr[worker]), int(self._pair_ptr[worker + 1])
        own = self._pair_order[lo:hi]
        own = own[(state.pairs.remaining[own] > 0) & state.eligible[state.pairs.items[own]]]
        if own.size == 0:
            return None
        own_items = state.pairs.items[own]
        with_quota = own_items[self._quota[own_items] > 0]
        if with_quota.size:
            return self._take(state, int(with_quota[0]), worker)
        # no quota reachable: the worker's least-labeled open item (spends the budget)
        load = state.label_counts[own_items].sum(axis=1) + state.pending[own_items]
        item = int(own_items[int(np.argmin(load))])
        price = state.problem.price_of(worker)
        return (
            Assignment(item=item, worker=worker, price=price) if state.can_afford(price) else None
        )


class RandomBP(AggregatingPolicy):
    """Uniformly random items + belief propagation (Chen et al. §7 baseline "BP").

    Push mode: a uniformly random eligible item, ``worker=None`` (the environment picks a
    random worker: in a replay a random unused record of the item, as §7.2 does for every
    item-only policy). Pull mode: a uniformly random eligible item the arriving worker can
    label (replay: among its unused pairs). Final labels: :class:`~crowdbudget.aggregation.
    BeliefPropagation` with a Beta(``alpha``, ``beta``) reliability prior.

    Drawing a random eligible item: up to 32 uniform draws with rejection, then one draw
    among ``np.flatnonzero(eligible)`` — O(1) expected while most items are eligible.
    """

    budget_aware = False
    chooses_workers = False
    binary_only = False

    def __init__(self, alpha: float = 2.0, beta: float = 1.0, n_nodes: int = 64) -> None:
        self.alpha = alpha
        self.beta = beta
        self.n_nodes = n_nodes

    def validate_params(self) -> None:
        _check_positive(self.alpha, "alpha", "random-bp")
        _check_positive(self.beta, "beta", "random-bp")
        _check_positive(self.n_nodes, "n_nodes", "random-bp", integer=True)

    def make_aggregator(self, seed: int) -> Aggregator:
        return BeliefPropagation(alpha=self.alpha, beta=self.beta, n_nodes=self.n_nodes, rng=seed)

    def _reset_policy(self, problem: Problem, rng: np.random.Generator) -> None:
        self._pair_ptr: IntArray | None = None

    def _random_eligible(self, state: CampaignState) -> int | None:
        rng = self.rng_
        for _ in range(32):
            item = int(rng.integers(state.n_items))
            if state.eligible[item]:
                return item
        candidates = np.flatnonzero(state.eligible)
        return int(rng.choice(candidates)) if candidates.size else None

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        price = self._price(state, worker)
        if not state.can_afford(price):
            return None
        if worker is None or state.pairs is None:
            item = self._random_eligible(state)
            return None if item is None else Assignment(item=item, worker=worker, price=price)
        pairs = state.pairs
        if self._pair_ptr is None:
            n_slots = int(max(pairs.workers.max(initial=-1), worker) + 1)
            self._pair_order = np.argsort(pairs.workers, kind="stable")
            self._pair_ptr = np.zeros(n_slots + 1, dtype=np.int64)
            np.cumsum(np.bincount(pairs.workers, minlength=n_slots), out=self._pair_ptr[1:])
        if worker + 1 >= self._pair_ptr.shape[0]:
            return None
        own = self._pair_order[self._pair_ptr[worker] : self._pair_ptr[worker + 1]]
        own = own[(pairs.remaining[own] > 0) & state.eligible[pairs.items[own]]]
        if own.size == 0:
            return None
        item = int(pairs.items[int(self.rng_.choice(own))])
        return Assignment(item=item, worker=worker, price=price)
