"""Worker-aware Opt-KG's push replay between two refits in one compiled call.

Once push choices read the per-item bounds (:mod:`~crowdbudget.policies._push_bounds`) a
label costs two compiled calls — the choice (:func:`~crowdbudget.policies._push_bounds.
push_choose`) and the label (:func:`~crowdbudget.policies._push_bounds.observe_pushed`) —
and the Python around them: the campaign loop, the replay's record, the campaign state's
counters and the policy's bookkeeping, most of a label's time. :func:`push_replay_labels`
runs that loop for many labels in one call (Chen, Lin, Zhou 2013, §4's push mode on a
replay, §7.2): choose, draw the tie, hand the pair to the recorded world, take its record,
count the label, observe it — the same operations in the same order as the Python path
(:func:`crowdbudget.engine.replay_push.drive_replay_push` calls it; ``tests/
test_push_replay.py`` compares whole campaigns: choices, generator states, beliefs, the
campaign state and the world's records). It returns to Python before anything the Python
path does differently: a refit (the label that makes it due is the call's last), a
renumbering of the item states, a choice the bounds cannot make (the scan decides), a budget
that cannot pay the next label, the next checkpoint, the world's last record.

The tie draw is ``rng.integers(0, n)`` on the policy's own generator — NumPy's algorithm on
the same bit generator in Numba, the draw ``Generator.integers(n)`` makes (tested equal).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from crowdbudget.policies._push_bounds import FALLBACK, observe_pushed, push_choose
from crowdbudget.policies.worker_aware import OneCoinKnowledgeGradient
from crowdbudget.policies.worker_aware_multiclass import OneCoinAnyClassKnowledgeGradient
from crowdbudget.types import CampaignState, FloatArray, IntArray

#: why :func:`push_replay_labels` returned (bits of its second result)
REFIT_DUE = 1  # the last label made a refit due (the policy runs it)
RENUMBER_DUE = 2  # the state numbers outgrew their table (the policy renumbers)
WORLD_DONE = 4  # the world has no record left (the campaign ends)
NO_CHOICE = 8  # the budget cannot pay the next label (Python's select ends the campaign)
FELL_BACK = 16  # the bounds could not choose (the scan decides; the choice's lists are spent)


# inlined into its one caller: no library of its own to compile (_push_bounds._sort_ascending)
@njit(cache=True, nogil=True, inline="always")
def _take_record(pair: int, world: Any) -> int:
    """The recorded world's step for ``pair`` (``ReplayEnvironment.step`` with a worker, then
    ``_take_record``): its unused record, moved to the tail of its item's unused records.
    Returns the record. ``world`` = (items, record_pair, item_ptr, pair_ptr, pair_perm, perm,
    slot_of, used, pair_unused, unused, eligible, n_used) — the last a (1,) counter."""
    items, record_pair, item_ptr, pair_ptr, pair_perm, perm, slot_of, used = world[:8]
    pair_unused, unused, eligible, n_used = world[8:]
    lo, hi = pair_ptr[pair], pair_ptr[pair + 1]
    record = pair_perm[lo]
    if hi - lo > 1:
        for k in range(lo, hi):
            if not used[pair_perm[k]]:
                record = pair_perm[k]
                break
    item = items[record]
    # the item's segment keeps its unused records first: this one to the tail
    slot = slot_of[record]
    last = item_ptr[item] + unused[item] - 1
    moved = perm[slot]
    tail = perm[last]
    perm[slot] = tail
    perm[last] = moved
    slot_of[tail] = slot
    slot_of[moved] = last
    used[record] = True
    n_used[0] += 1
    pair_unused[record_pair[record]] -= 1
    unused[item] -= 1
    if unused[item] == 0:
        eligible[item] = False
    return record


@njit(cache=True, nogil=True)
def push_replay_labels(
    money: FloatArray,
    counts: IntArray,
    choice: Any,
    label: Any,
    world: Any,
    campaign: Any,
    out: Any,
    rng: Any,
) -> tuple[int, int]:
    """Push-mode labels of the bounded worker-aware Opt-KG on a replay until one of the
    module docstring's stops; returns (labels taken, the stop's bits).

    ``money`` = (budget, spent, committed, stop spend, price), updated; ``counts`` = (labels
    logged, labeled items, next state number, state-number limit, next refit (0: no log),
    worker moves (0/1), random ties (0/1), records in the world, rebuild the bounds (0/1),
    the most labels to take), updated.

    ``choice`` = push_choose's (csr, beliefs, moments, extremes, tree, valid, scratch, tied,
    memo), then the bounds' stale marks per worker and the items and workers changed before
    the first choice (the policy's lists); ``label`` =
    observe_pushed's (beliefs, log, labeled, labeled_items, (state numbers, stale flags),
    observe csr); ``world`` = the records' (workers, labels), then :func:`_take_record`'s;
    ``campaign`` = the state's (eligible, label_counts, pending); ``out`` = (items, workers,
    labels) of the labels taken (for the label log), the workers newly marked stale and their
    number (1,), then the item and the worker the next choice must re-read (2,), −1: none;
    ``rng`` the policy's generator (its own argument: a tuple holding it would be typed by
    Numba's slow path at every call, every array in it too)."""
    csr, beliefs, moments, extremes, tree, valid, scratch, tied, memo = choice[:9]
    marks, dirty, stale = choice[9:]
    workers, labels = world[0], world[1]
    records = world[2:]
    eligible, label_counts, pending = campaign
    out_items, out_workers, out_labels, fresh, n_fresh, pending_change = out
    pair_items = csr[4]
    budget, price = money[0], money[4]
    n_taken = 0
    dirty_one = np.empty(1, dtype=np.int64)
    stale_one = np.empty(1, dtype=np.int64)
    nothing = np.empty(0, dtype=np.int64)
    while True:
        spent, committed = money[1], money[2]
        if n_taken and (spent + 1e-9 >= money[3] or n_taken == counts[9]):
            return n_taken, 0  # the recorder's checkpoint (Python records it), or the cap
        if not price <= budget - spent - committed + 1e-9:
            return n_taken, NO_CHOICE
        if n_taken:  # what the last label changed (the Python path's lists)
            dirty = nothing
            if pending_change[0] >= 0:
                dirty_one[0] = pending_change[0]
                dirty = dirty_one
            stale = nothing
            if pending_change[1] >= 0:
                stale_one[0] = pending_change[1]
                stale = stale_one
        n_tied = push_choose(
            counts[8] == 1, dirty, stale, csr, beliefs, moments, extremes, tree, valid,
            eligible, scratch, tied, memo,
        )  # fmt: skip
        counts[8] = 0
        for n in range(stale.shape[0]):
            marks[stale[n]] = False
        pending_change[0] = -1
        pending_change[1] = -1
        if n_tied == FALLBACK:
            return n_taken, FELL_BACK  # Python's push_choose again finds the same
        pair = tied[0]
        if counts[6] == 1 and n_tied > 1:
            pair = tied[rng.integers(0, n_tied)]
        item = pair_items[pair]
        # the state's record_assignment, the world's step, record_label (its release first)
        pending[item] += 1
        money[2] = committed + price
        record = _take_record(pair, records)
        worker = workers[record]
        value = labels[record]
        pending[item] -= 1
        money[2] = money[2] - price
        label_counts[item, value] += 1
        out_items[n_taken] = item
        out_workers[n_taken] = worker
        out_labels[n_taken] = value
        money[1] = spent + price
        n_taken += 1
        # the policy's observe (_observe_compiled)
        code = observe_pushed(
            (item, worker, value), counts[5] == 1, counts[4], label[0], label[1], counts,
            label[2], label[3], label[4], label[5], fresh[n_fresh[0] :],
        )  # fmt: skip
        stop = 0
        if code < 0:
            stop = REFIT_DUE
        else:
            pending_change[0] = item
            if code & 1 and not marks[worker]:
                marks[worker] = True
                pending_change[1] = worker
            n_fresh[0] += code >> 1
            if counts[2] > counts[3]:
                stop = RENUMBER_DUE
        # the campaign loop's _sync: the item leaves once the world has nothing for it
        if not records[10][item]:
            eligible[item] = False
        if records[11][0] == counts[7]:
            stop |= WORLD_DONE
        if stop:
            return n_taken, stop


