"""The push-mode choice of worker-aware Opt-KG on a replay, by per-item bounds (compiled).

The push choice is the argmax of the Opt-KG score over every live (item, worker) pair (Chen,
Lin, Zhou 2013, §4). A refit (``refit=N``) changes every item's and every worker's Beta, so
the per-worker bests of :class:`~crowdbudget.policies._pair_scores.WorkerBest` need every live
pair rescored before the next choice — two incomplete betas per pair, every N labels.

Here the argmax reads one bound per item instead. For a fixed item state the Opt-KG score
of a pair, ``max(R_1, R_0)`` with ``R_z = h(now) − h(after z)``, is non-decreasing in the
worker's mean reliability ρ on [1/2, 1] and non-increasing on [0, 1/2] (a surer worker moves
the belief further), and the larger reward is the label's that agrees with the item's lean
(a label 1 on a ≥ b from ρ ≥ 1/2, flipped below 1/2) — both checked on a dense grid of
states and reliabilities in ``tests/test_push_bounds.py`` (never off by more than the slack
below), and the choices against the per-worker bests on whole replays. So an item's best
pair is the one of its most or least reliable live worker (``extremes``), and ``bound[item]``
= ``h(now) −`` the error after that worker's agreeing label (one ``betainc``, not two), the
larger of the two extremes when the item has workers on both sides of 1/2. Every I_{1/2}
here is the table kernel's (:func:`~crowdbudget._betainc_half_table.betainc_half_small`, the
bits of the policy's scores; the monotonicity above holds for it within the slack below).

A max segment tree over the bounds gives the largest, M. The items whose bound is at least
``margin_below(M)`` (a few; at the start every fresh item) have their live pairs scored
exactly (kept per item until the item, one of its workers or a refit changes them); if the
best exact score T is lower than M by more than the slack, the threshold drops to
``margin_below(T)`` and the new candidates are scored too (a bound is above its item's
scores but not always one of them). Every pair at T then belongs to a candidate, and the tie
set is the pairs at T in pair order — the scan's ``flatnonzero(masked == max)``, so the same
choice and the same draw. The slack (2⁻²⁰ relative, 2⁻³⁶ absolute) only covers rounding
(two reliabilities whose scores agree to the last bits may come out in either order); it is
no approximation of the rule.

Work per choice: the items labeled since the last choice (their extremes re-read, their
bound rescored) and the pairs of the workers labeled since (O(1) each unless the pair is an
extreme of its item or its new reliability passed one: then as a labeled item),
O(log n_items) per changed bound, and the candidates' pairs; after a refit one pass over
the live pairs (no ``betainc``) and one ``betainc`` per distinct
(item state, extreme reliability) — instead of two per live pair. What is left is
proportional to the tie set: on trec, after a refit, thousands of unlabeled items tie at the
top (their best worker is the same), and the scan's draw needs them all, in pair order.
Between two choices with the same top bound the tie set is kept (``memo``): the changed
items' pairs leave it and re-enter at the best score, O(tie set + changed items) instead of
a pass over every candidate's pairs, the same set (:func:`_reused_ties`).

A label between two such choices is one compiled call too (:func:`observe_pushed`): the
one-coin moment-matched update of the item's and the worker's Betas (§4; the scalar update's
operations in its order, so the same bits), the label log, the item's error at d = 1/2 and
moments, the worker's mean reliability, a new state number and the stale marks — the Python
of the policy's ``observe`` was a third of a replay's time per label.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from crowdbudget._betainc_half_table import betainc_half_small as _betainc_half
from crowdbudget.policies._one_coin_kernel import (
    TRUE,
    ZERO,
    _error_after,
    _grown,
    _slot,
    beta_moments,
    canonical,
    fill_item_moments,
    matched,
    rescore_pairs,
)
from crowdbudget.types import FloatArray, IntArray

#: the relative slack of the candidate threshold (rounding only; module docstring)
MARGIN = 2.0**-20
#: its absolute part, for scores near 0 (the largest rounding gap measured on the test grid
#: was 2.3e-14; this is 600 times that)
ABSOLUTE_MARGIN = 2.0**-36
#: what :func:`push_choose` returns when the scan must decide
FALLBACK = -1


@njit(cache=True, nogil=True)
def margin_below(top: float) -> float:
    """The candidate threshold for the largest bound ``top``: ``top`` less a relative slack
    of :data:`MARGIN` and :data:`ABSOLUTE_MARGIN`."""
    return top - (abs(top) * MARGIN + ABSOLUTE_MARGIN)


@njit(cache=True, nogil=True)
def tree_set(tree: FloatArray, leaf: int, value: float) -> None:
    """Set the leaf ``leaf`` of the max segment tree ``tree`` (leaves at ``n_leaves + k``,
    node ``n`` the max of ``2n`` and ``2n + 1``) and its ancestors."""
    node = tree.shape[0] // 2 + leaf
    tree[node] = value
    node //= 2
    while node >= 1:
        left = tree[2 * node]
        right = tree[2 * node + 1]
        value = left if left >= right else right
        if tree[node] == value:
            return
        tree[node] = value
        node //= 2


@njit(cache=True, nogil=True)
def tree_build(tree: FloatArray) -> None:
    """Every inner node of the tree from its leaves, O(n_leaves)."""
    n_leaves = tree.shape[0] // 2
    for node in range(n_leaves - 1, 0, -1):
        left = tree[2 * node]
        right = tree[2 * node + 1]
        tree[node] = left if left >= right else right


@njit(cache=True, nogil=True)
def tree_at_least(tree: FloatArray, threshold: float, out: IntArray) -> int:
    """The leaves of value ≥ ``threshold`` into ``out``, ascending; returns their number."""
    n_leaves = tree.shape[0] // 2
    stack = np.empty(64, dtype=np.int64)
    stack[0] = 1
    depth = 1
    found = 0
    while depth:
        depth -= 1
        node = stack[depth]
        if not tree[node] >= threshold:
            continue
        if node >= n_leaves:
            out[found] = node - n_leaves
            found += 1
        else:
            stack[depth] = 2 * node + 1  # the left child on top: leaves come out ascending
            stack[depth + 1] = 2 * node
            depth += 2
    return found


@njit(cache=True, nogil=True)
def _extremes(
    item: int,
    item_ptr: IntArray,
    item_order: IntArray,
    pair_workers: IntArray,
    reliability: FloatArray,
    remaining: IntArray,
) -> tuple[int, int]:
    """The live pairs of ``item`` with the largest and the smallest worker reliability (the
    first in pair order on ties: equal reliabilities give equal scores); −1 if none."""
    hi = -1
    lo = -1
    r_hi = -np.inf
    r_lo = np.inf
    for k in range(item_ptr[item], item_ptr[item + 1]):
        p = item_order[k]
        if remaining[p] <= 0:
            continue
        r = reliability[pair_workers[p]]
        if r > r_hi:
            r_hi = r
            hi = p
        if r < r_lo:
            r_lo = r
            lo = p
    return hi, lo


@njit(cache=True, nogil=True, inline="always")
def _refresh_bounds(
    items: IntArray,
    n_items: int,
    marks: Any,
    stale_worker: Any,
    csr: Any,
    beliefs: Any,
    moments: FloatArray,
    extremes: IntArray,
    tree: FloatArray,
    valid: Any,
    bulk: bool,
) -> None:
    """Re-read the extremes of ``items[:n_items]`` (distinct) and rescore the bound of each
    whose state changed (``marks[item] == 2``), whose extreme pair changed or whose extreme
    worker is in ``stale_worker``; their cached pair scores become invalid. ``bulk``: write
    the leaves only and rebuild the tree's inner nodes once (every item changed)."""
    item_ptr, item_order, _, _, _, pair_workers, remaining = csr
    a, b, reliability, item_error, _ = beliefs
    n_leaves = tree.shape[0] // 2
    todo_items = np.empty(2 * n_items, dtype=np.int64)
    todo_workers = np.empty(2 * n_items, dtype=np.int64)
    n_todo = ZERO  # not the literal 0 (see _one_coin_kernel.ZERO)
    for n in range(n_items):
        i = items[n]
        valid[i] = False
        hi, lo = _extremes(i, item_ptr, item_order, pair_workers, reliability, remaining)
        # the least reliable worker's pair counts only below 1/2 (ρ ≥ 1/2 throughout: the
        # most reliable worker's pair is the best)
        use_lo = hi >= 0 and lo != hi and reliability[pair_workers[lo]] < 0.5
        changed = marks[i] == 2 or hi != extremes[i, 0]
        if not changed and hi >= 0:
            changed = stale_worker[pair_workers[hi]] or (
                use_lo and (lo != extremes[i, 1] or stale_worker[pair_workers[lo]])
            )
        extremes[i, 0] = hi
        extremes[i, 1] = lo
        if not changed:
            continue
        if hi < 0:
            if bulk:
                tree[n_leaves + i] = -np.inf
            else:
                tree_set(tree, i, -np.inf)
            continue
        todo_items[n_todo] = i
        todo_workers[n_todo] = pair_workers[hi]
        n_todo += 1
        if use_lo:
            todo_items[n_todo] = i
            todo_workers[n_todo] = pair_workers[lo]
            n_todo += 1
    errors = np.empty(n_todo)
    _agreeing_errors(todo_items, todo_workers, n_todo, a, b, moments, reliability, errors)
    for n in range(n_todo):
        i = todo_items[n]
        value = canonical(item_error[i] - errors[n])
        if n + 1 < n_todo and todo_items[n + 1] == i:
            continue  # the item's other extreme follows: take the larger there
        if n and todo_items[n - 1] == i:
            other = canonical(item_error[i] - errors[n - 1])
            value = value if value >= other else other
        if bulk:
            tree[n_leaves + i] = value
        elif tree[n_leaves + i] != value:
            tree_set(tree, i, value)
    if bulk:
        tree_build(tree)


