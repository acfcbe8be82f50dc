"""An incremental refit of the binary one-coin worker-aware policy (``refit_tol > 0``; ours).

The refit of :class:`~crowdbudget.policies.worker_aware.OneCoinKnowledgeGradient` (``refit=N``)
re-reads every label so far in three rounds of item and worker steps inside the model of Chen,
Lin, Zhou (2013), §4: O(labels) per refit, so O(T²/N) over a campaign of T labels — on trec at
4 labels per item most of a replay's time. This module keeps what a refit needs between refits
and re-reads only what changed:

- **Links.** Every label is linked into its item's list and its worker's list (arrival order;
  arrays ``(n_labels,)`` of the next label of the same item / worker, −1 at the end), so an
  item's labels or a worker's labels are read without a scan of the log.
- **Sufficient statistics per worker.** The worker step of a refit is
  ``c_j = c0 + Σ P(agree)``, ``d_j = d0 + n_j − Σ P(agree)`` with P(agree) = E[θ_i] for a label
  1 and 1 − E[θ_i] for a 0 (``right[j]`` = the sum, ``answered[j]`` = n_j). Each label keeps
  the agreement it currently adds (``contrib``), so an item re-read updates ``right`` of its
  labels' workers by the differences: O(labels of the item).
- **Dirty items.** The item step (the paper's moment matching of an item's labels in arrival
  order from its prior, the workers' mean reliabilities held fixed — the operations of
  :func:`~crowdbudget.policies._one_coin_kernel.reestimate`) runs only for the items with a
  new label and the items of the workers whose mean reliability moved by more than ``tol``
  since their items were last re-read (``r_used``). A worker below the tolerance gets its new
  Beta but its items keep beliefs computed with a reliability within ``tol`` of it.

Each refit runs at most ``n_rounds`` item/worker rounds and stops early when no item is dirty;
items left dirty after the last round are re-read first at the next refit (a warm start: the
fit carries over, instead of every item and worker restarting from scratch). With tol > 0 the
beliefs differ from the full refit's (the items not re-read keep beliefs up to ``tol`` off in
their workers' reliabilities). The policy runs it between full refits (``refit_exact_until``,
``refit_exact_growth``: :mod:`~crowdbudget.policies.worker_aware`); after each full refit
:func:`resync_after_full_refit` sets the statistics to its fit, so the incremental refits
continue from it (docs/decisions.md, benchmarks/README.md).

Cost of a refit: O(labels of the dirty items + labels of the workers that passed the
tolerance), not O(all labels).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from crowdbudget.policies._one_coin_kernel import match_label
from crowdbudget.types import FloatArray, IntArray


@njit(cache=True, nogil=True)
def _reread_item(
    i: int,
    first: IntArray,
    next_label: IntArray,
    workers: IntArray,
    labels: IntArray,
    prior_a: FloatArray,
    prior_b: FloatArray,
    c: FloatArray,
    d: FloatArray,
) -> tuple[float, float]:
    """Item i's Beta (a, b): its prior, then its labels in arrival order by
    :func:`~crowdbudget.policies._one_coin_kernel.match_label` (``reestimate``'s item step),
    workers' means ``c / (c + d)``."""
    ai = prior_a[i]
    bi = prior_b[i]
    k = first[i]
    while k >= 0:
        w = workers[k]
        ai, bi = match_label(ai, bi, c[w] / (c[w] + d[w]), labels[k] == 1)
        k = next_label[k]
    return ai, bi


@njit(cache=True, nogil=True)
def link_labels(
    items: IntArray,
    workers: IntArray,
    start: int,
    stop: int,
    links: tuple[IntArray, IntArray, IntArray, IntArray, IntArray, IntArray],
    contrib: FloatArray,
    answered: IntArray,
) -> None:
    """Append labels ``start..stop-1`` of the log to their item's and worker's lists.

    ``links`` = (item_first, item_last, next_of_item, worker_first, worker_last,
    next_of_worker): heads and tails (n_items,) / (n_workers,), next pointers (n_labels,)."""
    item_first, item_last, next_item, worker_first, worker_last, next_worker = links
    for k in range(start, stop):
        i = items[k]
        w = workers[k]
        next_item[k] = -1
        next_worker[k] = -1
        contrib[k] = 0.0  # counted in right[w] once its item is re-read
        if item_last[i] < 0:
            item_first[i] = k
        else:
            next_item[item_last[i]] = k
        item_last[i] = k
        if worker_last[w] < 0:
            worker_first[w] = k
        else:
            next_worker[worker_last[w]] = k
        worker_last[w] = k
        answered[w] += 1


@njit(cache=True, nogil=True)
def incremental_refit(
    log: IntArray,
    start: int,
    stop: int,
    links: tuple[IntArray, IntArray, IntArray, IntArray, IntArray, IntArray],
    stats: tuple[FloatArray, IntArray, FloatArray, FloatArray],
    dirty: tuple[IntArray, IntArray, IntArray],
    beliefs: tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray],
    c0: float,
    d0: float,
    tol: float,
    n_rounds: int,
    changed_items: IntArray,
    changed_workers: IntArray,
) -> tuple[int, int]:
    """One incremental refit (module docstring), in place.

    Args:
        log: (n_labels, 3) rows (item, worker, label); labels ``start..stop-1`` are new since
            the last refit (linked here).
        links: see :func:`link_labels`.
        stats: (contrib (n_labels,), answered (n_workers,), right (n_workers,), r_used
            (n_workers,)).
        dirty: (mark (n_items,) 0/1, list (n_items,), count (1,)): the items to re-read,
            carried between refits.
        beliefs: (prior_a, prior_b, a, b, c, d) — the items' prior and Beta (n_items,), the
            workers' Beta (n_workers,); a, b, c, d written in place.
        changed_items, changed_workers: outputs (n_items,), (n_workers,) — the items re-read
            and the workers whose Beta was re-set.

    Returns:
        (number of changed items, number of changed workers), each listed once.
    """
    items = log[:, 0]
    workers = log[:, 1]
    labels = log[:, 2]
    contrib, answered, right, r_used = stats
    item_first, _, next_item, worker_first, _, next_worker = links
    mark, dirty_list, dirty_count = dirty
    prior_a, prior_b, a, b, c, d = beliefs
    n_items = a.shape[0]
    n_workers = c.shape[0]
    link_labels(items, workers, start, stop, links, contrib, answered)
    touched = np.empty(n_workers, dtype=np.int64)
    touched_mark = np.zeros(n_workers, dtype=np.bool_)
    item_seen = np.zeros(n_items, dtype=np.bool_)
    worker_seen = np.zeros(n_workers, dtype=np.bool_)
    n_touched = 0
    n_dirty = dirty_count[0]
    for k in range(start, stop):
        i = items[k]
        w = workers[k]
        if not mark[i]:
            mark[i] = 1
            dirty_list[n_dirty] = i
            n_dirty += 1
        if not touched_mark[w]:  # its count changed (and the label's online update its Beta)
            touched_mark[w] = True
            touched[n_touched] = w
            n_touched += 1
    n_ci = 0
    n_cw = 0
    for _ in range(n_rounds):
        if n_dirty == 0 and n_touched == 0:
            break
        # items: re-read the dirty ones, and move their labels' agreements in right[]
        for n in range(n_dirty):
            i = dirty_list[n]
            mark[i] = 0
            ai, bi = _reread_item(i, item_first, next_item, workers, labels, prior_a, prior_b, c, d)
            a[i] = ai
            b[i] = bi
            if not item_seen[i]:
                item_seen[i] = True
                changed_items[n_ci] = i
                n_ci += 1
            mean = ai / (ai + bi)
            k = item_first[i]
            while k >= 0:
                w = workers[k]
                agree = mean if labels[k] == 1 else 1.0 - mean
                right[w] += agree - contrib[k]
                contrib[k] = agree
                if not touched_mark[w]:
                    touched_mark[w] = True
                    touched[n_touched] = w
                    n_touched += 1
                k = next_item[k]
        n_dirty = 0
        # workers: prior + expected agreements; past the tolerance, their items are dirty
        for n in range(n_touched):
            w = touched[n]
            touched_mark[w] = False
            c[w] = c0 + right[w]
            d[w] = d0 + (answered[w] - right[w])
            if not worker_seen[w]:
                worker_seen[w] = True
                changed_workers[n_cw] = w
                n_cw += 1
            r = c[w] / (c[w] + d[w])
            if abs(r - r_used[w]) > tol:
                r_used[w] = r
                k = worker_first[w]
                while k >= 0:
                    i = items[k]
                    if not mark[i]:
                        mark[i] = 1
                        dirty_list[n_dirty] = i
                        n_dirty += 1
                    k = next_worker[k]
        n_touched = 0
    dirty_count[0] = n_dirty
    return n_ci, n_cw


