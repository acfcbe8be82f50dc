"""Worker-aware allocation for any number of classes (issue 15): the categorical one-coin and
confusion-matrix posteriors (crowdbudget.posteriors.categorical_workers) and KG / Opt-KG /
CVaR-KG over (item, worker) pairs on them (crowdbudget.policies.worker_aware_multiclass)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from crowdbudget.datasets import load_dataset
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.worker_aware import OneCoinKnowledgeGradient
from crowdbudget.policies.worker_aware_multiclass import (
    CategoricalWorkerKnowledgeGradient,
    OneCoinAnyClassKnowledgeGradient,
    tail_mean,
)
from crowdbudget.posteriors.categorical_workers import (
    ConfusionPosterior,
    OneCoinCategoricalPosterior,
    confusion_prior,
    one_coin_categorical_update,
)
from crowdbudget.registry import make_policy, parse_policy
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.simulation.workers import WorkerPrior
from crowdbudget.testing import check_policy
from crowdbudget.testing.checks import _drive
from crowdbudget.testing.posterior_checks import check_posterior
from crowdbudget.types import LabelEvent, Problem

# ---- brute force over ρ ------------------------------------------------------------------------

_X, _W = np.polynomial.legendre.leggauss(400)
_RHO = (_X + 1.0) / 2.0
_RHO_W = _W / 2.0


def _likelihood(rho: np.ndarray, label: int, n_classes: int) -> np.ndarray:
    """P(label | class k, ρ), shape (len(rho), K)."""
    lik = np.repeat(((1.0 - rho) / (n_classes - 1))[:, None], n_classes, axis=1)
    lik[:, label] = rho
    return lik


def _exact_one_label(q: np.ndarray, c: float, d: float, label: int) -> tuple[np.ndarray, ...]:
    """The exact posterior after one label, by quadrature over ρ: the item marginal and the
    mean and variance of ρ."""
    dens = stats.beta.pdf(_RHO, c, d) * _RHO_W  # (R,)
    joint = dens[:, None] * q[None, :] * _likelihood(_RHO, label, q.shape[0])  # (R, K)
    z = joint.sum()
    item = joint.sum(axis=0) / z
    rho = joint.sum(axis=1) / z
    mean = float(rho @ _RHO)
    var = float(rho @ (_RHO - mean) ** 2)
    return item, np.array([mean, var]), np.array([z])


def _beta_moments(c: float, d: float) -> np.ndarray:
    return np.array([c / (c + d), c * d / ((c + d) ** 2 * (c + d + 1.0))])


@pytest.mark.parametrize("n_classes", [2, 3, 4])
@pytest.mark.parametrize(("c", "d"), [(4.0, 1.0), (2.5, 3.0), (30.0, 4.0)])
def test_one_label_matches_numerical_integration_over_rho(
    n_classes: int, c: float, d: float
) -> None:
    rng = np.random.default_rng(n_classes)
    for _ in range(5):
        q = rng.dirichlet(np.ones(n_classes))
        label = int(rng.integers(n_classes))
        item, rho, z = _exact_one_label(q, c, d, label)
        q2, c2, d2, p = one_coin_categorical_update(q, c, d, label)
        # the item update is exact (ρ integrated out), the worker Beta matches two moments
        np.testing.assert_allclose(q2, item, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(p, z[0], rtol=1e-10)
        np.testing.assert_allclose(_beta_moments(c2, d2), rho, rtol=1e-9, atol=1e-14)


def test_a_few_labels_match_numerical_integration() -> None:
    """One item, three labels from three different workers: the item posterior is the exact
    one (each worker integrated out on a grid); then one worker labelling three fresh items:
    each step is the moment match of the exact one-step posterior, and the result is close to
    the exact posterior of ρ given all three labels."""
    n_classes, prior = 3, (1.0, 4.0)
    post = OneCoinCategoricalPosterior(np.ones(n_classes), prior, 4, 4)
    workers_c = [(4.0, 1.0), (2.0, 2.0), (6.0, 1.5)]
    for j, (c, d) in enumerate(workers_c):
        post.c[j], post.d[j] = c, d
    labels = [0, 0, 2]
    for j, label in enumerate(labels):
        post.update(LabelEvent(item=0, worker=j, label=label))
    # exact: q(k) ∝ Π_j ∫ Beta(ρ_j) P(l_j | k, ρ_j) dρ_j (a 3-D integral, separable by
    # independence — each factor by quadrature)
    exact = np.ones(n_classes) / n_classes
    for (c, d), label in zip(workers_c, labels, strict=True):
        dens = stats.beta.pdf(_RHO, c, d) * _RHO_W
        exact = exact * (dens @ _likelihood(_RHO, label, n_classes))
    exact /= exact.sum()
    np.testing.assert_allclose(post.q[0], exact, rtol=1e-6)  # quadrature error of d = 1.5

    # one worker (index 3, Beta(4, 1)), three items with different beliefs
    beliefs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.34, 0.33, 0.33]])
    post.q[1:4] = beliefs
    seen = [(1, 0), (2, 1), (3, 2)]
    c, d = 4.0, 1.0
    for item, label in seen:
        # step: the moment match of the exact posterior of this label given the current Beta
        _, rho, _ = _exact_one_label(post.q[item].copy(), c, d, label)
        post.update(LabelEvent(item=item, worker=3, label=label))
        c, d = float(post.c[3]), float(post.d[3])
        # (quadrature of a Beta with non-integer d: about 1e-7 relative)
        np.testing.assert_allclose(_beta_moments(c, d), rho, rtol=1e-6)
    # the exact posterior of ρ after the three labels, against the ADF Beta
    dens = stats.beta.pdf(_RHO, 4.0, 1.0) * _RHO_W
    for (_item, label), q in zip(seen, beliefs, strict=True):
        dens = dens * (_likelihood(_RHO, label, n_classes) @ q)
    dens /= dens.sum()
    mean = float(dens @ _RHO)
    sd = float(np.sqrt(dens @ (_RHO - mean) ** 2))
    adf_mean, adf_var = _beta_moments(c, d)
    assert abs(adf_mean - mean) < 0.01
    assert abs(np.sqrt(adf_var) - sd) < 0.01


def test_one_coin_extremes_are_the_conjugate_counts() -> None:
    # a certain item: the label is right (w = 1) or wrong (w = 0) for sure
    _, c, d, _ = one_coin_categorical_update(np.array([1.0, 0.0, 0.0]), 4.0, 1.0, 0)
    np.testing.assert_allclose([c, d], [5.0, 1.0], rtol=1e-12)
    _, c, d, _ = one_coin_categorical_update(np.array([1.0, 0.0, 0.0]), 4.0, 1.0, 2)
    np.testing.assert_allclose([c, d], [4.0, 2.0], rtol=1e-12)
    # a worker with thousands of labels keeps a finite, positive Beta
    _, c, d, _ = one_coin_categorical_update(np.array([0.5, 0.3, 0.2]), 4000.0, 900.0, 1)
    assert np.isfinite(c) and np.isfinite(d) and 4000 < c + d < 4902


# ---- confusion matrices ------------------------------------------------------------------------


def test_confusion_prior_matches_the_one_coin_mean() -> None:
    np.testing.assert_array_equal(confusion_prior(2), [[4.0, 1.0], [1.0, 4.0]])
    alpha = confusion_prior(3, 4.0, 1.0)
    np.testing.assert_array_equal(alpha, [[8, 1, 1], [1, 8, 1], [1, 1, 8]])
    np.testing.assert_allclose(np.diag(alpha) / alpha.sum(axis=1), 0.8)
    with pytest.raises(InvalidParameterError):
        confusion_prior(3, 0.0, 1.0)


def test_confusion_rows_sum_to_one_and_keep_close_to_the_exact_mean() -> None:
    rng = np.random.default_rng(3)
    n_classes = 3
    post = ConfusionPosterior(np.ones(n_classes), 6, 2)
    post.q[0] = [0.6, 0.3, 0.1]
    alpha0 = post.alpha[0].copy()
    post.update(LabelEvent(item=0, worker=0, label=1))
    means = post.confusion_matrices()
    np.testing.assert_allclose(means.sum(axis=2), 1.0, rtol=1e-12)
    assert np.all(post.alpha > 0)
    # Monte Carlo of the exact posterior mean of the rows: prior draws weighted by the
    # likelihood Σ_k q(k) π[k, l]
    draws = np.stack(
        [rng.dirichlet(alpha0[k], size=200_000) for k in range(n_classes)], axis=1
    )  # (S, K, K)
    q = np.array([0.6, 0.3, 0.1])
    weight = draws[:, :, 1] @ q
    weight /= weight.sum()
    mc = np.einsum("s,skl->kl", weight, draws)
    np.testing.assert_allclose(means[0], mc, atol=3e-3)
    # the soft count α_kl + w_k against the exact mixture mean: off by O(w(1 − w)/A²)
    w = q * alpha0[:, 1] / alpha0.sum(axis=1)
    w /= w.sum()
    total = alpha0.sum(axis=1, keepdims=True)
    bumped = alpha0.copy()
    bumped[:, 1] += 1.0
    exact = w[:, None] * bumped / (total + 1.0) + (1.0 - w[:, None]) * alpha0 / total
    np.testing.assert_allclose(means[0], exact, atol=2e-3)  # w(1 − w)/A² ≈ 1.6e-3 here
    np.testing.assert_allclose(post.alpha[0], alpha0 + np.outer(w, [0.0, 1.0, 0.0]), rtol=1e-12)
    # the item update: q(k) E[π[k, l]] normalised
    expected = q * alpha0[:, 1] / alpha0.sum(axis=1)
    np.testing.assert_allclose(post.q[0], expected / expected.sum(), rtol=1e-12)
    # every row still sums to one after many labels
    for _ in range(200):
        post.update(
            LabelEvent(
                item=int(rng.integers(6)),
                worker=int(rng.integers(2)),
                label=int(rng.integers(n_classes)),
            )
        )
    np.testing.assert_allclose(post.confusion_matrices().sum(axis=2), 1.0, rtol=1e-12)
    np.testing.assert_allclose(post.class_probabilities().sum(axis=1), 1.0, rtol=1e-12)


def test_confusion_row_of_a_certain_item_is_the_conjugate_count() -> None:
    post = ConfusionPosterior(np.ones(3), 2, 1)
    post.q[0] = [0.0, 1.0, 0.0]
    before = post.alpha[0].copy()
    post.update(LabelEvent(item=0, worker=0, label=2))
    expected = before.copy()
    expected[1, 2] += 1.0
    np.testing.assert_allclose(post.alpha[0], expected, rtol=1e-12)


@pytest.mark.parametrize("n_classes", [2, 3, 4])
def test_posteriors_pass_the_conformance_kit(n_classes: int) -> None:
    check_posterior(
        lambda: OneCoinCategoricalPosterior(np.ones(n_classes), (1.0, 4.0), 5, 3),
        order="disjoint",
    )
    check_posterior(lambda: ConfusionPosterior(np.ones(n_classes), 5, 3), order="disjoint")
    prior = np.random.default_rng(n_classes).uniform(0.5, 3.0, size=(5, n_classes))
    check_posterior(lambda: ConfusionPosterior(prior, 5, 3), order="disjoint", seed=1)


def test_posteriors_refuse_bad_labels_and_priors() -> None:
    post = OneCoinCategoricalPosterior(np.ones(3), (1.0, 4.0), 2, 2)
    with pytest.raises(InvalidParameterError):
        post.update(LabelEvent(item=0, worker=0, label=3))
    with pytest.raises(InvalidParameterError):
        ConfusionPosterior(np.ones(3), 2, 2, np.ones((2, 2)))


# ---- the policies -------------------------------------------------------------------------------


def test_tail_mean_spans_kg_and_opt_kg() -> None:
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(50, 3))
    p = rng.dirichlet(np.ones(3), size=50)
    np.testing.assert_allclose(tail_mean(rewards, p, 1.0), (p * rewards).sum(axis=1))
    np.testing.assert_allclose(tail_mean(rewards, p, 0.0), rewards.max(axis=1))
    # two labels: the binary policies' two-point formula
    r, p2 = rewards[:, :2], np.column_stack([p[:, 0], 1.0 - p[:, 0]])
    alpha = 0.3
    p_max = np.where(r[:, 1] >= r[:, 0], p2[:, 1], p2[:, 0])
    q_max = np.minimum(1.0, p_max / alpha)
    kg = (p2 * r).sum(axis=1)
    np.testing.assert_allclose(
        tail_mean(r, p2, alpha), kg + (q_max - p_max) * np.abs(r[:, 1] - r[:, 0]), atol=1e-12
    )


MULTICLASS_IDS = [
    "opt-kg:posterior=one-coin",
    "kg:posterior=one-coin",
    "cvar-kg:posterior=one-coin:alpha=0.3",
    "opt-kg:posterior=confusion",
    "kg:posterior=confusion",
    "cvar-kg:posterior=confusion",
]


@pytest.mark.parametrize("policy_id", MULTICLASS_IDS)
def test_policies_pass_the_conformance_kit(policy_id: str) -> None:
    check_policy(policy_id)


@pytest.mark.parametrize("model", ["one-coin", "confusion"])
@pytest.mark.parametrize("optimistic", [True, False])
def test_categorical_policy_passes_the_kit_on_three_classes(model: str, optimistic: bool) -> None:
    """The kit's own campaigns (push and pull, items dropped, out-of-order answers, reset
    replays) on a three-class problem."""

    def factory() -> CategoricalWorkerKnowledgeGradient:
        return CategoricalWorkerKnowledgeGradient(model, optimistic, tie_break="random")

    check_policy(factory)  # binary problems: K = 2 of the categorical model
    problem = Problem(n_items=6, budget=14, n_workers=3, n_classes=3)
    for mode in ("push", "pull"):
        first = _drive(factory, problem, 0, mode=mode, max_pending=1, drop_items=True)
        assert first == _drive(factory, problem, 0, mode=mode, max_pending=1, drop_items=True)
        obj = factory()
        _drive(factory, problem, 5, mode=mode, max_pending=1, drop_items=False, policy=obj)
        assert first == _drive(
            factory, problem, 0, mode=mode, max_pending=1, drop_items=True, policy=obj
        )
        _drive(factory, problem, 0, mode=mode, max_pending=3, drop_items=True)


def test_registry_builds_and_dispatches() -> None:
    three = Problem(n_items=4, budget=8, n_classes=3, n_workers=3)
    one_coin = make_policy("opt-kg:posterior=one-coin")
    assert isinstance(one_coin, OneCoinAnyClassKnowledgeGradient)
    assert isinstance(one_coin, OneCoinKnowledgeGradient)  # the binary class on two classes
    one_coin.reset(three, np.random.default_rng(0))
    assert isinstance(one_coin.multiclass_, CategoricalWorkerKnowledgeGradient)
    assert one_coin.multiclass_.worker_model == "one-coin"
    one_coin.reset(Problem(n_items=4, budget=8, n_workers=3), np.random.default_rng(0))
    assert one_coin.multiclass_ is None and one_coin.posterior_.n_classes == 2
    confusion = make_policy("opt-kg:posterior=confusion:worker-prior=8;2")
    assert isinstance(confusion, CategoricalWorkerKnowledgeGradient)
    assert confusion.worker_prior == (8.0, 2.0) and confusion.tie_break == "random"
    for text in ("opt-kg:posterior=one-coin", "opt-kg:posterior=confusion"):
        assert parse_policy(text).refusal(three) is None
    refusal = parse_policy("opt-kg:posterior=two-coin").refusal(three)
    assert refusal is not None and "\n" not in refusal
    assert "'opt-kg:posterior=two-coin'" in refusal and "3 classes" in refusal
    with pytest.raises(InvalidParameterError, match="refit needs posterior=one-coin"):
        make_policy("opt-kg:refit=5")


def test_binary_one_coin_decisions_are_the_binary_policy_s() -> None:
    env = SyntheticBernoulliEnvironment(12, workers=WorkerPrior(4))
    runs = []
    for policy in (
        OneCoinKnowledgeGradient(tie_break="random"),
        OneCoinAnyClassKnowledgeGradient(tie_break="random"),
    ):
        chosen: list[tuple[int, int | None]] = []
        select = policy.select

        def recording(state: object, *, worker: int | None = None, _s=select, _c=chosen) -> object:
            assignment = _s(state, worker=worker)  # type: ignore[arg-type]
            if assignment is not None:
                _c.append((assignment.item, assignment.worker))
            return assignment

        policy.select = recording  # type: ignore[method-assign]
        rows = run_campaign(
            policy,
            env,
            [12.0, 36.0],
            world_seed=0,
            policy_rng=np.random.default_rng(1),
            mode="push",
        )
        runs.append((chosen, [{k: v for k, v in r.items() if k != "seconds"} for r in rows]))
    assert runs[0] == runs[1] and len(runs[0][0]) == 36


def test_a_label_rescores_only_the_changed_pairs() -> None:
    data = load_dataset("wsd")
    env = ReplayEnvironment.from_label_data(data)
    policy = CategoricalWorkerKnowledgeGradient("confusion", tie_break="random")
    scored: list[int] = []
    original = policy._score_pairs

    def counting(pairs: np.ndarray) -> np.ndarray:
        scored.append(int(pairs.shape[0]))
        return original(pairs)

    policy._score_pairs = counting  # type: ignore[method-assign]
    run_campaign(policy, env, [120.0], world_seed=0, policy_rng=np.random.default_rng(0))
    n_pairs = policy._pair_items.shape[0]
    per_item = np.diff(policy._item_ptr).max()
    per_worker = np.diff(policy._worker_ptr).max()
    # the first call scores every pair once; each label then at most item i's + worker j's
    assert scored[0] <= n_pairs
    assert max(scored[1:]) <= per_item + per_worker < n_pairs


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_replay_on_wsd_beats_uniform(mode: str) -> None:
    """wsd (3 classes, 177 items, 10 labels each): at 1 and 2 labels per item the
    worker-aware policies beat uniform sampling in push mode (means of 3 replays; at 2 per
    item in pull mode they are level: uniform 0.989, one-coin 0.983, confusion 0.989); in pull
    mode only recorded pairs are asked (the replay would refuse any other)."""
    env = ReplayEnvironment.from_label_data(load_dataset("wsd"))
    budgets = [177.0, 354.0]
    accuracy: dict[str, np.ndarray] = {}
    for policy_id in ("uniform", "opt-kg:posterior=one-coin", "opt-kg:posterior=confusion"):
        runs = []
        for seed in range(3):
            rows = run_campaign(
                make_policy(policy_id),
                env,
                budgets,
                world_seed=seed,
                policy_rng=np.random.default_rng(seed),
                mode=mode,
            )
            assert [row["labels_used"] for row in rows] == [177, 354]
            runs.append([row["accuracy"] for row in rows])
        accuracy[policy_id] = np.mean(runs, axis=0)
    for policy_id in ("opt-kg:posterior=one-coin", "opt-kg:posterior=confusion"):
        if mode == "push":  # the policy chooses the pair
            assert np.all(accuracy[policy_id] > accuracy["uniform"]), accuracy
        else:  # the arriving worker is given: ahead at 1 label per item, level at 2
            assert accuracy[policy_id][0] > accuracy["uniform"][0], accuracy
            assert accuracy[policy_id][1] > accuracy["uniform"][1] - 0.015, accuracy


@pytest.mark.parametrize("model", ["one-coin", "confusion"])
@pytest.mark.parametrize("optimistic", [True, False])
def test_push_choice_is_a_best_pair_from_scratch(model: str, optimistic: bool) -> None:
    """The incremental bookkeeping (rescoring the changed pairs, per-worker bests, dropped
    pairs) against scoring every usable pair from scratch before every decision."""
    data = load_dataset("wsd")
    env = ReplayEnvironment.from_label_data(data)
    policy = CategoricalWorkerKnowledgeGradient(model, optimistic, tie_break="random")
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
        checked.append(fresh[chosen])
        return assignment

    policy.select = checking  # type: ignore[method-assign]
    run_campaign(policy, env, [400.0], world_seed=0, policy_rng=np.random.default_rng(0))
    assert len(checked) == 400
