"""The compiled parts of the fast engine (:mod:`crowdbudget.engine.fast`): the campaign loops
(ties broken by item index, or at random by score group) and the open-addressing hash table of
scores they read. Numba kernels, so each loop is one function (the exemption from the
120-line rule for compiled kernels); :mod:`crowdbudget.engine.fast` says how they work.

The loops are resumable: they return :data:`DONE`, or a request — :data:`NEED_TILE` (answers
not generated yet), :data:`NEED_SCORES` (a state without a score), :data:`NEED_SPACE` (a score
group is full) — with what is needed in ``st``, having changed nothing for the decision they
stopped at; Python provides it and calls them again.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from crowdbudget.types import FloatArray, IntArray

#: an empty slot of the hash table (keys are ``p << 32 | q`` >= 0)
EMPTY = -1
HASH_MULTIPLIER = 6364136223846793005  # < 2**63: stays an int64 inside Numba

#: what a campaign loop returns
DONE, NEED_TILE, NEED_SCORES, NEED_SPACE = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def hash_find(keys: IntArray, key: int) -> int:
    """Slot of ``key`` in the open-addressing table ``keys``, or of the empty slot ending its
    probe sequence (capacity a power of two, load <= 1/2)."""
    mask = keys.shape[0] - 1
    h = ((key * HASH_MULTIPLIER) >> 29) & mask
    while True:
        k = keys[h]
        if k == key or k == EMPTY:  # noqa: SIM109 - compiled code
            return h
        h = (h + 1) & mask


@njit(cache=True, nogil=True)
def hash_insert_many(
    keys: IntArray,
    scores: FloatArray,
    groups: IntArray,
    new_keys: IntArray,
    new_scores: FloatArray,
    new_groups: IntArray,
) -> None:
    for j in range(new_keys.shape[0]):
        h = hash_find(keys, new_keys[j])
        keys[h] = new_keys[j]
        scores[h] = new_scores[j]
        groups[h] = new_groups[j]


@njit(cache=True, nogil=True)
def hash_contains(keys: IntArray, query: IntArray) -> np.ndarray:
    out = np.empty(query.shape[0], dtype=np.bool_)
    for j in range(query.shape[0]):
        out[j] = keys[hash_find(keys, query[j])] != EMPTY
    return out


@njit(cache=True, nogil=True)
def gather_scores(counts: IntArray, keys: IntArray, scores: FloatArray) -> FloatArray:
    """Current score of every item (every item's state has been looked up before)."""
    n = counts.shape[0]
    out = np.empty(n)
    for i in range(n):
        out[i] = scores[hash_find(keys, (counts[i, 1] << 32) | counts[i, 0])]
    return out


@njit(cache=True, nogil=True)
def campaign_loop(
    target: int,
    st: IntArray,
    counts: IntArray,
    a: FloatArray,
    b: FloatArray,
    use_heap: bool,
    heap: FloatArray,
    plan: IntArray,
    plan_start: int,
    tile_dir: IntArray,
    tile_pool: np.ndarray,
    item_shift: int,
    label_shift: int,
    keys: IntArray,
    scores: FloatArray,
    record_items: bool,
    items_out: IntArray,
) -> int:
    """Make decisions ``st[0], ..., target - 1``; return ``DONE``, or ``NEED_TILE`` with the
    tile's (item block, label block) in ``st[1:3]``, or ``NEED_SCORES`` when the score of
    the labeled item's next state is not in the table (``keys``, ``scores``): the item in
    ``st[1]``. ``st[0]`` is the number of decisions made so far.

    Index policies (``use_heap``): the item is the root of ``heap`` (rows ``(score, item)``,
    a max-heap on (score, -item)). Otherwise the item is ``plan[decision - plan_start]``.
    """
    item_mask = (1 << item_shift) - 1
    label_mask = (1 << label_shift) - 1
    n_heap = heap.shape[0]
    s = st[0]
    while s < target:
        item = np.int64(heap[0, 1]) if use_heap else plan[s - plan_start]
        n_pos = counts[item, 1]
        n_neg = counts[item, 0]
        k = n_pos + n_neg
        ib = item >> item_shift
        lb = k >> label_shift
        off = tile_dir[ib, lb] if lb < tile_dir.shape[1] else EMPTY
        if off == EMPTY:
            st[0] = s
            st[1] = ib
            st[2] = lb
            return NEED_TILE
        label = tile_pool[off + ((item & item_mask) << label_shift) + (k & label_mask)]
        if label:
            n_pos += 1
        else:
            n_neg += 1
        if use_heap:
            h = hash_find(keys, (n_pos << 32) | n_neg)
            if keys[h] == EMPTY:
                st[0] = s
                st[1] = item
                return NEED_SCORES
            score = scores[h]
            fitem = heap[0, 1]
            # sift the root down: a child moves up iff it beats (score, item)
            pos = 0
            while True:
                c = 2 * pos + 1
                if c >= n_heap:
                    break
                if c + 1 < n_heap:
                    s1 = heap[c, 0]
                    s2 = heap[c + 1, 0]
                    if s2 > s1 or (s2 == s1 and heap[c + 1, 1] < heap[c, 1]):
                        c += 1
                cs = heap[c, 0]
                if cs > score or (cs == score and heap[c, 1] < fitem):
                    heap[pos, 0] = cs
                    heap[pos, 1] = heap[c, 1]
                    pos = c
                else:
                    break
            heap[pos, 0] = score
            heap[pos, 1] = fitem
            if label:
                a[item] += 1.0
            else:
                b[item] += 1.0
        if label:
            counts[item, 1] += 1
        else:
            counts[item, 0] += 1
        if record_items:
            items_out[s] = item
        s += 1
    st[0] = s
    return DONE


@njit(cache=True, nogil=True)
def campaign_loop_random(
    target: int,
    st: IntArray,
    counts: IntArray,
    a: FloatArray,
    b: FloatArray,
    rng: np.random.Generator,
    item_group: IntArray,
    position: IntArray,
    members: IntArray,
    g_start: IntArray,
    g_size: IntArray,
    g_cap: IntArray,
    g_score: FloatArray,
    in_heap: np.ndarray,
    gheap: IntArray,
    tile_dir: IntArray,
    tile_pool: np.ndarray,
    item_shift: int,
    label_shift: int,
    keys: IntArray,
    groups: IntArray,
    record_items: bool,
    items_out: IntArray,
) -> int:
    """The index loop with ties broken at random: ``ScoreBuckets(..., "random")`` step by step.

    Items are grouped by score (group ids: ``groups`` of the score table; one group per
    distinct canonical score). Group g's members are ``members[g_start[g]:g_start[g] +
    g_size[g]]`` in the order the reference keeps them (a new member is appended, a leaving
    one is replaced by the last), ``position[i]`` is item i's place in its group. ``gheap``
    (``st[4]`` entries) is a max-heap of group ids on ``g_score`` holding every non-empty
    group (and, lazily, emptied ones). A decision takes the top non-empty group and, when it
    has more than one member, the member at ``rng.integers(0, size)`` — the draw
    ``ScoreBuckets.best`` makes, from the same generator (NumPy's own algorithm, shared
    state). The chosen item waits in ``st[3]`` while the loop returns for a tile or a score
    (the draw is made once); ``NEED_SPACE``: the group in ``st[1]`` is full (Python moves
    it to a larger slice of ``members``); nothing is changed before the loop returns.
    """
    item_mask = (1 << item_shift) - 1
    label_mask = (1 << label_shift) - 1
    s = st[0]
    while s < target:
        item = st[3]
        if item < 0:
            n_heap = st[4]
            while g_size[gheap[0]] == 0:  # lazy deletion of emptied groups
                g = gheap[0]
                in_heap[g] = False
                n_heap -= 1
                last = gheap[n_heap]
                key = g_score[last]
                pos = 0
                while True:
                    c = 2 * pos + 1
                    if c >= n_heap:
                        break
                    if c + 1 < n_heap and g_score[gheap[c + 1]] > g_score[gheap[c]]:
                        c += 1
                    if g_score[gheap[c]] > key:
                        gheap[pos] = gheap[c]
                        pos = c
                    else:
                        break
                gheap[pos] = last
            st[4] = n_heap
            g = gheap[0]
            size = g_size[g]
            pick = rng.integers(0, size) if size > 1 else 0  # the reference draws for 2+
            item = members[g_start[g] + pick]
            st[3] = item
        n_pos = counts[item, 1]
        n_neg = counts[item, 0]
        k = n_pos + n_neg
        ib = item >> item_shift
        lb = k >> label_shift
        off = tile_dir[ib, lb] if lb < tile_dir.shape[1] else EMPTY
        if off == EMPTY:
            st[0] = s
            st[1] = ib
            st[2] = lb
            return NEED_TILE
        label = tile_pool[off + ((item & item_mask) << label_shift) + (k & label_mask)]
        if label:
            n_pos += 1
        else:
            n_neg += 1
        h = hash_find(keys, (n_pos << 32) | n_neg)
        if keys[h] == EMPTY:
            st[0] = s
            st[1] = item
            return NEED_SCORES
        new_group = groups[h]
        old_group = item_group[item]
        if new_group != old_group:  # the reference's update: an unchanged score stays put
            if g_size[new_group] == g_cap[new_group]:
                st[0] = s
                st[1] = new_group
                return NEED_SPACE
            # discard from the old group: the last member takes the item's place
            start = g_start[old_group]
            p = position[item]
            last_member = members[start + g_size[old_group] - 1]
            g_size[old_group] -= 1
            if last_member != item:
                members[start + p] = last_member
                position[last_member] = p
            # append to the new group
            size = g_size[new_group]
            members[g_start[new_group] + size] = item
            position[item] = size
            g_size[new_group] = size + 1
            item_group[item] = new_group
            if not in_heap[new_group]:
                in_heap[new_group] = True
                n_heap = st[4]
                key = g_score[new_group]
                pos = n_heap
                while pos > 0:
                    parent = (pos - 1) >> 1
                    if g_score[gheap[parent]] < key:
                        gheap[pos] = gheap[parent]
                        pos = parent
                    else:
                        break
                gheap[pos] = new_group
                st[4] = n_heap + 1
        if label:
            a[item] += 1.0
            counts[item, 1] += 1
        else:
            b[item] += 1.0
            counts[item, 0] += 1
        if record_items:
            items_out[s] = item
        st[3] = -1
        s += 1
    st[0] = s
    return DONE
