"""Conformance checks for allocation policies and labeling environments.

``check_policy`` drives a policy through campaigns it did not choose (random labels, items made
ineligible mid-way, several assignments pending and answered out of order, push and pull mode,
worker prices) and raises ``AssertionError`` naming the first broken rule of the contract
(:mod:`crowdbudget.policies.base`):

1. only eligible items are assigned;
2. the budget is never overspent (pending assignments count), and ``select`` returns None once
   nothing is affordable;
3. the same seed gives the same assignments (also after a second ``reset`` of one object);
4. pull mode: the assignment is for the arriving worker;
5. ``select`` does not modify the state it is given;
6. ``get_params`` and ``repr`` work.

The campaigns run on the one campaign loop (:func:`crowdbudget.engine.loop.drive`, DESIGN
§11) against an adversary: the world answers with random labels (and, in pull mode, sends
random workers); the clock answers an assignment at once only when ``max_pending`` are out,
and otherwise holds it until the policy has nothing to hand out, then answers the held work
newest first (out of order on purpose); before the decision at step ``budget // 3`` a third of
the items leave the eligible set; every ``select`` is checked as it returns.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from crowdbudget.engine.loop import drive
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.registry import make_policy
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.types import Assignment, CampaignState, LabelEvent, Problem, StepResult

PolicyFactory = Callable[[], AllocationPolicy]


def _factory(policy: str | PolicyFactory) -> PolicyFactory:
    if isinstance(policy, str):
        return lambda: make_policy(policy)
    return policy


def _snapshot(state: CampaignState) -> tuple[object, ...]:
    return (
        state.label_counts.copy(),
        state.pending.copy(),
        state.eligible.copy(),
        state.spent,
        state.committed,
        state.n_events,
    )


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    return all(
        np.array_equal(x, np.asarray(y)) if isinstance(x, np.ndarray) else x == y
        for x, y in zip(a, b, strict=True)
    )


class _Checked:
    """The policy under test, each ``select`` checked against rules 1, 2, 4 and 5 as it
    returns; the (item, worker) sequence of its assignments is kept."""

    def __init__(self, policy: AllocationPolicy, problem: Problem, mode: str) -> None:
        self.policy = policy
        self.problem = problem
        self.mode = mode
        self.name = type(policy).__name__
        self.sequence: list[tuple[int, int | None]] = []

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        name, problem = self.name, self.problem
        before = _snapshot(state)
        assignment = self.policy.select(state, worker=worker)
        assert _same(before, _snapshot(state)), f"{name}.select modified the campaign state"
        if assignment is None:
            return None
        assert isinstance(assignment, Assignment), f"{name}.select returned {assignment!r}"
        assert 0 <= assignment.item < problem.n_items, f"{name} chose item {assignment.item}"
        assert state.eligible[assignment.item], (
            f"{name} chose item {assignment.item}, which is not eligible"
        )
        if self.mode == "pull":
            assert assignment.worker == worker, (
                f"{name} in pull mode returned worker {assignment.worker}, not the arriving "
                f"worker {worker}"
            )
        assert state.can_afford(assignment.price), (
            f"{name} overspends: price {assignment.price} with {state.remaining:g} left"
        )
        assert assignment.price == problem.price_of(assignment.worker), (
            f"{name} priced worker {assignment.worker} at {assignment.price}, "
            f"not {problem.price_of(assignment.worker)}"
        )
        self.sequence.append((assignment.item, assignment.worker))
        return assignment

    def observe(self, event: LabelEvent) -> None:
        self.policy.observe(event)


class _RandomWorld(LabelingEnvironment):
    """Random labels and (pull mode) random arriving workers, from the checker's generator;
    an assignment without a worker is answered by a random one."""

    def __init__(self, problem: Problem, rng: np.random.Generator) -> None:
        self.n_items = problem.n_items
        self.n_classes = problem.n_classes
        self.n_workers = problem.n_workers or 1
        self.true_labels = np.zeros(problem.n_items, dtype=np.int64)
        self.rng = rng

    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> dict[str, Any]:
        return {}

    def arriving_worker(self) -> int:
        return int(self.rng.integers(self.n_workers))

    def step(self, assignment: Assignment) -> StepResult:
        label = int(self.rng.integers(self.n_classes))
        worker = assignment.worker
        who = worker if worker is not None else int(self.rng.integers(self.n_workers))
        return StepResult(LabelEvent(assignment.item, who, label, cost=assignment.price))


class _HoldingClock:
    """Steps 1, 2, ... ``n_steps`` (then no more arrivals); an assignment is answered at once
    when ``max_pending`` are out with it, else held until the policy idles (work time
    ``math.inf``: :func:`~crowdbudget.engine.loop.drive` then answers held work newest
    first)."""

    def __init__(self, mode: str, max_pending: int, n_steps: int) -> None:
        self.pull = mode == "pull"
        self.timed = False
        self.horizon = math.inf
        self.max_assignments: int | None = None
        self.max_pending = max_pending
        self.n_steps = n_steps

    def next_arrival(self, after: float) -> float:
        # step numbers as floats: exact (a few hundred steps)
        return after + 1.0 if after + 1.0 <= self.n_steps else math.inf

    def next_duration(self, state: CampaignState) -> float:
        return 0.0 if int(state.pending.sum()) >= self.max_pending else math.inf


class _Dropper:
    """Before the decision of step ``dropped_at`` (None: never), a third of the items leave
    the eligible set (they must never be assigned again); the budget is checked at every
    step (rule 2, pending assignments count)."""

    def __init__(
        self, problem: Problem, rng: np.random.Generator, dropped_at: int | None, name: str
    ) -> None:
        self.problem = problem
        self.rng = rng
        self.dropped_at = dropped_at
        self.name = name
        self.step = 0

    def _check_budget(self, state: CampaignState) -> None:
        # 1e-9: spends are float sums of prices
        assert state.spent + state.committed <= self.problem.budget + 1e-9, f"{self.name} overspent"

    def before_decision(self, state: CampaignState) -> bool:
        self._check_budget(state)
        if self.step == self.dropped_at:
            n_items = self.problem.n_items
            drop = self.rng.choice(n_items, size=max(1, n_items // 3), replace=False)
            state.eligible[drop] = False
        self.step += 1
        return False

    def finish(self, state: CampaignState) -> None:
        self._check_budget(state)


def _drive(
    factory: PolicyFactory,
    problem: Problem,
    seed: int,
    *,
    mode: str,
    max_pending: int,
    drop_items: bool,
    policy: AllocationPolicy | None = None,
) -> list[tuple[int, int | None]]:
    """One campaign against the adversary (module docstring); returns the (item, worker)
    sequence; asserts rules."""
    rng = np.random.default_rng(seed)
    labels_rng = np.random.default_rng(seed + 1_000_003)
    policy = factory() if policy is None else policy
    policy.reset(problem, rng)
    state = CampaignState.initial(problem)
    checked = _Checked(policy, problem, mode)
    dropped_at = max(1, int(problem.budget) // 3) if drop_items else None
    drive(
        checked,
        _RandomWorld(problem, labels_rng),
        state,
        _HoldingClock(mode, max_pending, n_steps=10 * int(problem.budget) + 10),
        _Dropper(problem, labels_rng, dropped_at, checked.name),
    )
    assert policy.select(state) is None or state.remaining >= 1e-9, (
        f"{checked.name}.select did not return None once the budget was exhausted"
    )
    return checked.sequence


def check_policy(
    policy: str | PolicyFactory,
    *,
    n_items: int = 5,
    budget: float = 12,
    n_workers: int = 3,
    seed: int = 0,
) -> None:
    """Raise ``AssertionError`` if the policy breaks the allocation-policy contract.

    Args:
        policy: a registered policy id, or a zero-argument factory of a fresh policy.
        n_items, budget, n_workers: size of the test problems (keep them tiny for budget-aware
            policies such as exact DP).
        seed: root seed of the random labels and of the policy's generator.
    """
    factory = _factory(policy)
    sample = factory()
    assert isinstance(sample, AllocationPolicy), "a policy must subclass AllocationPolicy"
    params = sample.get_params()
    assert isinstance(params, dict), "get_params must return a dict"
    assert type(sample).__name__ in repr(sample)

    # Every problem carries instance features (feature-based policies need them; the others
    # must ignore them).
    features = np.random.default_rng(seed).normal(size=(n_items, 3))
    problem = Problem(n_items=n_items, budget=budget, n_workers=n_workers, features=features)
    for mode in ("push", "pull"):
        first = _drive(factory, problem, seed, mode=mode, max_pending=1, drop_items=True)
        again = _drive(factory, problem, seed, mode=mode, max_pending=1, drop_items=True)
        assert first == again, f"same seed, different assignments in {mode} mode"
        # a second reset of the same object replays the same campaign
        obj = factory()
        _drive(factory, problem, seed + 7, mode=mode, max_pending=1, drop_items=False, policy=obj)
        replay = _drive(
            factory, problem, seed, mode=mode, max_pending=1, drop_items=True, policy=obj
        )
        assert replay == first, f"reset did not clear the policy's state ({mode} mode)"
        # several assignments pending at once, answered out of order
        _drive(factory, problem, seed, mode=mode, max_pending=3, drop_items=True)
    # money budget with worker prices (pull mode: the arriving worker's price applies)
    # A policy may refuse a problem it cannot handle, but only with InvalidParameterError.
    prices = np.linspace(0.5, 2.0, n_workers)
    priced = Problem(
        n_items=n_items,
        budget=budget,
        n_workers=n_workers,
        worker_prices=prices,
        features=features,
    )
    try:
        factory().reset(priced, np.random.default_rng(seed))
    except InvalidParameterError:
        return
    _drive(factory, priced, seed, mode="pull", max_pending=2, drop_items=False)


def check_environment(env: LabelingEnvironment, *, seed: int = 0, n_steps: int = 20) -> None:
    """Raise ``AssertionError`` if the environment breaks the environment contract:
    ``reset(seed=)`` reproducible, ``step`` returns a :class:`StepResult` whose event is for
    the assigned item with a label in range, ``true_labels`` of shape (n_items,)."""

    def run() -> tuple[np.ndarray, list[tuple[int, int]]]:
        env.reset(seed=seed)
        truth = np.asarray(env.true_labels).copy()
        assert truth.shape == (env.n_items,), "true_labels must have shape (n_items,)"
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(n_steps):
            eligible = np.flatnonzero(env.eligible) if env.eligible is not None else None
            if eligible is not None and eligible.size == 0:
                break
            item = (
                int(rng.choice(eligible))
                if eligible is not None
                else int(rng.integers(env.n_items))
            )
            result = env.step(Assignment(item=item))
            assert isinstance(result, StepResult), "step must return a StepResult"
            if result.event is not None:
                assert result.event.item == item, "the event must be for the assigned item"
                assert 0 <= result.event.label < env.n_classes, "label out of range"
                out.append((item, result.event.label))
            if result.terminated or result.truncated:
                break
        return truth, out

    truth1, seq1 = run()
    truth2, seq2 = run()
    assert np.array_equal(truth1, truth2) and seq1 == seq2, "reset(seed) is not reproducible"
    _ = copy.copy(env)
