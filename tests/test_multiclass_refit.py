"""``refit=N`` for the categorical worker models (issue 15): every N labels the item and worker
beliefs are re-read from all labels (crowdbudget.posteriors.categorical_workers, "Refit"), the
default of ``opt-kg:posterior=one-coin`` on any number of classes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from crowdbudget.datasets import load_dataset
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies._index import canonical_scores
from crowdbudget.policies.worker_aware_multiclass import (
    CategoricalWorkerKnowledgeGradient,
    OneCoinAnyClassKnowledgeGradient,
    next_refit_at,
)
from crowdbudget.posteriors.base import kg_rewards
from crowdbudget.posteriors.categorical_workers import (
    ConfusionPosterior,
    OneCoinCategoricalPosterior,
    confusion_prior,
)
from crowdbudget.registry import make_policy
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.testing import check_policy
from crowdbudget.types import CampaignState, LabelEvent, Problem


def _random_log(
    rng: np.random.Generator, n: int, n_items: int, n_workers: int, n_classes: int
) -> list[tuple[int, int, int]]:
    return [
        (int(rng.integers(n_items)), int(rng.integers(n_workers)), int(rng.integers(n_classes)))
        for _ in range(n)
    ]


def _reference_one_coin(log, n_items, n_workers, n_classes, rounds=3):  # type: ignore[no-untyped-def]
    """The one-coin refit written label by label: rounds of (items from the uniform prior,
    labels in arrival order, q ∝ q·L with the worker means fixed; workers = Beta(4, 1) +
    Σ q_i(label)), the first round's workers at the prior Beta(4, 1)."""
    c, d = np.full(n_workers, 4.0), np.full(n_workers, 1.0)
    for _ in range(rounds):
        q = np.full((n_items, n_classes), 1.0 / n_classes)
        for i, j, z in log:
            mu = c[j] / (c[j] + d[j])
            lik = np.full(n_classes, (1.0 - mu) / (n_classes - 1))
            lik[z] = mu
            q[i] = q[i] * lik / (q[i] * lik).sum()
        right = np.zeros(n_workers)
        count = np.zeros(n_workers)
        for i, j, z in log:
            right[j] += q[i, z]
            count[j] += 1
        c, d = 4.0 + right, 1.0 + count - right
    return q, c, d


def _reference_confusion(log, n_items, n_workers, n_classes, rounds=3):  # type: ignore[no-untyped-def]
    """The confusion refit label by label: items from the prior with E[π_j] fixed; rows =
    prior + Σ q_i(k) at column l; the first round's workers at the prior."""
    prior = confusion_prior(n_classes)
    alpha = np.broadcast_to(prior, (n_workers, n_classes, n_classes)).copy()
    for _ in range(rounds):
        mean = alpha / alpha.sum(axis=2, keepdims=True)
        q = np.full((n_items, n_classes), 1.0 / n_classes)
        for i, j, z in log:
            q[i] = q[i] * mean[j, :, z] / (q[i] * mean[j, :, z]).sum()
        alpha = np.broadcast_to(prior, alpha.shape).copy()
        for i, j, z in log:
            alpha[j, :, z] += q[i]
    return q, alpha