@njit(cache=True, nogil=True)
def resync_after_full_refit(
    log: IntArray,
    start: int,
    links: tuple[IntArray, IntArray, IntArray, IntArray, IntArray, IntArray],
    stats: tuple[FloatArray, IntArray, FloatArray, FloatArray],
    dirty: tuple[IntArray, IntArray, IntArray],
    a: FloatArray,
    b: FloatArray,
    c: FloatArray,
    d: FloatArray,
) -> None:
    """After a full refit of the whole log ``(n_labels, 3)``: link labels ``start..`` and set
    every statistic to the full refit's beliefs, so the next incremental refit continues from
    them — ``contrib[k]`` the agreement of label k with its item's mean ``a / (a + b)``
    (n_items,), ``right`` their sums per worker in label order (the full refit's worker
    step sums the same terms in the same order: ``c = c0 + right`` bit for bit), ``r_used``
    the workers' current means ``c / (c + d)`` (n_workers,), no item dirty. O(labels)."""
    items = log[:, 0]
    workers = log[:, 1]
    labels = log[:, 2]
    contrib, answered, right, r_used = stats
    mark, _, dirty_count = dirty
    link_labels(items, workers, start, log.shape[0], links, contrib, answered)
    right[:] = 0.0
    for k in range(log.shape[0]):
        i = items[k]
        mean = a[i] / (a[i] + b[i])
        agree = mean if labels[k] == 1 else 1.0 - mean
        contrib[k] = agree
        right[workers[k]] += agree
    for w in range(c.shape[0]):
        r_used[w] = c[w] / (c[w] + d[w])
    mark[:] = 0
    dirty_count[0] = 0


