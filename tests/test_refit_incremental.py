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
from crowdbudget.policies._refit_schedule import (
    DEFAULT_REFIT_EXACT,
    DEFAULT_REFIT_TOL,
    exact_phase,
)
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


#: the refit options that make every refit incremental, and the full refit at every refit
_ONLY_INCREMENTAL = ":refit-exact-until=0:refit-exact-growth=0"
_FULL = "opt-kg:posterior=one-coin:refit-tol=0"
_EXACT_200 = "refit-tol=0.01:refit-exact-until=200:refit-exact-growth=0.5"


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
    # incremental from the first refit (no full refits: the registry's defaults turned off)
    policy_id = f"opt-kg:posterior=one-coin:refit-tol={tol}{_ONLY_INCREMENTAL}"
    bounded = _decisions(policy_id, env, 1200.0, 3)
    assert bounded == _decisions(policy_id, env, 1200.0, 3, bounded_push=False)
    assert bounded == _decisions(policy_id, env, 1200.0, 3, reference=True)
    # and the incremental refit is not the full one
    assert bounded[0] != _decisions(_FULL, env, 1200.0, 3)[0]


def test_pull_mode_lazy_and_eager_alike() -> None:
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    runs = []
    for lazy in (True, False):
        policy = make_policy(f"opt-kg:posterior=one-coin:refit-tol=0.01{_ONLY_INCREMENTAL}")
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
        ({"refit": 10, "refit_exact_until": 100}, "need refit_tol > 0"),
        ({"refit": 10, "refit_exact_growth": 0.5}, "need refit_tol > 0"),
        ({"refit": 10, "refit_tol": 0.01, "refit_exact_until": -1}, "refit_exact_until must"),
        ({"refit": 10, "refit_tol": 0.01, "refit_exact_until": 1.5}, "refit_exact_until must"),
        ({"refit": 10, "refit_tol": 0.01, "refit_exact_growth": -1.0}, "refit_exact_growth"),
        ({"refit": 10, "refit_tol": 0.01, "refit_exact_growth": np.inf}, "refit_exact_growth"),
    ],
)
def test_refit_tol_is_validated(kwargs: dict, message: str) -> None:
    policy = OneCoinKnowledgeGradient(**kwargs)
    with pytest.raises(InvalidParameterError, match=message):
        policy.validate_params()


def test_the_full_refit_up_to_the_exact_phase() -> None:
    # every refit up to the first past the exact phase is the full one: the same decisions
    # and draws as refit-tol=0 (on rte the registry's phase is 2,000 labels)
    policy = make_policy("opt-kg:posterior=one-coin:refit-tol=0.01")
    assert (policy.refit_exact_until, policy.refit_exact_growth) == (10_000, 0.1)
    assert policy.refit_exact_items == 1.0
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    full = _decisions(_FULL, env, 1600.0, 3)
    assert _decisions("opt-kg:posterior=one-coin:refit-tol=0.01", env, 1600.0, 3) == full
    # and a shorter exact phase leaves the full refit's decisions after it
    short = "opt-kg:posterior=one-coin:refit-tol=0.01:refit-exact-until=500"
    hybrid = _decisions(short, env, 1600.0, 3)
    assert hybrid[0][:500] == full[0][:500]
    assert hybrid[0] != full[0]


def test_hybrid_paths_decide_alike() -> None:
    # full refits, the switch and the incremental ones after it: every path reads the same
    # beliefs (the statistics re-set from each full refit)
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    policy_id = (
        "opt-kg:posterior=one-coin:refit-tol=0.01:refit-exact-until=300:refit-exact-growth=0.3"
    )
    bounded = _decisions(policy_id, env, 1400.0, 5)
    assert bounded == _decisions(policy_id, env, 1400.0, 5, bounded_push=False)
    assert bounded == _decisions(policy_id, env, 1400.0, 5, reference=True)


def test_full_refits_at_the_exact_phase_and_the_growth_points() -> None:
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    policy = make_policy(f"opt-kg:posterior=one-coin:{_EXACT_200}")
    full_at: list[int] = []
    reestimate_beliefs = policy._reestimate_beliefs

    def counted(n_rounds: int) -> None:
        full_at.append(policy._n_log)
        reestimate_beliefs(n_rounds)

    policy._reestimate_beliefs = counted  # type: ignore[method-assign]
    run_recorded(policy, env, [1000.0], 0)
    # every refit up to the first past 200 labels, then at 1.5x the last full one's count
    assert full_at == [*range(10, 211, 10), 320, 480, 720]


