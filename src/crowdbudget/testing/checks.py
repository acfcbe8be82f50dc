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
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np

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
    """One campaign with random labels; returns the (item, worker) sequence; asserts rules."""
    rng = np.random.default_rng(seed)
    labels_rng = np.random.default_rng(seed + 1_000_003)
    policy = factory() if policy is None else policy
    name = type(policy).__name__
    policy.reset(problem, rng)
    state = CampaignState.initial(problem)
    pending: list[Assignment] = []
    sequence: list[tuple[int, int | None]] = []
    n_workers = problem.n_workers or 1
    dropped_at = max(1, int(problem.budget) // 3)
    for step in range(10 * int(problem.budget) + 10):
        if drop_items and step == dropped_at:
            # make a third of the items ineligible; they must never be assigned again
            drop = labels_rng.choice(
                problem.n_items, size=max(1, problem.n_items // 3), replace=False
            )
            state.eligible[drop] = False
        worker = int(labels_rng.integers(n_workers)) if mode == "pull" else None
        before = _snapshot(state)
        assignment = policy.select(state, worker=worker)
        assert _same(before, _snapshot(state)), f"{name}.select modified the campaign state"
        if assignment is None:
            if not pending:
                break
        else:
            assert isinstance(assignment, Assignment), f"{name}.select returned {assignment!r}"
            assert 0 <= assignment.item < problem.n_items, f"{name} chose item {assignment.item}"
            assert state.eligible[assignment.item], (
                f"{name} chose item {assignment.item}, which is not eligible"
            )
            if mode == "pull":
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
            state.record_assignment(assignment)
            pending.append(assignment)
            sequence.append((assignment.item, assignment.worker))
        # answer some pending assignments, newest first (out of order on purpose)
        answer_now = len(pending) >= max_pending or assignment is None
        while answer_now and pending:
            done = pending.pop()
            label = int(labels_rng.integers(problem.n_classes))
            who = done.worker if done.worker is not None else int(labels_rng.integers(n_workers))
            event = LabelEvent(item=done.item, worker=who, label=label, cost=done.price)
            state.record_label(event, done)
            policy.observe(event)
            answer_now = len(pending) > 0 and assignment is None
        assert state.spent + state.committed <= problem.budget + 1e-9, f"{name} overspent"
    assert policy.select(state) is None or state.remaining >= 1e-9, (
        f"{name}.select did not return None once the budget was exhausted"
    )
    return sequence


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
