"""The KG family parametrised by a posterior (DESIGN §11, issue 16 step 6) and the fast
worker-aware scoring of issue 21: every number the policies decide on is the one of the direct
formulas, bit for bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies import builtin
from crowdbudget.policies._index import canonical_scores
from crowdbudget.posteriors.base import LabelPosterior, kg_rewards
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.posteriors.one_coin import (
    OneCoinPosterior,
    _one_coin_update_scalar,
    one_coin_rewards,
    one_coin_update,
)
from crowdbudget.posteriors.two_coin import (
    TwoCoinPosterior,
    _two_coin_update_scalar,
    two_coin_rewards,
    two_coin_update,
)
from crowdbudget.registry import make_policy
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.simulation.workers import WorkerPrior


def _params(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    return [rng.gamma(1.0, 5.0, n) + 1e-3 for _ in range(6)]


def test_scalar_updates_are_the_array_updates_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    a, b, c, d, c2, d2 = _params(rng, 3000)
    z = rng.integers(0, 2, 3000)
    one = one_coin_update(a, b, c, d, z)
    two = two_coin_update(a, b, c, d, c2, d2, z)
    for k in range(3000):
        args = (float(a[k]), float(b[k]), float(c[k]), float(d[k]))
        assert _one_coin_update_scalar(*args, int(z[k])) == tuple(float(x[k]) for x in one[:4])
        got = _two_coin_update_scalar(*args, float(c2[k]), float(d2[k]), int(z[k]))
        assert got == tuple(float(x[k]) for x in two[:6])


@pytest.mark.parametrize("thresholds", ["default", "0.7", "mixed"])
def test_lookahead_gives_the_direct_rewards_bit_for_bit(thresholds: str) -> None:
    rng = np.random.default_rng(1)
    n_items, n_workers = 200, 30
    th = {
        "default": None,
        "0.7": np.full(n_items, 0.7),
        "mixed": np.where(rng.random(n_items) < 0.5, 0.5, 0.3),
    }[thresholds]
    one = OneCoinPosterior((1, 1), (1, 4), n_items, n_workers, th)
    two = TwoCoinPosterior((1, 1), (1, 4), n_items, n_workers, th)
    a, b, c, d, c2, d2 = _params(rng, max(n_items, n_workers))
    one.a, one.b, one.c, one.d = a[:n_items], b[:n_items], c[:n_workers], d[:n_workers]
    two.a, two.b = one.a, one.b
    two.c1, two.d1, two.c2, two.d2 = one.c, one.d, c2[:n_workers], d2[:n_workers]
    i = rng.integers(0, n_items, 400)
    j = rng.integers(0, n_workers, 400)
    now = error_probability(one.a[i], one.b[i], one.thresholds[i])
    look = one.lookahead(j, items=i)
    r1, r0, p1 = one_coin_rewards(one.a[i], one.b[i], one.c[j], one.d[j], one.thresholds[i], now)
    rewards = kg_rewards(look, now)
    assert np.array_equal(rewards[:, 1], r1) and np.array_equal(rewards[:, 0], r0)
    assert np.array_equal(look.label_probabilities[:, 1], p1)
    assert np.array_equal(look.label_probabilities[:, 0], 1.0 - p1)
    # the class probabilities say the same as error_after
    accuracy = look.class_probabilities.max(axis=-1)
    np.testing.assert_allclose(1.0 - accuracy, look.error_after, atol=1e-12)
    # with the table kernel of I_{1/2} (the worker-aware one-coin policies' scoring) likewise
    one.half_table = True
    now_table = error_probability(one.a[i], one.b[i], one.thresholds[i], table=True)
    table_rewards = kg_rewards(one.lookahead(j, items=i), now_table)
    args = (one.a[i], one.b[i], one.c[j], one.d[j], one.thresholds[i], now_table)
    t1, t0, _ = one_coin_rewards(*args, table=True)
    assert np.array_equal(table_rewards[:, 1], t1) and np.array_equal(table_rewards[:, 0], t0)
    one.half_table = False
    look = two.lookahead(j, items=i)
    r1, r0, p1 = two_coin_rewards(
        two.a[i], two.b[i], two.c1[j], two.d1[j], two.c2[j], two.d2[j], two.thresholds[i], now
    )
    rewards = kg_rewards(look, now)
    assert np.array_equal(rewards[:, 1], r1) and np.array_equal(rewards[:, 0], r0)
    assert np.array_equal(look.label_probabilities[:, 1], p1)


def test_posteriors_meet_the_protocol_and_a_noiseless_lookahead() -> None:
    for post in (OneCoinPosterior((1, 1), (1, 4), 5, 3), TwoCoinPosterior((1, 1), (1, 4), 5, 3)):
        assert isinstance(post, LabelPosterior)
        look = post.lookahead()  # every item, a worker who never errs: Beta(a+1, b) / (a, b+1)
        assert look.class_probabilities.shape == (5, 2, 2)
        np.testing.assert_allclose(look.error_after, 0.25, rtol=1e-9)  # Beta(2, 1): P(θ<½)
        one_worker = post.lookahead(1)
        assert one_worker.label_probabilities.shape == (5, 2)


@pytest.mark.parametrize("policy_id", ["opt-kg:posterior=one-coin", "kg:posterior=two-coin"])
def test_incremental_scores_equal_a_full_rescoring(policy_id: str) -> None:
    """After 150 labels every pair's kept score is the direct formula's on today's beliefs
    (unlabeled items scored once per worker, only changed pairs rescored)."""
    policy = make_policy(policy_id)
    env = SyntheticBernoulliEnvironment(40, workers=WorkerPrior(6))
    run_campaign(
        policy,
        env,
        [150.0],
        world_seed=np.random.SeedSequence(0),
        policy_rng=np.random.default_rng(1),
    )
    post = policy.posterior_
    i, j = policy._pair_items, policy._pair_workers
    # the one-coin policy scores with the table kernel of I_{1/2} (OneCoinPosterior.half_table)
    table = isinstance(post, OneCoinPosterior)
    now = error_probability(post.a, post.b, post.thresholds, table=table)
    if isinstance(post, OneCoinPosterior):
        args = (post.a[i], post.b[i], post.c[j], post.d[j], 0.5, now[i])
        r1, r0, p1 = one_coin_rewards(*args, table=True)
    else:
        r1, r0, p1 = two_coin_rewards(
            post.a[i], post.b[i], post.c1[j], post.d1[j], post.c2[j], post.d2[j], 0.5, now[i]
        )
    expected = canonical_scores(
        np.maximum(r1, r0) if policy.optimistic else p1 * r1 + (1.0 - p1) * r0
    )
    if getattr(policy, "_lazy", False):
        # lazy worker rescoring: the workers not flagged stale are exact now, the others once
        # a choice reads them (flushed here as the next choice would)
        current = ~policy._stale[j]
        assert np.array_equal(policy._scores[current], expected[current])
        policy._flush(None)
    assert np.array_equal(policy._scores, expected)


def _steps(policy_id: str) -> list[tuple[int, int]]:
    env = SyntheticBernoulliEnvironment(30, workers=WorkerPrior(5))
    policy = make_policy(policy_id)
    steps: list[tuple[int, int]] = []
    original = policy.observe

    def observe(event):  # type: ignore[no-untyped-def]
        steps.append((event.item, event.worker))
        original(event)

    policy.observe = observe  # type: ignore[method-assign]
    run_campaign(
        policy,
        env,
        [90.0],
        world_seed=np.random.SeedSequence(3),
        policy_rng=np.random.default_rng(4),
    )
    return steps


def test_old_workers_spelling_is_an_alias_printed_once() -> None:
    builtin._OLD_SPELLING_NOTICES.discard("one-coin")
    with pytest.warns(FutureWarning, match="write posterior=one-coin"):
        old = make_policy("opt-kg:workers=one-coin:worker-prior=3;1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = make_policy("kg:workers=one-coin")  # reported once per process
        new = make_policy("opt-kg:posterior=one-coin:worker-prior=3;1")
    assert repr(old) == repr(new) and not again.optimistic
    assert _steps("opt-kg:workers=one-coin") == _steps("opt-kg:posterior=one-coin")
    with pytest.raises(Exception, match="not both"):
        make_policy("opt-kg:workers=one-coin:posterior=one-coin")


def test_cvar_kg_takes_a_posterior_and_spans_kg_to_opt_kg() -> None:
    spec_caps = make_policy("cvar-kg:posterior=two-coin:alpha=0.3")
    assert spec_caps.chooses_workers and spec_caps.alpha == 0.3
    # α = 1 is KG bit for bit (the CVaR correction is exactly 0)
    assert _steps("cvar-kg:posterior=one-coin:alpha=1:tie-break=first") == _steps(
        "kg:posterior=one-coin:tie-break=first"
    )
    assert (
        repr(make_policy("cvar-kg:alpha=0.3"))
        == "CVaRKnowledgeGradient(alpha=0.3, tie_break='random')"
    )