@pytest.mark.parametrize("n_classes", [2, 3, 4])
def test_one_coin_refit_equals_the_label_by_label_reference(n_classes: int) -> None:
    rng = np.random.default_rng(n_classes)
    n_items, n_workers = 9, 4
    log = _random_log(rng, 40, n_items - 1, n_workers, n_classes)  # item 8 never labelled
    post = OneCoinCategoricalPosterior(np.ones(n_classes), (1.0, 4.0), n_items, n_workers)
    for i, j, z in log:
        post.update(LabelEvent(item=i, worker=j, label=z))
    post.refit(*np.array(log).T)
    q, c, d = _reference_one_coin(log, n_items, n_workers, n_classes)
    np.testing.assert_allclose(post.q, q, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(post.c, c, rtol=1e-12)
    np.testing.assert_allclose(post.d, d, rtol=1e-12)
    assert np.all(post.q[8] == 1.0 / n_classes)  # an unlabelled item stays at the prior exactly


@pytest.mark.parametrize("n_classes", [2, 3])
def test_confusion_refit_equals_the_label_by_label_reference(n_classes: int) -> None:
    rng = np.random.default_rng(10 + n_classes)
    n_items, n_workers = 8, 3
    log = _random_log(rng, 30, n_items, n_workers, n_classes)
    post = ConfusionPosterior(np.ones(n_classes), n_items, n_workers)
    for i, j, z in log:
        post.update(LabelEvent(item=i, worker=j, label=z))
    post.refit(*np.array(log).T)
    q, alpha = _reference_confusion(log, n_items, n_workers, n_classes)
    np.testing.assert_allclose(post.q, q, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(post.alpha, alpha, rtol=1e-12)
    np.testing.assert_allclose(post.confusion_matrices().sum(axis=2), 1.0)


def _lucky_start(refit: int) -> tuple[CategoricalWorkerKnowledgeGradient, CampaignState]:
    """Three classes, 20 items, three workers. Worker 0 answers items 0–9 first (each item
    fresh, so the online update credits every answer as probably right); then workers 1 and 2
    both answer class 1 on those items, where worker 0 said class 0. Two agreeing workers
    against one: worker 0 is the bad one."""
    problem = Problem(n_items=20, budget=60, n_workers=3, n_classes=3)
    policy = CategoricalWorkerKnowledgeGradient("one-coin", tie_break="random", refit=refit)
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState(
        problem,
        label_counts=np.zeros((20, 3), dtype=np.int64),
        pending=np.zeros(20, dtype=np.int64),
        eligible=np.ones(20, dtype=bool),
    )
    assert policy.select(state) is not None  # scores built before the labels arrive
    for worker, label in ((0, 0), (1, 1), (2, 1)):
        for item in range(10):
            policy.observe(LabelEvent(item=item, worker=worker, label=label))
    return policy, state


def test_refit_does_not_lock_in_on_a_lucky_start() -> None:
    """The paper's sequential rule (refit=0) keeps believing the worker who answered first
    and sends it the next fresh item; refit=30 (one refit after the 30 labels) sees that two
    workers agree against it, and chooses one of them."""
    locked, state = _lucky_start(refit=0)
    rho = locked.posterior_.worker_reliability()
    assert rho[0] > max(rho[1], rho[2])  # the lucky start: the bad worker believed best
    chosen = locked.select(state)
    assert chosen is not None and chosen.worker == 0 and chosen.item >= 10
    refit, state = _lucky_start(refit=30)
    rho = refit.posterior_.worker_reliability()
    assert rho[0] < 0.5 < min(rho[1], rho[2])
    assert np.all(refit.posterior_.predict()[:10] == 1)
    for _ in range(5):  # whatever the tie draw, never the bad worker
        chosen = refit.select(state)
        assert chosen is not None and chosen.worker != 0


def test_registry_default_refits_on_every_number_of_classes() -> None:
    policy = make_policy("opt-kg:posterior=one-coin")
    policy.reset(Problem(n_items=4, budget=8, n_classes=3, n_workers=3), np.random.default_rng(0))
    assert policy.multiclass_ is not None and policy.multiclass_.refit == 10  # type: ignore[attr-defined]
    paper = make_policy("opt-kg:posterior=one-coin:refit=0")
    paper.reset(Problem(n_items=4, budget=8, n_classes=3, n_workers=3), np.random.default_rng(0))
    assert paper.multiclass_.refit == 0  # type: ignore[attr-defined]
    assert make_policy("opt-kg:posterior=confusion:refit=5").refit == 5  # type: ignore[attr-defined]
    assert make_policy("opt-kg:posterior=confusion").refit == 0  # type: ignore[attr-defined]
    with pytest.raises(InvalidParameterError, match="refit must be"):
        CategoricalWorkerKnowledgeGradient(refit=-1).reset(
            Problem(n_items=4, budget=8, n_classes=3, n_workers=3), np.random.default_rng(0)
        )


@pytest.mark.parametrize(
    "policy_id", ["kg:posterior=one-coin:refit=3", "opt-kg:posterior=confusion:refit=4"]
)
def test_refit_policies_pass_the_conformance_kit(policy_id: str) -> None:
    check_policy(policy_id)


@pytest.mark.parametrize("model", ["one-coin", "confusion"])
def test_push_choice_after_refits_is_a_best_pair_from_scratch(model: str) -> None:
    """After every refit the per-worker bests, the shared scores of the workers still at the
    prior and the dropped pairs agree with scoring every usable pair from scratch."""
    env = ReplayEnvironment.from_label_data(load_dataset("wsd"))
    policy = CategoricalWorkerKnowledgeGradient(model, tie_break="random", refit=7)
    select = policy.select
    checked = []

    def checking(state: object, *, worker: int | None = None) -> object:
        assignment = select(state, worker=worker)  # type: ignore[arg-type]
        if assignment is None:
            return None
        pairs = np.arange(policy._pair_items.shape[0])
        usable = pairs[policy._usable(state, pairs)]  # type: ignore[arg-type]
        fresh = policy._score_pairs(usable)
        chosen = int(
            np.flatnonzero(
                (policy._pair_items[usable] == assignment.item)
                & (policy._pair_workers[usable] == assignment.worker)
            )[0]
        )
        assert fresh[chosen] == fresh.max()
        np.testing.assert_array_equal(policy._scores[usable], fresh)
        checked.append(fresh[chosen])
        return assignment

    policy.select = checking  # type: ignore[method-assign,assignment]
    run_campaign(policy, env, [300.0], world_seed=0, policy_rng=np.random.default_rng(0))
    assert len(checked) == 300


def test_refit_lowers_the_spread_over_replays_on_a_synthetic_world() -> None:
    """A three-class world of 60 items with one spammer (uniformly random answers) and two
    good workers (right with probability 0.85), every worker having answered every item; 12
    replays at 2 labels per item. The paper's rule (refit=0) lets a worker's lucky start on
    fresh items carry it; refit=10 does not: fewer labels bought from the spammer, higher
    accuracy in the mean and in the worst replay, smaller spread (measured: share 0.203 vs
    0.169, accuracy 0.869 ± 0.044 (worst 0.750) vs 0.911 ± 0.020 (worst 0.883)). Seeded,
    so deterministic."""
    rng = np.random.default_rng(3)
    n_items, n_classes = 60, 3
    accuracy_of = np.array([1.0 / 3.0, 0.85, 0.85])
    truth = rng.integers(n_classes, size=n_items)
    items = np.repeat(np.arange(n_items), 3)
    workers = np.tile(np.arange(3), n_items)
    right = rng.random(items.shape[0]) < accuracy_of[workers]
    wrong = (truth[items] + rng.integers(1, n_classes, size=items.shape[0])) % n_classes
    labels = np.where(right, truth[items], wrong)
    env = ReplayEnvironment(items, workers, labels, truth, n_classes=n_classes)
    results = {}
    for refit in (0, 10):
        share, accuracy = [], []
        for seed in range(12):
            policy = CategoricalWorkerKnowledgeGradient("one-coin", tie_break="random", refit=refit)
            asked: list[int] = []
            select = policy.select

            def recording(
                state: object,
                *,
                worker: int | None = None,
                _s: Any = select,
                _a: list[int] = asked,
            ) -> object:
                assignment = _s(state, worker=worker)
                if assignment is not None:
                    _a.append(assignment.worker)
                return assignment

            policy.select = recording  # type: ignore[method-assign,assignment]
            rows = run_campaign(
                policy, env, [120.0], world_seed=seed, policy_rng=np.random.default_rng(seed)
            )
            share.append(np.mean(np.array(asked) == 0))
            accuracy.append(rows[-1]["accuracy"])
        results[refit] = (np.array(share), np.array(accuracy))
    share0, acc0 = results[0]
    share10, acc10 = results[10]
    assert share10.mean() < share0.mean(), (share0, share10)
    assert acc10.mean() > acc0.mean() + 0.02, (acc0, acc10)
    assert acc10.std() < acc0.std(), (acc0, acc10)
    assert acc10.min() > acc0.min(), (acc0, acc10)


def _refit_points_and_choices(
    refit: int, refit_growth: float | None, budget: float
) -> tuple[list[int], list[tuple[int, int]]]:
    """One wsd replay (three classes): the label counts at which the posterior was refitted
    and the (item, worker) pairs chosen, in order. ``refit_growth`` None: the argument left
    at its default."""
    env = ReplayEnvironment.from_label_data(load_dataset("wsd"))
    if refit_growth is None:
        policy = CategoricalWorkerKnowledgeGradient("one-coin", tie_break="random", refit=refit)
    else:
        policy = CategoricalWorkerKnowledgeGradient(
            "one-coin", tie_break="random", refit=refit, refit_growth=refit_growth
        )
    points: list[int] = []
    choices: list[tuple[int, int]] = []
    refit_beliefs = policy._refit_beliefs
    select = policy.select

    def counting() -> None:
        points.append(policy._n_log)
        refit_beliefs()

    def recording(state: object, *, worker: int | None = None) -> object:
        assignment = select(state, worker=worker)  # type: ignore[arg-type]
        if assignment is not None:
            assert assignment.worker is not None
            choices.append((assignment.item, assignment.worker))
        return assignment

    policy._refit_beliefs = counting  # type: ignore[method-assign]
    policy.select = recording  # type: ignore[method-assign,assignment]
    run_campaign(policy, env, [budget], world_seed=0, policy_rng=np.random.default_rng(0))
    return points, choices


def test_growing_refit_schedule() -> None:
    """After a refit at n labels the next is at n + max(refit, ⌈growth · n⌉): every 10 labels
    up to 200 (0.05 · 200 = 10), then 210, 221 (⌈10.5⌉ = 11), 233 (⌈11.05⌉ = 12), ..."""
    points, _ = _refit_points_and_choices(10, 0.05, 400.0)
    expected = [*range(10, 210, 10), 210, 221, 233, 245, 258, 271, 285, 300, 315, 331]
    expected += [348, 366, 385]
    assert points == expected
    assert next_refit_at(200, 10, 0.05) == 210
    assert next_refit_at(210, 10, 0.05) == 221
    assert next_refit_at(1000, 10, 0.0) == 1010
    assert next_refit_at(1000, 10, 0.5) == 1500


def test_growth_zero_is_the_fixed_interval_with_the_same_decisions() -> None:
    """refit_growth=0 refits at every multiple of refit and decides as the policy without the
    argument; a growing schedule decides the same until its first refit that differs."""
    fixed, chose_fixed = _refit_points_and_choices(7, 0.0, 300.0)
    assert fixed == list(range(7, 301, 7))
    default, chose_default = _refit_points_and_choices(7, None, 300.0)
    assert default == fixed and chose_default == chose_fixed
    grown, chose_grown = _refit_points_and_choices(7, 0.1, 300.0)
    # 7, 14, ..., 70, then 70 + max(7, ⌈7.0⌉) = 77 (shared), then 77 + ⌈7.7⌉ = 85 (fixed: 84)
    assert grown[:12] == [*fixed[:11], 85] and grown[12] == 85 + 9
    # the first 84 choices come before the first refit the two schedules do not share
    assert chose_grown[:84] == chose_fixed[:84]
    assert chose_grown != chose_fixed


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "0.05", True, None])
def test_refit_growth_is_validated(bad: object) -> None:
    policy = CategoricalWorkerKnowledgeGradient("one-coin", refit=10, refit_growth=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="refit_growth must be a finite number"):
        policy.reset(
            Problem(n_items=4, budget=8, n_classes=3, n_workers=3), np.random.default_rng(0)
        )


