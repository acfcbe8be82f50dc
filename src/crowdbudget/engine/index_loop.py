"""A compiled continuous-time campaign for the Hu–Frazier index policy.

Hu & Frazier, "Bayes-Optimal Effort Allocation in Crowdsourcing: Bounds and Index Policies",
AISTATS 2016, §6 (Algorithm 1) and §7 (Fig. 1): workers arrive as a Poisson process, each is
given the task of largest index λ*(n⁺, n⁻, w; U − ℓ), works an Exp(μ) time and answers.
:func:`run_compiled` runs that campaign — the world
(:class:`~crowdbudget.simulation.continuous_time.ContinuousTimeEnvironment` around a
:class:`~crowdbudget.simulation.environment.SyntheticBernoulliEnvironment`), the event loop
(:func:`crowdbudget.engine.loop.drive` with an :class:`~crowdbudget.engine.loop.ArrivalClock`)
and the policy (:class:`~crowdbudget.policies.lagrangian_index.LagrangianIndexPolicy`) — in
one Numba function, and gives **exactly** the reference run: the same task for every worker,
the same labels at the same times, the same final state, the same generator states.
:func:`supports` says where it applies; :func:`crowdbudget.experiments.continuous.
run_continuous_campaign` uses it there (``engine="auto"``).

What the compiled loop replicates, and how:

- *Arrival and work times*: the world draws gaps as ``exponential(1/r, 1024)`` then
  ``random(1024)`` (the thinning draws, drawn even without a rate function) per chunk, and
  durations as ``exponential(1/μ, 1024)``; the loop makes the same calls on the same
  generators (Numba's ``Generator`` methods are NumPy's algorithms on the same bit generator,
  tested equal) and adds the gaps to the clock one at a time, as the world does.
- *Answers*: the k-th answer of task i is the world's ``noiseless_answer_tile`` entry
  (the compiled engine's hook of :mod:`crowdbudget.engine.fast`); a task never gets more than
  ``label_cap + 1`` labels (its index is −inf at the cap), so the tiles of the first
  ``label_cap + 1`` answers of every task are read before the loop.
- *Event order*: the next arrival (while fewer than U are hired) against a binary min-heap of
  completions keyed by (time, order handed out) — ``drive``'s heap of tuples; an arrival goes
  first on a tie.
- *The policy*: tasks in buckets by state id (a member array per state in one slab; a member
  moving in is appended, one moving out replaced by the last — :class:`~crowdbudget.policies.
  lagrangian_index.StateBuckets`' order), the occupied states ascending, the best occupied
  state of the current row (first on ties, none when a NaN is met or all are −inf), the tie
  between the best state's tasks drawn by ``rng.integers(0, size)`` on the policy's generator
  (what the reference's Lemire draw on ``next_uint32`` equals bit for bit).
- *The order the policy re-reads its changed tasks*: the reference keeps them in a Python
  ``set`` of ints and re-reads them, before each decision, in the set's iteration order; two
  tasks entering one bucket in the other order would change later tie draws. The loop keeps
  them in a table with CPython's set probing (``Objects/setobject.c``: slot ``hash & mask``,
  up to 9 linear probes where the table has room, then ``i = 5i + 1 + perturb``,
  ``perturb >>= 5``; the table of 8 slots grows to the next power of two above 4 × used when
  it is 3/5 full; ``clear`` returns it to 8 slots) and walks its slots in order.
  :func:`set_order_matches` checks this against the running interpreter (2,000 random sets,
  resizes included) once per process; where it differs, :func:`supports` says no and the
  reference loop runs.

Applies to (:func:`supports`): exactly :class:`LagrangianIndexPolicy` with one prior group
(one prior row and threshold for every task), a NumPy ``Generator``; exactly
:class:`ContinuousTimeEnvironment` without a rate function, around a
:class:`SyntheticBernoulliEnvironment` whose answers follow its tiles (anonymous noiseless
workers, so unit prices and worker 0) — Fig. 1's campaigns. Replays (Fig. 2), other policies
and priced workers run on the reference loop.

Afterwards the state (label counts, pending, spent, committed, events, time, the label log)
and the world's generators, clock and answer counters are the reference's; the policy's
``n_capped_`` is set, its buckets are not (the runner discards the policy: it was made for
the world's rates by ``for_rates``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import njit

from crowdbudget.engine.loop import CheckpointRecorder, Outcome
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.lagrangian_index import LagrangianIndexPolicy
from crowdbudget.policies.verdict import Verdict, make_verdict
from crowdbudget.simulation.continuous_time import ContinuousTimeEnvironment
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.types import CampaignState, IntArray

__all__ = ["run_compiled", "run_instant", "set_order_matches", "supports", "supports_instant"]

_LINEAR_PROBES = 9  # CPython's setobject.c
_PERTURB_SHIFT = 5
_SET_MINSIZE = 8


# ---- a Python set of ints, its iteration order ---------------------------------------------------
@njit(cache=True, nogil=True)
def _set_insert_clean(table: IntArray, mask: int, key: int) -> None:
    """``set_insert_clean``: ``key`` into a table known not to hold it (a resize)."""
    perturb = key
    i = key & mask
    while True:
        if table[i] < 0:
            table[i] = key
            return
        if i + _LINEAR_PROBES <= mask:
            for j in range(1, _LINEAR_PROBES + 1):
                if table[i + j] < 0:
                    table[i + j] = key
                    return
        perturb >>= _PERTURB_SHIFT
        i = (i * 5 + 1 + perturb) & mask


@njit(cache=True, nogil=True)
def _set_add(table: IntArray, used: IntArray, key: int) -> IntArray:
    """``set.add(key)`` for a key >= 0 (its hash is itself) on ``table`` (−1: empty slot;
    ``used[0]``: members; a set that only grows, so fill = used). Returns the table (a new one
    when it grew)."""
    mask = table.shape[0] - 1
    perturb = key
    i = key & mask
    while True:
        probes = _LINEAR_PROBES if i + _LINEAR_PROBES <= mask else 0
        j = 0
        while True:
            entry = table[i + j]
            if entry == key:
                return table
            if entry < 0:
                table[i + j] = key
                used[0] += 1
                n = used[0]
                if n * 5 < mask * 3:
                    return table
                wanted = n * 2 if n > 50_000 else n * 4
                size = _SET_MINSIZE
                while size <= wanted:
                    size <<= 1
                grown = np.full(size, -1, dtype=np.int64)
                for old in table:
                    if old >= 0:
                        _set_insert_clean(grown, size - 1, old)
                return grown
            if j >= probes:
                break
            j += 1
        perturb >>= _PERTURB_SHIFT
        i = (i * 5 + 1 + perturb) & mask


@njit(cache=True, nogil=True)
def _set_iteration_order(keys: IntArray) -> IntArray:
    """The order ``list(s)`` gives for ``s = set(); s.add(k) for k in keys``."""
    table = np.full(_SET_MINSIZE, -1, dtype=np.int64)
    used = np.zeros(1, dtype=np.int64)
    for key in keys:
        table = _set_add(table, used, key)
    out = np.empty(used[0], dtype=np.int64)
    n = 0
    for entry in table:
        if entry >= 0:
            out[n] = entry
            n += 1
    return out


_SET_ORDER_OK: bool | None = None


def set_order_matches() -> bool:
    """Whether the compiled set table iterates as this interpreter's ``set`` does (2,000
    random sets of 1–60 ints below 8, 64, 10^3 or 10^7, resizes included; checked once per
    process)."""
    global _SET_ORDER_OK
    if _SET_ORDER_OK is None:
        rng = np.random.default_rng(20261127)
        ok = True
        for trial in range(2_000):
            keys = rng.integers(0, (8, 64, 1_000, 10_000_000)[trial % 4], rng.integers(1, 61))
            python_set: set[int] = set()
            for key in keys.tolist():
                python_set.add(key)
            if list(python_set) != _set_iteration_order(keys).tolist():
                ok = False
                break
        _SET_ORDER_OK = ok
    return _SET_ORDER_OK


# ---- the campaign ----------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _heap_push(
    times: np.ndarray, order: IntArray, items: IntArray, n: int, t: float, o: int, item: int
) -> None:
    """Push (t, o, item) on the min-heap of the first ``n`` entries, keyed by (t, o)."""
    pos = n
    while pos > 0:
        parent = (pos - 1) >> 1
        if times[parent] < t or (times[parent] == t and order[parent] < o):
            break
        times[pos] = times[parent]
        order[pos] = order[parent]
        items[pos] = items[parent]
        pos = parent
    times[pos] = t
    order[pos] = o
    items[pos] = item


@njit(cache=True, nogil=True)
def _heap_pop(times: np.ndarray, order: IntArray, items: IntArray, n: int) -> None:
    """Remove the root of the min-heap of ``n`` entries (the caller read it)."""
    n -= 1
    t = times[n]
    o = order[n]
    item = items[n]
    pos = 0
    while True:
        c = 2 * pos + 1
        if c >= n:
            break
        if c + 1 < n and (
            times[c + 1] < times[c] or (times[c + 1] == times[c] and order[c + 1] < order[c])
        ):
            c += 1
        if times[c] < t or (times[c] == t and order[c] < o):
            times[pos] = times[c]
            order[pos] = order[c]
            items[pos] = items[c]
            pos = c
        else:
            break
    times[pos] = t
    order[pos] = o
    items[pos] = item


@njit(cache=True, nogil=True)
def _campaign(
    n_items: int,
    max_hired: int,
    money_budget: float,
    horizon: float,
    discrete: bool,
    arrival_rng: np.random.Generator,
    arrival_scale: float,
    work_rng: np.random.Generator,
    work_scale: float,
    chunk: int,
    answers: np.ndarray,
    lookup: IntArray,
    index: np.ndarray,
    budget_rows: int,
    n_rows: int,
    cap: int,
    start_state: int,
    policy_rng: np.random.Generator,
    label_counts: IntArray,
    pending: IntArray,
    asked: IntArray,
    log_items: IntArray,
    log_labels: IntArray,
    out_int: IntArray,
    out_float: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One campaign, ``drive`` + ``ArrivalClock`` + ``LagrangianIndexPolicy``, event by event
    (module doc). Writes the state's arrays in place and, in ``out_int``: assignments handed
    out, cancelled, labels, tasks capped, gaps used in the last chunk, durations used in the
    last chunk; ``out_float``: end time, the state's time, the world's clock, spent,
    committed. Returns the world's last (gaps, accept, durations) chunks."""
    n_states = index.shape[1]
    # ---- the policy's buckets: members of state s are slab[start[s] : start[s] + size[s]]
    slab = np.empty(2 * n_items + 8 * n_states, dtype=np.int64)
    b_start = np.zeros(n_states, dtype=np.int64)
    b_cap = np.zeros(n_states, dtype=np.int64)
    b_size = np.zeros(n_states, dtype=np.int64)
    slab_used = n_items
    for i in range(n_items):
        slab[i] = i
    b_cap[start_state] = n_items
    b_size[start_state] = n_items
    position = np.arange(n_items)
    bucket_of = np.full(n_items, start_state, dtype=np.int64)
    occupied = np.empty(n_states, dtype=np.int64)
    occupied[0] = start_state
    n_occupied = 1
    dirty = np.full(_SET_MINSIZE, -1, dtype=np.int64)
    dirty_used = np.zeros(1, dtype=np.int64)
    n_capped = 0
    # ---- the world's streams
    gaps = np.empty(0)
    accept = np.empty(0)
    gap_next = 0
    durations = np.empty(0)
    duration_next = 0
    clock = 0.0
    # ---- the loop's state
    due_times = np.empty(max_hired + 1)
    due_order = np.empty(max_hired + 1, dtype=np.int64)
    due_items = np.empty(max_hired + 1, dtype=np.int64)
    n_due = 0
    handed = 0
    n_events = 0
    spent = 0.0
    committed = 0.0
    now = 0.0
    state_time = 0.0
    inf = math.inf
    t_arrival = 0.0
    need_arrival = True  # the first arrival, and the one after each arrival handled
    while True:
        if need_arrival:
            # drawn here rather than right after the arrival: the stream is the world's alone,
            # so the draws and their order are ``drive``'s
            if discrete:
                clock += 1.0
            else:
                if gap_next >= gaps.shape[0]:
                    gaps = arrival_rng.exponential(arrival_scale, chunk)
                    accept = arrival_rng.random(chunk)
                    gap_next = 0
                clock += gaps[gap_next]
                gap_next += 1
            t_arrival = clock
            need_arrival = False
        t_done = due_times[0] if n_due > 0 else inf
        arrivals_open = handed < max_hired
        t_next = min(t_arrival if arrivals_open else inf, t_done)
        if t_next == inf:
            break
        if t_next >= horizon:
            now = horizon
            break
        if arrivals_open and t_arrival <= t_done:
            now = t_arrival
            state_time = now
            # ---- select(state, worker=0): unit price
            task = -1
            if money_budget - spent - committed + 1e-9 >= 1.0:  # can_afford(1.0)
                # re-read the changed tasks, in the set's order
                for slot in range(dirty.shape[0]):
                    t = dirty[slot]
                    if t < 0:
                        continue
                    neg = label_counts[t, 0]
                    pos = label_counts[t, 1]
                    w = pending[t]
                    before = bucket_of[t]
                    new = -1
                    if before >= 0:
                        if pos + neg + w > cap:
                            n_capped += 1
                        else:
                            new = lookup[pos, neg, w]
                            if new == before:
                                continue
                        # out of its bucket: the last member takes its place
                        base = b_start[before]
                        last = slab[base + b_size[before] - 1]
                        if last != t:
                            at = position[t]
                            slab[base + at] = last
                            position[last] = at
                        b_size[before] -= 1
                        if b_size[before] == 0:
                            k = 0
                            while occupied[k] != before:
                                k += 1
                            for m in range(k, n_occupied - 1):
                                occupied[m] = occupied[m + 1]
                            n_occupied -= 1
                        if new < 0:
                            bucket_of[t] = -1
                            continue
                    else:
                        if pos + neg + w > cap:
                            continue
                        new = lookup[pos, neg, w]
                    # into bucket ``new`` (moved to a larger slice of the slab when full)
                    if b_size[new] == b_cap[new]:
                        grown = max(4, 2 * b_cap[new])
                        if slab_used + grown > slab.shape[0]:
                            bigger = np.empty(
                                max(2 * slab.shape[0], slab_used + grown), dtype=np.int64
                            )
                            bigger[:slab_used] = slab[:slab_used]
                            slab = bigger
                        for m in range(b_size[new]):
                            slab[slab_used + m] = slab[b_start[new] + m]
                        b_start[new] = slab_used
                        b_cap[new] = grown
                        slab_used += grown
                    position[t] = b_size[new]
                    slab[b_start[new] + b_size[new]] = t
                    b_size[new] += 1
                    if b_size[new] == 1:
                        k = n_occupied
                        while k > 0 and occupied[k - 1] > new:
                            occupied[k] = occupied[k - 1]
                            k -= 1
                        occupied[k] = new
                        n_occupied += 1
                    bucket_of[t] = new
                if dirty_used[0] > 0:
                    if dirty.shape[0] != _SET_MINSIZE:
                        dirty = np.full(_SET_MINSIZE, -1, dtype=np.int64)
                    else:
                        dirty[:] = -1
                    dirty_used[0] = 0
                arrivals = round(spent + committed)
                if arrivals < budget_rows:
                    key = min(budget_rows - arrivals, n_rows)
                    row = key - 1
                    best = -1
                    value = -inf
                    for m in range(n_occupied):
                        s = occupied[m]
                        v = index[row, s]
                        if v > value:
                            value = v
                            best = s
                        elif v != v:  # NaN: no choice, as np.argmax's pick would give
                            best = -1
                            break
                    if best >= 0:
                        size = b_size[best]
                        pick = policy_rng.integers(0, size) if size > 1 else 0
                        task = slab[b_start[best] + pick]
                        dirty = _set_add(dirty, dirty_used, task)
            if task < 0:
                if n_due == 0:
                    break
            else:
                # the state reserves the price; the clock's work time; on the heap
                pending[task] += 1
                committed += 1.0
                handed += 1
                duration = 0.0
                if not discrete:
                    if duration_next >= durations.shape[0]:
                        durations = work_rng.exponential(work_scale, chunk)
                        duration_next = 0
                    duration = durations[duration_next]
                    duration_next += 1
                _heap_push(due_times, due_order, due_items, n_due, now + duration, handed, task)
                n_due += 1
            need_arrival = True
        else:
            now = due_times[0]
            task = due_items[0]
            _heap_pop(due_times, due_order, due_items, n_due)
            n_due -= 1
            k = asked[task]
            label = answers[task, k]
            asked[task] = k + 1
            # record_label: the reservation becomes spending
            pending[task] -= 1
            committed -= 1.0
            label_counts[task, label] += 1
            log_items[n_events] = task
            log_labels[n_events] = label
            spent += 1.0
            n_events += 1
            state_time = now
            dirty = _set_add(dirty, dirty_used, task)
    cancelled = n_due
    for m in range(n_due):
        pending[due_items[m]] -= 1
        committed -= 1.0
    out_int[0] = handed
    out_int[1] = cancelled
    out_int[2] = n_events
    out_int[3] = n_capped
    out_int[4] = gap_next
    out_int[5] = duration_next
    out_float[0] = now
    out_float[1] = state_time
    out_float[2] = clock
    out_float[3] = spent
    out_float[4] = committed
    return gaps, accept, durations