@njit(cache=True, nogil=True)
def workers_of_items(
    items: IntArray,
    item_ptr: IntArray,
    item_order: IntArray,
    pair_workers: IntArray,
    mark: np.ndarray,
    out: IntArray,
) -> int:
    """The workers with a pair of one of ``items`` whose ``mark`` is False, each once, into
    ``out`` (marked True here); returns their number. O(pairs of the items)."""
    n = 0
    for t in range(items.shape[0]):
        i = items[t]
        for k in range(item_ptr[i], item_ptr[i + 1]):
            w = pair_workers[item_order[k]]
            if not mark[w]:
                mark[w] = True
                out[n] = w
                n += 1
    return n


class IncrementalRefitState:
    """What the incremental refit keeps between refits (module docstring), grown with the
    log. Arrays: per label (capacity,), per item (n_items,), per worker (n_workers,)."""

    def __init__(self, n_items: int, n_workers: int, c0: float, d0: float) -> None:
        capacity = 64
        self.n_linked = 0
        self.item_first = np.full(n_items, -1, dtype=np.int64)
        self.item_last = np.full(n_items, -1, dtype=np.int64)
        self.next_of_item = np.empty(capacity, dtype=np.int64)
        self.worker_first = np.full(n_workers, -1, dtype=np.int64)
        self.worker_last = np.full(n_workers, -1, dtype=np.int64)
        self.next_of_worker = np.empty(capacity, dtype=np.int64)
        self.contrib = np.empty(capacity)
        self.answered = np.zeros(n_workers, dtype=np.int64)
        self.right = np.zeros(n_workers)
        # the reliability a worker's items were last re-read with: the prior's mean at first
        self.r_used = np.full(n_workers, c0 / (c0 + d0))
        self.mark = np.zeros(n_items, dtype=np.int64)
        self.dirty_list = np.empty(n_items, dtype=np.int64)
        self.dirty_count = np.zeros(1, dtype=np.int64)
        self.changed_items = np.empty(n_items, dtype=np.int64)
        self.changed_workers = np.empty(n_workers, dtype=np.int64)

    def _reserve(self, n_labels: int) -> None:
        if n_labels <= self.contrib.shape[0]:
            return
        size = self.contrib.shape[0]
        while size < n_labels:
            size *= 2
        for name in ("next_of_item", "next_of_worker", "contrib"):
            old = getattr(self, name)
            new = np.empty(size, dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)

    def resync(
        self, log: IntArray, a: FloatArray, b: FloatArray, c: FloatArray, d: FloatArray
    ) -> None:
        """After a full refit of ``log``: :func:`resync_after_full_refit`."""
        self._reserve(log.shape[0])
        resync_after_full_refit(
            log,
            self.n_linked,
            self._links(),
            (self.contrib, self.answered, self.right, self.r_used),
            (self.mark, self.dirty_list, self.dirty_count),
            a,
            b,
            c,
            d,
        )
        self.n_linked = log.shape[0]

    def _links(self) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray, IntArray]:
        return (
            self.item_first,
            self.item_last,
            self.next_of_item,
            self.worker_first,
            self.worker_last,
            self.next_of_worker,
        )

    def refit(
        self,
        log: IntArray,
        beliefs: tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray],
        c0: float,
        d0: float,
        tol: float,
        n_rounds: int,
    ) -> tuple[IntArray, IntArray]:
        """Link the log's new rows and run :func:`incremental_refit`; returns the changed items
        and workers (views, valid until the next call)."""
        n_labels = log.shape[0]
        self._reserve(n_labels)
        n_ci, n_cw = incremental_refit(
            log,
            self.n_linked,
            n_labels,
            self._links(),
            (self.contrib, self.answered, self.right, self.r_used),
            (self.mark, self.dirty_list, self.dirty_count),
            beliefs,
            float(c0),
            float(d0),
            float(tol),
            int(n_rounds),
            self.changed_items,
            self.changed_workers,
        )
        self.n_linked = n_labels
        return self.changed_items[:n_ci], self.changed_workers[:n_cw]
