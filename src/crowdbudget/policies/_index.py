"""Argmax of per-item scores without O(n_items) work per decision.

:class:`ScoreBuckets` groups items whose scores are exactly equal. The distinct scores sit in a
max-heap (lazy deletion); inside the top group the tie is broken either by the smallest item
index (``tie_break="first"``: the same choice as ``np.argmax``) or uniformly at random
(``"random"``), each in O(1) or O(log group size). Changing one item's score costs
O(log n_distinct). For index policies on the Beta–Bernoulli MDP the scores depend only on the
item's state (a, b, d), so with a shared prior there are few distinct scores and the structure
is close to the "state buckets" of DESIGN §9.

Scores must be canonical: two items whose scores are mathematically equal must carry the very
same float. :func:`canonical_scores` rounds to 40 significant bits so that, e.g., the symmetric
states (a, b) and (b, a) at d = 0.5 — whose rewards differ only by the rounding of ``betainc``
— tie exactly, as Prop. 3.1 of Chen et al. requires.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any, Literal

import numpy as np

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.types import FloatArray, IntArray

TieBreak = Literal["first", "random"]

#: How the item-selecting policies break a tie among items by default: uniformly at random, so
#: a result does not depend on the order of the items in the file. The smallest index
#: (``"first"``, what ``np.argmax`` does) is available as ``tie-break=first``.
DEFAULT_TIE_BREAK: TieBreak = "random"

#: The papers' rule (the smallest index among the best — deterministic KG of Chen et al.'s
#: Prop. 3.1, Algorithm 1's ``argmax``): what every faithful reproduction pins
#: (:func:`crowdbudget.registry.pin_paper_ties`).
PAPER_TIE_BREAK: TieBreak = "first"


def csr_groups(keys: IntArray, n: int) -> tuple[IntArray, IntArray]:
    """Group the indices of ``keys`` (values 0..n−1) by key: ``(ptr, order)`` with
    ``order[ptr[k]:ptr[k + 1]]`` the indices whose key is k, ascending (CSR offsets)."""
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, order


def check_tie_break(value: object) -> None:
    """Raise :class:`InvalidParameterError` unless ``value`` is ``"first"`` or ``"random"``."""
    if value not in ("first", "random"):
        raise InvalidParameterError(f"tie_break must be 'first' or 'random', got {value!r}")


_MANTISSA_BITS = 40


def canonical_scores(scores: FloatArray) -> FloatArray:
    """Round to 40 significant bits (about 12 decimal digits), keeping sign and order.

    Differences below ~1e-12 relative are numerical noise of the special functions; rounding
    them away makes mathematically equal scores bit-identical. NaN is mapped to -inf so an
    undefined score never wins.
    """
    scores = np.asarray(scores, dtype=float)
    mantissa, exponent = np.frexp(scores)
    rounded = np.ldexp(np.round(mantissa * 2.0**_MANTISSA_BITS) / 2.0**_MANTISSA_BITS, exponent)
    return np.where(np.isnan(rounded), -np.inf, rounded)


class ScoreBuckets:
    """Items grouped by score, answering "which item has the largest score?".

    Args:
        scores: canonical scores, shape (n_items,).
        tie_break: ``"first"`` (smallest item index among the best) or ``"random"``.
        order: ``"random"`` only: a permutation of the items giving the order of the members
            inside each score group (default ascending) — the draw ``rng.integers(size)``
            picks a position in it, so restoring a structure exactly (the compiled engine's
            ``restore_scores``) needs it.
    """

    def __init__(
        self, scores: FloatArray, tie_break: TieBreak = "first", order: IntArray | None = None
    ) -> None:
        scores = np.asarray(scores, dtype=float)
        self.n_items = scores.shape[0]
        self.tie_break = tie_break
        self._score = scores.copy()
        self._present = np.ones(self.n_items, dtype=bool)
        self._count: dict[float, int] = {}
        self._members: dict[float, list[int]] = {}
        self._position = np.zeros(self.n_items, dtype=np.int64)  # "random": index in members
        keys, inverse = np.unique(scores, return_inverse=True)
        inverse = inverse.reshape(-1)
        if order is None or tie_break != "random":
            order = np.argsort(inverse, kind="stable")  # items grouped by key, ascending inside
        else:  # grouped by key, in the given order inside
            order = np.asarray(order, dtype=np.int64)
            order = order[np.argsort(inverse[order], kind="stable")]
        bounds = np.searchsorted(inverse[order], np.arange(keys.shape[0] + 1))
        for k, key in enumerate(keys.tolist()):
            group = order[bounds[k] : bounds[k + 1]]
            self._members[key] = group.tolist()  # "first": ascending, a valid min-heap
            self._count[key] = int(group.shape[0])
            if tie_break == "random":
                self._position[group] = np.arange(group.shape[0])
        self._keys = [-key for key in keys.tolist()]
        heapq.heapify(self._keys)
        self._in_keys = set(keys.tolist())

    def __len__(self) -> int:
        return sum(self._count.values())

    def scores_of(self, items: IntArray) -> FloatArray:
        """Current scores of ``items`` (removed items included), shape like ``items``."""
        return self._score[items]

    def score(self, item: int) -> float:
        return float(self._score[item])

    def _add(self, item: int, key: float) -> None:
        self._score[item] = key
        members = self._members.get(key)
        if members is None:
            members = self._members[key] = []
            self._count[key] = 0
        if self.tie_break == "random":
            self._position[item] = len(members)
            members.append(item)
        else:
            heapq.heappush(members, item)
        self._count[key] += 1
        if key not in self._in_keys:
            heapq.heappush(self._keys, -key)
            self._in_keys.add(key)

    def _discard(self, item: int) -> None:
        key = float(self._score[item])
        self._count[key] -= 1
        if self.tie_break == "random":
            members = self._members[key]
            pos = int(self._position[item])
            last = members.pop()
            if last != item:
                members[pos] = last
                self._position[last] = pos
        # "first": the heap entry goes stale and is dropped lazily in best()

    def update(self, item: int, score: float) -> None:
        """Give ``item`` a new (canonical) score."""
        if not self._present[item]:
            return
        if score == self._score[item]:
            return
        self._discard(item)
        self._add(item, score)

    def remove(self, item: int) -> None:
        """Take ``item`` out for good (it is no longer eligible)."""
        if self._present[item]:
            self._discard(item)
            self._present[item] = False

    def best(self, rng: np.random.Generator | None = None) -> int | None:
        """The item with the largest score (None when no item is left)."""
        while self._keys:
            key = -self._keys[0]
            if self._count.get(key, 0) > 0:
                members = self._members[key]
                if self.tie_break == "random":
                    assert rng is not None, "random tie-breaking needs a generator"
                    return (
                        members[int(rng.integers(len(members)))] if len(members) > 1 else members[0]
                    )
                # lazy deletion: an entry is live iff the item is present with this score
                while not (self._present[members[0]] and self._score[members[0]] == key):
                    heapq.heappop(members)
                return members[0]
            heapq.heappop(self._keys)
            self._in_keys.discard(key)
            if self.tie_break == "first":
                self._members[key] = []  # every entry is stale
        return None

    def best_excluding(
        self,
        excluded: Collection[int],
        usable: Callable[[int], bool],
        rng: np.random.Generator | None = None,
    ) -> int | None:
        """The best present item not in ``excluded`` and for which ``usable(item)`` holds.

        Walks the heap of distinct scores in decreasing order and, inside a score group, the
        members in ``best``'s order — both lazily (:func:`_heap_in_order`), so the cost grows
        with the number of items skipped (``excluded``, unusable, stale), not with n_items.
        For ``"random"`` a few uniform draws come first, then the group in index order.
        Nothing is modified; items failing ``usable`` are skipped, not removed.
        """
        for negative_key in _heap_in_order(self._keys):
            key = -negative_key
            if self._count.get(key, 0) <= 0:
                continue
            members = self._members[key]
            if self.tie_break == "random":
                # "random" groups hold exactly their live members
                assert rng is not None, "random tie-breaking needs a generator"
                for _ in range(min(8, len(members))):
                    item = members[int(rng.integers(len(members)))]
                    if item not in excluded and usable(item):
                        return item
                candidates: Iterable[int] = sorted(members)
            else:  # "first" groups are heaps with stale entries, skipped on the way
                # drop stale entries at the top for good (as best() does), so they are not
                # walked again on every call
                while members and not (
                    self._present[members[0]] and self._score[members[0]] == key
                ):
                    heapq.heappop(members)
                candidates = (
                    m for m in _heap_in_order(members) if self._present[m] and self._score[m] == key
                )
            seen: set[int] = set()
            for item in candidates:
                if item in seen:  # a heap may hold an item twice (re-added with this score)
                    continue
                seen.add(item)
                if item not in excluded and usable(item):
                    return item
        return None


def _heap_in_order(heap: list[Any]) -> Iterator[Any]:
    """The entries of a binary min-heap in ascending order, lazily: O(k log k) for the first
    k (a frontier heap of positions, children pushed as parents are popped); the heap itself
    is not modified."""
    if not heap:
        return
    frontier = [(heap[0], 0)]
    n = len(heap)
    while frontier:
        value, position = heapq.heappop(frontier)
        yield value
        for child in (2 * position + 1, 2 * position + 2):
            if child < n:
                heapq.heappush(frontier, (heap[child], child))