def replay_ready(policy: Any, state: CampaignState) -> bool:
    """Whether :func:`take_labels` may take ``policy``'s next labels: the binary one-coin
    worker-aware policy (exactly that class, ``select`` and ``observe`` not replaced on the
    instance) whose push choices read the bounds (``_bounded``; its pairs are built here if
    they are not yet, as its first ``select`` would), no item or worker shut by live rules,
    no capacities, one price."""
    if type(policy) not in _SEGMENT_POLICIES or getattr(policy, "multiclass_", None) is not None:
        return False
    if "select" in vars(policy) or "observe" in vars(policy):
        return False  # wrapped on the instance (a recording test, a conformance check)
    availability = state.availability
    if availability.closed or availability.last:
        return False
    if not policy._pairs_built:
        policy._build_pairs(state)  # what the first select does first (no draw)
    if not (policy._bounded and policy.compiled_replay):
        return False
    return not (
        availability.closed
        or availability.last
        or availability.blocked
        or availability.worker_items
        or state.remaining_capacity is not None
        or state.problem.worker_prices is not None
    )


def take_labels(
    policy: Any, state: CampaignState, world: tuple[Any, ...], stop_spend: float
) -> tuple[int, bool]:
    """Run :func:`push_replay_labels` for ``policy`` (:func:`replay_ready`) on the recorded
    world (``world`` = ``ReplayEnvironment.record_arrays()`` and its records used so far, a
    (1,) counter, updated) from ``state`` until ``stop_spend`` or another stop, then bring the
    Python side up to date: the state's money, counters, time and label log, the policy's
    counts, lists, refit and state numbering. Returns the labels taken (0: the Python path
    decides next) and whether the world has no record left."""
    post = policy.posterior_
    for name in ("a", "b", "c", "d"):  # written in place by both calls: float64, contiguous
        setattr(post, name, np.ascontiguousarray(getattr(post, name), dtype=float))
    cap = _LABELS_PER_CALL
    if policy.refit:
        # the labels up to the next refit fit in the log (as the Python path grows it)
        cap = max(1, min(cap, policy._next_refit - policy._n_log))
        while policy._log.shape[0] < policy._n_log + cap:
            policy._log = np.concatenate([policy._log, np.empty_like(policy._log)])
    money, counts, out = _buffers(policy, cap)
    money[0], money[1], money[2] = state.problem.budget, state.spent, state.committed
    money[3], money[4] = stop_spend, _price(state)
    counts[0], counts[1], counts[2] = policy._n_log, policy._n_labeled, policy._n_states
    counts[3] = 2 * policy._state_ids.shape[0] + 64
    counts[4] = policy._next_refit if policy.refit else 0
    counts[5] = policy._incremental is None
    counts[6] = policy.tie_break == "random"
    counts[7] = world[2].shape[0]
    counts[8] = policy._push_rebuild
    counts[9] = cap
    out[4][0] = 0
    out[5][:] = -1
    dirty, stale = policy._push_dirty, policy._push_stale
    n_taken, stop = push_replay_labels(
        money,
        counts,
        (
            policy._push_csr,
            (post.a, post.b, policy._reliability, policy._item_error, policy._scores),
            policy._moments,
            policy._push_extremes,
            policy._push_tree,
            policy._push_valid,
            policy._push_scratch,
            policy._push_tied,
            policy._push_memo,
            policy._push_stale_mark,
            np.array(dirty, dtype=np.int64) if dirty else _NOTHING,
            np.array(stale, dtype=np.int64) if stale else _NOTHING,
        ),
        (
            (
                post.a,
                post.b,
                post.c,
                post.d,
                policy._moments,
                policy._reliability,
                policy._item_error,
            ),
            policy._log,
            policy._labeled,
            policy._labeled_items,
            (policy._state_ids, policy._stale),
            policy._observe_csr,
        ),
        world,
        (state.eligible, state.label_counts, state.pending),
        out,
        policy._rng,
    )
    _settle(policy, state, n_taken, stop, money, counts, out)
    return n_taken, bool(stop & WORLD_DONE)