@njit(cache=True, nogil=True)
def _agreeing_errors(
    items: IntArray,
    workers: IntArray,
    n_todo: int,
    a: FloatArray,
    b: FloatArray,
    moments: FloatArray,
    reliability: FloatArray,
    out: FloatArray,
) -> None:
    """``out[n]`` = the error after the label of ``workers[n]`` that agrees with the lean of
    ``items[n]`` (a label 1 on a ≥ b from ρ ≥ 1/2; flipped below 1/2) — the smaller of the
    two errors after, so ``h(now) − out`` is the pair's Opt-KG score (the test grid: never
    below it by more than the candidate slack). One ``betainc`` per distinct (oriented state,
    reliability), the table of :func:`~crowdbudget.policies._one_coin_kernel.rescore_pairs`."""
    # a power of two above twice the keys at most (doubled if ever half full, between runs
    # of _agreeing_run: no loop rebinds the table, see rescore_pairs): a label re-reads a
    # bound or two, and a 24 KB table per label was most of that
    size = 16
    while size < 2 * n_todo + 2 and size < 1024:
        size *= 2
    keys = np.full((size, 3), -1, dtype=np.int64)
    errors = np.empty(size)
    start = ZERO  # not the literal 0 (see _one_coin_kernel.ZERO)
    evaluated = ZERO
    while True:
        start, evaluated = _agreeing_run(
            start, evaluated, items, workers, n_todo, a, b, moments, reliability, out, keys,
            errors,
        )  # fmt: skip
        if start == n_todo:
            return
        keys, errors = _grown(keys, errors, 2 * keys.shape[0])