def test_any_class_one_coin_passes_refit_growth_to_its_delegate() -> None:
    policy = OneCoinAnyClassKnowledgeGradient(refit=10)
    policy.refit_growth = 0.05  # the parent's argument (worker_aware.OneCoinKnowledgeGradient)
    policy.reset(Problem(n_items=4, budget=8, n_classes=3, n_workers=3), np.random.default_rng(0))
    assert policy.multiclass_ is not None and policy.multiclass_.refit_growth == 0.05


def _lookahead_best(post: OneCoinCategoricalPosterior, workers: np.ndarray, items: np.ndarray):  # type: ignore[no-untyped-def]
    return post.lookahead(workers, items=items).class_probabilities.max(axis=-1)


@pytest.mark.parametrize("n_classes", [2, 3, 4, 5, 7, 8, 9])
def test_one_coin_best_after_is_the_lookahead_bit_for_bit(n_classes: int) -> None:
    """The Opt-KG fast path (max_k q'_l(k) without the (n, K, K) look-ahead) gives the same
    floats as the look-ahead: random beliefs spanning 16 orders of magnitude, peaked and
    flat items, reliabilities from near 0 to near 1 (K ≥ 8 takes the look-ahead itself)."""
    rng = np.random.default_rng(n_classes)
    n_items, n_workers = 4000, 50
    post = OneCoinCategoricalPosterior(np.ones(n_classes), (1.0, 4.0), n_items, n_workers)
    raw = rng.random((n_items, n_classes)) * 10.0 ** rng.integers(-16, 1, (n_items, n_classes))
    raw[:100] = 1.0  # flat items (ties between labels)
    post.q = raw / raw.sum(axis=1, keepdims=True)
    post.c = rng.uniform(0.01, 500.0, n_workers)
    post.d = rng.uniform(0.01, 500.0, n_workers)
    items = rng.integers(n_items, size=20000)
    workers = rng.integers(n_workers, size=20000)
    fast = post.best_after(workers, items)
    np.testing.assert_array_equal(fast, _lookahead_best(post, workers, items))


def test_one_coin_opt_kg_scores_equal_the_lookahead_scores_on_adult() -> None:
    """At several points of an adult replay (after refits and online updates) every live
    pair's Opt-KG score from the fast path equals the score from the full look-ahead."""
    env = ReplayEnvironment.from_label_data(load_dataset("adult"))
    policy = CategoricalWorkerKnowledgeGradient(
        "one-coin", tie_break="random", refit=10, refit_growth=0.5
    )
    for budget in (25.0, 1500.0):
        run_campaign(policy, env, [budget], world_seed=0, policy_rng=np.random.default_rng(0))
        post = policy.posterior_
        assert isinstance(post, OneCoinCategoricalPosterior)
        pairs = np.flatnonzero(policy._scores > -np.inf)
        items = policy._pair_items[pairs]
        workers = policy._pair_workers[pairs]
        look = post.lookahead(workers, items=items)
        rewards = kg_rewards(look, policy._item_error[items])
        rewards = np.where(np.abs(rewards) < 1e-12, 0.0, rewards)
        expected = canonical_scores(rewards.max(axis=1))
        np.testing.assert_array_equal(policy._score_pairs(pairs), expected)
        np.testing.assert_array_equal(policy._scores[pairs], expected)
