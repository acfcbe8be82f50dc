"""The Hu–Frazier index policy, Thompson sampling and UCB1-tuned."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crowdbudget.bounds.lagrangian import lagrangian_bound
from crowdbudget.experiments.continuous import run_continuous_experiment
from crowdbudget.policies.lagrangian_index import LagrangianIndexPolicy, StateBuckets
from crowdbudget.policies.ucb import UCB1TunedPolicy, ucb1_tuned_scores
from crowdbudget.registry import make_policy
from crowdbudget.simulation.continuous_time import (
    ContinuousTimeEnvironment,
)
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.types import Assignment, CampaignState, LabelEvent, Problem


def test_index_policy_picks_a_task_of_largest_index() -> None:
    problem = Problem(n_items=6, budget=10)
    policy = LagrangianIndexPolicy(arrival_rate=0.1, completion_rate=0.4)
    rng = np.random.default_rng(0)
    policy.reset(problem, rng)
    state = CampaignState.initial(problem)
    labels = np.random.default_rng(1)
    pending: list[Assignment] = []
    for _ in range(10):
        assignment = policy.select(state)
        assert assignment is not None
        indices = [policy.index_of(state, x) for x in range(6)]
        assert indices[assignment.item] == pytest.approx(max(indices), abs=0)
        state.record_assignment(assignment)
        pending.append(assignment)
        if labels.random() < 0.6:  # answer some, keep others pending
            done = pending.pop(0)
            event = LabelEvent(done.item, 0, int(labels.integers(2)))
            state.record_label(event, done)
            policy.observe(event)
    assert policy.select(state) is None  # the budget is committed


def test_index_policy_resyncs_after_an_unannounced_cancellation() -> None:
    problem = Problem(n_items=3, budget=6)
    policy = LagrangianIndexPolicy(arrival_rate=0.1, completion_rate=0.4)
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState.initial(problem)
    first = policy.select(state)
    assert first is not None
    state.record_assignment(first)
    state.release_assignment(first)  # cancelled; the policy is not told
    policy.select(state)
    assert policy._w.tolist() == [0, 0, 0]


@given(st.lists(st.tuples(st.integers(0, 19), st.integers(-1, 6)), max_size=60))
@settings(max_examples=40, deadline=None)
def test_state_buckets_stay_consistent(moves: list[tuple[int, int]]) -> None:
    start = np.zeros(20, dtype=np.int64)
    buckets = StateBuckets(7, start)
    for task, state in moves:
        buckets.move(task, state)
    for s in range(7):
        members = sorted(buckets.members[s])
        assert members == sorted(np.flatnonzero(buckets.state == s).tolist())
        assert buckets.count[s] == len(members)
        for k, task in enumerate(buckets.members[s]):
            assert buckets.position[task] == k


def test_no_policy_beats_the_bound_and_the_index_policy_is_close() -> None:
    n_items, budget = 10, 12
    env = ContinuousTimeEnvironment(
        SyntheticBernoulliEnvironment(n_items), arrival_rate=0.1, completion_rate=0.4
    )
    bound = lagrangian_bound(
        n_items=n_items, budget=budget, arrival_rate=0.1, completion_rate=0.4
    ).bound
    result = run_continuous_experiment(
        ["lagrangian-index", "opt-kg", "thompson", "ucb1-tuned"],
        env,
        [budget],
        150,
        seed=2,
        n_jobs=1,
        progress=False,
    )
    for row in result.summary.itertuples():
        standard_error = row.reward_std / math.sqrt(row.reps)
        assert row.reward_mean <= bound + 3 * standard_error, row.policy
    index = result.summary.set_index("policy").loc["lagrangian-index"]
    assert index.reward_mean >= bound - 0.03 * n_items  # within 3% per task


def test_thompson_prefers_the_uncertain_task() -> None:
    problem = Problem(n_items=2, budget=400, prior=np.array([[1.0, 1.0], [1.0, 40.0]]))
    policy = make_policy("thompson")
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState.initial(problem)
    picks = [policy.select(state).item for _ in range(400)]  # type: ignore[union-attr]
    # task 1's posterior Beta(40, 1) puts mass on θ > 0.9; task 0's Beta(1, 1) sample is
    # closer to 0.5 unless |θ̃₀ − 0.5| > |θ̃₁ − 0.5| ≈ 0.48: probability ≈ 0.03
    assert np.mean(np.array(picks) == 0) > 0.9


def test_ucb1_tuned_scores_by_hand_and_unlabeled_tasks_first() -> None:
    # task with 3 positives of 4 labels, t = 10 labels so far, d = 0.5
    mean, n, log_t = 0.75, 4.0, math.log(10.0)
    variance = mean * (1 - mean) + math.sqrt(2 * log_t / n)
    width = math.sqrt(log_t / n * min(0.25, variance))
    score = ucb1_tuned_scores(np.array([3, 0]), np.array([4, 0]), np.array([0.5, 0.5]), 10.0)
    assert score[0] == pytest.approx(width - 0.25)
    assert score[1] == math.inf
    problem = Problem(n_items=3, budget=10)
    state = CampaignState.initial(problem)
    state.label_counts[0] = [1, 1]
    # unlabeled tasks first: the smallest index with the papers' rule, either of them at random
    policy = UCB1TunedPolicy(tie_break="first")
    policy.reset(problem, np.random.default_rng(0))
    assert policy.select(state).item == 1  # type: ignore[union-attr]
    policy = UCB1TunedPolicy()
    picks = set()
    for seed in range(40):
        policy.reset(problem, np.random.default_rng(seed))
        picks.add(policy.select(state).item)  # type: ignore[union-attr]
    assert picks == {1, 2}


def test_index_policy_refuses_prices_and_bad_parameters() -> None:
    from crowdbudget.exceptions import InvalidParameterError

    priced = Problem(n_items=2, budget=4, n_workers=2, worker_prices=np.array([1.0, 2.0]))
    with pytest.raises(InvalidParameterError, match="unit prices"):
        make_policy("lagrangian-index").reset(priced, np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match="arrival-rate"):
        make_policy("lagrangian-index:arrival-rate=-1")