# ---- Python side -------------------------------------------------------------------------------
def _world_applies(base: Any) -> bool:
    """A synthetic world whose answers follow its tiles, one prior row and threshold."""
    return (
        isinstance(base, SyntheticBernoulliEnvironment)
        and base.answers_follow_tiles
        and bool(np.all(base.prior == base.prior[0]))
        and bool(np.all(base.thresholds == base.thresholds[0]))
    )


def supports(policy: Any, env: Any) -> bool:
    """Whether :func:`run_compiled` gives the reference continuous-time run of ``policy``
    (before ``reset``) in ``env``: see the module doc."""
    if type(policy) is not LagrangianIndexPolicy or type(env) is not ContinuousTimeEnvironment:
        return False
    return env.rate_function is None and _world_applies(env.base) and set_order_matches()


def supports_instant(policy: Any, env: Any) -> bool:
    """Whether :func:`run_instant` gives the reference discrete-time run (``drive`` with a
    ``Clock``, push or pull: the world's noiseless worker is 0 either way) of ``policy`` in
    ``env``."""
    return type(policy) is LagrangianIndexPolicy and _world_applies(env) and set_order_matches()


def _run(
    policy: LagrangianIndexPolicy,
    base: SyntheticBernoulliEnvironment,
    state: CampaignState,
    max_hired: int,
    env: ContinuousTimeEnvironment | None,
) -> Outcome:
    """The compiled loop from the initial ``state``: continuous time in ``env``, or
    instantaneous labels (``env`` None: arrivals at 1, 2, ..., zero work time)."""
    if len(policy.tables_) != 1 or type(policy.rng_) is not np.random.Generator:
        raise InvalidParameterError(
            "the compiled index loop needs one prior group and a NumPy Generator"
        )
    n_items = state.n_items
    cap = policy.label_cap_
    table = policy.tables_[0]
    tile_items, tile_labels = base.answer_tile_shape
    n_blocks = -(-(cap + 1) // tile_labels)
    # the first cap + 1 answers of every task (no task gets more: its index is −inf there)
    answers = np.empty((n_items, n_blocks * tile_labels), dtype=np.int8)
    for item_block in range(-(-n_items // tile_items)):
        first = item_block * tile_items
        for label_block in range(n_blocks):
            tile = base.noiseless_answer_tile(item_block, label_block)
            columns = slice(label_block * tile_labels, (label_block + 1) * tile_labels)
            answers[first : first + tile.shape[0], columns] = tile
    asked = np.asarray(base.answers_given, dtype=np.int64)
    log_items = np.empty(max_hired, dtype=np.int64)
    log_labels = np.empty(max_hired, dtype=np.int64)
    out_int = np.zeros(6, dtype=np.int64)
    out_float = np.zeros(5)
    if env is not None:
        arrival_rng, arrival_scale, work_rng, work_scale, chunk = env.stream_generators()
        horizon = float(env.horizon)
    else:  # not drawn from: placeholders of the right type
        arrival_rng = work_rng = np.random.default_rng(0)
        arrival_scale = work_scale = 1.0
        chunk = 1
        horizon = math.inf
    gaps, accept, durations = _campaign(
        n_items,
        int(max_hired),
        float(state.problem.budget),
        horizon,
        env is None,
        arrival_rng,
        arrival_scale,
        work_rng,
        work_scale,
        chunk,
        answers,
        np.ascontiguousarray(table.space.lookup, dtype=np.int64),
        np.ascontiguousarray(table.index, dtype=np.float64),
        int(policy.budget_),
        int(table.n_rows),
        int(cap),
        int(table.space.lookup[0, 0, 0]),
        policy.rng_,
        state.label_counts,
        state.pending,
        asked,
        log_items,
        log_labels,
        out_int,
        out_float,
    )
    handed, cancelled, n_events, n_capped, gap_next, duration_next = (int(v) for v in out_int)
    end_time, state_time, clock, spent, committed = (float(v) for v in out_float)
    # the state as drive leaves it
    state.label_log.extend(
        log_items[:n_events],
        np.zeros(n_events, dtype=np.int64),
        log_labels[:n_events],
        np.ones(n_events),
    )
    state.spent = spent
    state.committed = committed
    state.n_events = n_events
    # untimed events: the state's time is the number of labels
    state.time = state_time if env is not None else float(n_events)
    # the world as the reference leaves it
    base.set_answers_given(asked)
    if env is not None:
        env.set_stream_position(gaps, accept, gap_next, durations, duration_next, clock)
    policy.n_capped_ = n_capped
    return Outcome(handed, cancelled, end_time)


def run_compiled(
    policy: LagrangianIndexPolicy,
    env: ContinuousTimeEnvironment,
    state: CampaignState,
    max_hired: int,
) -> Outcome:
    """Run the campaign of ``policy`` (reset, one prior group) in ``env`` (reset) from the
    initial ``state`` — what ``drive(policy, env, state, ArrivalClock(env, max_hired),
    StopAtSpend())`` does, compiled (module doc)."""
    base = env.base
    assert isinstance(base, SyntheticBernoulliEnvironment)
    return _run(policy, base, state, max_hired, env)


def run_instant(
    policy: LagrangianIndexPolicy,
    env: SyntheticBernoulliEnvironment,
    budgets: Sequence[float],
    *,
    world_seed: int | np.random.SeedSequence | None,
    policy_rng: np.random.Generator,
    verdict: Verdict | None = None,
) -> list[dict[str, Any]]:
    """``run_campaign(policy, env, budgets, ...)`` (discrete time, labels at once) compiled:
    the same rows bar ``seconds``. One budget (the runner gives a budget-aware policy one
    campaign per budget): the campaign hires until that budget is spent or the policy stops,
    and its row is recorded at the end, as the reference's ``CheckpointRecorder`` does.

    Raises:
        InvalidParameterError: more than one budget.
    """
    if len(budgets) != 1:
        raise InvalidParameterError(
            f"the compiled index loop runs one budget per campaign, got {len(budgets)}"
        )
    checkpoint = float(budgets[0])
    env.check_budget(checkpoint)
    env.reset(seed=world_seed)
    problem = env.problem(checkpoint)
    state = CampaignState.initial(problem)
    verdict = verdict if verdict is not None else make_verdict()
    recorder = CheckpointRecorder(
        policy, [checkpoint], env.true_labels, np.ones(problem.n_items, dtype=bool), None, verdict
    )
    policy.reset(problem, policy_rng)
    verdict.reset(problem, policy_rng)
    # the reference ends at the first arrival with spent + 1e-9 >= the budget: after n labels
    _run(policy, env, state, max(0, math.ceil(checkpoint - 1e-9)), None)
    recorder.finish(state)
    return recorder.rows
