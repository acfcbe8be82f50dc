"""The index policy's fast paths make the decisions of the straightforward implementation.

``_ReferencePolicy`` below is the policy as it was before the speed work (issue 21): NumPy
scalar bookkeeping per task, Python-list buckets, ``np.argmax`` over the whole masked row at
every decision, ``Generator.integers`` for the tie between the tasks of the best state. The
tests drive it and :class:`LagrangianIndexPolicy` through the same random campaigns — mixed
priors and thresholds, labels delayed, cancelled without telling the policy, items becoming
ineligible, the generator replaced mid-campaign (as a live campaign does), every NumPy bit
generator — and require the same assignment at every step, the same indices, the same
``n_capped_`` and the generator in the same state afterwards.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle

import numpy as np
import pytest

from crowdbudget.bounds.lagrangian import default_label_cap, index_table, prior_groups
from crowdbudget.policies.lagrangian_index import (
    MAX_TABLE_CELLS,
    PAPER_ARRIVAL_RATE,
    PAPER_COMPLETION_RATE,
    LagrangianIndexPolicy,
    StateBuckets,
    _integers,
)
from crowdbudget.types import Assignment, CampaignState, LabelEvent, Problem

BIT_GENERATORS = ["PCG64", "PCG64DXSM", "Philox", "MT19937", "SFC64"]


class _ReferenceBuckets:
    def __init__(self, n_states: int, states: np.ndarray) -> None:
        self.state = np.asarray(states, dtype=np.int64).copy()
        self.count = np.zeros(n_states, dtype=np.int64)
        self.members: list[list[int]] = [[] for _ in range(n_states)]
        self.position = np.zeros(self.state.shape[0], dtype=np.int64)
        valid = self.state >= 0
        order = np.argsort(self.state, kind="stable")
        order = order[valid[order]]
        for s in np.unique(self.state[valid]).tolist():
            group = order[self.state[order] == s]
            self.members[s] = group.tolist()
            self.position[group] = np.arange(group.shape[0])
            self.count[s] = group.shape[0]

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


class _ReferencePolicy(LagrangianIndexPolicy):
    """The implementation before the speed work (commit 672266d), kept as the oracle."""

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
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
        self.tables_ = [
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
            )
            for a, b, d in groups
        ]
        sizes = [t.space.n_states for t in self.tables_]
        offset = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._lookup = np.stack(
            [
                t.space.lookup + np.where(t.space.lookup >= 0, off, 0)
                for t, off in zip(self.tables_, offset[:-1], strict=True)
            ]
        )
        self._group = group_of
        self.ref_n_pos = np.zeros(n, dtype=np.int64)
        self.ref_n_neg = np.zeros(n, dtype=np.int64)
        self.ref_w = np.zeros(n, dtype=np.int64)
        self.ref_removed = np.zeros(n, dtype=bool)
        self.ref_buckets = _ReferenceBuckets(int(offset[-1]), self._lookup[group_of, 0, 0, 0])
        self._row_m = -1
        self._row = np.empty(0)
        self._dirty = set()
        self._total_pending = 0
        self._total_labels = 0
        self.n_capped_ = 0

    def _state_id(self, task: int) -> int:
        c = self.label_cap_
        npos, nneg, w = int(self.ref_n_pos[task]), int(self.ref_n_neg[task]), int(self.ref_w[task])
        if npos + nneg + w > c or self.ref_removed[task]:
            return -1
        return int(self._lookup[self._group[task], npos, nneg, w])

    def _sync_task(self, state: CampaignState, task: int) -> None:
        counts = state.label_counts[task]
        self._total_labels += int(counts[0] + counts[1]) - int(
            self.ref_n_pos[task] + self.ref_n_neg[task]
        )
        self._total_pending += int(state.pending[task]) - int(self.ref_w[task])
        self.ref_n_neg[task] = counts[0]
        self.ref_n_pos[task] = counts[1]
        self.ref_w[task] = state.pending[task]
        before = int(self.ref_buckets.state[task])
        new = self._state_id(task)
        if new < 0 and before >= 0 and not self.ref_removed[task]:
            self.n_capped_ += 1
        self.ref_buckets.move(task, new)

    def _sync(self, state: CampaignState) -> None:
        for task in self._dirty:
            self._sync_task(state, task)
        self._dirty.clear()
        if self._total_pending != round(state.committed) or self._total_labels != state.n_events:
            for task in range(state.n_items):
                self._sync_task(state, task)

    def _current_row(self, arrivals: int) -> np.ndarray:
        m = self.budget_ - arrivals
        if m != self._row_m:
            self._row = np.concatenate([t.row(arrivals) for t in self.tables_])
            self._row_m = m
        return self._row

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        price = self._price(state, worker)
        if not state.can_afford(price):
            return None
        self._sync(state)
        arrivals = round(state.spent + state.committed)
        if arrivals >= self.budget_:
            return None
        row = self._current_row(arrivals)
        buckets = self.ref_buckets
        while True:
            scores = np.where(buckets.count > 0, row, -np.inf)
            best = int(np.argmax(scores))
            if not scores[best] > -np.inf:
                return None
            members = buckets.members[best]
            task = (
                members[int(self.rng_.integers(len(members)))] if len(members) > 1 else members[0]
            )
            if state.eligible[task]:
                self._dirty.add(task)
                return Assignment(item=task, worker=worker, price=price)
            self.ref_removed[task] = True
            buckets.move(task, -1)

    def index_of(self, state: CampaignState, task: int) -> float:
        self._sync(state)
        sid = self._state_id(task)
        if sid < 0:
            return -math.inf
        return float(self._current_row(round(state.spent + state.committed))[sid])


def _problem(seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    n_items = int(rng.integers(1, 40))
    budget = int(rng.integers(1, 4 * n_items + 3))
    kind = seed % 3
    if kind == 0:  # one shared prior
        return Problem(n_items=n_items, budget=budget)
    # a few distinct (prior, threshold) groups, items shuffled among them
    rows = np.array([[1.0, 1.0], [2.0, 1.0], [1.0, 3.0]])[: int(rng.integers(1, 4))]
    prior = rows[rng.integers(rows.shape[0], size=n_items)]
    thresholds = 0.5 if kind == 1 else rng.choice([0.4, 0.5], size=n_items)
    return Problem(n_items=n_items, budget=budget, prior=prior, thresholds=thresholds)


def _generator(name: str, seed: int) -> np.random.Generator:
    return np.random.Generator(getattr(np.random, name)(seed))


def _campaign(seed: int, bit_generator: str, capped: list[int]) -> None:
    """Drive both policies through one random campaign; fail at the first difference."""
    problem = _problem(seed)
    world = np.random.default_rng(10_000 + seed)
    params = {
        "arrival_rate": 0.1,
        "completion_rate": float(world.choice([0.4, 2.0])),
        "label_cap": int(world.integers(2, 6)),
        "max_lookahead": None if world.random() < 0.5 else int(world.integers(1, 8)),
    }
    fast, reference = LagrangianIndexPolicy(**params), _ReferencePolicy(**params)
    fast.reset(problem, _generator(bit_generator, seed))
    reference.reset(problem, _generator(bit_generator, seed))
    states = [CampaignState.initial(problem), CampaignState.initial(problem)]
    pending: list[Assignment] = []
    delay = world.random() < 0.5  # labels come back later (w > 0 at decisions)
    worker = None if world.random() < 0.5 else 0
    for step in range(4 * round(problem.budget) + 10):
        u = world.random()
        if u < 0.05 and problem.n_items > 1:  # an item leaves for good
            item = int(world.integers(problem.n_items))
            for state in states:
                state.eligible[item] = False
        elif u < 0.11:  # a label the policies are not told about (imported): may pass the cap
            item, label = int(world.integers(problem.n_items)), int(world.integers(2))
            for state in states:
                state.label_counts[item, label] += 1
                state.n_events += 1
        elif u < 0.14:  # a new generator, as a live campaign sets one per request
            fast.rng_ = _generator(bit_generator, 50 + step)
            reference.rng_ = _generator(bit_generator, 50 + step)
        picks = [fast.select(states[0], worker=worker), reference.select(states[1], worker=worker)]
        assert picks[0] == picks[1], (seed, bit_generator, step)
        assert fast.n_capped_ == reference.n_capped_
        if picks[0] is not None:
            for state, pick in zip(states, picks, strict=True):
                state.record_assignment(pick)
            pending.append(picks[0])
        answer = pending and (not delay or world.random() < 0.5 or picks[0] is None)
        if answer:
            done = pending.pop(int(world.integers(len(pending))))
            if world.random() < 0.1:  # cancelled, and the policies are not told
                for state in states:
                    state.release_assignment(done)
            else:
                event = LabelEvent(done.item, 0, int(world.integers(2)))
                for state in states:
                    state.record_label(event, done)
                fast.observe(event)
                reference.observe(event)
        if world.random() < 0.1:
            task = int(world.integers(problem.n_items))
            assert fast.index_of(states[0], task) == reference.index_of(states[1], task)
        if picks[0] is None and not pending:
            break
    assert fast.n_capped_ == reference.n_capped_
    capped.append(fast.n_capped_)
    assert pickle.dumps(fast.rng_.bit_generator.state) == pickle.dumps(
        reference.rng_.bit_generator.state
    )
    assert fast._w.tolist() == reference.ref_w.tolist()
    assert fast._n_pos.tolist() == reference.ref_n_pos.tolist()
    assert fast._n_neg.tolist() == reference.ref_n_neg.tolist()


@pytest.mark.parametrize("bit_generator", BIT_GENERATORS)
def test_fast_paths_make_the_reference_decisions(bit_generator: str) -> None:
    capped: list[int] = []
    for seed in range(40):
        _campaign(seed, bit_generator, capped)
    assert sum(capped) > 0  # the cap was passed (imported labels) in some campaigns


@pytest.mark.parametrize("bit_generator", BIT_GENERATORS)
def test_tie_draw_is_generator_integers_bit_for_bit(bit_generator: str) -> None:
    # one bucket of n tasks: each decision draws integers(n) (n up to 5 * 10^4 here); the
    # other draws interleaved use the generator's 32-bit buffer and state as integers() left it
    for n_items in (2, 3, 1000, 50_000):
        problem = Problem(n_items=n_items, budget=10 * n_items)
        policy = LagrangianIndexPolicy(arrival_rate=0.1, completion_rate=0.4, label_cap=3)
        policy.reset(problem, _generator(bit_generator, n_items))
        mirror = _generator(bit_generator, n_items)
        state = CampaignState.initial(problem)
        for k in range(200):
            pick = policy.select(state)
            assert pick is not None
            assert pick.item == int(mirror.integers(n_items))  # nobody left the start state
            if k % 3 == 0:
                assert policy.rng_.random() == mirror.random()
            if k % 5 == 0:
                assert policy.rng_.integers(2**40) == mirror.integers(2**40)
            policy._dirty.clear()  # keep every task in the start state (w is not synced)
            policy._total_pending = round(state.committed)
        assert pickle.dumps(policy.rng_.bit_generator.state) == pickle.dumps(
            mirror.bit_generator.state
        )


def test_a_copied_policy_goes_on_with_the_same_decisions() -> None:
    problem = Problem(n_items=30, budget=90)
    policy = LagrangianIndexPolicy(arrival_rate=0.1, completion_rate=0.4, label_cap=4)
    policy.reset(problem, np.random.default_rng(3))
    state = CampaignState.initial(problem)
    labels = np.random.default_rng(4)

    def step(p: LagrangianIndexPolicy, s: CampaignState, label: int) -> int | None:
        pick = p.select(s)
        if pick is None:
            return None
        s.record_assignment(pick)
        event = LabelEvent(pick.item, 0, label)
        s.record_label(event, pick)
        p.observe(event)
        return pick.item

    for _ in range(20):
        step(policy, state, int(labels.integers(2)))
    twins = [copy.deepcopy(policy), pickle.loads(pickle.dumps(policy))]
    twin_states = [copy.deepcopy(state), copy.deepcopy(state)]
    for _ in range(70):
        label = int(labels.integers(2))
        item = step(policy, state, label)
        for twin, twin_state in zip(twins, twin_states, strict=True):
            assert step(twin, twin_state, label) == item


@pytest.mark.parametrize("seed", range(20))
def test_state_buckets_start_as_the_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_tasks = int(rng.integers(0, 50))
    n_states = int(rng.integers(1, 6))
    if seed % 2:
        start = np.full(n_tasks, int(rng.integers(n_states)), dtype=np.int64)
    else:
        start = rng.integers(-1, n_states, size=n_tasks)
    fast, reference = StateBuckets(n_states, start), _ReferenceBuckets(n_states, start)
    for _ in range(60):
        if n_tasks == 0:
            break
        task, new = int(rng.integers(n_tasks)), int(rng.integers(-1, n_states))
        fast.move(task, new)
        reference.move(task, new)
        assert fast.state.tolist() == reference.state.tolist()
        assert fast.count.tolist() == reference.count.tolist()
        assert [list(m) for m in fast.members] == reference.members
        for members in reference.members:
            for k, t in enumerate(members):
                assert fast.position[t] == k


@pytest.mark.parametrize("bit_generator", BIT_GENERATORS)
def test_integers_is_generator_integers_rejections_included(bit_generator: str) -> None:
    # sizes near 2^32 reject often (probability up to ~1/2): the rejection loop is exercised
    sizes = np.random.default_rng(7).integers(2, 2**32, size=3000).tolist()
    sizes += [2, 3, 2**31 + 1, 2**32 - 1, 3 * 2**30 + 7] * 50
    policy = LagrangianIndexPolicy()
    policy.rng_ = _generator(bit_generator, 11)
    mirror = _generator(bit_generator, 11)
    draw = policy._draw_source()
    assert draw is not None
    for k, size in enumerate(sizes):
        assert _integers(draw, size) == int(mirror.integers(size)), (k, size)
        if k % 7 == 0:  # leaves the 32-bit buffer half used, or not
            assert policy.rng_.random() == mirror.random()
    assert pickle.dumps(policy.rng_.bit_generator.state) == pickle.dumps(mirror.bit_generator.state)


@pytest.mark.parametrize("cap", [3, 12])
def test_best_state_is_the_masked_argmax(cap: int) -> None:
    # rows with ties, −inf and NaN; few occupied states (the Python loop) and many (NumPy)
    problem = Problem(n_items=4, budget=6)
    policy = LagrangianIndexPolicy(arrival_rate=0.1, completion_rate=0.4, label_cap=cap)
    policy.reset(problem, np.random.default_rng(0))
    table = policy.tables_[0]
    rng = np.random.default_rng(cap)
    for trial in range(300):
        index = rng.choice(
            [0.0, 0.1, 0.2, -np.inf, np.nan], p=[0.3, 0.3, 0.2, 0.15, 0.05], size=table.index.shape
        )
        policy.tables_ = [dataclasses.replace(table, index=index)]
        n_occupied = int(rng.integers(0, min(table.space.n_states, 40) + 1))
        occupied = sorted(rng.choice(table.space.n_states, size=n_occupied, replace=False))
        policy._occupied[:] = [int(s) for s in occupied]
        policy._occupied_array = None
        policy._best_key = -1
        policy._row_key = -1
        arrivals = int(rng.integers(0, policy.budget_))
        row = index[min(max(policy.budget_ - arrivals, 1), index.shape[0]) - 1]
        mask = np.zeros(row.shape[0], dtype=bool)
        mask[occupied] = True
        scores = np.where(mask, row, -np.inf)
        best = int(np.argmax(scores))
        expected = best if scores[best] > -np.inf else -1
        assert policy._best_state(arrivals) == expected, trial


def test_a_task_past_the_cap_is_in_no_bucket() -> None:
    # labels the policy was not told about (imported) take task 0 past the cap of 2; it
    # must leave every bucket (it was once appended to the last state's bucket, and −1
    # listed among the occupied states)
    problem = Problem(n_items=3, budget=12)
    policy = LagrangianIndexPolicy(label_cap=2)
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState.initial(problem)
    for _ in range(3):
        imported = Assignment(0, 0)
        state.record_assignment(imported)
        state.record_label(LabelEvent(0, 0, 1), imported)
    pick = policy.select(state, worker=0)
    assert pick is not None and pick.item != 0
    assert policy.n_capped_ == 1
    assert int(policy._buckets.state[0]) == -1
    assert -1 not in policy._occupied
    assert all(0 not in members for members in policy._buckets.members)
    assert int(policy._buckets.count.sum()) == 2
