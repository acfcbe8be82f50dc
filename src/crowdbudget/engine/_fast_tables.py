"""The Python-side structures of the fast engine (:mod:`crowdbudget.engine.fast`): the table
of canonical scores per label-count state, the score groups of random tie-breaking and the
world's answer tiles, each laid out in the flat arrays the compiled loops
(:mod:`crowdbudget.engine._fast_kernel`) read.
"""

from __future__ import annotations

import numpy as np

from crowdbudget.engine._fast_kernel import EMPTY, hash_contains, hash_find, hash_insert_many
from crowdbudget.policies.index_policy import BetaIndexPolicy
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.types import FloatArray, IntArray


def grown(array: np.ndarray, length: int, fill: float | int) -> np.ndarray:
    """``array`` with its first axis extended to at least ``length`` (doubling)."""
    size = array.shape[0]
    if length <= size:
        return array
    new_size = max(length, 2 * size, 1)
    out = np.full((new_size, *array.shape[1:]), fill, dtype=array.dtype)
    out[:size] = array
    return out


class ScoreTable:
    """Canonical scores of label-count states ``(p, q)``, computed on demand, in an
    open-addressing hash table the compiled loop reads (key ``p << 32 | q``), with the id of
    each state's score group (one per distinct score, in order of appearance: the groups of
    random tie-breaking, ``group_scores``)."""

    def __init__(
        self, policy: BetaIndexPolicy, prior_a: float, prior_b: float, threshold: float, cap: int
    ) -> None:
        self.policy = policy
        self.threshold = threshold
        self.prior_a = prior_a
        self.prior_b = prior_b
        self.a_values = self._cumulative(prior_a, 64)
        self.b_values = self._cumulative(prior_b, 64)
        capacity = max(2, 1 << max(1, cap - 1).bit_length())
        self.keys = np.full(capacity, EMPTY, dtype=np.int64)
        self.scores = np.zeros(capacity)
        self.groups = np.zeros(capacity, dtype=np.int64)
        self.size = 0
        self.group_of: dict[float, int] = {}
        self.group_scores: list[float] = []

    @staticmethod
    def _cumulative(prior: float, length: int) -> FloatArray:
        # prior + 1.0 + 1.0 + ..., added one at a time as the reference posterior does
        steps = np.ones(length)
        steps[0] = prior
        return np.add.accumulate(steps)

    def add(self, p: IntArray, q: IntArray) -> None:
        """Compute and store the scores of the states ``(p[j], q[j])`` not stored yet."""
        keys = np.unique((p << 32) | q)
        keys = keys[~hash_contains(self.keys, keys)]
        if keys.shape[0] == 0:
            return
        p, q = keys >> 32, keys & 0xFFFFFFFF
        top_p, top_q = int(p.max()) + 1, int(q.max()) + 1
        if top_p > self.a_values.shape[0]:
            self.a_values = self._cumulative(self.prior_a, max(top_p, 2 * self.a_values.shape[0]))
        if top_q > self.b_values.shape[0]:
            self.b_values = self._cumulative(self.prior_b, max(top_q, 2 * self.b_values.shape[0]))
        a, b = self.a_values[p], self.b_values[q]
        scores = self.policy.index_scores(a, b, np.full(a.shape, self.threshold))
        groups = np.empty(keys.shape[0], dtype=np.int64)
        for j, score in enumerate(scores.tolist()):  # equal floats, one group (as a dict key)
            group = self.group_of.get(score)
            if group is None:
                group = self.group_of[score] = len(self.group_scores)
                self.group_scores.append(score)
            groups[j] = group
        self.size += keys.shape[0]
        if 2 * self.size > self.keys.shape[0]:
            capacity = self.keys.shape[0]
            while 2 * self.size > capacity:
                capacity *= 2
            live = self.keys != EMPTY
            old = self.keys[live], self.scores[live], self.groups[live]
            self.keys = np.full(capacity, EMPTY, dtype=np.int64)
            self.scores = np.zeros(capacity)
            self.groups = np.zeros(capacity, dtype=np.int64)
            hash_insert_many(self.keys, self.scores, self.groups, *old)
        hash_insert_many(self.keys, self.scores, self.groups, keys, scores, groups)

    def score(self, p: int, q: int) -> float:
        self.add(np.array([p], dtype=np.int64), np.array([q], dtype=np.int64))
        return float(self.scores[hash_find(self.keys, (p << 32) | q)])

    def group(self, p: int, q: int) -> int:
        self.add(np.array([p], dtype=np.int64), np.array([q], dtype=np.int64))
        return int(self.groups[hash_find(self.keys, (p << 32) | q)])


