"""One Problem (issue #16): workers as a WorkerSpec, contexts, the old spellings kept."""

from __future__ import annotations

from typing import Any

import pytest

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.types import Problem, WorkerSpec, task_contexts


def test_old_and_new_worker_spellings_fill_each_other_in() -> None:
    old = Problem(n_items=3, budget=5, n_workers=2, worker_prices=[1.0, 2.5])
    assert old.workers is not None and old.workers.n_workers == 2
    assert old.workers.prices is not None and old.workers.prices.tolist() == [1.0, 2.5]
    spec = WorkerSpec(3, prices=[1.0, 1.0, 2.0], capacities=[4, 0, 2], ids=("a", "b", "c"))
    new = Problem(n_items=3, budget=5, workers=spec)
    assert new.n_workers == 3 and new.price_of(2) == 2.0
    assert new.workers is not None and new.workers.capacities is not None
    assert new.workers.capacities.tolist() == [4, 0, 2]
    assert Problem(n_items=3, budget=5).workers is None
    again = new.with_budget(9)
    assert again.budget == 9 and again.workers is new.workers and again.n_workers == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_workers": 2, "workers": WorkerSpec(3)}, "disagrees with workers"),
        ({"worker_prices": [1.0, 2.0], "workers": WorkerSpec(2)}, "disagrees with workers"),
        ({"workers": 3}, "must be a WorkerSpec"),
        ({"contexts": [0, 1]}, "contexts must be 3 integers"),
        ({"contexts": [0, 2, 1], "n_contexts": 2}, "n_contexts=2 but contexts go up to 2"),
        ({"n_contexts": 2}, "n_contexts needs contexts"),
    ],
)
def test_inconsistent_problems_are_refused_in_one_line(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        Problem(n_items=3, budget=5, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_workers": 0}, "n_workers"),
        ({"n_workers": 2, "prices": [1.0, 0.0]}, "numbers > 0"),
        ({"n_workers": 2, "capacities": [1, -1]}, "integers >= 0"),
        ({"n_workers": 2, "capacities": [1.5, 1]}, "integers >= 0"),
        ({"n_workers": 2, "ids": ("a", "a")}, "distinct"),
    ],
)
def test_bad_worker_specs_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        WorkerSpec(**kwargs)


def test_contexts_live_on_the_problem() -> None:
    problem = Problem(n_items=4, budget=4, contexts=[0, 2, 2, 0])
    contexts, n_contexts = task_contexts(problem)
    assert contexts.tolist() == [0, 2, 2, 0] and n_contexts == 3
    assert task_contexts(Problem(n_items=2, budget=2))[1] == 1
    assert problem.with_budget(8).contexts is problem.contexts


def test_campaign_state_tracks_each_workers_capacity() -> None:
    from crowdbudget.exceptions import IneligibleAssignmentError
    from crowdbudget.types import Assignment, CampaignState, LabelEvent

    problem = Problem(n_items=2, budget=10, workers=WorkerSpec(2, capacities=[1, 2]))
    state = CampaignState.initial(problem)
    assert state.remaining_capacity is not None
    first = Assignment(item=0, worker=0)
    state.record_assignment(first)
    assert state.remaining_capacity.tolist() == [0, 2] and not state.has_capacity(0)
    with pytest.raises(IneligibleAssignmentError, match="worker 0 has no capacity left"):
        state.record_assignment(Assignment(item=1, worker=0))
    state.release_assignment(first)  # cancelled: the capacity comes back
    assert state.remaining_capacity.tolist() == [1, 2]
    state.record_assignment(first)
    state.record_label(LabelEvent(item=0, worker=0, label=1), first)  # reserved -> used
    assert state.remaining_capacity.tolist() == [0, 2]
    # a label without a reservation (the world chose the worker) uses that worker's capacity
    state.record_assignment(Assignment(item=1))
    state.record_label(LabelEvent(item=1, worker=1, label=0), Assignment(item=1))
    assert state.remaining_capacity.tolist() == [0, 1]
    assert (
        CampaignState.initial(Problem(n_items=2, budget=2, n_workers=2)).remaining_capacity is None
    )
