"""The continuous-time simulator: Poisson arrivals, pending work, horizon cancellation,
thinning, replay, rewards by hand, reproducibility."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crowdbudget.experiments.continuous import run_continuous_campaign, run_continuous_experiment
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.registry import make_policy
from crowdbudget.simulation.continuous_time import ContinuousTimeEnvironment, posterior_reward
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import Assignment, CampaignState, Problem


class _Recorder(AllocationPolicy):
    """Round-robin over eligible items; records the time and pending count at each select."""

    binary_only = False

    def __init__(self) -> None:
        pass

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        self.calls: list[tuple[float, int]] = []
        self._next = 0

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        if not state.can_afford(1.0):
            return None
        self.calls.append((state.time, int(state.pending.sum())))
        items = np.flatnonzero(state.eligible)
        if items.size == 0:
            return None
        item = int(items[self._next % items.size])
        self._next += 1
        return Assignment(item=item, worker=worker)


def _env(n_items: int = 5, **kwargs: float) -> ContinuousTimeEnvironment:
    params = {"arrival_rate": 0.1, "completion_rate": 0.4, **kwargs}
    return ContinuousTimeEnvironment(SyntheticBernoulliEnvironment(n_items), **params)


def test_reward_by_hand_one_task() -> None:
    # Beta(1, 1), one task: after 1 label R = 0.75 whatever it is; after 2 labels
    # E[R] = (0.875 + 0.5 + 0.875) / 3 = 0.75 as well; 3 labels: 13/16 = 0.8125
    problem = Problem(n_items=1, budget=1)
    assert posterior_reward(problem, np.array([[0, 1]])) == pytest.approx(0.75)
    assert posterior_reward(problem, np.array([[1, 2]])) == pytest.approx(0.6875)
    env = _env(1)
    row = run_continuous_campaign(
        make_policy("uniform"), env, 1, world_seed=3, policy_rng=np.random.default_rng(0)
    )
    assert row["reward"] == pytest.approx(0.75)
    assert row["workers_hired"] == 1 and row["labels_used"] == 1 and row["cancelled"] == 0


def test_several_assignments_pending_at_once_and_exact_event_order() -> None:
    env = _env(3, arrival_rate=1.0, completion_rate=0.05)  # slow workers: work piles up
    policy = _Recorder()
    row = run_continuous_campaign(
        policy, env, 30, world_seed=1, policy_rng=np.random.default_rng(0)
    )
    times = [t for t, _ in policy.calls]
    assert times == sorted(times) and times[0] > 0
    assert max(p for _, p in policy.calls) >= 5
    assert row["workers_hired"] == 30 and row["labels_used"] == 30
    assert row["end_time"] >= times[-1]


def test_poisson_arrivals_until_the_horizon_and_cancellation() -> None:
    # U large, T = 40, r = 0.5: hires ~ Poisson(20); pending work at T is cancelled
    env = _env(4, arrival_rate=0.5, completion_rate=0.2, horizon=40.0)
    hired, cancelled = [], []
    for rep in range(300):
        row = run_continuous_campaign(
            make_policy("uniform"), env, 1000, world_seed=rep, policy_rng=np.random.default_rng(rep)
        )
        assert row["labels_used"] + row["cancelled"] == row["workers_hired"]
        assert row["end_time"] == 40.0
        hired.append(row["workers_hired"])
        cancelled.append(row["cancelled"])
    mean = float(np.mean(hired))
    assert abs(mean - 20.0) < 4 * math.sqrt(20.0 / 300)
    assert float(np.var(hired)) == pytest.approx(20.0, rel=0.3)  # Poisson: variance = mean
    # in steady state the pending count is Poisson(r/μ) = Poisson(2.5) (M/M/∞)
    assert abs(float(np.mean(cancelled)) - 2.5) < 4 * math.sqrt(2.5 / 300)


def _late_start(t: float) -> float:
    return 0.0 if t < 10.0 else 0.5


def test_non_homogeneous_arrivals_by_thinning() -> None:
    env = _env(3, arrival_rate=0.5, rate_function=_late_start)
    policy = _Recorder()
    counts = []
    for rep in range(100):
        env2 = _env(3, arrival_rate=0.5, rate_function=_late_start, horizon=30.0)
        row = run_continuous_campaign(
            make_policy("uniform"), env2, 1000, world_seed=rep, policy_rng=np.random.default_rng(0)
        )
        counts.append(row["workers_hired"])
    assert abs(float(np.mean(counts)) - 10.0) < 4 * math.sqrt(10.0 / 100)  # 0.5 × 20
    run_continuous_campaign(policy, env, 20, world_seed=2, policy_rng=np.random.default_rng(0))
    assert min(t for t, _ in policy.calls) >= 10.0


def test_same_seed_same_world_for_every_policy() -> None:
    env = _env(6)
    rows = [
        run_continuous_campaign(
            make_policy(pid), env, 8, world_seed=11, policy_rng=np.random.default_rng(1)
        )
        for pid in ("opt-kg", "opt-kg", "uniform")
    ]
    assert rows[0] == {**rows[1], "seconds": rows[0]["seconds"]}
    env.reset(seed=11)
    truth = env.base.true_labels.copy()
    env.reset(seed=11)
    assert np.array_equal(truth, env.base.true_labels)


def test_replay_never_runs_out_of_labels_with_pending_work() -> None:
    items = np.repeat(np.arange(4), 2)
    workers = np.tile(np.arange(2), 4)
    labels = np.array([1, 1, 0, 1, 0, 0, 1, 0])
    base = ReplayEnvironment(items, workers, labels, gold=np.array([1, 0, 0, 1]))
    env = ContinuousTimeEnvironment(base, arrival_rate=1.0, completion_rate=0.01)
    for pid in ("opt-kg", "lagrangian-index", "thompson", "ucb1-tuned", "uniform"):
        row = run_continuous_campaign(
            make_policy(pid), env, 8, world_seed=0, policy_rng=np.random.default_rng(0)
        )
        assert row["labels_used"] == 8  # every recorded label, none asked twice


def test_experiment_is_reproducible_and_chunking_does_not_matter() -> None:
    env = _env(5)
    one = run_continuous_experiment(
        ["opt-kg", "thompson"], env, [6], 6, seed=4, n_jobs=1, progress=False, chunk_size=1
    )
    two = run_continuous_experiment(
        ["opt-kg", "thompson"], env, [6], 6, seed=4, n_jobs=1, progress=False, chunk_size=4
    )
    cols = ["policy", "replication", "reward", "accuracy", "end_time"]
    assert one.runs[cols].equals(two.runs[cols])
    assert set(one.summary.columns) >= {"reward_mean", "reward_ci_low", "accuracy_ci_high"}


def test_invalid_settings_are_refused() -> None:
    from crowdbudget.exceptions import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="completion rate"):
        _env(3, completion_rate=-1.0)
    with pytest.raises(InvalidParameterError, match="horizon"):
        _env(3, horizon=0.0)
