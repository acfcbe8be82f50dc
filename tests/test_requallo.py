"""Requallo (Li et al. 2016 §3): hand-derived completeness and rewards, early stop, leaving
items, top-two multi-class, spammer blocking (Example 4), weighted votes (eq. 8-10), and the
label-uncertainty baseline (Sheng et al. 2008 eq. 4)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.label_uncertainty import LabelUncertainty
from crowdbudget.policies.requallo import (
    RequalloPolicy,
    completeness_rewards,
    expected_completeness,
    modified_positive_probability,
    optimistic_completeness_reward,
    reliability_mle,
)
from crowdbudget.registry import make_policy
from crowdbudget.requirements import parse_requirement
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.types import CampaignState, LabelEvent, Problem


def test_eq_1_2_by_hand() -> None:
    ratio = parse_requirement("ratio=4")
    # (2, 1): P+ = 2/3 + 1/r(1) = 2/3 + 1/5; V = P+ 3/5 + (1 - P+) 3/10
    p = 2 / 3 + 1 / 5
    assert float(modified_positive_probability(2, 1, ratio)) == pytest.approx(p)
    assert float(expected_completeness(2, 1, ratio)) == pytest.approx(p * 3 / 5 + (1 - p) * 3 / 10)
    # (3, 1) and (2, 2) after one more vote; R = V(after) - V(now)
    v31 = (3 / 4 + 1 / 5) * 4 / 5 + (1 - 3 / 4 - 1 / 5) * 4 / 15
    v22 = 0.5 * 4 / 10 + 0.5 * 4 / 10
    plus, minus = completeness_rewards(2, 1, ratio)
    v21 = p * 3 / 5 + (1 - p) * 3 / 10
    assert float(plus) == pytest.approx(v31 - v21)
    assert float(minus) == pytest.approx(v22 - v21)
    assert float(optimistic_completeness_reward(2, 1, ratio)) == pytest.approx(v31 - v21)
    # mirror symmetry: V(a, b) = V(b, a)
    assert float(expected_completeness(1, 2, ratio)) == pytest.approx(v21)


@pytest.mark.parametrize("text", ["ratio=4", "fisher=0.2", "fisher=0.05:max-labels=14"])
def test_completeness_is_one_exactly_at_the_requirement(text: str) -> None:
    req = parse_requirement(text)
    for x in range(0, 6):
        r = float(req.min_total(x))
        majority = r - x
        # eq. 2 gives P(Z) = 1 and V = 1 at the boundary, and V < 1 just before it
        assert float(expected_completeness(majority, x, req)) == pytest.approx(1.0)
        if majority - 1 > x:
            assert float(expected_completeness(majority - 1, x, req)) < 1.0
            assert float(modified_positive_probability(majority - 1, x, req)) <= 1.0


def _drive(policy: RequalloPolicy, problem: Problem, answer, budget_steps: int):
    state = CampaignState.initial(problem)
    policy.reset(problem, np.random.default_rng(0))
    chosen = []
    for _ in range(budget_steps):
        assignment = policy.select(state)
        if assignment is None:
            break
        state.record_assignment(assignment)
        event = LabelEvent(item=assignment.item, worker=0, label=answer(assignment.item))
        state.record_label(event, assignment)
        policy.observe(event)
        chosen.append(assignment.item)
    return state, chosen


def test_m3_spends_exactly_three_labels_per_item_and_stops() -> None:
    # Table 3: Requallo-m3 costs 3 x the number of items, then stops by itself
    policy = make_policy("requallo:min-labels=3")
    problem = Problem(n_items=7, budget=100)
    state, _chosen = _drive(policy, problem, lambda i: i % 2, 100)
    assert state.spent == 21 and np.all(state.label_counts.sum(axis=1) == 3)
    assert policy.select(state) is None and policy.stopped_early_


def test_complete_items_leave_and_easy_items_go_first() -> None:
    policy = RequalloPolicy(fisher=0.2, max_labels=14, tie_break="first")
    problem = Problem(n_items=4, budget=200)
    state, chosen = _drive(policy, problem, lambda i: 1, 200)
    # unanimous answers: with one pseudo-vote per class, 3 real votes give (4, 1), p = 0.1875
    assert state.label_counts[:, 1].tolist() == [3, 3, 3, 3]
    assert chosen == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]  # finish one item before the next
    assert policy.complete_.all() and state.spent == 12


def test_campaign_stops_by_itself_and_saves_budget() -> None:
    theta = np.array([0.97, 0.03, 0.9, 0.1, 0.95, 0.05] * 5)
    env = SyntheticBernoulliEnvironment(theta.size, theta=theta)
    rows = run_campaign(
        make_policy("requallo:fisher=0.2:max-labels=14"),
        env,
        [50, 5000],
        world_seed=1,
        policy_rng=np.random.default_rng(0),
    )
    spent = rows[-1]["labels_used"]
    assert 3 * theta.size <= spent < 5000  # stopped early: every item complete
    assert rows[0]["labels_used"] == 50


def test_memoised_scores_equal_direct_computation() -> None:
    policy = RequalloPolicy(ratio=4, max_labels=14)
    problem = Problem(n_items=30, budget=300)
    rng = np.random.default_rng(5)
    answers = rng.random(30)
    _drive(policy, problem, lambda i: int(rng.random() < answers[i]), 150)
    a, b = policy.votes()
    direct = optimistic_completeness_reward(a, b, policy.requirement_, 1.0)
    for item in range(30):
        if not policy.complete_[item]:
            assert policy._index.score(item) == pytest.approx(direct[item], abs=1e-11)


def test_top_two_conversion_for_multiclass() -> None:
    binary = RequalloPolicy(ratio=4)
    multi = RequalloPolicy(ratio=4)
    binary.reset(Problem(n_items=1, budget=10), np.random.default_rng(0))
    multi.reset(Problem(n_items=1, budget=10, n_classes=4), np.random.default_rng(0))
    for label in (2, 2, 0, 2):
        multi.observe(LabelEvent(item=0, worker=0, label=label))
    for label in (1, 1, 0, 1):
        binary.observe(LabelEvent(item=0, worker=0, label=label))
    assert multi._index.score(0) == binary._index.score(0)
    state = CampaignState.initial(Problem(n_items=1, budget=10, n_classes=4))
    assert multi.final_labels(state).tolist() == [2]


def test_spammer_is_blocked_and_his_votes_removed_example_4() -> None:
    spammer = 9
    policy = RequalloPolicy(
        fisher=0.1, pseudo_labels=0, workers="spammer", spammer_min_labels=4, spammer_alpha=0.2
    )
    problem = Problem(n_items=5, budget=100, n_workers=10)
    policy.reset(problem, np.random.default_rng(0))

    def give(item: int, worker: int, label: int) -> None:
        policy.observe(LabelEvent(item=item, worker=worker, label=label))

    # Example 2/4: spammer says +1, four others say -1: p = 0.1875, not complete at 0.1
    give(4, spammer, 1)
    for w in range(1, 5):
        give(4, w, 0)
    assert not policy.complete_[4]
    # four items complete; the spammer agrees with the majority on two of them
    for item, spam_label in zip(range(4), (1, 1, 0, 0), strict=True):
        give(item, spammer, spam_label)
        for w in range(1, 7):  # (6, 1): p = 8/128 < 0.1
            if not policy.complete_[item]:
                give(item, w, 1)
        assert policy.complete_[item]
    assert policy.blocked_ == {spammer}  # P(Bin(4, 1/2) >= 2) = 11/16 >= 0.2
    assert policy.complete_[4]  # (0, 4) after removing his label: p = 0.0625 (Example 4)
    assert policy.counts_[4].tolist() == [4, 0]
    state = CampaignState.initial(problem)
    assert policy.select(state, worker=spammer) is None  # pull mode: no more work for him


def test_reliability_mle_matches_grid_search() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        k = int(rng.integers(1, 12))
        labels = rng.integers(0, 2, size=k)
        theta = rng.uniform(0.5, 1.0, size=k)
        grid = np.linspace(1e-6, 1 - 1e-6, 200_001)
        pos = theta[None, :] * grid[:, None] + (1 - theta[None, :]) * (1 - grid[:, None])
        ll = np.where(labels[None, :] == 1, np.log(pos), np.log(1 - pos)).sum(axis=1)
        ll += np.log(grid) + np.log(1 - grid)  # one noiseless pseudo-vote per class
        assert reliability_mle(labels, theta, 1.0) == pytest.approx(grid[np.argmax(ll)], abs=2e-5)


def test_weighted_mode_with_noiseless_workers_equals_the_basic_policy() -> None:
    problem = Problem(n_items=12, budget=80, n_workers=3)
    rng = np.random.default_rng(1)
    answers = rng.integers(0, 2, size=(12, 40))
    basic = RequalloPolicy(ratio=4, max_labels=14)
    weighted = RequalloPolicy(
        ratio=4, max_labels=14, workers="weighted", worker_reliability=np.ones(3)
    )
    counters = {}
    runs = []
    for policy in (basic, weighted):
        counters.clear()

        def answer(i: int) -> int:
            counters[i] = counters.get(i, 0) + 1
            return int(answers[i, counters[i] - 1])

        runs.append(_drive(policy, problem, answer, 80)[1])
    assert runs[0] == runs[1]


def test_weighted_votes_discount_unreliable_workers() -> None:
    policy = RequalloPolicy(
        ratio=4, workers="weighted", worker_reliability=np.array([0.99, 0.55, 0.55, 0.55])
    )
    policy.reset(Problem(n_items=1, budget=10, n_workers=4), np.random.default_rng(0))
    policy.observe(LabelEvent(0, 0, 1))
    for w in (1, 2, 3):
        policy.observe(LabelEvent(0, w, 0))
    # one reliable +1 outweighs three near-random -1 votes
    state = CampaignState.initial(Problem(n_items=1, budget=10, n_workers=4))
    assert policy.final_labels(state).tolist() == [1]


def test_label_uncertainty_is_sheng_eq_4() -> None:
    lu = LabelUncertainty()
    pos = np.array([0, 1, 3, 2, 5.0])
    neg = np.array([0, 0, 1, 2, 1.0])
    tail = special.betainc(pos + 1, neg + 1, 0.5)
    expected = np.minimum(tail, 1 - tail)
    assert np.allclose(lu.score_states(pos + 1, neg + 1, np.full(5, 0.5)), expected)
    # every item gets one label before any gets a second (Li et al. §4.2)
    problem = Problem(n_items=6, budget=6)
    policy = make_policy("label-uncertainty")
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState.initial(problem)
    seen = []
    for _ in range(6):
        a = policy.select(state)
        assert a is not None
        state.record_assignment(a)
        event = LabelEvent(a.item, 0, 1)
        state.record_label(event, a)
        policy.observe(event)
        seen.append(a.item)
    assert sorted(seen) == list(range(6))
