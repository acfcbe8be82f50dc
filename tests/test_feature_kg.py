"""Instance features (Chen, Lin, Zhou 2013, §5): the Laplace posterior and feature-based KG."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from scipy import integrate, optimize, special

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.feature_kg import FeatureKnowledgeGradient
from crowdbudget.posteriors.logistic import (
    LogisticGaussianPosterior,
    laplace_step,
    logistic_label_probability,
    prepare_features,
)
from crowdbudget.registry import make_policy
from crowdbudget.simulation import FeatureEnvironment
from crowdbudget.simulation.workers import WorkerPrior
from crowdbudget.testing import check_environment, check_policy
from crowdbudget.types import LabelEvent, Problem


def _random_gaussian(rng: np.random.Generator, dim: int) -> tuple[np.ndarray, np.ndarray]:
    a = rng.normal(size=(dim, dim))
    return rng.normal(size=dim), a @ a.T / dim + 0.5 * np.eye(dim)


@pytest.mark.parametrize("label", [0, 1])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_laplace_step_is_the_mode_and_hessian_of_one_observation(label: int, seed: int) -> None:
    """μ' is the MAP of N(μ, Σ) × one logistic likelihood and Σ' the inverse Hessian there."""
    rng = np.random.default_rng(seed)
    dim = 4
    mu, cov = _random_gaussian(rng, dim)
    x = rng.normal(size=dim) * 2.0
    precision = np.linalg.inv(cov)

    def neg_log_post(w: np.ndarray) -> float:
        s = w @ x
        loglik = label * s - np.logaddexp(0.0, s)
        return float(-loglik + 0.5 * (w - mu) @ precision @ (w - mu))

    found = optimize.minimize(neg_log_post, mu, method="BFGS", options={"gtol": 1e-12})
    alpha, beta, s_star = laplace_step(mu @ x, x @ cov @ x, label)
    sx = cov @ x
    mean = mu + alpha * sx
    np.testing.assert_allclose(mean, found.x, atol=1e-6)
    assert s_star == pytest.approx(mean @ x, abs=1e-10)
    lam = special.expit(s_star) * (1 - special.expit(s_star))
    expected_cov = np.linalg.inv(precision + lam * np.outer(x, x))
    np.testing.assert_allclose(cov - beta * np.outer(sx, sx), expected_cov, atol=1e-10)


def test_tracked_scores_equal_recomputation_after_updates() -> None:
    rng = np.random.default_rng(3)
    x = prepare_features(rng.normal(size=(30, 5)))
    post = LogisticGaussianPosterior(x, 0.0, 2.0)
    for _ in range(25):
        post.update(LabelEvent(item=int(rng.integers(30)), worker=0, label=int(rng.integers(2))))
    np.testing.assert_allclose(post.score_mean, x @ post.mean, atol=1e-10)
    np.testing.assert_allclose(post.score_var, np.einsum("kd,de,ke->k", x, post.cov, x), atol=1e-9)
    assert post.cross is not None
    np.testing.assert_allclose(post.cross, x @ post.cov @ x.T, atol=1e-9)
    np.testing.assert_allclose(post.cov, post.cov.T)
    assert np.all(np.linalg.eigvalsh(post.cov) > 0)


def test_label_probability_matches_numerical_integration() -> None:
    cases = [(0.0, 1.0), (2.0, 9.0), (-3.0, 0.25), (0.7, 40.0), (5.0, 400.0), (1.0, 1e-4)]
    for m, v in cases:
        sd = np.sqrt(v)
        exact, _ = integrate.quad(
            lambda z, m=m, sd=sd: special.expit(m + sd * z) * np.exp(-z * z / 2),
            -40,
            40,
            epsabs=1e-15,
            limit=400,
            points=[-m / sd] if abs(m / sd) < 40 else None,
        )
        exact /= np.sqrt(2 * np.pi)
        assert float(logistic_label_probability(m, v)) == pytest.approx(exact, abs=1e-12)
    vector = logistic_label_probability(np.array([0.0, 2.0]), np.array([1.0, 9.0]))
    assert vector.shape == (2,) and vector[0] == pytest.approx(0.5, abs=1e-14)


@pytest.mark.parametrize("reward", ["global", "local"])
def test_rewards_equal_brute_force_lookahead(reward: str) -> None:
    """R_z(i) is Σ_k h after the real update minus Σ_k h now (global) or item i's own term."""
    rng = np.random.default_rng(5)
    features = rng.normal(size=(12, 3))
    policy = FeatureKnowledgeGradient(reward=reward)  # type: ignore[arg-type]
    policy.reset(Problem(n_items=12, budget=20, features=features), np.random.default_rng(0))
    for item, label in [(0, 1), (4, 0), (7, 1)]:
        policy.observe(LabelEvent(item=item, worker=0, label=label))
    post = policy.posterior_
    candidates = np.arange(12)
    for label in (0, 1):
        fast = (policy._h_sum_after if reward == "global" else policy._local_after)(
            candidates, label
        )
        for i in candidates:
            after = copy.deepcopy(post)
            after.update(LabelEvent(item=int(i), worker=0, label=label))
            if reward == "global":
                expected = post.error().sum() - after.error().sum()
            else:
                expected = post.error()[i] - after.error()[i]
            assert fast[i] == pytest.approx(expected, abs=1e-10)


