"""The state's availability (DESIGN §11): ``state.excluded`` closes items for one question, and
every policy that ``searches_past_excluded`` honours it in its own ``select`` — the same
search as if the excluded items were ineligible, leaving no trace (issue 16, step 2)."""

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
    assert policy.searches_past_excluded
    untouched, untouched_state = _played(policy_id, n_items, budget)
    first = untouched.select(untouched_state, worker=worker)
    assert first is not None
    excluded = {first.item, (first.item + 1) % n_items}
    eligible_before = state.eligible.copy()
    with state.excluding(excluded):
        got = policy.select(state, worker=worker)
    assert not state.excluded and np.array_equal(state.eligible, eligible_before)
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
        with state.excluding(excluded):
            assignment = policy.select(state, worker=int(rng.integers(3)))
        assert assignment is not None and assignment.item not in excluded
    with state.excluding(set(range(7))):
        assert policy.select(state) is None
    assert state.eligible.all()


def test_excluding_restores_on_error_and_is_open_reads_it() -> None:
    state = CampaignState.initial(Problem(n_items=4, budget=4))
    state.eligible[3] = False
    with pytest.raises(RuntimeError), state.excluding({1}):
        assert not state.is_open(1) and state.is_open(0) and not state.is_open(3)
        raise RuntimeError
    assert tuple(state.excluded) == () and state.is_open(1)
    with state.excluding({0}), state.excluding({2}):
        assert set(state.excluded) == {2}
    assert not state.excluded


class _ReadsAfresh(AllocationPolicy):
    reads_eligibility_afresh = True

    def __init__(self) -> None:
        self.seen: list[tuple[list[int], tuple[int, ...]]] = []

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        self.seen.append((np.flatnonzero(state.eligible).tolist(), tuple(state.excluded)))
        items = np.flatnonzero(state.eligible)
        return Assignment(int(items[0]), worker) if items.shape[0] else None


class _MovesItsPlan(_ReadsAfresh):
    reads_eligibility_afresh = False

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        return Assignment(0, worker)


class _Searches(_MovesItsPlan):
    searches_past_excluded = True

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        return Assignment(min(set(range(state.n_items)) - set(state.excluded)), worker)


def test_the_base_class_declares_who_searches_and_hides_for_afresh_readers() -> None:
    assert _ReadsAfresh.searches_past_excluded
    assert not _MovesItsPlan.searches_past_excluded  # a new select says nothing: asked once
    assert _Searches.searches_past_excluded
    policy = _ReadsAfresh()
    state = CampaignState.initial(Problem(n_items=4, budget=4))
    with state.excluding({0, 2}):
        assert policy.select(state) == Assignment(1, None)
    assert policy.seen == [([1, 3], ())]  # hidden as ineligible, ``excluded`` empty inside
    assert state.eligible.all()
    assert policy.select(state) == Assignment(0, None)  # nothing excluded: plain select


def test_a_campaign_asks_with_the_workers_items_excluded_and_clears_them() -> None:
    campaign = Campaign.create([f"q{k}" for k in range(3)], budget=9, policy="opt-kg", seed=0)
    given = []
    for _ in range(3):
        assignment = campaign.next_assignment("ann")
        assert assignment is not None
        assert not campaign.state.excluded
        given.append(assignment.item_id)
        campaign.record_label(assignment.assignment_id, "1")
    assert sorted(given) == ["q0", "q1", "q2"]  # never an item twice
    assert campaign.next_assignment("ann") is None  # nothing open to her: 204
    assert not campaign.state.excluded
    assert campaign.next_assignment("bob") is not None


def test_a_policy_asked_once_gets_no_work_when_it_names_an_excluded_item() -> None:
    """Round-robin's select moves its cycle: it is asked once, an excluded answer is none."""
    campaign = Campaign.create(["a", "b"], budget=10, policy="round-robin", seed=0)
    first = campaign.next_assignment("ann")
    assert first is not None and first.item_id == "a"
    campaign.record_label(first.assignment_id, "1")
    second = campaign.next_assignment("ann")
    assert second is not None and second.item_id == "b"
    campaign.record_label(second.assignment_id, "1")
    assert campaign.next_assignment("ann") is None  # the cycle names "a": hers already
    assert not campaign.state.excluded