@njit(cache=True, nogil=True)
def _agreeing_run(
    start: int,
    evaluated: int,
    items: IntArray,
    workers: IntArray,
    n_todo: int,
    a: FloatArray,
    b: FloatArray,
    moments: FloatArray,
    reliability: FloatArray,
    out: FloatArray,
    keys: IntArray,
    errors: FloatArray,
) -> tuple[int, int]:
    """:func:`_agreeing_errors` from ``start`` on, until a new key would fill the table past
    half; returns where it stopped and the evaluations so far."""
    size = keys.shape[0]
    a_bits = a.view(np.int64)
    b_bits = b.view(np.int64)
    r_bits = reliability.view(np.int64)
    for n in range(start, n_todo):
        i = items[n]
        w = workers[n]
        r = reliability[w]
        o = 1 if (a[i] >= b[i]) != (r < 0.5) else 0
        ta = b_bits[i] if o == 0 else a_bits[i]
        tb = a_bits[i] if o == 0 else b_bits[i]
        h = _slot(keys, ta, tb, r_bits[w])
        if keys[h, 0] == -1:
            if 2 * (evaluated + 1) > size:
                return n, evaluated
            keys[h, 0] = ta
            keys[h, 1] = tb
            keys[h, 2] = r_bits[w]
            errors[h] = _error_after(moments, i, o, r, 1.0 - r)
            evaluated += 1
        out[n] = errors[h]
    return n_todo, evaluated