def test_compiled_global_rewards_equal_the_numpy_expression() -> None:
    """The compiled pass (posteriors/_logistic_kernel.py, our normal CDF) gives the NumPy
    reward (SciPy's ``ndtr``) to within 1e-13 of the error sum — each Φ is within a few 1e-15
    relatively — along a real campaign on real features (pima), for every eligible candidate
    subset used: all items, and an unsorted subset with repeats."""
    from crowdbudget.datasets import load_feature_set

    features = load_feature_set("pima").features[:200]
    policy = FeatureKnowledgeGradient(reward="global")
    policy.reset(Problem(n_items=200, budget=400, features=features), np.random.default_rng(0))
    rng = np.random.default_rng(1)
    subsets = [np.arange(200), rng.integers(0, 200, size=57)]
    for _step in range(60):
        post = policy.posterior_
        tolerance = 1e-13 * (1.0 + float(np.sum(post.error())))
        for cand in subsets:
            r1, r0 = policy._global_rewards(cand)
            assert np.abs(r1 - policy._h_sum_after(cand, 1)).max() <= tolerance
            assert np.abs(r0 - policy._h_sum_after(cand, 0)).max() <= tolerance
        item = int(rng.integers(200))
        policy.observe(LabelEvent(item=item, worker=0, label=int(rng.integers(2))))
        assert post.cross is not None and np.array_equal(post.cross, post.cross.T)


