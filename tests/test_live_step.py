"""The live step runs in simulations: a campaign simulated through ``drive`` under the live
rules (prices, a worker's capacity, a pending limit, a label cap, busy items last, a
time-to-live) makes the decisions the same campaign makes live through :class:`Campaign`.

Both sides get the same policy (the live campaign's own build, same seed), the same arrivals
(worker j at time k), the same work times (the n-th assignment takes ``durations[n]``; work
not answered within the ttl expires) and the same answers (``answers[item, worker]``).
Arrivals are at whole times and work times end at half times, so no two events tie.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.engine.live import LiveRules
from crowdbudget.engine.loop import StopAtSpend, drive
from crowdbudget.policies.base import ScoringPolicy
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.types import Assignment, CampaignState, LabelEvent, StepResult
from service_helpers import FakeClock

WORKERS = ["w0", "w1", "w2", "w3"]
PRICES = {"w1": 0.5, "w3": 1.5}
CAPACITIES = {"w2": 3}
TTL = 2.75  # expiries at quarter times: never tied with an arrival
N_ARRIVALS = 70
#: ids whose policy searches (heaps, samples, cycles) and ids that follow a plan
POLICIES = [
    "kg",
    "opt-kg",
    "uniform",
    "round-robin",
    "thompson",
    "requallo",
    "gittins",
    "ucb1-tuned",
    "lagrangian-index",
    "opt-kg:posterior=one-coin",
]


@dataclass
class _Script:
    """The crowd: who arrives when, how long each assignment takes, what each worker says."""

    arrivals: list[int]
    durations: list[float]
    answers: np.ndarray

    @classmethod
    def draw(cls, n_items: int, seed: int) -> _Script:
        rng = np.random.default_rng(seed)
        arrivals = [int(w) for w in rng.integers(0, len(WORKERS), N_ARRIVALS)]
        # half times: 0.5 (answered before the next arrival) up to 4.5 (expires at the ttl)
        durations = [0.5 + float(d) for d in rng.integers(0, 5, N_ARRIVALS)]
        answers = rng.integers(0, 2, (n_items, len(WORKERS)))
        return cls(arrivals, durations, answers)


def _create(policy: str, n_items: int, clock: Any, mode: str = "pull") -> Campaign:
    return Campaign.create(
        [f"q{k}" for k in range(n_items)],
        budget=14.0,
        policy=policy,
        seed=4,
        ttl=TTL,
        workers=WORKERS,
        worker_prices=PRICES,
        worker_capacities=CAPACITIES,
        max_labels_per_item=3,
        max_pending_per_worker=2,
        mode=mode,
        store=EventStore("sqlite://"),
        clock=clock,
    )


def _rules(**extra: Any) -> LiveRules:
    """The campaign's rules by worker index."""
    index = {w: k for k, w in enumerate(WORKERS)}
    return LiveRules(
        worker_prices={index[w]: p for w, p in PRICES.items()},
        worker_capacities={index[w]: c for w, c in CAPACITIES.items()},
        max_labels_per_item=3,
        max_pending_per_worker=2,
        ttl=TTL,
        **extra,
    )


def _live_run(policy: str, n_items: int, script: _Script) -> tuple[list[tuple], Campaign]:
    """The campaign live: events in time order, labels at their completion times, expiries
    when the campaign's housekeeping finds them."""
    clock = FakeClock()
    campaign = _create(policy, n_items, clock)
    given: list[tuple] = []
    completions: list[tuple[float, int, str, int, int]] = []
    seen: set[str] = set()
    for k, worker in enumerate(script.arrivals):
        t = float(k + 1)
        while completions and completions[0][0] < t:
            clock.now, _, assignment_id, item, who = heapq.heappop(completions)
            campaign.record_label(assignment_id, str(script.answers[item, who]))
        clock.now = t
        work = campaign.next_assignment(WORKERS[worker])
        if work is None or work.assignment_id in seen:
            continue  # no work, or the worker's oldest pending one again
        seen.add(work.assignment_id)
        item = campaign._item_index[work.item_id]
        given.append((item, worker, work.price))
        duration = script.durations[len(given) - 1]
        if duration < TTL:  # else the worker never answers: the assignment expires
            heapq.heappush(
                completions, (t + duration, len(given), work.assignment_id, item, worker)
            )
    clock.now = math.inf
    campaign.expire_overdue()
    while completions:
        clock.now, _, assignment_id, item, who = heapq.heappop(completions)
        campaign.record_label(assignment_id, str(script.answers[item, who]))
    return given, campaign


