"""Every registered policy through a live :class:`~crowdbudget.campaign.Campaign` (issue 17).

A simulated crowd drives each campaign in pull mode (workers ask for work at random; one
joins late, one leaves with work pending), and assignments are answered, cancelled or left to
expire on a fake clock. At every step the campaign must keep its promises:

- never over budget: spent + committed <= budget, and the ledger matches the labels paid;
- never an ineligible pair: a worker never receives an item they labeled or hold;
- reload: :meth:`Campaign.load` from the event store (in-memory SQLite and a SQLite file)
  gives the same state (counts, pending, spending, eligible items, worker slots);
- determinism: the same seed and the same crowd give the same assignments;
- one verdict: ``results()`` confidence is the verdict's probability of the label.

Every registered id must run live (issue 17's "Done means"); the exact DP on a campaign
small enough for its state space.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.engine.loop import StopAtSpend, drive
from crowdbudget.registry import registered_policies
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.types import Assignment, CampaignState, LabelEvent, Problem, StepResult
from service_helpers import FakeClock

#: worker-aware variants (parameters of registered ids) the issue names explicitly
VARIANTS = (
    "opt-kg:posterior=one-coin",
    "kg:posterior=two-coin",
    "opt-kg:posterior=one-coin:refit=10",
    "requallo:min-labels=2",
)
N_ITEMS, BUDGET = 12, 30
#: the exact DP's state space grows as budget^(2·items): a smaller campaign for it
SIZES = {"dp": (4, 8)}


def _policies() -> list[str]:
    """Every id a worker can ask for work (push-only ones run in the push test below)."""
    from crowdbudget.registry import parse_policy

    ids = [*sorted(registered_policies()), *VARIANTS]
    return [p for p in ids if parse_policy(p).capabilities.supports_pull]


def _drive(policy: str, store: EventStore, seed: int = 0) -> tuple[Campaign, list[tuple]]:
    """Run one live campaign to its end; return it and the assignments it gave."""
    clock = FakeClock()
    rng = np.random.default_rng(seed)
    n_items, budget = SIZES.get(policy, (N_ITEMS, BUDGET))
    items = [f"q{k}" for k in range(n_items)]
    truth = {item: int(rng.integers(2)) for item in items}
    accuracy = {"w0": 0.95, "w1": 0.9, "w2": 0.8, "w3": 0.7, "w4": 0.55, "late": 0.85}
    campaign = Campaign.create(
        items,
        budget=budget,
        policy=policy,
        seed=seed,
        ttl=10.0,
        workers=["w0", "w1", "w2"],
        store=store,
        clock=clock,
    )
    present = ["w0", "w1", "w2", "w3", "w4"]
    given: list[tuple] = []
    idle = 0
    for step in range(400):
        clock.now += 1.0
        if step == 12:
            present.append("late")  # a worker joins mid-campaign
        if step == 20:
            present.remove("w4")  # a worker leaves; their pending work is cancelled
            for pending in campaign.pending_assignments("w4"):
                campaign.cancel_assignment(pending.assignment_id)
        worker = present[int(rng.integers(len(present)))]
        assignment = campaign.next_assignment(worker)
        _check_invariants(campaign)
        if assignment is None:
            idle += 1
            if idle > 30:
                break
            continue
        idle = 0
        given.append((assignment.item_id, assignment.worker_id))
        fate = rng.random()
        if fate < 0.08:
            campaign.cancel_assignment(assignment.assignment_id)
        elif fate < 0.14:
            pass  # never answered: expires after the ttl
        else:
            right = rng.random() < accuracy[worker]
            label = truth[assignment.item_id] if right else 1 - truth[assignment.item_id]
            campaign.record_label(assignment.assignment_id, str(label))
        _check_invariants(campaign)
    clock.now += 100.0
    campaign.expire_overdue()
    _check_invariants(campaign)
    return campaign, given


def _check_invariants(campaign: Campaign) -> None:
    status = campaign.status()
    assert status["spent"] + status["committed"] <= status["budget"], status
    paid = sum(1 for r in campaign._records.values() if r.status == "answered")
    assert status["spent"] == pytest.approx(paid)
    # no worker holds or labeled an item twice
    seen: set[tuple[int, int]] = set()
    for record in campaign._records.values():
        if record.status in ("pending", "answered"):
            pair = (record.item, record.worker)
            assert pair not in seen, pair
            seen.add(pair)


def _same_state(a: Campaign, b: Campaign) -> None:
    np.testing.assert_array_equal(a.state.label_counts, b.state.label_counts)
    np.testing.assert_array_equal(a.state.pending, b.state.pending)
    np.testing.assert_array_equal(a.state.eligible, b.state.eligible)
    assert a.status()["spent"] == b.status()["spent"]
    assert a.status()["committed"] == b.status()["committed"]
    assert a.worker_ids == b.worker_ids
    assert a.problem.n_workers == b.problem.n_workers


@pytest.mark.parametrize("policy", _policies())
def test_every_policy_runs_live_or_is_refused_at_creation(policy: str, tmp_path: Path) -> None:
    store = EventStore(f"sqlite:///{tmp_path / 'live.db'}")
    campaign, given = _drive(policy, store)
    assert given, f"{policy} gave no work at all"
    status = campaign.status()
    # the crowd keeps asking: a policy that gives live work spends most of its budget
    # (Requallo and KOS may stop early by their own rules; CrowdSense leaves some unspent)
    assert status["spent"] >= 0.6 * status["budget"], status
    reloaded = Campaign.load(store, campaign.campaign_id)
    _same_state(campaign, reloaded)
    # the same seed and crowd: the same assignments (in-memory store this time)
    again, given_again = _drive(policy, EventStore("sqlite://"))
    assert given_again == given
    _same_state(campaign, again)
    # label and confidence from one verdict
    labels, probabilities = campaign.verdict_probabilities()
    results = campaign.results()
    picked = probabilities[np.arange(labels.shape[0]), labels]
    np.testing.assert_allclose(results["confidence"].to_numpy(), picked)


def test_worker_aware_opt_kg_runs_live_with_worker_slots() -> None:
    """opt-kg:posterior=one-coin (the README's best policy on RTE) runs live: the problem
    has worker slots that grow as workers join, and the policy learns each worker."""
    campaign, given = _drive("opt-kg:posterior=one-coin", EventStore("sqlite://"))
    assert campaign.problem.n_workers is not None
    assert campaign.problem.n_workers >= len(campaign.worker_ids) == 6
    assert campaign.worker_ids[:3] == ["w0", "w1", "w2"]  # the roster first, in order
    assert {w for _, w in given} >= {"w0", "late"}
    posterior = campaign.policy.posterior_
    # every worker who answered moved away from the prior
    answered = {r.worker for r in campaign._records.values() if r.status == "answered"}
    prior_c, prior_d = 4.0, 1.0
    for worker in answered:
        assert (posterior.c[worker], posterior.d[worker]) != (prior_c, prior_d)


def test_slots_double_as_workers_join() -> None:
    campaign = Campaign.create(
        [f"q{k}" for k in range(5)], budget=100, policy="opt-kg:posterior=one-coin"
    )
    assert campaign.problem.n_workers == 4
    for k in range(5):
        assignment = campaign.next_assignment(f"w{k}")
        assert assignment is not None
        campaign.record_label(assignment.assignment_id, "1")
    assert campaign.problem.n_workers == 8
    assert int(campaign.state.label_counts.sum()) == 5  # the rebuild kept every label
    campaign.add_workers([f"x{k}" for k in range(5)])
    assert campaign.problem.n_workers == 16


def _push_policies() -> list[str]:
    """Every id that declares push (it chooses workers), whether or not it models them."""
    from crowdbudget.registry import parse_policy

    return [
        p
        for p in [*sorted(registered_policies()), *VARIANTS]
        if parse_policy(p).capabilities.chooses_workers
    ]


def _drive_push(policy: str, store: EventStore, seed: int = 0) -> tuple[Campaign, list[tuple]]:
    """Push mode: the policy picks (item, worker) pairs in batches of 2; assignments are
    answered, cancelled or left to expire; a worker joins the team mid-campaign."""
    clock = FakeClock()
    rng = np.random.default_rng(seed)
    items = [f"q{k}" for k in range(N_ITEMS)]
    truth = {item: int(rng.integers(2)) for item in items}
    accuracy = {"w0": 0.95, "w1": 0.9, "w2": 0.8, "w3": 0.7, "late": 0.85}
    campaign = Campaign.create(
        items,
        budget=BUDGET,
        policy=policy,
        seed=seed,
        ttl=10.0,
        mode="push",
        workers=["w0", "w1", "w2", "w3"],
        store=store,
        clock=clock,
    )
    given: list[tuple] = []
    for step in range(200):
        clock.now += 1.0
        if step == 5:
            campaign.add_workers(["late"])
        batch = campaign.push_assignments(2)
        _check_invariants(campaign)
        if not batch and campaign.status()["pending"] == 0:
            break
        for assignment in batch:
            given.append((assignment.item_id, assignment.worker_id))
            fate = rng.random()
            if fate < 0.08:
                campaign.cancel_assignment(assignment.assignment_id)
            elif fate < 0.14:
                pass  # expires
            else:
                worker = assignment.worker_id
                right = rng.random() < accuracy[worker]
                label = truth[assignment.item_id] if right else 1 - truth[assignment.item_id]
                campaign.record_label(assignment.assignment_id, str(label))
        _check_invariants(campaign)
    return campaign, given


@pytest.mark.parametrize("policy", _push_policies())
def test_worker_choosing_policies_run_live_in_push_mode(policy: str, tmp_path: Path) -> None:
    store = EventStore(f"sqlite:///{tmp_path / 'push.db'}")
    campaign, given = _drive_push(policy, store)
    # no silent stall: the run ended with nothing pushed and nothing pending, so the campaign
    # says it stopped and why — the budget is spent, or the policy has nothing more (the
    # ε-first family plans its exploitation once; KOS draws its graph once, so cancelled
    # and expired edges are not asked again)
    status = campaign.status()
    assert status["pending"] == 0 and status["stopped"] and status["stop_reason"], status
    if status["stop_reason"].startswith("the budget"):
        assert status["spent"] == BUDGET
    # the late worker joined the team (whether the policy picks them is its own business)
    assert campaign.worker_ids[-1] == "late"
    assert campaign.problem.n_workers == 5  # push mode: exactly the team
    _same_state(campaign, Campaign.load(store, campaign.campaign_id))
    _again, given_again = _drive_push(policy, EventStore("sqlite://"))
    assert given_again == given
    np.testing.assert_array_equal(
        campaign.state.pairs.remaining,
        Campaign.load(store, campaign.campaign_id).state.pairs.remaining,
    )


@pytest.mark.parametrize("policy", ["opt-kg:posterior=one-coin", "opt-kg", "bbta"])
def test_a_worker_with_nothing_left_gets_none_while_others_get_work(policy: str) -> None:
    campaign = Campaign.create(["a", "b", "c"], budget=20, policy=policy)
    for _ in range(3):
        work = campaign.next_assignment("ann")
        assert work is not None
        campaign.record_label(work.assignment_id, "1")
    assert campaign.next_assignment("ann") is None  # ann labeled every item
    assert campaign.next_assignment("bob") is not None  # bob still gets work


class _AnswerTable(LabelingEnvironment):
    """A world of fixed answers ``answers[item, worker]``; workers arrive in ``arrivals``
    order (pull mode)."""

    def __init__(self, answers: np.ndarray, arrivals: list[int]) -> None:
        self.answers = answers
        self.arrivals = arrivals
        self.n_items = answers.shape[0]
        self.true_labels = np.zeros(self.n_items, dtype=np.int64)

    def reset(self, *, seed: object = None) -> dict[str, object]:
        self._next = 0
        self.given: list[tuple[int, int]] = []
        return {}

    def step(self, assignment: Assignment) -> StepResult:
        assert assignment.worker is not None
        label = int(self.answers[assignment.item, assignment.worker])
        event = LabelEvent(assignment.item, assignment.worker, label, assignment.price)
        return StepResult(event)

    def arriving_worker(self) -> int:
        worker = self.arrivals[self._next]
        self._next += 1
        return worker

    def claim(self, assignment: Assignment) -> None:
        assert assignment.worker is not None
        self.given.append((assignment.item, assignment.worker))


def _pull_ids() -> list[str]:
    """Every registered id a worker can ask (the exact DP on a smaller campaign)."""
    return [p for p in _policies() if p not in VARIANTS]


@pytest.mark.parametrize("policy", _pull_ids())
def test_a_sequential_live_pull_run_makes_the_offline_engines_decisions(policy: str) -> None:
    """Workers ask one at a time and answer at once: the live campaign and the engine in pull
    mode under the live rules (same generators, same answers) give the same assignments —
    every pull policy, whether it searches past a worker's own items or names them from a
    plan (then the worker gets nothing and the next arrival is served, on both sides)."""
    from crowdbudget.engine.live import LiveRules
    from crowdbudget.registry import make_policy, parse_policy

    rng = np.random.default_rng(5)
    n_workers, seed = 4, 2
    n_items, budget = {"dp": (4, 8)}.get(policy, (10, 24))
    answers = rng.integers(0, 2, (n_items, n_workers))
    arrivals = [int(w) for w in rng.integers(0, n_workers, 400)]
    workers = [f"w{j}" for j in range(n_workers)]
    campaign = Campaign.create(
        [f"q{k}" for k in range(n_items)], budget=budget, policy=policy, seed=seed, workers=workers
    )
    live: list[tuple[int, int]] = []
    for worker in arrivals:
        if campaign.state.spent >= budget:
            break  # as the engine: the recorder ends the run once the budget is spent
        assignment = campaign.next_assignment(workers[worker])
        if assignment is None:
            continue  # no work for this worker: the next arrival is served
        item = campaign._item_index[assignment.item_id]
        live.append((item, worker))
        campaign.record_label(assignment.assignment_id, str(answers[item, worker]))
    offline_policy = make_policy(policy)
    # the live problem: worker slots for a policy that models workers (4 workers: 4 slots)
    needs_workers = parse_policy(policy).capabilities.needs_workers
    problem = Problem(n_items=n_items, budget=budget, n_workers=4 if needs_workers else None)
    offline_policy.reset(problem, np.random.default_rng([seed, 0]))
    offline_policy.rng_ = np.random.default_rng([seed, 1])
    world = _AnswerTable(answers, arrivals)
    world.reset()
    state = CampaignState.initial(problem)
    drive(offline_policy, world, state, _Arrivals(400), StopAtSpend(budget), live=LiveRules())
    assert live == world.given


@dataclass(frozen=True)
class _Arrivals:
    """Discrete time with ``n`` arrivals, zero work time (pull mode)."""

    n: int
    pull: bool = True
    timed: bool = False
    horizon: float = float("inf")
    max_assignments: int | None = None

    def next_arrival(self, after: float) -> float:
        return after + 1.0 if after < self.n else float("inf")

    def next_duration(self, state: CampaignState) -> float:
        return 0.0


def _every_id() -> list[str]:
    """Every registered id with each mode it declares."""
    from crowdbudget.registry import parse_policy

    out = []
    for policy in sorted(registered_policies()):
        capabilities = parse_policy(policy).capabilities
        if capabilities.supports_pull:
            out.append((policy, "pull"))
        if capabilities.chooses_workers:
            out.append((policy, "push"))
    return out


@pytest.mark.parametrize(("policy", "mode"), _every_id())
def test_every_policy_spends_its_budget_or_says_why_it_stopped(policy: str, mode: str) -> None:
    """No silent stall: workers answer at once until a whole round of requests gets no work;
    then the budget is spent, or the status names the reason. A final reason (``stopped``)
    means nobody gets work, not even a newcomer; a reason without ``stopped`` means a new
    worker does get work."""
    rng = np.random.default_rng(1)
    n_items, budget = SIZES.get(policy, (N_ITEMS, BUDGET))
    team = ["w0", "w1", "w2"]
    campaign = Campaign.create(
        [f"q{k}" for k in range(n_items)],
        budget=budget,
        policy=policy,
        mode=mode,
        workers=team if mode == "push" else (),
    )
    for _ in range(10 * budget):
        if mode == "push":
            batch = campaign.push_assignments(2)
        else:
            batch = [a for w in team if (a := campaign.next_assignment(w)) is not None]
        if not batch:
            break
        for assignment in batch:
            campaign.record_label(assignment.assignment_id, str(int(rng.integers(2))))
    status = campaign.status()
    assert status["pending"] == 0
    if status["spent"] == budget:
        assert status["stopped"] and status["stop_reason"].startswith("the budget"), status
        return
    assert status["stop_reason"], f"{policy} ({mode}) stalled at {status['spent']}/{budget}"
    if mode == "pull":
        newcomer = campaign.next_assignment("newcomer")
        assert (newcomer is None) == status["stopped"], status
    else:
        assert status["stopped"] and not campaign.push_assignments(2)
