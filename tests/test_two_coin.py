"""Two-coin moment matching against numerical integration of the exact posterior, and the
two-coin Opt-KG / KG policies (registry ids, replay, simulation)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from crowdbudget.posteriors.one_coin import one_coin_rewards, one_coin_update
from crowdbudget.posteriors.two_coin import TwoCoinPosterior, two_coin_rewards, two_coin_update
from crowdbudget.types import LabelEvent


def exact_moments(args: tuple[float, ...], z: int) -> dict[str, float]:
    """Normaliser and first two moments of θ, ρ1, ρ2 under the exact posterior, by 3-D
    Gauss–Legendre quadrature (120³ nodes)."""
    a, b, c1, d1, c2, d2 = args
    x, w = np.polynomial.legendre.leggauss(120)
    x, w = (x + 1) / 2, w / 2
    # densities per axis (1-D), broadcast to the 3-D grid; the likelihood is not factorised
    ft = (w * stats.beta.pdf(x, a, b))[:, None, None]
    f1 = (w * stats.beta.pdf(x, c1, d1))[None, :, None]
    f2 = (w * stats.beta.pdf(x, c2, d2))[None, None, :]
    t, r1, r2 = x[:, None, None], x[None, :, None], x[None, None, :]
    weight = ft * f1 * f2
    lik = t * r1 + (1 - t) * (1 - r2) if z == 1 else t * (1 - r1) + (1 - t) * r2
    dens = weight * lik
    norm = dens.sum()
    out = {"p": float(norm)}
    for name, v in (("t", t), ("r1", r1), ("r2", r2)):
        out[name + "1"] = float((dens * v).sum() / norm)
        out[name + "2"] = float((dens * v**2).sum() / norm)
    return out


def _moments(p: float, q: float) -> tuple[float, float]:
    n = p + q
    return p / n, p * (p + 1) / (n * (n + 1))


@pytest.mark.parametrize(
    "args",
    [
        (1, 1, 4, 1, 4, 1),
        (2.3, 1.7, 4, 1, 2, 3),
        (5, 2, 2, 2, 6, 1.5),
        (1.5, 6.0, 3.0, 2.3, 2.0, 3.5),
    ],
)
@pytest.mark.parametrize("z", [0, 1])
def test_moment_matching_matches_exact_moments(args: tuple[float, ...], z: int) -> None:
    exact = exact_moments(args, z)
    na, nb, nc1, nd1, nc2, nd2, p = two_coin_update(*args, z)
    assert float(p) == pytest.approx(exact["p"], abs=1e-6)
    for name, (u, v) in (("t", (na, nb)), ("r1", (nc1, nd1)), ("r2", (nc2, nd2))):
        m1, m2 = _moments(float(u), float(v))
        assert m1 == pytest.approx(exact[name + "1"], abs=1e-6), name
        assert m2 == pytest.approx(exact[name + "2"], abs=1e-6), name


def test_equal_coins_on_a_fresh_item_give_the_one_coin_item_update() -> None:
    for z in (0, 1):
        one = one_coin_update(1.0, 1.0, 4.0, 1.0, z)
        two = two_coin_update(1.0, 1.0, 4.0, 1.0, 4.0, 1.0, z)
        assert float(two[0]) == pytest.approx(float(one[0]))
        assert float(two[1]) == pytest.approx(float(one[1]))
        assert float(two[6]) == pytest.approx(float(one[4]))
    # ...and the rewards agree whenever the item mean is 1/2
    r = two_coin_rewards(3.0, 3.0, 4.0, 1.0, 4.0, 1.0)
    s = one_coin_rewards(3.0, 3.0, 4.0, 1.0)
    np.testing.assert_allclose(np.array(r), np.array(s))


def test_label_on_a_confident_negative_item_teaches_specificity_not_sensitivity() -> None:
    # the item is almost surely class 0: a 0 raises the specificity, the sensitivity stays
    a, b, c1, d1, c2, d2 = 1e-3, 1e4, 2.0, 2.0, 2.0, 2.0
    _, _, nc1, nd1, nc2, nd2, _ = two_coin_update(a, b, c1, d1, c2, d2, 0)
    assert float(nc1) == pytest.approx(2.0, rel=1e-3) and float(nd1) == pytest.approx(2.0, rel=1e-3)
    assert float(nc2) == pytest.approx(3.0, rel=1e-3) and float(nd2) == pytest.approx(2.0, rel=1e-3)
    _, _, nc1, nd1, nc2, nd2, _ = two_coin_update(a, b, c1, d1, c2, d2, 1)
    assert float(nc2) == pytest.approx(2.0, rel=1e-3) and float(nd2) == pytest.approx(3.0, rel=1e-3)


def test_rewards_match_the_full_update() -> None:
    rng = np.random.default_rng(0)
    args = [rng.uniform(0.5, 8.0, 50) for _ in range(6)]
    r1, r0, p1 = two_coin_rewards(*args)
    from crowdbudget.posteriors.beta_bernoulli import error_probability

    now = error_probability(args[0], args[1], 0.5)
    for z, r in ((1, r1), (0, r0)):
        na, nb, *_, p = two_coin_update(*args, z)
        np.testing.assert_allclose(r, now - error_probability(na, nb, 0.5), atol=1e-12)
        if z == 1:
            np.testing.assert_allclose(p1, p)


def test_posterior_object_learns_a_biased_worker() -> None:
    """A worker who always says 1 gets high sensitivity and low specificity."""
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 2, 300)
    post = TwoCoinPosterior((1.0, 1.0), (1.0, 4.0), n_items=300, n_workers=4)
    for i, y in enumerate(truth):
        for j in range(3):  # three good workers (90% right)
            label = int(y if rng.random() < 0.9 else 1 - y)
            post.update(LabelEvent(item=i, worker=j, label=label))
        post.update(LabelEvent(item=i, worker=3, label=1))  # always 1
    assert post.sensitivity()[3] > 0.9 and post.specificity()[3] < 0.2
    assert np.all(post.sensitivity()[:3] > 0.7) and np.all(post.specificity()[:3] > 0.7)
    assert np.mean(post.predict() == truth) > 0.95
    probs = post.class_probabilities()
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    with pytest.raises(Exception, match="binary"):
        post.update(LabelEvent(item=0, worker=0, label=2))


# ---- policies ---------------------------------------------------------------------------------
def _tiny_world(seed: int = 0):  # type: ignore[no-untyped-def]
    from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
    from crowdbudget.simulation.workers import WorkerPrior

    return SyntheticBernoulliEnvironment(20, prior=(1.0, 1.0), workers=WorkerPrior(5))


def _allocation(policy_id: str, policy_seed: int) -> list[tuple[int, int]]:
    from crowdbudget.registry import make_policy
    from crowdbudget.types import CampaignState

    env = _tiny_world()
    env.reset(seed=0)
    problem = env.problem(60)
    state = CampaignState.initial(problem)
    policy = make_policy(policy_id)
    policy.reset(problem, np.random.default_rng(policy_seed))
    picks = []
    for _ in range(60):
        assignment = policy.select(state)
        assert assignment is not None and assignment.worker is not None
        picks.append((assignment.item, assignment.worker))
        state.record_assignment(assignment)
        result = env.step(assignment)
        assert result.event is not None
        state.record_label(result.event, assignment)
        policy.observe(result.event)
    return picks


def test_registry_builds_two_coin_policies_and_tie_rules() -> None:
    from crowdbudget.exceptions import InvalidParameterError
    from crowdbudget.policies.worker_aware import OneCoinKnowledgeGradient, TwoCoinKnowledgeGradient
    from crowdbudget.registry import make_policy

    opt = make_policy("opt-kg:posterior=two-coin")
    assert isinstance(opt, TwoCoinKnowledgeGradient) and opt.optimistic
    assert opt.tie_break == "random" and opt.worker_prior == (4.0, 1.0)
    kg = make_policy("kg:posterior=two-coin:worker-prior=8;2")
    assert isinstance(kg, TwoCoinKnowledgeGradient) and not kg.optimistic
    assert kg.tie_break == "first" and kg.worker_prior == (8.0, 2.0)
    one = make_policy("opt-kg:posterior=one-coin:tie-break=first")
    assert isinstance(one, OneCoinKnowledgeGradient) and one.tie_break == "first"
    with pytest.raises(InvalidParameterError, match="tie-break"):
        make_policy("opt-kg:posterior=two-coin:tie-break=last")


def test_first_rule_is_deterministic_and_starts_with_the_first_pair() -> None:
    a = _allocation("opt-kg:posterior=two-coin:tie-break=first", 0)
    b = _allocation("opt-kg:posterior=two-coin:tie-break=first", 1)
    assert a == b and a[0] == (0, 0)


@pytest.mark.parametrize("workers", ["one-coin", "two-coin"])
def test_random_ties_follow_the_policy_generator(workers: str) -> None:
    same = _allocation(f"opt-kg:workers={workers}", 3)
    assert same == _allocation(f"opt-kg:workers={workers}", 3)
    other = _allocation(f"opt-kg:workers={workers}", 4)
    assert other != same
    # at the start every pair ties: the first pick is not always the first pair
    firsts = {_allocation(f"opt-kg:workers={workers}", s)[0] for s in range(4)}
    assert len(firsts) > 1


def test_two_coin_kg_uses_worker_identities_on_rte() -> None:
    """On the RTE replay at 800 labels, two-coin KG (random ties) is above homogeneous Opt-KG
    (measured with these seeds: 0.778 vs 0.734; over other seeds up to 0.87), and every label
    comes from a recorded pair (the replay raises otherwise)."""
    from crowdbudget.datasets import load_dataset
    from crowdbudget.experiments.runner import run_campaign
    from crowdbudget.registry import make_policy
    from crowdbudget.simulation.replay import ReplayEnvironment

    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    accuracy = {}
    for policy_id in ["opt-kg", "kg:posterior=two-coin:tie-break=random"]:
        [row] = run_campaign(
            make_policy(policy_id),
            env,
            [800],
            world_seed=0,
            policy_rng=np.random.default_rng(0),
        )
        assert row["labels_used"] == 800
        accuracy[policy_id] = row["accuracy"]
    assert accuracy["kg:posterior=two-coin:tie-break=random"] > accuracy["opt-kg"] + 0.02
