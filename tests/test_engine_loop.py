"""The one campaign loop (``engine.loop.drive``, DESIGN §11): the clock's arrivals and work
times order the events; held work comes back newest first; work pending at the end is
released; a world's ``claim`` hears of work when it is handed out."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from crowdbudget.engine.loop import Clock, StopAtSpend, drive
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.types import Assignment, CampaignState, LabelEvent, Problem, StepResult


class _Log(LabelingEnvironment):
    """Answers every assignment with label 1; logs ``claim`` and ``step`` calls."""

    def __init__(self, n_items: int) -> None:
        self.n_items = n_items
        self.true_labels = np.zeros(n_items, dtype=np.int64)
        self.log: list[tuple[str, int]] = []

    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> dict[str, Any]:
        return {}

    def claim(self, assignment: Assignment) -> None:
        self.log.append(("claim", assignment.item))

    def step(self, assignment: Assignment) -> StepResult:
        self.log.append(("step", assignment.item))
        return StepResult(LabelEvent(assignment.item, 0, 1, assignment.price))


class _Next:
    """Items 0, 1, 2, ... in turn, ``n`` of them, then None; records what it observes."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.k = 0
        self.seen: list[tuple[int, float | None]] = []
        self.times: list[float] = []

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        self.times.append(state.time)
        if self.k >= self.n:
            return None
        self.k += 1
        return Assignment(self.k - 1, worker)

    def observe(self, event: LabelEvent) -> None:
        self.seen.append((event.item, event.time))


class _Times:
    """Arrivals at 1, 2, ... (``last``: none after); work times from a list."""

    def __init__(self, durations: list[float], *, horizon: float = math.inf, last: int = 99):
        self.pull = False
        self.timed = True
        self.horizon = horizon
        self.max_assignments: int | None = None
        self.durations = list(durations)
        self.last = last

    def next_arrival(self, after: float) -> float:
        return after + 1.0 if after + 1.0 <= self.last else math.inf

    def next_duration(self, state: CampaignState) -> float:
        return self.durations.pop(0)


def _run(policy: _Next, clock: Any, n_items: int = 6) -> tuple[_Log, CampaignState, Any]:
    env = _Log(n_items)
    state = CampaignState.initial(Problem(n_items=n_items, budget=20))
    outcome = drive(policy, env, state, clock, StopAtSpend())
    return env, state, outcome


def test_discrete_time_answers_each_assignment_before_the_next_arrival() -> None:
    policy = _Next(3)
    env, state, outcome = _run(policy, Clock())
    assert [item for what, item in env.log if what == "claim"] == [0, 1, 2]
    assert env.log[:4] == [("claim", 0), ("step", 0), ("claim", 1), ("step", 1)]
    assert policy.seen == [(0, None), (1, None), (2, None)]  # untimed labels
    assert policy.times == [0.0, 1.0, 2.0, 3.0]  # state.time counts labels
    assert (outcome.assignments, outcome.cancelled) == (3, 0) and state.spent == 3


def test_work_completes_in_time_order_with_event_times() -> None:
    # handed out at 1, 2, 3 with work times 5, 0.5, 1: back at 2.5, 4, 6
    policy = _Next(3)
    _env, state, outcome = _run(policy, _Times([5.0, 0.5, 1.0]))
    assert policy.seen == [(1, 2.5), (2, 4.0), (0, 6.0)]
    assert policy.times[:3] == [1.0, 2.0, 3.0]  # state.time is the arrival's time
    # the policy idles at 4, 5 and 6 (an arrival goes first on a tie), then at 7 with
    # nothing pending: the campaign ends there
    assert outcome.end_time == 7.0 and state.spent == 3


def test_held_work_comes_back_newest_first_when_the_policy_idles() -> None:
    policy = _Next(3)
    _env, state, outcome = _run(policy, _Times([math.inf, math.inf, math.inf]))
    assert policy.seen == [(2, 4.0), (1, 4.0), (0, 4.0)]  # policy idles at the 4th arrival
    assert outcome.cancelled == 0 and state.committed == 0 and state.spent == 3


def test_pending_work_at_the_horizon_is_cancelled_and_released() -> None:
    policy = _Next(3)
    _env, state, outcome = _run(policy, _Times([0.5, 10.0, 10.0], horizon=5.0))
    assert policy.seen == [(0, 1.5)]
    assert (outcome.assignments, outcome.cancelled, outcome.end_time) == (3, 2, 5.0)
    assert state.committed == 0 and int(state.pending.sum()) == 0 and state.spent == 1


def test_held_work_left_when_arrivals_end_is_cancelled() -> None:
    policy = _Next(5)
    _env, state, outcome = _run(policy, _Times([math.inf] * 5, last=2))
    assert policy.seen == [] and outcome.cancelled == 2 and state.committed == 0