class _Crowd(LabelingEnvironment):
    """The script as a world: arrivals in order, fixed answers, every hand-out noted."""

    def __init__(self, script: _Script) -> None:
        self.script = script
        self.n_items = script.answers.shape[0]
        self.true_labels = np.zeros(self.n_items, dtype=np.int64)
        self.given: list[tuple] = []

    def reset(self, *, seed: object = None) -> dict[str, object]:
        self._next = 0
        return {}

    def arriving_worker(self) -> int:
        worker = self.script.arrivals[self._next]
        self._next += 1
        return worker

    def claim(self, assignment: Assignment) -> None:
        self.given.append((assignment.item, assignment.worker, assignment.price))

    def step(self, assignment: Assignment) -> StepResult:
        assert assignment.worker is not None
        label = int(self.script.answers[assignment.item, assignment.worker])
        return StepResult(LabelEvent(assignment.item, assignment.worker, label, assignment.price))


@dataclass
class _ScriptClock:
    """Arrivals at 1, 2, …, n; the n-th assignment's work time is ``durations[n]``."""

    durations: list[float]
    n_arrivals: int
    pull: bool = True
    timed: bool = False
    horizon: float = math.inf
    max_assignments: int | None = None
    handed: int = 0

    def next_arrival(self, after: float) -> float:
        return after + 1.0 if after < self.n_arrivals else math.inf

    def next_duration(self, state: CampaignState) -> float:
        self.handed += 1
        return self.durations[self.handed - 1]


def _simulated_run(policy: str, n_items: int, script: _Script) -> tuple[list[tuple], CampaignState]:
    """The same campaign through ``drive``: the live campaign's own policy and state as built
    (a twin created the same way), the live rules by worker index."""
    twin = _create(policy, n_items, FakeClock())
    rules = _rules()
    crowd = _Crowd(script)
    crowd.reset()
    clock = _ScriptClock(script.durations, len(script.arrivals))
    drive(twin.policy, crowd, twin.state, clock, StopAtSpend(None), live=rules)
    return crowd.given, twin.state


@pytest.mark.parametrize("policy", POLICIES)
def test_a_simulated_campaign_under_the_live_rules_decides_as_the_live_campaign(
    policy: str,
) -> None:
    n_items = 6
    script = _Script.draw(n_items, seed=11)
    live_given, campaign = _live_run(policy, n_items, script)
    sim_given, state = _simulated_run(policy, n_items, script)
    assert sim_given == live_given
    assert len(live_given) > 10  # the crowd got work
    # the rules bit: a worker at capacity, a label cap, expiries, busy items
    assert sum(1 for _, w, _ in live_given if w == 2) <= CAPACITIES["w2"]
    assert np.array_equal(state.label_counts, campaign.state.label_counts)
    assert state.label_counts.sum(axis=1).max() <= 3
    assert state.spent == pytest.approx(campaign.status()["spent"])
    assert np.array_equal(state.eligible, campaign.state.eligible)
    assert state.label_log.items.tolist() == campaign.state.label_log.items.tolist()


def test_the_script_exercises_every_rule() -> None:
    """The crowd above meets each live rule: expiries (work times past the ttl), a worker
    at their capacity, a full label cap, a worker at the pending limit, busy items."""
    script = _Script.draw(6, seed=11)
    given, campaign = _live_run("kg", 6, script)
    expired = [d for d in script.durations[: len(given)] if d >= TTL]
    assert expired
    assert sum(1 for _, w, _ in given if w == 2) == CAPACITIES["w2"]
    assert campaign.state.label_counts.sum(axis=1).max() == 3
    statuses = [campaign.assignment(a).status for a in campaign._records]
    assert "expired" in statuses