def test_batch_refit_is_the_map_of_all_labels() -> None:
    """``refit`` gives the MAP of the whole history (checked against scikit-learn's
    L2-penalised logistic regression, whose penalty ½|w|²/C is the prior N(0, C·I))."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(11)
    x = prepare_features(rng.normal(size=(40, 3)))
    post = LogisticGaussianPosterior(x, 0.0, 0.5)
    items = rng.integers(40, size=60)
    labels = (rng.random(60) < special.expit(x[items] @ np.array([1.0, -2.0, 0.5, 0.3]))).astype(
        np.int64
    )
    for i, y in zip(items, labels, strict=True):
        post.update(LabelEvent(item=int(i), worker=0, label=int(y)))
    post.refit(items, labels, np.zeros(4), 0.5 * np.eye(4))
    # Newton steps: converged to the tolerance on every supported scikit-learn (L-BFGS of
    # scikit-learn 1.3 stops ~3e-5 short of the optimum here)
    reference = LogisticRegression(
        C=0.5, fit_intercept=False, tol=1e-12, max_iter=10_000, solver="newton-cholesky"
    )
    reference.fit(x[items], labels)
    np.testing.assert_allclose(post.mean, reference.coef_[0], atol=1e-6)
    np.testing.assert_allclose(post.score_mean, x @ post.mean, atol=1e-10)


@pytest.mark.parametrize(
    "policy_id",
    [
        "opt-kg:features=logistic",
        "kg:features=logistic",
        "opt-kg:features=logistic:reward=local",
        "opt-kg:features=logistic:refit=3:tie-break=random",
    ],
)
def test_feature_policies_conform(policy_id: str) -> None:
    check_policy(policy_id, n_items=3, budget=6)
    check_policy(policy_id, n_items=7, budget=25, seed=3)


@pytest.mark.parametrize(
    ("policy_id", "message"),
    [
        ("opt-kg:features=linear", "features must be one of"),
        ("opt-kg:prior-var=2", "needs features=logistic"),
        ("opt-kg:features=logistic:posterior=one-coin", "cannot be combined"),
        ("opt-kg:features=logistic:reward=all", "reward must be"),
        ("kg:features=logistic:prior-var=0", "prior_var must be"),
        ("opt-kg:features=logistic:refit=-1", "refit must be"),
    ],
)
def test_bad_feature_ids_fail_with_a_clear_message(policy_id: str, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        make_policy(policy_id)


def test_problem_without_features_is_refused() -> None:
    policy = make_policy("opt-kg:features=logistic")
    with pytest.raises(InvalidParameterError, match="needs a problem with features"):
        policy.reset(Problem(n_items=4, budget=5), np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match="features must have shape"):
        Problem(n_items=4, budget=5, features=np.zeros((3, 2)))
    with pytest.raises(InvalidParameterError, match="finite"):
        Problem(n_items=2, budget=5, features=np.array([[0.0], [np.nan]]))


def test_feature_environment_worlds() -> None:
    rng = np.random.default_rng(2)
    features = rng.normal(size=(20, 3))
    env = FeatureEnvironment(features, world="logistic", weight_var=2.0)
    check_environment(env)
    env.reset(seed=4)
    design = prepare_features(features)
    # the world's θ is σ(Xw) for some w: its logits lie in the column space of the design
    logits = special.logit(env.theta)
    coef, *_ = np.linalg.lstsq(design, logits, rcond=None)
    np.testing.assert_allclose(design @ coef, logits, atol=1e-8)
    np.testing.assert_array_equal(env.true_labels, (env.theta >= 0.5).astype(int))
    assert env.problem(10).features is not None
    gold = (rng.random(20) < 0.5).astype(int)
    noisy = FeatureEnvironment(features, world="gold", gold=gold, workers=WorkerPrior(5))
    noisy.reset(seed=0)
    np.testing.assert_array_equal(noisy.true_labels, gold)
    with pytest.raises(InvalidParameterError, match="needs the gold labels"):
        FeatureEnvironment(features, world="gold")


def test_features_beat_item_only_opt_kg_at_small_budgets() -> None:
    """With θ = σ(wᵀx) true, one label per item on average is enough for the feature model to
    label most items; item-only Opt-KG can at best get the labeled items right. Mean over
    6 worlds (common random numbers)."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(80, 4))
    env = FeatureEnvironment(features, world="logistic", weight_var=1.0)
    scores: dict[str, list[float]] = {}
    for policy_id in ["opt-kg", "kg:features=logistic:refit=5", "opt-kg:features=logistic"]:
        for rep in range(6):
            rows = run_campaign(
                make_policy(policy_id),
                env,
                [40],
                world_seed=rep,
                policy_rng=np.random.default_rng(rep),
            )
            scores.setdefault(policy_id, []).append(rows[0]["accuracy"])
    means = {k: float(np.mean(v)) for k, v in scores.items()}
    assert means["kg:features=logistic:refit=5"] > means["opt-kg"] + 0.15, means
    assert means["opt-kg:features=logistic"] > means["opt-kg"] + 0.1, means


