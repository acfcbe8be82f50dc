"""The index policy of Hu & Frazier, "Bayes-Optimal Effort Allocation in Crowdsourcing: Bounds
and Index Policies", §6 (Algorithm 1), registered as ``lagrangian-index``.

Each task's state is (n⁺, n⁻, w): labels received and workers in flight; the arriving worker
(the (ℓ+1)-th) goes to the task of largest index λ*(n⁺, n⁻, w; U − ℓ), the largest penalty at
which hiring for that task is optimal in the single-task relaxation (15) with scalar λ
(:mod:`crowdbudget.bounds.lagrangian`). Ties between tasks: uniformly at random among the tasks
in the best state; between different states of equal index: the state listed first
(Algorithm 1: "break tie arbitrarily").

The tables are computed once per (prior, threshold, U, r, μ, cap) and cached (memory; disk with
``cache_dir``). A decision looks at the current row of the table restricted to the occupied
states (state buckets, :class:`StateBuckets`; the occupied state ids are kept sorted as tasks
move), independent of the number of tasks: the best occupied state is cached per (row,
occupied states) and recomputed only when either changes, over the few occupied states of the
S = (C+1)(C+2)(C+3)/6 states of one task; moving a task between buckets is O(1). The
per-decision path uses flat arrays (memoryviews, ``array('q')`` buckets, no per-task Python
object), and draws the tie with ``Generator.integers``'s own arithmetic (:func:`_integers`):
same decisions as the straightforward implementation
(``tests/test_lagrangian_index_speed_paths.py``), about 3.5 µs per decision. Where the whole
campaign can be compiled — a synthetic world with noiseless workers and one prior, in
continuous time or with labels at once — the runners run it compiled
(:mod:`crowdbudget.engine.index_loop`: the same run, 0.5–1.6 µs per decision).

The policy models the arrival and completion rates r and μ: ``arrival_rate`` /
``completion_rate`` default to None, which means "the continuous-time simulator's rates"
(:func:`~crowdbudget.experiments.continuous.run_continuous_campaign` calls
:meth:`for_rates`) and, elsewhere, the paper's r = 0.1, μ = 0.4. In the instantaneous model of
the other simulators (labels come back at once) w is always 0 when a decision is made.

Tasks at the label cap C get no more workers; the number of tasks that reached it is
``n_capped_`` (the paper's §6 check that the cap does not bind). Unit prices only (a worker is
one unit of U); a problem with worker prices is refused.
"""

from __future__ import annotations

import math
from array import array
from bisect import insort
from collections.abc import Collection, Iterable
from typing import Any

import numpy as np

from crowdbudget.bounds.lagrangian import IndexTable, default_label_cap, index_table, prior_groups
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.types import Assignment, CampaignState, IntArray, LabelEvent, Problem

PAPER_ARRIVAL_RATE = 0.1
PAPER_COMPLETION_RATE = 0.4
#: Without ``max_lookahead``, tables keep at most this many (row, state) cells: rows beyond
#: it (many arrivals to go) reuse the last row (``tables_[g].lookahead_change`` says how much
#: the last row still moved). Fig. 1's largest case (1200 × 1330) is exact.
MAX_TABLE_CELLS = 4_000_000


def _integers(draw: tuple[Any, Any, Any], size: int) -> int:
    """``Generator.integers(size)`` for 1 < size < 2^32, bit for bit: NumPy's
    ``buffered_bounded_lemire_uint32`` (Lemire's multiply-shift on one 32-bit draw, low words
    below (2^32 − size) mod size rejected) on the bit generator's own ``next_uint32`` (its
    32-bit buffer included), under its lock. ``draw`` is
    :meth:`LagrangianIndexPolicy._draw_source`'s (next_uint32, state pointer, lock)."""
    next_uint32, bits, lock = draw
    lock.acquire()
    try:
        product = next_uint32(bits) * size
        low = product & 0xFFFFFFFF
        if low < size:
            threshold = (0x100000000 - size) % size
            while low < threshold:
                product = next_uint32(bits) * size
                low = product & 0xFFFFFFFF
    finally:
        lock.release()
    return product >> 32


