"""The state's availability (DESIGN §11): ``state.availability`` closes items for one question
(and puts busy items last), and every policy that searches honours it in its own ``select`` —
the same search as if the closed items were ineligible, leaving no trace."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.campaign import Campaign
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.registry import make_policy
from crowdbudget.types import Assignment, CampaignState, LabelEvent, Problem, WorkerSpec

# (policy id, n_items, budget, worker asking): deterministic ties (the smallest index,
# ``tie-break=first``: random ties are the default since issue 15), so an exclusion must give
# exactly the decision of the same policy with the excluded items ineligible
DETERMINISTIC = [
    ("opt-kg:tie-break=first", 8, 40, None),
    ("kg", 8, 40, None),
    ("cvar-kg:tie-break=first", 8, 40, None),
    ("label-uncertainty:tie-break=first", 8, 40, None),
    ("gittins-inf:tie-break=first", 8, 40, None),
    ("gittins:tie-break=first", 8, 40, None),
    ("requallo:tie-break=first", 8, 40, None),
    ("ucb1-tuned", 8, 40, None),
    ("dp", 4, 8, None),
    ("opt-kg:posterior=one-coin", 8, 40, 1),
    ("opt-kg:posterior=two-coin", 8, 40, None),
]


def _problem(policy_id: str, n_items: int, budget: int) -> Problem:
    workers = WorkerSpec(3) if "posterior=" in policy_id else None
    return Problem(n_items=n_items, budget=budget, workers=workers)


def _played(policy_id: str, n_items: int, budget: int, n_labels: int = 5) -> tuple:
    """The policy after ``n_labels`` decisions answered by a fixed rule (deterministic)."""
    problem = _problem(policy_id, n_items, budget)
    policy = make_policy(policy_id)
    policy.reset(problem, np.random.default_rng(3))
    state = CampaignState.initial(problem)
    for k in range(n_labels):
        assignment = policy.select(state)
        assert assignment is not None
        state.record_assignment(assignment)
        worker = 0 if assignment.worker is None else assignment.worker
        event = LabelEvent(assignment.item, worker, (assignment.item + k) % 2)
        state.record_label(event, assignment)
        policy.observe(event)
    return policy, state


@pytest.mark.parametrize(("policy_id", "n_items", "budget", "worker"), DETERMINISTIC)
def test_an_exclusion_is_the_search_past_ineligible_items_and_leaves_no_trace(
    policy_id: str, n_items: int, budget: int, worker: int | None
) -> None:
    policy, state = _played(policy_id, n_items, budget)
    untouched, untouched_state = _played(policy_id, n_items, budget)
    first = untouched.select(untouched_state, worker=worker)
    assert first is not None
    excluded = {first.item, (first.item + 1) % n_items}
    eligible_before = state.eligible.copy()
    with state.availability.question(excluded):
        got = policy.select(state, worker=worker)
    assert not state.availability.closed and np.array_equal(state.eligible, eligible_before)
    # the same search with the excluded items ineligible (for good, on a twin)
    twin, twin_state = _played(policy_id, n_items, budget)
    twin_state.eligible[sorted(excluded)] = False
    expected = twin.select(twin_state, worker=worker)
    assert got == expected
    assert got is None or got.item not in excluded
    # no trace: the next question without exclusion is answered as if none had been asked
    assert policy.select(state, worker=worker) == first


@pytest.mark.parametrize("policy_id", ["uniform", "kg-random", "thompson", "requallo"])
def test_a_searching_policy_never_names_an_excluded_item(policy_id: str) -> None:
    problem = Problem(n_items=7, budget=50)
    policy = make_policy(policy_id)
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState.initial(problem)
    rng = np.random.default_rng(1)
    for _ in range(30):
        excluded = set(rng.choice(7, size=int(rng.integers(0, 7)), replace=False).tolist())
        with state.availability.question(excluded):
            assignment = policy.select(state, worker=int(rng.integers(3)))
        assert assignment is not None and assignment.item not in excluded
    with state.availability.question(set(range(7))):
        assert policy.select(state) is None
    assert state.eligible.all()


def test_a_question_restores_on_error_and_is_open_reads_it() -> None:
    state = CampaignState.initial(Problem(n_items=4, budget=4))
    availability = state.availability
    state.eligible[3] = False
    with pytest.raises(RuntimeError), availability.question({1}):
        assert not availability.is_open(1) and availability.is_open(0)
        assert not availability.is_open(3)
        assert availability.open_items().tolist() == [0, 2]
        raise RuntimeError
    assert tuple(availability.closed) == () and availability.is_open(1)
    with availability.question({0}), availability.question({2}):
        assert set(availability.closed) == {2}
    assert not availability.closed


def test_search_tries_the_busy_items_last_and_only_when_nothing_else_is_open() -> None:
    """``search`` runs the policy's search with the busy items closed too, then (nothing
    found) once more without; the closed items stay closed on both tries."""
    state = CampaignState.initial(Problem(n_items=4, budget=4))
    availability = state.availability
    tries: list[list[int]] = []

    def first_open() -> int | None:
        items = availability.open_items()
        tries.append(items.tolist())
        return int(items[0]) if items.shape[0] else None

    with availability.question({0}, {1, 2}):
        assert availability.search(first_open) == 3
        assert tries == [[3]]  # found outside the busy items: one try
        state.eligible[3] = False
        assert availability.search(first_open) == 1  # only busy items left: the second try
        assert tries[1:] == [[], [1, 2]]
        assert availability.closed == {0}
    state.eligible[1:3] = False
    assert availability.search(first_open) == 0  # offline: one try, nothing closed


class _NamesAPlannedItem(AllocationPolicy):
    """A plan that does not search: item 0, always."""

    def __init__(self) -> None:
        pass

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        return Assignment(0, worker)


def test_the_live_step_asks_once_and_refuses_a_closed_answer() -> None:
    """A policy that names an item from its plan is asked once; an item closed to the asking
    worker is no work for them (``done``); an open one is given at the worker's price."""
    from crowdbudget.engine.live import LiveStep

    problem = Problem(n_items=3, budget=5)
    state = CampaignState.initial(problem)
    step = LiveStep()
    policy = _NamesAPlannedItem()
    decision = step.assign(policy, state, 1, price=0.5)
    assert decision.assignment == Assignment(0, 1, 0.5)
    state.record_assignment(decision.assignment)
    step.assigned(state, "a", decision.assignment)
    assert step.busy == {0} and step.worker_items == {1: {0}}
    refused = step.assign(policy, state, 1, price=0.5)
    assert refused.assignment is None and refused.cause == "done"
    assert step.assign(policy, state, 2, price=0.5).assignment == Assignment(0, 2, 0.5)
    assert step.assign(policy, state, 2, price=9.0).cause == "budget"
    assert step.assign(policy, state, 1, price=0.5, capacity=1).cause == "capacity"
    assert step.assign(policy, state, 1, price=0.5, max_pending=1).held == "a"