def test_feature_set_loading_and_a_tiny_features_reproduction() -> None:
    """The UCI loader (bundled data) and the reproduction's table: one row per policy, budget
    and case, named by the bare policy id, the data set and the world."""
    from crowdbudget.datasets import load_feature_set
    from crowdbudget.exceptions import DataFormatError
    from crowdbudget.experiments.papers import chen2013

    data = load_feature_set("ionosphere")
    assert data.features.shape == (351, 34) and data.classes == ("b", "g")
    assert int(data.gold.sum()) == 225  # 225 'g' (data README)
    with pytest.raises(DataFormatError, match="unknown feature set"):
        load_feature_set("iris")
    result = chen2013.features(
        datasets=("ionosphere",),
        per_item=(0.1, 0.5),
        reps=1,
        policies=("uniform", "opt-kg:features=logistic:reward=local:refit=10"),
        n_jobs=1,
        progress=False,
    )
    table = result.summary
    assert len(table) == 2 * 2 * 2  # policies × budgets × worlds
    assert set(table["world"]) == {"logistic", "gold"}
    assert set(table["policy_id"]) == {"uniform", "opt-kg:features=logistic:reward=local:refit=10"}
    assert sorted(set(table["budget"])) == [35.0, 176.0]
    assert table["accuracy_mean"].between(0, 1).all()


def test_compiled_laplace_step_equals_the_numpy_loop_bit_for_bit() -> None:
    """The compiled lockstep Newton loop gives the NumPy loop's bits: random scores, huge and
    tiny variances (clipped steps), scalars, and NaN."""
    from crowdbudget.posteriors.logistic import _laplace_step_reference

    rng = np.random.default_rng(4)
    m = np.concatenate([rng.normal(scale=3.0, size=2000), [0.0, -0.0, 40.0, -40.0, np.nan, 1.0]])
    v = np.concatenate([rng.gamma(0.5, 4.0, size=2000), [1e-300, 1e4, 2.0, 9.0, 1.0, np.nan]])
    for label in (0, 1):
        for got, want in zip(
            laplace_step(m, v, label), _laplace_step_reference(m, v, label), strict=True
        ):
            assert np.array_equal(got, want, equal_nan=True)
        for i in range(0, 2006, 97):  # one element at a time: the scalar update's call
            for got, want in zip(
                laplace_step(m[i], v[i], label),
                _laplace_step_reference(m[i], v[i], label),
                strict=True,
            ):
                assert np.array_equal(got, want, equal_nan=True) and np.shape(got) == ()


def test_compiled_global_rewards_within_tolerance_where_most_items_are_confident() -> None:
    """Late in a campaign most items' moved ratios are at or below the kernel's
    ``NEGLIGIBLE_BELOW`` (their Φ counted 0): the rewards still match the NumPy expression to
    within 1e-13 of the error sum (here a third of the items are that far out)."""
    from crowdbudget.datasets import load_feature_set
    from crowdbudget.posteriors._logistic_kernel import NEGLIGIBLE_BELOW

    features = load_feature_set("pima").features[:200]
    policy = FeatureKnowledgeGradient(reward="global")
    policy.reset(Problem(n_items=200, budget=2000, features=features), np.random.default_rng(0))
    rng = np.random.default_rng(2)
    x = policy.posterior_.features
    theta = 1.0 / (1.0 + np.exp(-(x @ rng.normal(size=x.shape[1]))))
    for _ in range(1200):  # labels from a logistic world: the belief concentrates
        item = int(rng.integers(200))
        policy.observe(LabelEvent(item=item, worker=0, label=int(rng.random() < theta[item])))
    post = policy.posterior_
    far = -np.abs(post.score_mean - post.cuts) / np.sqrt(post.score_var) <= NEGLIGIBLE_BELOW
    assert far.mean() > 0.3
    tolerance = 1e-13 * (1.0 + float(np.sum(post.error())))
    cand = np.arange(200)
    r1, r0 = policy._global_rewards(cand)
    assert np.abs(r1 - policy._h_sum_after(cand, 1)).max() <= tolerance
    assert np.abs(r0 - policy._h_sum_after(cand, 0)).max() <= tolerance