class StateBuckets:
    """Tasks grouped by state id: O(1) move, uniform member, occupied-state mask.

    Flat arrays, no per-task Python object: ``state``, ``position`` (index of the task in its
    bucket) and ``count`` are NumPy int64 arrays; ``members[s]`` is an ``array('q')`` of the
    tasks in state s, ascending at the start, then in the order of the moves (a task moving in
    is appended; one moving out is replaced by the last member). A uniform member is
    ``members[s][k]``, k uniform in [0, count[s]).

    Args:
        n_states: number of state ids.
        states: initial state id per task, shape (n_tasks,); −1 = in no bucket.
    """

    def __init__(self, n_states: int, states: IntArray) -> None:
        self.state = np.array(states, dtype=np.int64)  # a copy
        n_tasks = self.state.shape[0]
        self.members: list[array[int]] = [array("q") for _ in range(n_states)]
        if n_tasks and 0 <= self.state.min() == self.state.max():
            # every task in one bucket (one shared prior): no sort, no group search
            start = int(self.state[0])
            self.count = np.zeros(n_states, dtype=np.int64)
            self.count[start] = n_tasks
            self.position = np.arange(n_tasks, dtype=np.int64)
            self.members[start].frombytes(self.position.tobytes())
        else:
            valid = self.state >= 0
            keys = np.where(valid, self.state, n_states)  # −1 last
            order = np.argsort(keys, kind="stable")
            counts = np.bincount(keys, minlength=n_states + 1)
            self.count = counts[:n_states].astype(np.int64)
            ptr = np.zeros(n_states + 2, dtype=np.int64)
            np.cumsum(counts, out=ptr[1:])
            self.position = np.zeros(n_tasks, dtype=np.int64)
            self.position[order] = np.arange(n_tasks, dtype=np.int64) - ptr[keys[order]]
            for s in np.flatnonzero(self.count).tolist():
                self.members[s].frombytes(order[ptr[s] : ptr[s + 1]].astype(np.int64).tobytes())

    def move(self, task: int, new_state: int) -> None:
        old = int(self.state[task])
        if old == new_state:
            return
        if old >= 0:
            members = self.members[old]
            pos = int(self.position[task])
            last = members.pop()
            if last != task:
                members[pos] = last
                self.position[last] = pos
            self.count[old] -= 1
        if new_state >= 0:
            self.position[task] = len(self.members[new_state])
            self.members[new_state].append(task)
            self.count[new_state] += 1
        self.state[task] = new_state


