"""Baseline allocations: uniform sampling and round-robin ("looping").

Uniform (Chen et al. §3.1, "pure exploration"): each label goes to an eligible item drawn
uniformly at random. Round-robin (Li et al. 2016 "looping"): items in index order, over and
over. Both are O(1) amortised per decision: ineligible items are dropped lazily.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection

import numpy as np

from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.types import Assignment, CampaignState, Problem


class UniformPolicy(AllocationPolicy):
    """Each label goes to an eligible item drawn uniformly at random (with replacement)."""

    binary_only = False
    replay_pull = True

    def __init__(self) -> None:
        pass

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        self._alive = np.arange(problem.n_items, dtype=np.int64)
        self._n_alive = problem.n_items

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        return state.availability.offer(worker, lambda price: self._draw(state, worker, price))

    def _draw(self, state: CampaignState, worker: int | None, price: float) -> Assignment | None:
        """Uniform over the open items (of ``worker``'s recorded pairs, on a replay)."""
        excluded = state.availability.closed
        mine = state.availability.items_for_worker(worker)
        if mine is not None:  # pull mode on a replay: uniform over the worker's items
            if mine.shape[0] == 0:
                return None
            item = int(mine[int(self.rng_.integers(mine.shape[0]))])
            return Assignment(item=item, worker=worker, price=price)
        if excluded:
            return self._select_outside(state, excluded, worker, price)
        while self._n_alive > 0:
            slot = int(self.rng_.integers(self._n_alive))
            item = int(self._alive[slot])
            if state.eligible[item]:
                return Assignment(item=item, worker=worker, price=price)
            # swap-remove the ineligible item; it never comes back
            self._n_alive -= 1
            self._alive[slot] = self._alive[self._n_alive]
        return None

    def _select_outside(
        self, state: CampaignState, excluded: Collection[int], worker: int | None, price: float
    ) -> Assignment | None:
        """Uniform over eligible items outside ``excluded`` (``availability.closed``, live):
        rejection sampling (a few draws), then a scan of the remaining items in random order
        (O(n_items), only when the worker has labeled most items)."""
        alive = self._alive[: self._n_alive]
        for _ in range(16):
            if alive.shape[0] == 0:
                return None
            item = int(alive[int(self.rng_.integers(alive.shape[0]))])
            if state.eligible[item] and item not in excluded:
                return Assignment(item=item, worker=worker, price=price)
        for item in self.rng_.permutation(alive).tolist():
            if state.eligible[item] and item not in excluded:
                return Assignment(item=item, worker=worker, price=price)
        return None


class RoundRobinPolicy(AllocationPolicy):
    """Items in index order, cycling ("looping" in Li et al. 2016).

    An item closed to the question (``availability.closed``: in a live campaign, the asking
    worker's own items) keeps its place in the cycle and the next open one is named, so a
    live campaign spends its budget while any worker can label any open item (the scan is
    O(|excluded|) per decision). Without exclusions the cycle is the papers' exactly.
    """

    binary_only = False
    replay_pull = True
    keeps_select_state = True  # the cycle's order and the replay cursor move in select

    def __init__(self) -> None:
        pass

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        self._queue: deque[int] = deque(range(problem.n_items))
        self._cursor = 0  # pull mode on a replay: the next item in the cycle

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        return state.availability.offer(worker, lambda price: self._next(state, worker, price))

    def _next(self, state: CampaignState, worker: int | None, price: float) -> Assignment | None:
        """The next open item of the cycle (of ``worker``'s recorded pairs, on a replay)."""
        mine = state.availability.items_for_worker(worker)
        if mine is not None:  # pull mode on a replay: the worker's next item in the cycle
            if mine.shape[0] == 0:
                return None
            at = int(np.searchsorted(mine, self._cursor))
            item = int(mine[at % mine.shape[0]])
            self._cursor = item + 1
            return Assignment(item=item, worker=worker, price=price)
        excluded = state.availability.closed
        position = 0
        while position < len(self._queue):
            item = self._queue[position]
            if not state.eligible[item]:
                del self._queue[position]  # finished for good: leaves the cycle
            elif item in excluded:
                position += 1  # keeps its place for the next question
            else:
                del self._queue[position]
                self._queue.append(item)
                return Assignment(item=item, worker=worker, price=price)
        return None