class _ClosestVote(ScoringPolicy):
    """A policy that only scores (the contributors' guide's): the closest vote first."""

    def __init__(self) -> None:
        pass

    def scores(self, state: CampaignState, items: np.ndarray) -> np.ndarray:
        votes = state.label_counts[items]
        return np.asarray(-np.abs(votes[:, 1] - votes[:, 0]), dtype=float)


@pytest.fixture
def closest_vote() -> Iterator[str]:
    """``closest-vote`` registered for the test, taken out again after it."""
    from crowdbudget.registry import POLICIES, ComponentSpec, register_policy

    POLICIES.entries()  # the built-in ones first
    saved = dict(POLICIES._entries)
    register_policy(ComponentSpec("closest-vote", _ClosestVote, "the closest vote first"))
    yield "closest-vote"
    POLICIES._entries.clear()
    POLICIES._entries.update(saved)


def test_a_policy_that_only_scores_follows_the_live_rules_live_and_simulated(
    closest_vote: str,
) -> None:
    """No availability, price or capacity code of its own, and the same decisions under the
    live rules in ``drive`` and in a :class:`Campaign`."""
    script = _Script.draw(6, seed=11)
    live_given, campaign = _live_run(closest_vote, 6, script)
    sim_given, state = _simulated_run(closest_vote, 6, script)
    assert sim_given == live_given and len(live_given) > 10
    assert np.array_equal(state.label_counts, campaign.state.label_counts)
    assert sum(1 for _, w, _ in live_given if w == 2) <= CAPACITIES["w2"]


#: ids that choose the worker (push mode) and take priced workers
PUSH_POLICIES = ["opt-kg:posterior=one-coin", "kg:posterior=two-coin", "kos", "b-kube", "eps-first"]


def _live_push_run(policy: str, n_items: int, script: _Script) -> tuple[list[tuple], Campaign]:
    """Push mode live: at each arrival time one assignment is asked for (the policy chooses
    the worker); labels at their completion times, expiries by the housekeeping."""
    clock = FakeClock()
    campaign = _create(policy, n_items, clock, mode="push")
    given: list[tuple] = []
    completions: list[tuple[float, int, str, int, int]] = []
    for k in range(len(script.arrivals)):
        t = float(k + 1)
        while completions and completions[0][0] < t:
            clock.now, _, assignment_id, item, who = heapq.heappop(completions)
            campaign.record_label(assignment_id, str(script.answers[item, who]))
        clock.now = t
        for work in campaign.push_assignments(1):
            item = campaign._item_index[work.item_id]
            worker = WORKERS.index(work.worker_id)
            given.append((item, worker, work.price))
            duration = script.durations[len(given) - 1]
            if duration < TTL:
                heapq.heappush(
                    completions, (t + duration, len(given), work.assignment_id, item, worker)
                )
    return given, campaign


@pytest.mark.parametrize("policy", PUSH_POLICIES)
def test_a_simulated_push_campaign_under_the_live_rules_decides_as_the_live_campaign(
    policy: str,
) -> None:
    """Push mode: the policy chooses (item, worker); the live step refuses a pair the worker
    cannot take (their item, their pending limit, their capacity, a saturated item) and takes
    each pair once — the same in ``drive`` as in the campaign."""
    n_items = 6
    script = _Script.draw(n_items, seed=12)
    live_given, campaign = _live_push_run(policy, n_items, script)
    twin = _create(policy, n_items, FakeClock(), mode="push")
    rules = _rules(pair_of=twin._pair)
    crowd = _Crowd(script)
    crowd.reset()
    clock = _ScriptClock(script.durations, len(script.arrivals), pull=False)
    drive(twin.policy, crowd, twin.state, clock, StopAtSpend(None), live=rules)
    assert crowd.given[: len(live_given)] == live_given
    assert len(crowd.given) == len(live_given) and len(live_given) >= 5
    assert campaign.state.label_counts.sum(axis=1).max() <= 3  # the label cap held
