"""Issue 21: the compiled scoring of the one-coin fast path (policies/_one_coin_kernel.py)
gives the bits of the NumPy path it replaces — canonical rounding, the items' errors, and
every pair's Opt-KG and KG score — on states with exact ties and mirrored states."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.policies._index import canonical_scores
from crowdbudget.policies._one_coin_kernel import (
    canonical,
    choose_for_worker,
    fill_moments,
    item_errors,
    number_states,
    rescore_pairs,
)
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.registry import make_policy
from crowdbudget.types import Problem
from kernel_loops import state_arrays


def _same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return bool(np.array_equal(np.asarray(x).view(np.int64), np.asarray(y).view(np.int64)))


def test_canonical_rounds_every_value_as_canonical_scores() -> None:
    rng = np.random.default_rng(0)
    halves = (rng.integers(0, 2**40, 2000) + 0.5) / 2.0**40  # mantissas exactly on a half
    values = np.concatenate(
        [
            rng.normal(0, 1, 20_000),
            rng.normal(0, 1e-300, 500),  # subnormals
            halves,
            -halves,
            [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1.5, 2.5, 1e308],
        ]
    )
    compiled = np.array([canonical(v) for v in values])
    assert _same_bits(compiled, canonical_scores(values))


def _states(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Item Betas with repeats, mirrored pairs and exact ties (a = b)."""
    a = rng.uniform(0.3, 40.0, n)
    b = rng.uniform(0.3, 40.0, n)
    a[: n // 5], b[: n // 5] = 1.0, 1.0  # the prior, shared
    a[n // 5 : n // 4] = b[n // 5 : n // 4]  # a = b
    a[n // 4 : n // 3], b[n // 4 : n // 3] = (
        b[n // 3 : n // 3 + (n // 3 - n // 4)],
        a[n // 3 : n // 3 + (n // 3 - n // 4)],
    )  # mirrored copies of later items
    return a, b


@pytest.mark.parametrize("high", [40.0, 3.0])  # 3: most states in the table kernel's region
def test_item_errors_are_error_probability_at_one_half(high: float) -> None:
    a, b = _states(np.random.default_rng(1), 3000)
    a, b = a * (high / 40.0), b * (high / 40.0)
    out = np.empty(a.shape[0])
    evaluated = item_errors(a, b, out)
    # the table kernel of I_{1/2}: error_probability's table=True, not SciPy's bits
    assert _same_bits(out, error_probability(a, b, 0.5, table=True))
    if high < 40.0:
        assert not _same_bits(out, error_probability(a, b, 0.5))
    assert evaluated < a.shape[0]  # the shared and mirrored states were evaluated once


@pytest.mark.parametrize("policy_id", ["opt-kg:posterior=one-coin", "kg:posterior=one-coin"])
def test_every_pair_score_is_the_numpy_fused_score(policy_id: str) -> None:
    # a policy in a random state: its NumPy look-ahead (_score_fused) is the reference
    rng = np.random.default_rng(2)
    n_items, n_workers = 400, 30
    policy = make_policy(policy_id)
    problem = Problem(n_items=n_items, budget=10, n_workers=n_workers)
    policy.reset(problem, np.random.default_rng(0))
    post = policy.posterior_
    post.a, post.b = _states(rng, n_items)
    post.c = rng.uniform(0.5, 30.0, n_workers)
    post.d = rng.uniform(0.5, 30.0, n_workers)
    post.c[:10], post.d[:10] = 4.0, 1.0  # workers sharing the prior's reliability
    policy._pair_items = np.repeat(np.arange(n_items, dtype=np.int64), n_workers)
    policy._pair_workers = np.tile(np.arange(n_workers, dtype=np.int64), n_items)
    policy._item_error = error_probability(post.a, post.b, 0.5, table=True)
    policy._prepare_fused()
    moments = policy._moments.copy()
    # fill_moments gave _prepare_fused its moments; the NumPy formula gives the same bits
    for k, (ta, tb) in enumerate(((post.b, post.a), (post.a, post.b))):
        from crowdbudget.policies._worker_aware_fast import _orientation_moments

        assert _same_bits(moments[:, k], np.column_stack(_orientation_moments(ta, tb)))
    pairs = rng.permutation(n_items * n_workers)[: n_items * n_workers // 2].astype(np.int64)
    expected = policy._score_fused(pairs)
    scores = np.full(n_items * n_workers, -7.0)
    evaluated = rescore_pairs(
        pairs,
        policy._pair_items,
        policy._pair_workers,
        post.a,
        post.b,
        moments,
        policy._reliability,
        policy._item_error,
        policy.optimistic,
        scores,
    )
    assert _same_bits(scores[pairs], expected)
    untouched = np.setdiff1d(np.arange(n_items * n_workers), pairs)
    assert np.all(scores[untouched] == -7.0)
    assert 0 < evaluated < 2 * pairs.shape[0]  # shared keys evaluated once
    # and a fresh moments table filled by the kernel is the same as _prepare_fused's
    again = np.empty_like(moments)
    fill_moments(post.a, post.b, again)
    assert _same_bits(again, moments)


def test_the_compiled_refit_rounds_give_the_numpy_rounds_bits() -> None:
    # reference=True re-reads the log with one_coin_update rank by rank (the NumPy path);
    # the default runs reestimate() over the log in arrival order: the same Betas, bit for bit
    rng = np.random.default_rng(4)
    n_items, n_workers, n_labels = 300, 25, 2000
    log = np.column_stack(
        [
            rng.integers(0, n_items, n_labels),
            rng.integers(0, n_workers, n_labels),
            rng.integers(0, 2, n_labels),
        ]
    ).astype(np.int64)
    beliefs = []
    for reference in (True, False):
        policy = make_policy("opt-kg:posterior=one-coin")
        policy.reference = reference
        problem = Problem(n_items=n_items, budget=n_labels, n_workers=n_workers)
        policy.reset(problem, np.random.default_rng(0))
        policy._log, policy._n_log = log.copy(), n_labels
        policy._reestimate_beliefs(3)
        post = policy.posterior_
        beliefs.append([np.asarray(x, dtype=float) for x in (post.a, post.b, post.c, post.d)])
    for numpy_rounds, compiled in zip(*beliefs, strict=True):
        assert _same_bits(compiled, numpy_rounds)
    assert not np.all(beliefs[1][0] == 1.0)  # the items did move


@pytest.mark.parametrize("optimistic", [True, False])
@pytest.mark.parametrize("grid", [True, False])
def test_choose_for_worker_is_the_masked_scan_of_rescored_pairs(
    optimistic: bool, grid: bool
) -> None:
    # one worker's pairs: the compiled pull decision scores them as rescore_pairs does (one
    # score per state number) and ties as the masked scan np.flatnonzero(masked == max) over
    # the askable pairs; a full grid (pair = item * n_workers + worker) or a replay's pairs
    rng = np.random.default_rng(6)
    n_items, n_workers, worker = 600, 3, 1
    a, b = _states(rng, n_items)
    a[: n_items // 5 : 2], b[: n_items // 5 : 2] = 2.0, 1.0  # a second shared state
    moments, errors = state_arrays(a, b)
    state_ids = np.empty(n_items, dtype=np.int64)
    n_states = number_states(np.arange(n_items, dtype=np.int64), a, b, state_ids, 0)
    assert n_states <= n_items - n_items // 5 + 2  # the two shared states, one number each
    pair_items = np.repeat(np.arange(n_items, dtype=np.int64), n_workers)
    pair_workers = np.tile(np.arange(n_workers, dtype=np.int64), n_items)
    if grid:
        remaining = np.empty(0, dtype=np.int64)
    else:  # a replay: some items lack the worker's pair, some pairs are used up
        keep = rng.random(pair_items.shape[0]) < 0.8
        pair_items, pair_workers = pair_items[keep], pair_workers[keep]
        remaining = rng.integers(0, 3, pair_items.shape[0]).astype(np.int64)
    reliability = np.array([0.7, 0.83, 0.6])
    pairs = np.flatnonzero(pair_workers == worker).astype(np.int64)
    expected = np.full(pair_items.shape[0], -5.0)
    rescore_pairs(
        pairs, pair_items, pair_workers, a, b, moments, reliability, errors, optimistic, expected
    )
    for open_items in (rng.random(n_items) < 0.7, np.arange(n_items) < n_items // 5):
        tied = np.empty(pairs.shape[0], dtype=np.int64)
        n_open, n_tied, best = choose_for_worker(
            pairs,
            pair_items,
            grid,
            state_ids,
            n_states,
            moments,
            float(reliability[worker]),
            errors,
            optimistic,
            remaining,
            open_items,
            tied,
        )
        askable = open_items[pair_items[pairs]]
        if not grid:
            askable &= remaining[pairs] > 0
        masked = np.where(askable, expected[pairs], -np.inf)
        assert n_open == np.count_nonzero(askable)
        assert best == masked.max()
        assert pairs[tied[:n_tied]].tolist() == pairs[np.flatnonzero(masked == best)].tolist()
    assert n_tied > 1  # the second case: only shared states are askable, so they tie


def test_a_refit_refreshes_what_a_full_pass_gives() -> None:
    # after a refit only the labeled items' moments, errors and state numbers are recomputed;
    # the rest must be what a full pass over every item gives, bit for bit
    from crowdbudget.datasets import load_dataset
    from crowdbudget.experiments.runner import run_campaign
    from crowdbudget.simulation.replay import ReplayEnvironment

    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    policy = make_policy("opt-kg:posterior=one-coin")
    run_campaign(
        policy, env, [400.0], world_seed=0, policy_rng=np.random.default_rng(0), mode="pull"
    )
    assert policy._last_refit == 400 and policy._n_labeled < env.n_items
    post = policy.posterior_
    moments, errors = state_arrays(post.a, post.b)
    assert _same_bits(policy._moments, moments)
    assert _same_bits(policy._item_error, errors)
    ids = policy._state_ids
    for number in np.unique(ids):
        members = np.flatnonzero(ids == number)
        assert np.all(post.a[members] == post.a[members[0]])
        assert np.all(post.b[members] == post.b[members[0]])