def _buffers(policy: Any, cap: int) -> tuple[FloatArray, IntArray, tuple[IntArray, ...]]:
    """The call's money and counts and its ``out`` arrays (:func:`push_replay_labels`),
    allocated once per policy and campaign (every entry is written before the call reads
    it: the counts and money above, the label buffers up to the labels taken, ``fresh`` up
    to its counter), so a call between two refits allocates none."""
    buffers = getattr(policy, "_replay_buffers", None)
    n_workers = policy._stale.shape[0]
    if buffers is None or buffers[2][0].shape[0] < cap or buffers[2][3].shape[0] != n_workers:
        size = max(cap, 64)
        buffers = (
            np.empty(5),
            np.empty(10, dtype=np.int64),
            (
                np.empty(size, dtype=np.int64),
                np.empty(size, dtype=np.int64),
                np.empty(size, dtype=np.int64),
                np.empty(n_workers, dtype=np.int64),
                np.zeros(1, dtype=np.int64),
                np.full(2, -1, dtype=np.int64),
            ),
        )
        policy._replay_buffers = buffers
    return buffers


def _price(state: CampaignState) -> float:
    """The one price of every label (``problem.price_of`` without worker prices)."""
    return float(state.problem.default_price)


def _settle(
    policy: Any,
    state: CampaignState,
    n_taken: int,
    stop: int,
    money: FloatArray,
    counts: IntArray,
    out: tuple[IntArray, ...],
) -> None:
    """The Python side after :func:`push_replay_labels` (see :func:`take_labels`)."""
    if n_taken or stop & FELL_BACK:  # a choice read the lists (as _choose_push_bounded)
        policy._push_active = True
        policy._push_rebuild = False
        policy._push_dirty = []
        policy._push_stale = []
    state.spent, state.committed = float(money[1]), float(money[2])
    items, workers, labels, fresh, n_fresh, pending_change = out
    if n_taken:
        price = float(money[4])
        state.label_log.extend(
            items[:n_taken], workers[:n_taken], labels[:n_taken], np.full(n_taken, price)
        )
        state.n_events += n_taken
        state.time = float(state.n_events)
    policy._n_log, policy._n_labeled, policy._n_states = (int(x) for x in counts[:3])
    if n_fresh[0]:
        policy._stale_list.extend(fresh[: n_fresh[0]].tolist())
    if pending_change[0] >= 0:
        policy._push_dirty.append(int(pending_change[0]))
    if pending_change[1] >= 0:
        policy._push_stale.append(int(pending_change[1]))
    if stop & REFIT_DUE:
        policy._refit_now()
    if stop & RENUMBER_DUE:
        policy._number_states()


#: the most labels one call takes without a refit in between (the label buffers' size)
_LABELS_PER_CALL = 4096
_NOTHING = np.empty(0, dtype=np.int64)
_SEGMENT_POLICIES = (OneCoinKnowledgeGradient, OneCoinAnyClassKnowledgeGradient)
