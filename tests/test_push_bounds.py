"""The push-mode Opt-KG choice by per-item bounds (policies/_push_bounds.py): the monotonicity it
rests on, its segment tree, and the same choices and draws as the per-worker bests on replays."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.datasets import load_dataset
from crowdbudget.policies._one_coin_kernel import canonical, rescore_pairs
from crowdbudget.policies._push_bounds import (
    _agreeing_errors,
    margin_below,
    one_coin_label,
    tree_at_least,
    tree_build,
    tree_set,
)
from crowdbudget.posteriors.one_coin import _one_coin_update_scalar
from crowdbudget.registry import make_policy
from crowdbudget.simulation.replay import ReplayEnvironment
from decision_log import PUSH_POLICIES, adversarial_world, run_recorded
from kernel_loops import state_arrays


def _scores_on_grid(a: np.ndarray, b: np.ndarray, reliability: np.ndarray) -> np.ndarray:
    """The compiled Opt-KG score of every (state, reliability), shape (states, reliabilities)."""
    n_states, n_r = a.shape[0], reliability.shape[0]
    moments, error = state_arrays(a, b)
    pair_items = np.repeat(np.arange(n_states), n_r)
    pair_workers = np.tile(np.arange(n_r), n_states)
    scores = np.empty(n_states * n_r)
    rescore_pairs(
        np.arange(n_states * n_r), pair_items, pair_workers, a, b, moments, reliability, error,
        True, scores,
    )  # fmt: skip
    return scores.reshape(n_states, n_r)


@pytest.mark.parametrize("side", ["above", "below"])
def test_score_is_monotone_in_reliability_away_from_one_half(side: str) -> None:
    # states (a, b) on a dense log grid (prior-like to 400 labels' worth), reliabilities from
    # 1/2 outwards: a pair's score is never above a farther reliability's score by more than
    # the slack of the candidate threshold — what makes the extreme worker's pair a bound
    grid = np.geomspace(0.2, 400.0, 41)
    a, b = (x.ravel().copy() for x in np.meshgrid(grid, grid))
    steps = np.concatenate([np.linspace(0.0, 0.5, 151)[:-1], [0.499999, 0.4999999999]])
    outward = np.sort(steps)[::-1]  # distances below 1/2, from 1/2 outwards
    reliability = np.ascontiguousarray(1.0 - outward if side == "above" else outward)
    scores = _scores_on_grid(a, b, reliability)
    assert np.isfinite(scores).all()
    threshold = np.vectorize(margin_below)(scores)
    assert (np.maximum.accumulate(threshold, axis=1) <= scores).all()
    # and the scores do grow: a surer worker is worth more on an undecided item
    assert scores[:, -1].max() > scores[:, 0].max()


def test_agreeing_label_gives_the_pair_score() -> None:
    # the bound reads one label: the one agreeing with the item's lean (flipped for ρ < 1/2);
    # h(now) − its error is the pair's Opt-KG score, never below it by more than the slack
    grid = np.geomspace(0.2, 400.0, 41)
    a, b = (x.ravel() for x in np.meshgrid(grid, grid))
    a = np.ascontiguousarray(np.concatenate([a, grid, grid * (1 + 1e-9), grid + 0.01]))
    b = np.ascontiguousarray(np.concatenate([b, grid, grid, grid]))
    reliability = np.concatenate([np.linspace(0.0, 1.0, 201), [1e-9, 1 - 1e-9, 0.5 + 1e-12]])
    scores = _scores_on_grid(a, b, reliability)
    moments, now = state_arrays(a, b)
    n_states, n_r = scores.shape
    items = np.repeat(np.arange(n_states), n_r)
    workers = np.tile(np.arange(n_r), n_states)
    after = np.empty(items.shape[0])
    _agreeing_errors(items, workers, items.shape[0], a, b, moments, reliability, after)
    bound = np.array([canonical(x) for x in now[items] - after]).reshape(n_states, n_r)
    threshold = np.vectorize(margin_below)(scores)
    assert (bound >= threshold).all()
    assert (bound == scores).mean() > 0.99  # nearly always the score itself


def test_segment_tree_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    n = 37
    values = np.round(rng.normal(size=n), 1)
    tree = np.full(128, -np.inf)
    tree[64 : 64 + n] = values
    tree_build(tree)
    out = np.empty(64, dtype=np.int64)
    for _ in range(200):
        leaf = int(rng.integers(n))
        values[leaf] = -np.inf if rng.random() < 0.1 else np.round(rng.normal(), 1)
        tree_set(tree, leaf, float(values[leaf]))
        assert tree[1] == values.max()
        threshold = float(np.round(rng.normal(), 1))
        found = tree_at_least(tree, threshold, out)
        assert out[:found].tolist() == np.flatnonzero(values >= threshold).tolist()


def _decisions(policy_id: str, env: ReplayEnvironment, budget: float, seed: int, bounded: bool):
    policy = make_policy(policy_id)
    policy.bounded_push = bounded  # type: ignore[attr-defined]
    return (*run_recorded(policy, env, [budget], seed), policy)


@pytest.mark.parametrize("policy_id", PUSH_POLICIES)
def test_rte_push_replay_same_choices_as_worker_bests(policy_id: str) -> None:
    # the bounded path's labels go through the compiled observe (observe_pushed), the
    # per-worker bests' through the policy's Python observe: same choices, same beliefs
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    seed = 5
    log, accuracy, policy = _decisions(policy_id, env, 1500.0, seed, True)
    assert policy._bounded and policy._push_active
    log_ref, accuracy_ref, reference = _decisions(policy_id, env, 1500.0, seed, False)
    assert (log, accuracy) == (log_ref, accuracy_ref)
    for name in ("a", "b", "c", "d"):
        assert np.array_equal(getattr(policy.posterior_, name), getattr(reference.posterior_, name))
    assert policy._n_log == reference._n_log and policy._n_labeled == reference._n_labeled


def test_compiled_label_update_has_the_scalar_update_bits() -> None:
    # one_coin_label against OneCoinPosterior.update's scalar path, on states from fresh to
    # concentrated, reliabilities on both sides of 1/2, both labels
    rng = np.random.default_rng(11)
    n = 4000
    a = np.exp(rng.uniform(-3.0, 9.0, n))
    b = np.exp(rng.uniform(-3.0, 9.0, n))
    c = np.exp(rng.uniform(-2.0, 8.0, n))
    d = np.exp(rng.uniform(-2.0, 8.0, n))
    a[:5], b[:5] = 1.0, 1.0
    labels = rng.integers(2, size=n)
    for k in range(n):
        want = _one_coin_update_scalar(a[k], b[k], c[k], d[k], int(labels[k]))
        got_a, got_b, got_c, got_d = a.copy(), b.copy(), c.copy(), d.copy()
        one_coin_label(k, k, int(labels[k]), got_a, got_b, got_c, got_d)
        assert (got_a[k], got_b[k], got_c[k], got_d[k]) == want, k


def test_adversarial_workers_same_choices() -> None:
    # a replay whose workers include adversaries (reliability < 1/2): an item's bound is
    # then the larger of its most and least reliable workers' pair scores
    env = adversarial_world(120, 14, 4)
    for policy_id in ("opt-kg:posterior=one-coin", "opt-kg:posterior=one-coin:refit=0"):
        for seed in (0, 1):
            log, acc, _ = _decisions(policy_id, env, 500.0, seed, True)
            assert (log, acc) == _decisions(policy_id, env, 500.0, seed, False)[:2]