def test_statistics_follow_a_full_refit() -> None:
    # after the switch and after each full refit the statistics are the full refit's beliefs:
    # c = c0 + right and d = d0 + answered - right bit for bit, r_used the workers' means
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    policy = make_policy(f"opt-kg:posterior=one-coin:{_EXACT_200}")
    run_recorded(policy, env, [480.0], 1)  # the last refit, at 480, is a full one
    state = policy._incremental
    post = policy.posterior_
    assert state is not None and state.n_linked == 480
    c0, d0 = policy.worker_prior
    np.testing.assert_array_equal(post.c, c0 + state.right)
    np.testing.assert_array_equal(post.d, d0 + (state.answered - state.right))
    np.testing.assert_array_equal(state.r_used, post.c / (post.c + post.d))
    log = policy._log[:480]
    mean = post.a / (post.a + post.b)
    agree = np.where(log[:, 2] == 1, mean[log[:, 0]], 1.0 - mean[log[:, 0]])
    np.testing.assert_array_equal(state.contrib[:480], agree)
    assert not state.mark.any() and state.dirty_count[0] == 0


@pytest.mark.parametrize(
    ("policy_id", "expected"),
    [
        ("opt-kg:posterior=one-coin:refit-tol=0.01", (0.01, 10_000, 0.1, 1.0)),
        ("opt-kg:posterior=one-coin:refit-tol=0.002", (0.002, 10_000, 0.1, 1.0)),
        ("opt-kg:posterior=one-coin:refit-tol=0", (0.0, 0, 0.0, 0.0)),
        ("opt-kg:posterior=one-coin:refit-tol=0.01:refit-items=exact", None),
        ("opt-kg:posterior=one-coin:refit-items=exact", (0.0, 0, 0.0, 0.0)),
        ("opt-kg:posterior=one-coin:refit=0", (0.0, 0, 0.0, 0.0)),
        # a named exact phase keeps its meaning (that many labels: no per-item default)
        ("opt-kg:posterior=one-coin:refit-tol=0.01:refit-exact-until=0", (0.01, 0, 0.1, 0.0)),
        ("opt-kg:posterior=one-coin:refit-exact-until=600", (0.01, 600, 0.1, 0.0)),
        ("opt-kg:posterior=one-coin:refit-exact-items=2", (0.01, 10_000, 0.1, 2.0)),
        ("opt-kg:posterior=one-coin", "default"),
        ("opt-kg:posterior=one-coin", (0.01, 10_000, 0.1, 1.0)),
        ("kg:posterior=one-coin", (0.0, 0, 0.0, 0.0)),
        ("cvar-kg:posterior=one-coin:alpha=0.5", (0.0, 0, 0.0, 0.0)),
        ("kg:posterior=one-coin:refit-tol=0.01", (0.01, 10_000, 0.1, 1.0)),
    ],
)
def test_registry_defaults_of_the_incremental_refit(policy_id: str, expected: object) -> None:
    if expected is None:  # the incremental refit needs the sequential item step
        with pytest.raises(InvalidParameterError, match="refit_items=sequential"):
            make_policy(policy_id)
        return
    if expected == "default":
        keys = ("refit_exact_until", "refit_exact_growth", "refit_exact_items")
        exact = tuple(DEFAULT_REFIT_EXACT[k] for k in keys) if DEFAULT_REFIT_TOL else (0, 0.0, 0.0)
        expected = (DEFAULT_REFIT_TOL, *exact)
    policy = make_policy(policy_id)
    policy.validate_params()
    got = (policy.refit_tol, policy.refit_exact_until, policy.refit_exact_growth)
    assert (*got, policy.refit_exact_items) == expected


def test_the_exact_phase_by_the_problem_size() -> None:
    # min(until, max(2000, items per item x n_items)); items 0: until labels; until 0: no cap
    assert exact_phase(10_000, 1.0, 800) == 2_000  # rte
    assert exact_phase(10_000, 1.0, 462) == 2_000  # temp
    assert exact_phase(10_000, 1.0, 19_033) == 10_000  # trec: as before
    assert exact_phase(10_000, 1.0, 5_000) == 5_000
    assert exact_phase(10_000, 0.0, 800) == 10_000
    assert exact_phase(0, 1.0, 19_033) == 19_033
    assert exact_phase(0, 0.0, 800) == 0
    assert exact_phase(10_000, 2.5, 1_001) == 2_503  # rounded up
    policy = make_policy("opt-kg:posterior=one-coin")
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    run_recorded(policy, env, [50.0], 0)
    assert policy._exact_until == 2_000  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"refit": 10, "refit_tol": 0.01, "refit_exact_items": -1.0}, "refit_exact_items must"),
        ({"refit": 10, "refit_tol": 0.01, "refit_exact_items": float("nan")}, "refit_exact_items"),
        ({"refit": 10, "refit_exact_items": 1.0}, "refit_exact_items needs refit_tol"),
    ],
)
def test_refit_exact_items_is_validated(kwargs: dict, message: str) -> None:
    policy = OneCoinKnowledgeGradient(**kwargs)
    with pytest.raises(InvalidParameterError, match=message):
        policy.validate_params()