@njit(cache=True, nogil=True)
def push_choose(
    rebuild: bool,
    dirty_items: IntArray,
    stale_workers: IntArray,
    csr: Any,
    beliefs: Any,
    moments: FloatArray,
    extremes: IntArray,
    tree: FloatArray,
    valid: Any,
    eligible: Any,
    scratch: Any,
    tied: IntArray,
    memo: FloatArray,
) -> int:
    """One push-mode Opt-KG choice (module docstring): bring the bounds up to date (every
    item if ``rebuild``, else ``dirty_items`` and the items of ``stale_workers``), then
    ``tied[:n]`` = the live pairs at the largest score, ascending. Returns n, or
    :data:`FALLBACK` when the scan must decide (no finite score; a tied pair's item not
    eligible).

    ``memo`` (5,): the last tie set's (valid, top bound, threshold, best score, size), kept
    with ``tied`` between calls; when the top bound is the same, the last set had its
    candidates from the first threshold and none of the items changed since holds a score
    above it, the new set is the last one less the changed items' pairs plus theirs at the
    best score (:func:`_reused_ties`) — the same set the full pass gives, in O(tie set +
    changed items) instead of O(candidates).

    ``csr`` = (item_ptr, item_order, worker_ptr, worker_order, pair_items, pair_workers,
    remaining) — pairs grouped per item and per worker, ``remaining`` the replay's unused
    records per pair; ``beliefs`` = (a, b, reliability, item_error, scores), ``scores`` the
    kept pair scores (written for the pairs rescored here: current values, as any rescoring
    writes); ``extremes`` (n_items, 2) and ``tree`` (the items' bounds) kept between calls,
    ``valid`` the items whose kept pair scores are current; ``scratch`` (n_items,) int8 zeros
    (left zero); ``tied`` (n_pairs,)."""
    _, _, worker_ptr, worker_order, pair_items, pair_workers, _ = csr
    reliability = beliefs[2]
    n_all = extremes.shape[0]
    # O(n_workers), not O(n_items): the workers whose reliability changed
    stale_worker = np.zeros(reliability.shape[0], dtype=np.bool_)
    if rebuild:
        items = np.arange(n_all)
        scratch[:] = 2
        n_items = n_all
        memo[0] = 0.0
        touched = items
        n_touched = ZERO  # not the literal 0 (see _one_coin_kernel.ZERO)
    else:
        # the items to re-read: labeled (2: state changed) or of a relabeled worker (1)
        size = dirty_items.shape[0]
        for n in range(stale_workers.shape[0]):
            w = stale_workers[n]
            size += worker_ptr[w + 1] - worker_ptr[w]
        items = np.empty(size, dtype=np.int64)
        # every item whose bound or kept pair scores may change here (for the memo)
        touched = np.empty(size, dtype=np.int64)
        n_touched = ZERO
        n_items = ZERO
        for n in range(dirty_items.shape[0]):
            i = dirty_items[n]
            if scratch[i] == 0:
                items[n_items] = i
                n_items += 1
            scratch[i] = 2
        for n in range(stale_workers.shape[0]):
            stale_worker[stale_workers[n]] = True
        for n in range(stale_workers.shape[0]):
            w = stale_workers[n]
            r = reliability[w]
            for k in range(worker_ptr[w], worker_ptr[w + 1]):
                p = worker_order[k]
                i = pair_items[p]
                if scratch[i] != 0:
                    continue
                valid[i] = False  # the pair's score changed
                touched[n_touched] = i
                n_touched += 1
                hi = extremes[i, 0]
                lo = extremes[i, 1]
                # the item's extremes and bound can change only if this pair is one of the
                # extremes or its reliability passed one; otherwise O(1) (its score stays
                # below the bound: monotone between the extremes)
                if hi >= 0 and (
                    p in (hi, lo)
                    or r > reliability[pair_workers[hi]]
                    or r < reliability[pair_workers[lo]]
                ):
                    scratch[i] = 1
                    items[n_items] = i
                    n_items += 1
    if n_items:
        _refresh_bounds(
            items, n_items, scratch, stale_worker, csr, beliefs, moments, extremes, tree, valid,
            rebuild,
        )  # fmt: skip
    for n in range(n_items):
        scratch[items[n]] = 0
    top = tree[1]
    if top == -np.inf:
        memo[0] = 0.0
        return FALLBACK
    if memo[0] == 1.0 and memo[1] == top:
        n_tied = _reused_ties(
            items, n_items, touched, n_touched, memo, csr, beliefs, moments, tree, valid,
            scratch, tied,
        )  # fmt: skip
        if n_tied >= 0:
            return _checked(n_tied, eligible, csr[4], tied, memo)
    n_tied = _tied_pairs(
        margin_below(top), csr, beliefs, moments, tree, valid, eligible, tied, memo
    )
    if n_tied == FALLBACK:
        memo[0] = 0.0
    else:
        memo[1] = top
    return n_tied