def test_a_campaign_asks_with_the_workers_items_excluded_and_clears_them() -> None:
    campaign = Campaign.create([f"q{k}" for k in range(3)], budget=9, policy="opt-kg", seed=0)
    given = []
    for _ in range(3):
        assignment = campaign.next_assignment("ann")
        assert assignment is not None
        assert not campaign.state.availability.closed
        given.append(assignment.item_id)
        campaign.record_label(assignment.assignment_id, "1")
    assert sorted(given) == ["q0", "q1", "q2"]  # never an item twice
    assert campaign.next_assignment("ann") is None  # nothing open to her: 204
    assert not campaign.state.availability.closed
    assert campaign.next_assignment("bob") is not None


def test_round_robin_searches_past_the_workers_own_items() -> None:
    """Round-robin names the next open item of its cycle: a worker who has every item gets
    none; a worker with one of them gets the other."""
    campaign = Campaign.create(["a", "b"], budget=10, policy="round-robin", seed=0)
    first = campaign.next_assignment("ann")
    assert first is not None and first.item_id == "a"
    campaign.record_label(first.assignment_id, "1")
    second = campaign.next_assignment("ann")
    assert second is not None and second.item_id == "b"
    campaign.record_label(second.assignment_id, "1")
    assert campaign.next_assignment("ann") is None  # the cycle names "a": hers already
    assert not campaign.state.availability.closed
