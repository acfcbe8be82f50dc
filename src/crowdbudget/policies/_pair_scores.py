"""Helpers of the worker-aware KG policies' incremental scoring.

- :func:`representatives`: one representative per distinct integer key, in O(n) with a scratch
  table (no sort), and the map back — pairs whose scores are equal by construction (the same
  item state and the same worker parameters) are scored once.
- :class:`WorkerBest`: per worker, the best score of its pairs and how many pairs have it, so
  the argmax over every pair reads the best workers' pairs only.
"""

from __future__ import annotations

import numpy as np

from crowdbudget.types import FloatArray, IntArray

#: largest scratch table of :func:`representatives` (int64 entries); above it, np.unique
_TABLE_LIMIT = 1 << 23


def representatives(
    keys: IntArray, n_keys: int, table: IntArray | None = None
) -> tuple[IntArray, IntArray]:
    """``(reps, inverse)``: ``keys[reps]`` are the distinct keys (one position each) and
    ``keys == keys[reps][inverse]``. Keys are integers in [0, n_keys); ``table``, if given, is a
    scratch array of at least ``n_keys`` entries (its contents are irrelevant)."""
    n = keys.shape[0]
    if n_keys > _TABLE_LIMIT:
        _, reps, inverse = np.unique(keys, return_index=True, return_inverse=True)
        return reps, inverse.reshape(-1)
    if table is None or table.shape[0] < n_keys:
        table = np.empty(n_keys, dtype=np.int64)
    positions = np.arange(n)
    table[keys] = positions  # with repeated keys one position wins, the same for every read
    winner = table[keys]
    first = winner == positions
    reps = np.flatnonzero(first)
    rank = np.cumsum(first) - 1
    return reps, rank[winner]


class WorkerBest:
    """The best score of each worker's pairs and its multiplicity (pairs in CSR groups).

    Args:
        scores: the pair scores (read, never written; the caller keeps it current and calls
            :meth:`refresh` for the workers whose pairs changed).
        ptr, order: ``order[ptr[w]:ptr[w + 1]]`` are worker w's pairs, ascending.
        refresh: False leaves every best at −∞ (the caller refreshes each worker before
            reading it, e.g. a policy that starts with every worker's scores stale).
    """

    def __init__(
        self, scores: FloatArray, ptr: IntArray, order: IntArray, refresh: bool = True
    ) -> None:
        self.scores = scores
        self.ptr = ptr
        self.order = order
        n_workers = ptr.shape[0] - 1
        self.best = np.full(n_workers, -np.inf)
        self.count = np.zeros(n_workers, dtype=np.int64)
        if refresh:
            self.refresh(np.arange(n_workers, dtype=np.int64))

    def pairs_of(self, workers: IntArray) -> tuple[IntArray, IntArray]:
        """The pairs of ``workers`` concatenated in that order, and each worker's count."""
        if workers.shape[0] == 1:
            w = int(workers[0])
            lo, hi = int(self.ptr[w]), int(self.ptr[w + 1])
            return self.order[lo:hi], np.array([hi - lo], dtype=np.int64)
        first = self.ptr[workers]
        lengths = self.ptr[workers + 1] - first
        starts = np.cumsum(lengths) - lengths
        positions = np.arange(int(lengths.sum())) + np.repeat(first - starts, lengths)
        return self.order[positions], lengths

    def refresh(self, workers: IntArray) -> None:
        """Recompute the best score of ``workers`` (distinct) and its multiplicity."""
        pairs, lengths = self.pairs_of(workers)
        has = lengths > 0
        best = np.full(workers.shape[0], -np.inf)
        count = np.zeros(workers.shape[0], dtype=np.int64)
        if pairs.shape[0]:
            values = self.scores[pairs]
            starts = (np.cumsum(lengths) - lengths)[has]
            best[has] = np.maximum.reduceat(values, starts)
            at_best = values == np.repeat(best, lengths)
            count[has] = np.add.reduceat(at_best.astype(np.int64), starts)
        self.best[workers] = best
        self.count[workers] = count

    def refresh_one(self, worker: int) -> None:
        """:meth:`refresh` of a single worker, without the group machinery."""
        lo, hi = int(self.ptr[worker]), int(self.ptr[worker + 1])
        if hi == lo:
            self.best[worker] = -np.inf
            self.count[worker] = 0
            return
        values = self.scores[self.order[lo:hi]]
        top = values.max()
        self.best[worker] = top
        self.count[worker] = int(np.count_nonzero(values == top))

    def tied(self) -> tuple[float, IntArray]:
        """The largest score over every pair and the pairs that have it, ascending."""
        top = float(self.best.max(initial=-np.inf))
        if top == -np.inf:
            return top, np.empty(0, dtype=np.int64)
        workers = np.flatnonzero(self.best == top)
        pairs, _ = self.pairs_of(workers)
        tied = pairs[self.scores[pairs] == top]
        if workers.shape[0] > 1:
            if tied.shape[0] > 512:  # many ties (the start): a mask, O(n_pairs), beats a sort
                mark = np.zeros(self.scores.shape[0], dtype=bool)
                mark[tied] = True
                tied = np.flatnonzero(mark)
            else:
                tied = np.sort(tied)
        return top, tied