@njit(cache=True, nogil=True)
def _checked(n_tied: int, eligible: Any, pair_items: IntArray, tied: IntArray, memo: Any) -> int:
    """``n_tied``, or :data:`FALLBACK` (the memo dropped) if a tied pair's item is not
    eligible — as :func:`_tied_pairs` decides."""
    for n in range(n_tied):
        if not eligible[pair_items[tied[n]]]:
            memo[0] = 0.0
            return FALLBACK
    memo[4] = n_tied
    return n_tied


@njit(cache=True, nogil=True, inline="always")
def _reused_ties(
    items: IntArray,
    n_items: int,
    touched: IntArray,
    n_touched: int,
    memo: Any,
    csr: Any,
    beliefs: Any,
    moments: FloatArray,
    tree: FloatArray,
    valid: Any,
    scratch: Any,
    tied: IntArray,
) -> int:
    """The tie set from the last one (``memo``; :func:`push_choose`), or −1: recompute it.

    The items not in ``items[:n_items]`` or ``touched[:n_touched]`` kept their bound, pair
    scores and live pairs (a replay's pair is used up only by a label, whose item is then
    dirty), so among them the candidates of the threshold and their best score are the last
    ones; if some of the last tie set is left and no changed candidate scores above the last
    best, the best stays, the first threshold still ends the search, and the set is the last
    one's rest plus the changed candidates' pairs at the best, in pair order."""
    item_ptr, item_order, _, _, pair_items, _, remaining = csr
    scores = beliefs[4]
    threshold = memo[2]
    best = memo[3]
    n_old = int(memo[4])
    n_leaves = tree.shape[0] // 2
    # mark the changed items (3), each once in `changed`
    changed = np.empty(n_items + n_touched, dtype=np.int64)
    n_changed = 0
    for n in range(n_items + n_touched):
        i = items[n] if n < n_items else touched[n - n_items]
        if scratch[i] == 0:
            scratch[i] = 3
            changed[n_changed] = i
            n_changed += 1
    result = -1
    kept = ZERO  # not the literal 0 (see _one_coin_kernel.ZERO)
    for n in range(n_old):
        p = tied[n]
        if scratch[pair_items[p]] == 3:
            continue
        if remaining[p] <= 0:
            kept = -1
            break
        tied[kept] = p
        kept += 1
    if kept > 0:
        # the changed candidates, scored where their kept scores are out of date
        candidates = np.empty(n_changed, dtype=np.int64)
        n_candidates = ZERO  # not the literal 0 (see _one_coin_kernel.ZERO)
        for n in range(n_changed):
            i = changed[n]
            if tree[n_leaves + i] >= threshold:
                candidates[n_candidates] = i
                n_candidates += 1
        _score_candidates(candidates, n_candidates, csr, beliefs, moments, valid)
        # room for every pair of the candidates: an array no loop rebinds (see
        # _one_coin_kernel.rescore_pairs)
        n_pairs = 0
        for n in range(n_candidates):
            n_pairs += item_ptr[candidates[n] + 1] - item_ptr[candidates[n]]
        extra = np.empty(n_pairs, dtype=np.int64)
        n_extra = ZERO
        above = False
        for n in range(n_candidates):
            i = candidates[n]
            for k in range(item_ptr[i], item_ptr[i + 1]):
                p = item_order[k]
                if remaining[p] <= 0:
                    continue
                if scores[p] > best:
                    above = True
                elif scores[p] == best:
                    extra[n_extra] = p
                    n_extra += 1
        if not above:
            result = kept + n_extra
            if n_extra:
                # the kept rest is ascending (the last set was, in pair order): the new pairs
                # sorted and merged in from the back, O(kept + e log e) — np.sort's array
                _sort_ascending(extra[:n_extra])
                _merge_from_back(tied, kept, extra, n_extra)
    for n in range(n_changed):
        scratch[changed[n]] = 0
    return result