class Groups:
    """The score groups of random tie-breaking (:func:`campaign_loop_random`): every item in
    one group (at first all in ``first_group``, in index order, as ``ScoreBuckets``), the
    members of each group in a slice of one pool, moved to a slice twice as large when full
    (amortised O(1); the pool holds O(n_items + decisions))."""

    def __init__(self, n_items: int, first_group: int) -> None:
        self.item_group = np.full(n_items, first_group, dtype=np.int64)
        self.position = np.arange(n_items, dtype=np.int64)
        self.members = np.arange(max(n_items, 1) * 2, dtype=np.int64)
        self.used = n_items
        size = max(16, first_group + 1)
        self.start = np.zeros(size, dtype=np.int64)
        self.size = np.zeros(size, dtype=np.int64)
        self.cap = np.zeros(size, dtype=np.int64)
        self.in_heap = np.zeros(size, dtype=np.bool_)
        self.heap = np.zeros(size, dtype=np.int64)
        self.scores = np.zeros(size)
        self.known = 0
        self.size[first_group] = self.cap[first_group] = n_items
        self.in_heap[first_group] = True
        self.heap[0] = first_group

    def sync(self, group_scores: list[float]) -> None:
        """Make room for every group the score table has named (new ones empty)."""
        n = len(group_scores)
        if n > self.start.shape[0]:
            size = max(n, 2 * self.start.shape[0])
            self.start = grown(self.start, size, 0)
            self.size = grown(self.size, size, 0)
            self.cap = grown(self.cap, size, 0)
            self.in_heap = grown(self.in_heap, size, False)
            self.heap = grown(self.heap, size, 0)
            self.scores = grown(self.scores, size, 0.0)
        self.scores[self.known : n] = group_scores[self.known : n]
        self.known = n

    def make_room(self, group: int) -> None:
        """Move ``group``'s members to a fresh slice of twice its capacity (at least 4)."""
        cap = max(4, 2 * int(self.cap[group]))
        self.members = grown(self.members, self.used + cap, 0)
        start, size = int(self.start[group]), int(self.size[group])
        self.members[self.used : self.used + size] = self.members[start : start + size]
        self.start[group] = self.used
        self.cap[group] = cap
        self.used += cap

    def order(self) -> IntArray:
        """The items, group by group, each group's members in their order."""
        live = np.flatnonzero(self.size)
        return np.concatenate(
            [self.members[self.start[g] : self.start[g] + self.size[g]] for g in live]
        )


class Tiles:
    """The world's answers as 0/1 tiles in one flat int8 pool, indexed by (item block, label
    block)."""

    def __init__(self, env: SyntheticBernoulliEnvironment, cap: int) -> None:
        self.env = env
        self.tile_items, self.tile_labels = env.answer_tile_shape
        self.item_shift = self.tile_items.bit_length() - 1
        self.label_shift = self.tile_labels.bit_length() - 1
        n_item_blocks = -(-env.n_items // self.tile_items)
        self.directory = np.full((n_item_blocks, max(1, cap)), EMPTY, dtype=np.int64)
        self.pool = np.zeros(min(env.n_items, self.tile_items) * self.tile_labels, dtype=np.int8)
        self.used = 0

    def add(self, item_block: int, label_block: int) -> None:
        # generated (and cached) by the environment's own code
        labels = self.env.noiseless_answer_tile(item_block, label_block).reshape(-1)
        if label_block >= self.directory.shape[1]:
            width = max(label_block + 1, 2 * self.directory.shape[1])
            directory = np.full((self.directory.shape[0], width), EMPTY, dtype=np.int64)
            directory[:, : self.directory.shape[1]] = self.directory
            self.directory = directory
        self.pool = grown(self.pool, self.used + labels.shape[0], 0)
        self.pool[self.used : self.used + labels.shape[0]] = labels
        self.directory[item_block, label_block] = self.used
        self.used += labels.shape[0]

    def answers(self, item: int, first: int, count: int) -> np.ndarray:
        """Answers ``first, ..., first + count - 1`` of ``item`` (0/1, int8)."""
        out = np.empty(count, dtype=np.int8)
        item_block = item >> self.item_shift
        row = (item & (self.tile_items - 1)) * self.tile_labels
        k = first
        while k < first + count:
            label_block = k >> self.label_shift
            if (
                label_block >= self.directory.shape[1]
                or self.directory[item_block, label_block] == EMPTY
            ):
                self.add(item_block, label_block)
            start = int(self.directory[item_block, label_block]) + row
            lo = k - label_block * self.tile_labels
            hi = min(self.tile_labels, first + count - label_block * self.tile_labels)
            out[k - first : k - first + hi - lo] = self.pool[start + lo : start + hi]
            k += hi - lo
        return out