class LagrangianIndexPolicy(AllocationPolicy):
    """Hu & Frazier's index policy (Algorithm 1).

    Args:
        arrival_rate, completion_rate: r and μ of the model (None: the simulator's, else the
            paper's 0.1 and 0.4).
        label_cap: C, workers per task in the DP (None: 3·ceil(U/K) + 12, at most U).
        max_lookahead: rows of the tables (arrivals to go) kept; more arrivals to go reuse the
            last row (None: all U rows — exact — unless U × S exceeds ``MAX_TABLE_CELLS``).
        grid_points: λ grid of the index computation.
        cache_dir: directory for the tables on disk (None: memory only).

    Fitted attributes: ``tables_`` (one :class:`IndexTable` per prior group), ``n_capped_``.

    Example:
        >>> policy = LagrangianIndexPolicy()
        >>> problem = Problem(n_items=4, budget=5)
        >>> policy.reset(problem, np.random.default_rng(0))
        >>> policy.select(CampaignState.initial(problem)).item in range(4)
        True
    """

    budget_aware = True
    binary_only = True
    chooses_workers = False
    unit_prices_only = True
    #: select marks the chosen task for a re-sort at the next call, so the member order of
    #: its state bucket (which a tie draw indexes) depends on past decisions
    keeps_select_state = True

    def __init__(
        self,
        arrival_rate: float | None = None,
        completion_rate: float | None = None,
        label_cap: int | None = None,
        max_lookahead: int | None = None,
        grid_points: int = 256,
        cache_dir: str | None = None,
    ) -> None:
        self.arrival_rate = arrival_rate
        self.completion_rate = completion_rate
        self.label_cap = label_cap
        self.max_lookahead = max_lookahead
        self.grid_points = grid_points
        self.cache_dir = cache_dir

    def validate_params(self) -> None:
        for name in ("arrival_rate", "completion_rate"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InvalidParameterError(f"{name} must be a number > 0, got {value!r}")
        if self.label_cap is not None and int(self.label_cap) < 1:
            raise InvalidParameterError(f"label_cap must be >= 1, got {self.label_cap!r}")
        if self.max_lookahead is not None and int(self.max_lookahead) < 1:
            raise InvalidParameterError(f"max_lookahead must be >= 1, got {self.max_lookahead!r}")
        if int(self.grid_points) < 8:
            raise InvalidParameterError(f"grid_points must be >= 8, got {self.grid_points!r}")

    def for_rates(self, arrival_rate: float, completion_rate: float) -> LagrangianIndexPolicy:
        """This policy with the simulator's rates filled in where it left them None."""
        params: dict[str, Any] = self.get_params()
        if params["arrival_rate"] is None:
            params["arrival_rate"] = arrival_rate
        if params["completion_rate"] is None:
            params["completion_rate"] = completion_rate
        return type(self)(**params)

    # ---- reset ---------------------------------------------------------------------------------
    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        if problem.worker_prices is not None:
            raise InvalidParameterError(
                "lagrangian-index counts workers (unit prices); problems with worker prices "
                "are not supported"
            )
        n = problem.n_items
        self.budget_ = max(1, math.floor(problem.budget + 1e-9))
        r = self.arrival_rate if self.arrival_rate is not None else PAPER_ARRIVAL_RATE
        mu = self.completion_rate if self.completion_rate is not None else PAPER_COMPLETION_RATE
        cap = default_label_cap(n, self.budget_) if self.label_cap is None else int(self.label_cap)
        self.label_cap_ = cap
        groups, _, group_of = prior_groups(problem.prior_array, problem.threshold_array, n)
        n_states = (cap + 1) * (cap + 2) * (cap + 3) // 6
        lookahead = self.max_lookahead
        if lookahead is None and self.budget_ * n_states > MAX_TABLE_CELLS:
            lookahead = max(32, MAX_TABLE_CELLS // n_states)
        self.lookahead_ = lookahead
        self.tables_: list[IndexTable] = [
            index_table(
                prior_a=a,
                prior_b=b,
                threshold=d,
                budget=self.budget_,
                arrival_rate=r,
                completion_rate=mu,
                label_cap=cap,
                max_lookahead=lookahead,
                grid_points=self.grid_points,
                cache_dir=self.cache_dir,
            )
            for a, b, d in groups
        ]
        sizes = [t.space.n_states for t in self.tables_]
        self._offset = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        # lookups (n⁺, n⁻, w) -> global state id, per group, shape (G, C+1, C+1, C+2)
        self._lookup = np.stack(
            [
                t.space.lookup + np.where(t.space.lookup >= 0, off, 0)
                for t, off in zip(self.tables_, self._offset[:-1], strict=True)
            ]
        )
        self._group = group_of
        self._one_group = len(self.tables_) == 1
        # (n⁺, n⁻, w) of each global state id, as Python lists (read per decision)
        self._sid_pos: list[int] = np.concatenate([t.space.n_pos for t in self.tables_]).tolist()
        self._sid_neg: list[int] = np.concatenate([t.space.n_neg for t in self.tables_]).tolist()
        self._sid_w: list[int] = np.concatenate([t.space.in_flight for t in self.tables_]).tolist()
        # a task's (n⁺, n⁻, w) is its state's; tasks in no bucket (at the cap, or removed:
        # no longer eligible) keep theirs here
        self._parked: dict[int, tuple[int, int, int]] = {}
        self._removed: set[int] = set()
        if self._one_group:
            start = np.full(n, self._lookup[0, 0, 0, 0], dtype=np.int64)
        else:
            start = self._lookup[group_of, 0, 0, 0]
        self._buckets = StateBuckets(int(self._offset[-1]), start)
        self._n_rows_max = max(t.n_rows for t in self.tables_)
        self._row_key = -1
        self._row: np.ndarray = np.empty(0)
        # occupied state ids, ascending (kept up to date by every move), and as an array
        self._occupied: list[int] = np.flatnonzero(self._buckets.count).tolist()
        self._occupied_array: IntArray | None = None  # None: to rebuild from the list
        self._best = -1  # best occupied state for the row ``_best_key`` (−1: none)
        self._best_key = -1  # −1: to recompute
        self._dirty: set[int] = set()
        self._total_pending = 0
        self._total_labels = 0
        self.n_capped_ = 0
        self._views: tuple[Any, ...] | None = None
        self._draw_rng: np.random.Generator | None = None
        self._draw: tuple[Any, Any, Any] | None = None

    # ---- per-task counts (derived: a task's state id says them) ---------------------------------
    def _count_array(self, column: int) -> IntArray:
        table = np.asarray([self._sid_pos, self._sid_neg, self._sid_w][column], dtype=np.int64)
        state = self._buckets.state
        out = np.where(state >= 0, table[np.maximum(state, 0)], 0)
        for task, counts in self._parked.items():
            out[task] = counts[column]
        return out

    @property
    def _n_pos(self) -> IntArray:
        """n⁺ of every task as the policy last saw it, shape (n_items,) (inspection)."""
        return self._count_array(0)

    @property
    def _n_neg(self) -> IntArray:
        """n⁻ of every task as the policy last saw it, shape (n_items,) (inspection)."""
        return self._count_array(1)

    @property
    def _w(self) -> IntArray:
        """Workers in flight per task as the policy last saw it, shape (n_items,)."""
        return self._count_array(2)

    def _counts_of(self, task: int) -> tuple[int, int, int]:
        sid = int(self._buckets.state[task])
        if sid < 0:
            return self._parked[task]
        return self._sid_pos[sid], self._sid_neg[sid], self._sid_w[sid]

    # ---- fast scalar access ----------------------------------------------------------------------
    def _scalar_views(self) -> tuple[Any, ...]:
        """What :meth:`_sync_tasks` reads per call, in one tuple: memoryviews of the per-task
        arrays (scalar reads and writes as Python ints, about half the cost of NumPy scalar
        indexing), the bucket lists, the state tables and constants. Rebuilt after a copy
        (``__getstate__``)."""
        if self._views is None:
            buckets = self._buckets
            _, d1, d2, d3 = self._lookup.shape
            self._views = (
                np.ascontiguousarray(self._group, dtype=np.int64).data,
                np.ascontiguousarray(self._lookup).reshape(-1).data,
                buckets.state.data,
                buckets.position.data,
                buckets.count.data,
                buckets.members,
                self._sid_pos,
                self._sid_neg,
                self._sid_w,
                self._parked,
                self._removed,
                self._one_group,
                self.label_cap_,
                self._occupied,
                d1,
                d2,
                d3,
            )
        return self._views

    def _draw_source(self) -> tuple[Any, Any, Any] | None:
        """(next_uint32, its state pointer, the bit generator's lock) of ``rng_``, or None
        when ``rng_`` is not a NumPy ``Generator`` (then :meth:`select` calls ``integers``).

        ``Generator.integers(n)`` (int64, 1 < n < 2^32) is Lemire's multiply-shift on one
        32-bit draw of the bit generator; :func:`_integers` does the same arithmetic on the
        same ``next_uint32`` (the bit generator's own C function), so the stream and the
        generator's state after each draw are those of ``integers`` — at 0.5 µs instead of
        1.2 µs. ``tests/test_lagrangian_index_speed_paths.py`` checks this on every NumPy bit
        generator.
        """
        rng = self.rng_
        if rng is not getattr(self, "_draw_rng", None):
            self._draw_rng = rng
            self._draw = None
            if type(rng) is np.random.Generator:
                try:
                    bit_generator = rng.bit_generator
                    interface = bit_generator.ctypes
                    self._draw = (interface.next_uint32, interface.state, bit_generator.lock)
                except Exception:  # pragma: no cover - no ctypes interface: integers()
                    self._draw = None
        return self._draw

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        # memoryviews and ctypes pointers do not survive a copy: rebuilt on first use
        for name in ("_views", "_draw_rng", "_draw"):
            if name in state:
                state[name] = None
        return state

    # ---- keeping the view of the state in sync --------------------------------------------------
    def _state_id(self, task: int) -> int:
        npos, nneg, w = self._counts_of(task)
        if npos + nneg + w > self.label_cap_ or task in self._removed:
            return -1
        return int(self._lookup[self._group[task], npos, nneg, w])

    def _sync_tasks(self, state: CampaignState, tasks: Iterable[int]) -> None:
        """Read (n⁺, n⁻, w) of ``tasks`` from ``state`` (in the order given) and move each to
        its state's bucket: scalar memoryviews and Python ints, the per-decision path."""
        (
            group,
            lookup,
            bucket_of,
            position,
            count,
            members,
            sid_pos,
            sid_neg,
            sid_w,
            parked,
            removed,
            one_group,
            cap,
            occupied,
            d1,
            d2,
            d3,
        ) = self._views if self._views is not None else self._scalar_views()
        label_counts = state.label_counts
        pending = state.pending
        labels_delta = 0
        pending_delta = 0
        occupancy_changed = False
        for task in tasks:
            neg = label_counts.item(task, 0)
            pos = label_counts.item(task, 1)
            w = pending.item(task)
            before = bucket_of[task]
            if before >= 0:
                labels_delta += neg + pos - sid_pos[before] - sid_neg[before]
                pending_delta += w - sid_w[before]
                if pos + neg + w > cap:
                    new = -1
                    self.n_capped_ += 1
                    parked[task] = (pos, neg, w)
                else:
                    g = 0 if one_group else group[task]
                    new = lookup[((g * d1 + pos) * d2 + neg) * d3 + w]
                    if new == before:
                        continue
                bucket = members[before]
                at = position[task]
                last = bucket.pop()
                if last != task:
                    bucket[at] = last
                    position[last] = at
                left = count[before] - 1
                count[before] = left
                if left == 0:
                    occupied.remove(before)
                    occupancy_changed = True
                if new < 0:  # parked at the cap: in no bucket
                    bucket_of[task] = -1
                    continue
            else:
                old_pos, old_neg, old_w = parked[task]
                labels_delta += neg + pos - old_pos - old_neg
                pending_delta += w - old_w
                if pos + neg + w > cap or task in removed:
                    parked[task] = (pos, neg, w)
                    continue
                del parked[task]
                g = 0 if one_group else group[task]
                new = lookup[((g * d1 + pos) * d2 + neg) * d3 + w]
            position[task] = len(members[new])
            members[new].append(task)
            size = count[new] + 1
            count[new] = size
            if size == 1:
                insort(occupied, new)
                occupancy_changed = True
            bucket_of[task] = new
        self._total_labels += labels_delta
        self._total_pending += pending_delta
        if occupancy_changed:
            self._occupied_array = None
            self._best_key = -1

    def _sync_task(self, state: CampaignState, task: int) -> None:
        self._sync_tasks(state, (task,))

    def _remove(self, task: int) -> None:
        """Take ``task`` out for good (it is no longer eligible)."""
        buckets = self._buckets
        old = int(buckets.state[task])
        self._removed.add(task)
        if old < 0:
            return
        self._parked[task] = (self._sid_pos[old], self._sid_neg[old], self._sid_w[old])
        buckets.move(task, -1)
        if buckets.count[old] == 0:
            self._occupied.remove(old)
            self._occupied_array = None
            self._best_key = -1

    def _sync(self, state: CampaignState) -> None:
        if self._dirty:
            self._sync_tasks(state, self._dirty)
            self._dirty.clear()
        if self._total_pending != round(state.committed) or self._total_labels != state.n_events:
            # something happened that the policy was not told about (a cancelled assignment,
            # imported labels): re-read every task, O(n_items), rare
            self._sync_tasks(state, range(state.n_items))

    def _row_key_of(self, arrivals: int) -> int:
        """Rows of every table are equal for equal keys: ``min(max(m, 1), n_rows)`` with m
        arrivals to go is the same for every m >= the largest table's rows."""
        return max(min(self.budget_ - arrivals, self._n_rows_max), 1)

    def _current_row(self, arrivals: int) -> np.ndarray:
        key = self._row_key_of(arrivals)
        if key != self._row_key:
            tables = self.tables_
            if len(tables) == 1:
                self._row = tables[0].index[min(key, tables[0].n_rows) - 1]
            else:
                self._row = np.concatenate([t.index[min(key, t.n_rows) - 1] for t in tables])
            self._row_key = key
        return self._row

    def _best_state(self, arrivals: int, key: int | None = None) -> int:
        """The occupied state of largest index in the current row, the first such state id on
        ties (as ``np.argmax`` over the row masked to −inf outside the occupied states, a NaN
        included); −1 when every occupied state is at −inf (the cap) or none is occupied.
        Cached per (row, occupied states): O(1) while neither changes, else O(occupied
        states): a Python loop over a few (one prior: a handful of states are occupied at a
        time), NumPy over many."""
        if key is None:
            key = self._row_key_of(arrivals)
        if key == self._best_key:
            return self._best
        occupied = self._occupied
        best = -1
        if self._one_group and len(occupied) <= 16:
            table = self.tables_[0].index.item  # one table: key <= its rows
            r = key - 1
            value = -math.inf
            for s in occupied:
                v = table(r, s)
                if v > value:
                    value = v
                    best = s
                elif v != v:  # NaN: np.argmax's pick, and not > −inf
                    best = -1
                    break
        elif occupied:
            row = self._current_row(arrivals)
            ids = self._occupied_array
            if ids is None:
                ids = self._occupied_array = np.asarray(occupied, dtype=np.int64)
            values = row[ids]
            k = int(values.argmax())
            if values[k] > -math.inf:
                best = occupied[k]
        self._best = best
        self._best_key = key
        return best

    def _open_task(self, state: CampaignState, arrivals: int, closed: Collection[int]) -> int:
        """The drawn task is closed: a uniformly random eligible task outside ``closed`` of
        the best occupied state that has one (states by index in the current row, high to
        low), −1 when none. O(occupied states + their members), only when the first draw
        is closed."""
        row = self._current_row(arrivals)
        occupied = self._occupied
        members_of = self._buckets.members
        eligible = state.eligible
        for k in np.argsort(-row[np.asarray(occupied, dtype=np.int64)], kind="stable"):
            sid = occupied[int(k)]
            if not row[sid] > -math.inf:
                break
            candidates = [t for t in members_of[sid] if eligible[t] and t not in closed]
            if candidates:
                return int(candidates[int(self.rng_.integers(len(candidates)))])
        return -1

    # ---- the contract ---------------------------------------------------------------------------
    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        price = self._price(state, worker)
        if not state.can_afford(price):
            return None
        dirty = self._dirty
        if dirty:
            self._sync_tasks(state, dirty)
            dirty.clear()
        committed = state.committed
        if self._total_pending != round(committed) or self._total_labels != state.n_events:
            self._sync(state)
        arrivals = round(state.spent + committed)
        if arrivals >= self.budget_:
            return None
        key = self.budget_ - arrivals
        if key > self._n_rows_max:
            key = self._n_rows_max
        eligible = state.eligible
        members_of = self._buckets.members
        draw = self._draw if self.rng_ is self._draw_rng else self._draw_source()
        while True:
            best = self._best if self._best_key == key else self._best_state(arrivals, key)
            if best < 0:
                return None  # every task left is at the cap (or none is eligible)
            members = members_of[best]
            size = len(members)
            if size <= 1:
                task = members[0]
            elif draw is None or size > 0xFFFFFFFF:
                task = members[int(self.rng_.integers(size))]
            else:
                task = members[_integers(draw, size)]
            if eligible[task]:
                closed = state.availability.closed
                if closed and task in closed:
                    # live rules: closed to this question (the worker's own, a control item)
                    task = self._open_task(state, arrivals, closed)
                    if task < 0:
                        return None
                dirty.add(task)
                return Assignment(item=task, worker=worker, price=price)
            self._remove(task)  # items never become eligible again

    def observe(self, event: LabelEvent) -> None:
        self._dirty.add(event.item)

    def index_of(self, state: CampaignState, task: int) -> float:
        """λ* of ``task`` in ``state`` (for inspection and tests)."""
        self._sync(state)
        sid = self._state_id(task)
        if sid < 0:
            return -math.inf
        return float(self._current_row(round(state.spent + state.committed))[sid])
