"""IEThresh's interval against scipy's t quantile; CrowdSense's quality and add-a-worker rule."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.bandits import CrowdSense, IEThresh
from crowdbudget.policies.bandits.iethresh import upper_interval
from crowdbudget.registry import make_policy
from crowdbudget.simulation.contextual import ContextualWorkerEnvironment
from crowdbudget.types import CampaignState, LabelEvent, Problem


def test_upper_interval_matches_scipy_t_quantile() -> None:
    rewards = [np.array([1, 0, 1, 1]), np.array([1, 1, 1]), np.array([0, 1]), np.array([1])]
    count = np.array([len(r) for r in rewards])
    total = np.array([r.sum() for r in rewards], dtype=float)
    sq = np.array([(r**2).sum() for r in rewards], dtype=float)
    ui = upper_interval(count, total, sq, alpha=0.05)
    for k, r in enumerate(rewards[:3]):
        n = len(r)
        expected = r.mean() + stats.t.ppf(0.975, n - 1) * r.std(ddof=1) / np.sqrt(n)
        assert ui[k] == pytest.approx(expected, rel=1e-12)
    assert np.isinf(ui[3])  # fewer than two rewards: always asked


def _one_task(policy, problem, answers):  # type: ignore[no-untyped-def]
    state = CampaignState.initial(problem)
    asked = []
    while (a := policy.select(state)) is not None:
        asked.append((a.item, a.worker))
        state.record_assignment(a)
        event = LabelEvent(item=a.item, worker=a.worker, label=int(answers[a.worker]))
        state.record_label(event, a)
        policy.observe(event)
    return asked, state


def test_iethresh_first_tasks_ask_everyone_then_threshold() -> None:
    problem = Problem(n_items=3, budget=100, n_workers=4)
    policy = IEThresh(eps=0.99)
    policy.reset(problem, np.random.default_rng(0))
    answers = np.array([1, 1, 1, 0])
    asked, state = _one_task(policy, problem, answers)
    first, second = int(policy.stream_[0]), int(policy.stream_[1])
    assert [j for i, j in asked if i == first] == [0, 1, 2, 3]
    assert [j for i, j in asked if i == second] == [0, 1, 2, 3]
    # after two tasks: workers 0-2 rewards (1, 1) -> UI 1; worker 3 (0, 0) -> UI 0
    np.testing.assert_allclose(policy.upper_intervals()[:3], 1.0)
    third = int(policy.stream_[2])
    assert sorted(j for i, j in asked if i == third) == [0, 1, 2]
    assert state.spent == 11
    assert (policy.final_labels(state) == 1).all()


def test_crowdsense_quality_and_stopping_rule() -> None:
    problem = Problem(n_items=1, budget=100, n_workers=5)
    policy = CrowdSense(eps=0.0, smoothing=1.0)
    policy.reset(problem, np.random.default_rng(0))
    np.testing.assert_allclose(policy.quality(), 0.5)
    # three initial workers agree (score 1.5); candidate test (1.5 - 0.5) / 4 = 0.25 >= 0 -> stop
    answers = np.ones(5, dtype=np.int64)
    asked, _ = _one_task(policy, problem, answers)
    assert len(asked) == 3
    chosen = [j for _, j in asked]
    np.testing.assert_allclose(policy.quality()[chosen], (1 + 1) / (1 + 2))
    # with a generous eps every candidate is added
    policy = CrowdSense(eps=10.0, smoothing=1.0)
    policy.reset(problem, np.random.default_rng(0))
    asked, _ = _one_task(policy, problem, answers)
    assert len(asked) == 5


def test_spend_follows_threshold() -> None:
    rng = np.random.default_rng(2)
    truth = rng.integers(0, 2, 120)
    env = ContextualWorkerEnvironment(truth, rng.integers(0, 3, 120), "one-coin", n_workers=12)
    spent = {}
    for pid in (
        "iethresh:eps=0.7",
        "iethresh:eps=0.95",
        "crowdsense:eps=0.01",
        "crowdsense:eps=0.3",
    ):
        rows = run_campaign(
            make_policy(pid), env, [120 * 12], world_seed=1, policy_rng=np.random.default_rng(0)
        )
        spent[pid] = rows[0]["labels_used"]
        assert rows[0]["accuracy"] > 0.6
    assert spent["iethresh:eps=0.7"] > spent["iethresh:eps=0.95"]
    assert spent["crowdsense:eps=0.3"] > spent["crowdsense:eps=0.01"]
