"""The incremental refit of the binary one-coin worker-aware policy (``refit_tol``;
policies/_refit_incremental.py): its fixed point is the full refit's, its statistics stay
consistent, and the fast paths decide as the scan on its beliefs."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.datasets import load_dataset
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies._one_coin_kernel import reestimate
from crowdbudget.policies._refit_incremental import IncrementalRefitState
from crowdbudget.policies.worker_aware import OneCoinKnowledgeGradient
from crowdbudget.registry import make_policy
from crowdbudget.simulation.replay import ReplayEnvironment
from decision_log import run_recorded


def _random_log(seed: int, n_items: int = 60, n_workers: int = 9, n_labels: int = 300):
    rng = np.random.default_rng(seed)
    truth = rng.integers(2, size=n_items)
    accuracy = rng.uniform(0.55, 0.95, n_workers)
    items = rng.integers(n_items, size=n_labels)
    workers = rng.integers(n_workers, size=n_labels)
    right = rng.random(n_labels) < accuracy[workers]
    labels = np.where(right, truth[items], 1 - truth[items])
    return np.column_stack([items, workers, labels]).astype(np.int64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fixed_point_is_the_full_refits(seed: int) -> None:
    # tol 0 and many rounds: every worker change is propagated, so the incremental sweeps
    # (Gauss–Seidel order) and the full refit's (Jacobi order) reach the same fixed point
    log = _random_log(seed)
    n_items, n_workers = 60, 9
    c0, d0 = 16.0, 4.0
    prior_a, prior_b = np.ones(n_items), np.ones(n_items)
    a, b = prior_a.copy(), prior_b.copy()
    c, d = np.full(n_workers, c0), np.full(n_workers, d0)
    state = IncrementalRefitState(n_items, n_workers, c0, d0)
    # in three pieces, as refits during a campaign
    for stop in (100, 200, 300):
        state.refit(log[:stop], (prior_a, prior_b, a, b, c, d), c0, d0, 0.0, 400)
    fa, fb, fc, fd = reestimate(
        log[:, 0].copy(), log[:, 1].copy(), log[:, 2].copy(), prior_a, prior_b,
        np.full(n_workers, c0), np.full(n_workers, d0), c0, d0, 400,
    )  # fmt: skip
    np.testing.assert_allclose(a / (a + b), fa / (fa + fb), atol=1e-9)
    np.testing.assert_allclose(c, fc, atol=1e-8)
    np.testing.assert_allclose(d, fd, atol=1e-8)


def test_statistics_stay_consistent_with_a_tolerance() -> None:
    log = _random_log(4, n_labels=400)
    n_items, n_workers = 60, 9
    c0, d0 = 4.0, 1.0
    prior_a, prior_b = np.ones(n_items), np.ones(n_items)
    a, b = prior_a.copy(), prior_b.copy()
    c, d = np.full(n_workers, c0), np.full(n_workers, d0)
    state = IncrementalRefitState(n_items, n_workers, c0, d0)
    for stop in range(10, 401, 10):
        items, workers = state.refit(log[:stop], (prior_a, prior_b, a, b, c, d), c0, d0, 0.02, 3)
        # the new labels' items are re-read and the new labels' workers re-set
        assert set(log[stop - 10 : stop, 0]) <= set(items.tolist())
        assert set(log[stop - 10 : stop, 1]) <= set(workers.tolist())
    n = log.shape[0]
    contrib = state.contrib[:n]
    right = np.bincount(log[:, 1], weights=contrib, minlength=n_workers)
    np.testing.assert_allclose(state.right, right, atol=1e-9)
    assert state.answered.tolist() == np.bincount(log[:, 1], minlength=n_workers).tolist()
    np.testing.assert_allclose(c, c0 + right, atol=1e-9)
    np.testing.assert_allclose(d, d0 + state.answered - right, atol=1e-9)
    # every label's agreement is its item's current mean, except items still waiting
    waiting = state.mark.astype(bool)
    mean = a / (a + b)
    agree = np.where(log[:, 2] == 1, mean[log[:, 0]], 1.0 - mean[log[:, 0]])
    settled = ~waiting[log[:, 0]]
    np.testing.assert_allclose(contrib[settled], agree[settled], atol=1e-12)
    # and the reliability each worker's items were read with is within the tolerance
    assert np.all(np.abs(c / (c + d) - state.r_used) <= 0.02 + 1e-12)


def _decisions(policy_id: str, env: ReplayEnvironment, budget: float, seed: int, **attrs):
    policy = make_policy(policy_id)
    for name, value in attrs.items():
        setattr(policy, name, value)
    return run_recorded(policy, env, [budget], seed)


@pytest.mark.parametrize("tol", ["0.01", "0.001"])
def test_paths_decide_alike_on_the_incremental_beliefs(tol: str) -> None:
    # the bounded push choice, the per-worker bests and the reference scan read the same
    # beliefs after an incremental refit: the changed items and workers must all be rescored
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    policy_id = f"opt-kg:posterior=one-coin:refit-tol={tol}"
    bounded = _decisions(policy_id, env, 1200.0, 3)
    assert bounded == _decisions(policy_id, env, 1200.0, 3, bounded_push=False)
    assert bounded == _decisions(policy_id, env, 1200.0, 3, reference=True)
    # and the incremental refit is not the full one
    assert bounded[0] != _decisions("opt-kg:posterior=one-coin", env, 1200.0, 3)[0]


def test_pull_mode_lazy_and_eager_alike() -> None:
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    runs = []
    for lazy in (True, False):
        policy = make_policy("opt-kg:posterior=one-coin:refit-tol=0.01")
        policy.lazy_workers = lazy  # type: ignore[attr-defined]
        rows = run_campaign(
            policy, env, [600.0], world_seed=2, policy_rng=np.random.default_rng(2), mode="pull"
        )
        runs.append(([row["accuracy"] for row in rows], policy.posterior_.a.copy()))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"refit": 10, "refit_tol": -0.1}, "refit_tol must be a finite number"),
        ({"refit": 10, "refit_tol": float("nan")}, "refit_tol must be a finite number"),
        ({"refit": 0, "refit_tol": 0.01}, "refit_tol needs refit"),
        ({"refit": 10, "refit_tol": 0.01, "refit_items": "exact"}, "refit_items=sequential"),
    ],
)
def test_refit_tol_is_validated(kwargs: dict, message: str) -> None:
    policy = OneCoinKnowledgeGradient(**kwargs)
    with pytest.raises(InvalidParameterError, match=message):
        policy.validate_params()