@njit(cache=True, nogil=True)
def _sort_ascending(values: IntArray) -> None:
    """Sort ``values`` in place, ascending: a heapsort, O(n log n) — integers, so any correct
    sort gives ``np.sort``'s array.

    Why a heapsort, loops and ``ZERO`` / ``TRUE`` in these kernels (what
    each costs is the cold compile of a worker-aware replay, benchmarks/README.md,
    2026-12-07): ``np.sort`` compiles Numba's quicksort (about a second of CPU, then again
    inside every kernel that calls it, up to the replay's); a slice assignment from an array
    compiles its shape-mismatch message (string formatting, about 2 s); a literal ``0`` or
    ``True`` that reaches a compiled callee — as an argument, or as the start of a
    loop-carried value — makes Numba compile the callee once more for the literal's type (and
    every callee below it). The three helpers only :func:`push_choose` calls
    (:func:`_refresh_bounds`, :func:`_reused_ties`, :func:`_tied_pairs`) are inlined into it
    (``inline="always"``): each had a library of its own, optimised and emitted once more than
    the same code inside push_choose's (≈ 2 s of a cold compile; no more copies, since each
    has one call site). The values are the same either way."""
    n = values.shape[0]
    for root in range(n // 2 - 1, -1, -1):  # a max-heap
        _sift_down(values, root, n)
    for end in range(n - 1, 0, -1):  # the largest left to the end, the heap one shorter
        values[0], values[end] = values[end], values[0]
        _sift_down(values, ZERO, end)


@njit(cache=True, nogil=True)
def _merge_from_back(out: IntArray, n_out: int, values: IntArray, n_values: int) -> None:
    """``out[:n_out + n_values]`` = the ascending merge of ``out[:n_out]`` and
    ``values[:n_values]`` (both ascending), written from the back (no buffer)."""
    i = n_out - 1
    j = n_values - 1
    for k in range(n_out + n_values - 1, -1, -1):
        if j < 0:
            return  # the rest of out is in place
        if i >= 0 and out[i] > values[j]:
            out[k] = out[i]
            i -= 1
        else:
            out[k] = values[j]
            j -= 1


@njit(cache=True, nogil=True)
def _sift_down(values: IntArray, root: int, end: int) -> None:
    """Move ``values[root]`` down the heap ``values[:end]`` while a child is larger."""
    while True:
        child = 2 * root + 1
        if child >= end:
            return
        if child + 1 < end and values[child] < values[child + 1]:
            child += 1
        if values[root] >= values[child]:
            return
        values[root], values[child] = values[child], values[root]
        root = child


@njit(cache=True, nogil=True, inline="always")
def _tied_pairs(
    threshold: float,
    csr: Any,
    beliefs: Any,
    moments: FloatArray,
    tree: FloatArray,
    valid: Any,
    eligible: Any,
    tied: IntArray,
    memo: Any,
) -> int:
    """The candidates (items of bound ≥ ``threshold``) scored pair by pair where their cache
    is invalid, and the live pairs at their largest score into ``tied`` (ascending)."""
    item_ptr, item_order, _, _, pair_items, _, remaining = csr
    scores = beliefs[4]
    # not zero-filled: an allocation, no O(n_items) pass
    candidates = np.empty(tree.shape[0] // 2, dtype=np.int64)
    first = True
    while True:
        n_candidates = tree_at_least(tree, threshold, candidates)
        _score_candidates(candidates, n_candidates, csr, beliefs, moments, valid)
        best = -np.inf
        n_tied = 0
        for n in range(n_candidates):
            i = candidates[n]
            for k in range(item_ptr[i], item_ptr[i + 1]):
                p = item_order[k]
                if remaining[p] <= 0:
                    continue
                value = scores[p]
                if value > best:
                    best = value
                    n_tied = 0
                if value == best:
                    tied[n_tied] = p
                    n_tied += 1
        if best == -np.inf:
            return FALLBACK
        # a bound above every score of its item (within the slack) but not always one of
        # them: below the largest bound, the items down to the best score's threshold
        lower = margin_below(best)
        if lower >= threshold:
            break
        threshold = lower
        first = False
    ascending = True
    for n in range(n_tied):
        if not eligible[pair_items[tied[n]]]:
            return FALLBACK
        if n and tied[n] < tied[n - 1]:
            ascending = False
    if not ascending:  # candidates come ascending: pairs numbered item-major need no sort
        _sort_ascending(tied[:n_tied])
    # the memo of push_choose: reusable only when the first threshold ended the search
    memo[0] = 1.0 if first else 0.0
    memo[2] = threshold
    memo[3] = best
    memo[4] = n_tied
    return n_tied


@njit(cache=True, nogil=True)
def _score_candidates(
    candidates: IntArray,
    n_candidates: int,
    csr: Any,
    beliefs: Any,
    moments: FloatArray,
    valid: Any,
) -> None:
    """Score the live pairs of the candidates whose kept scores are not current."""
    item_ptr, item_order, _, _, pair_items, pair_workers, remaining = csr
    a, b, reliability, item_error, scores = beliefs
    n_score = 0
    for n in range(n_candidates):
        i = candidates[n]
        if not valid[i]:
            n_score += item_ptr[i + 1] - item_ptr[i]
    if not n_score:
        return
    to_score = np.empty(n_score, dtype=np.int64)
    m = 0
    for n in range(n_candidates):
        i = candidates[n]
        if valid[i]:
            continue
        valid[i] = True
        for k in range(item_ptr[i], item_ptr[i + 1]):
            p = item_order[k]
            if remaining[p] > 0:
                to_score[m] = p
                m += 1
    if m:
        # TRUE, not the literal True (see _one_coin_kernel.ZERO): the policy's calls' signature
        rescore_pairs(
            to_score[:m], pair_items, pair_workers, a, b, moments, reliability, item_error,
            TRUE, scores,
        )  # fmt: skip


@njit(cache=True, nogil=True)
def one_coin_label(
    i: int, j: int, label: int, a: FloatArray, b: FloatArray, c: FloatArray, d: FloatArray
) -> None:
    """``OneCoinPosterior.update`` of one label in place (Chen, Lin, Zhou 2013, §4: the
    moment-matched item and worker Betas; ``one_coin._one_coin_update_scalar``'s operations
    in its order, so the same bits — tests/test_push_bounds.py)."""
    ta = a[i] if label == 1 else b[i]
    tb = b[i] if label == 1 else a[i]
    t1, t2, t3, t1m, t21m = beta_moments(ta, tb)
    r1, r2, r3, r1m, r21m = beta_moments(c[j], d[j])
    z1 = t1 * r1 + (1.0 - t1) * (1.0 - r1)
    na, nb = matched((t2 * r1 + t1m * (1.0 - r1)) / z1, (t3 * r1 + t21m * (1.0 - r1)) / z1)
    nc, nd = matched((t1 * r2 + (1.0 - t1) * r1m) / z1, (t1 * r3 + (1.0 - t1) * r21m) / z1)
    a[i] = na if label == 1 else nb
    b[i] = nb if label == 1 else na
    c[j] = nc
    d[j] = nd


@njit(cache=True, nogil=True)
def observe_pushed(
    event: Any,
    worker_moves: bool,
    next_refit: int,
    beliefs: Any,
    log: IntArray,
    counts: IntArray,
    labeled: Any,
    labeled_items: IntArray,
    pushed: Any,
    csr: Any,
    fresh: IntArray,
) -> int:
    """One label ``event`` = (item i, worker j, label) once push choices read the bounds, in
    one call — what ``OneCoinKnowledgeGradient.observe`` and its fast path do in Python, in
    the same order with the same bits: the posterior update (:func:`one_coin_label`; the
    worker's Beta put back unless ``worker_moves``), the label log and the labeled items
    (``counts`` = (labels logged, labeled items, next state number), updated; ``next_refit``
    ≤ 0: no log); then, unless a refit is due, the item's error (d = 1/2) and moments, the
    worker's mean reliability, a new state number for the item, and the item's workers not
    yet stale marked stale and written to ``fresh``.

    ``beliefs`` = (a, b, c, d, moments, reliability, item_error); ``pushed`` = (state
    numbers, stale flags per worker); ``csr`` = (item_ptr, item_order, pair_workers).
    Returns −1 when a refit is due (the rest then left to it), else ``2 · n_fresh + moved``
    (moved: the worker's mean reliability changed)."""
    i, j, label = event
    a, b, c, d, moments, reliability, item_error = beliefs
    state_ids, stale = pushed
    item_ptr, item_order, pair_workers = csr
    cj = c[j]
    dj = d[j]
    one_coin_label(i, j, label, a, b, c, d)
    if not worker_moves:
        c[j] = cj
        d[j] = dj
    if next_refit > 0:
        n_log = counts[0]
        log[n_log, 0] = i
        log[n_log, 1] = j
        log[n_log, 2] = label
        counts[0] = n_log + 1
        if not labeled[i]:
            labeled[i] = True
            labeled_items[counts[1]] = i
            counts[1] += 1
        if n_log + 1 >= next_refit:
            return -1
    ai = a[i]
    bi = b[i]
    # error_probability at d = 1/2 of one item (the policy's scalar rule: 1/2 on a tie; the
    # table kernel of I_{1/2}, as every error of the one-coin scoring)
    if ai == bi:
        item_error[i] = 0.5
    else:
        item_error[i] = _betainc_half(bi if bi > ai else ai, bi if bi < ai else ai)
    fill_item_moments(i, a, b, moments)
    r = c[j] / (c[j] + d[j])
    moved = 1 if reliability[j] != r else 0
    reliability[j] = r
    state_ids[i] = counts[2]
    counts[2] += 1
    n_fresh = 0
    for k in range(item_ptr[i], item_ptr[i + 1]):
        w = pair_workers[item_order[k]]
        if not stale[w]:
            stale[w] = True
            fresh[n_fresh] = w
            n_fresh += 1
    return 2 * n_fresh + moved
