"""``opt-kg:posterior=one-coin:refit=N``: the beliefs re-read from all labels every N labels."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.worker_aware import OneCoinKnowledgeGradient
from crowdbudget.posteriors.one_coin import one_coin_update
from crowdbudget.registry import make_policy
from crowdbudget.testing import check_policy
from crowdbudget.types import LabelEvent, Problem


def _reference_refit(
    log: list[tuple[int, int, int]], n_items: int, n_workers: int, rounds: int = 3
) -> tuple[np.ndarray, ...]:
    """The refit written label by label (no vectorisation): rounds of (items from the prior by
    moment matching with fixed workers; workers = Beta(4, 1) + expected agreements)."""
    c = np.full(n_workers, 4.0)
    d = np.full(n_workers, 1.0)
    # the online pass the policy made before refitting
    a, b = np.ones(n_items), np.ones(n_items)
    for i, j, z in log:
        a[i], b[i], c[j], d[j], _ = (float(v) for v in one_coin_update(a[i], b[i], c[j], d[j], z))
    for _ in range(rounds):
        a, b = np.ones(n_items), np.ones(n_items)
        for i, j, z in log:
            na, nb, _, _, _ = one_coin_update(a[i], b[i], c[j], d[j], z)
            a[i], b[i] = float(na), float(nb)
        right = np.zeros(n_workers)
        count = np.zeros(n_workers)
        for i, j, z in log:
            mean = a[i] / (a[i] + b[i])
            right[j] += mean if z == 1 else 1.0 - mean
            count[j] += 1
        c, d = 4.0 + right, 1.0 + count - right
    return a, b, c, d


def test_refit_equals_the_label_by_label_reference() -> None:
    rng = np.random.default_rng(0)
    n_items, n_workers = 9, 4
    policy = OneCoinKnowledgeGradient(refit=30)
    policy.reset(Problem(n_items=n_items, budget=40, n_workers=n_workers), rng)
    log = [
        (int(rng.integers(n_items)), int(rng.integers(n_workers)), int(rng.integers(2)))
        for _ in range(30)
    ]
    for i, j, z in log:
        policy.observe(LabelEvent(item=i, worker=j, label=z))
    a, b, c, d = _reference_refit(log, n_items, n_workers)
    post = policy.posterior_
    np.testing.assert_allclose(post.a, a, rtol=1e-12)
    np.testing.assert_allclose(post.b, b, rtol=1e-12)
    np.testing.assert_allclose(post.c, c, rtol=1e-12)
    np.testing.assert_allclose(post.d, d, rtol=1e-12)


def test_refit_policy_conforms_and_rejects_bad_values() -> None:
    check_policy("opt-kg:posterior=one-coin:refit=4", n_items=5, budget=14)
    with pytest.raises(InvalidParameterError, match="refit must be"):
        make_policy("opt-kg:posterior=one-coin:refit=-1")
    with pytest.raises(InvalidParameterError, match="one-coin only"):
        make_policy("opt-kg:posterior=two-coin:refit=5")
    with pytest.raises(InvalidParameterError, match="refit needs"):
        make_policy("opt-kg:refit=5")


def test_exact_item_step_matches_numerical_integration() -> None:
    """``refit-items=exact``: the item posterior given all its labels (workers fixed) is the
    prior times Π (rθ + (1−r)(1−θ)) — checked against a grid integral, then moment-matched."""
    from crowdbudget.posteriors.one_coin import exact_item_beliefs

    rng = np.random.default_rng(1)
    n_items = 4
    items = rng.integers(0, n_items - 1, 25)  # the last item has no label
    labels = rng.integers(0, 2, 25)
    reliability = rng.uniform(0.3, 0.99, 25)
    prior_a, prior_b = np.ones(n_items), np.full(n_items, 1.5)
    a, b = exact_item_beliefs(prior_a, prior_b, items, labels, reliability)
    x = np.linspace(1e-7, 1 - 1e-7, 400_001)
    for i in range(n_items - 1):
        density = x ** (prior_a[i] - 1) * (1 - x) ** (prior_b[i] - 1)
        for k in np.flatnonzero(items == i):
            r = reliability[k]
            density *= r * x + (1 - r) * (1 - x) if labels[k] == 1 else (1 - r) * x + r * (1 - x)
        density /= np.trapezoid(density, x)
        mean = np.trapezoid(density * x, x)
        var = np.trapezoid(density * x * x, x) - mean**2
        s = mean * (1 - mean) / var - 1
        np.testing.assert_allclose([a[i], b[i]], [mean * s, (1 - mean) * s], rtol=1e-4)
    assert (a[-1], b[-1]) == (1.0, 1.5)


def test_refit_variants_run_and_the_final_refit_leaves_the_beliefs_alone() -> None:
    check_policy("opt-kg:posterior=one-coin:refit=4:refit-items=exact", n_items=5, budget=14)
    check_policy("opt-kg:posterior=one-coin:refit=4:refit-rounds=6", n_items=5, budget=14)
    policy = make_policy("opt-kg:posterior=one-coin:refit=4:refit-final=true")
    rng = np.random.default_rng(2)
    policy.reset(Problem(n_items=6, budget=20, n_workers=3), rng)
    for _ in range(7):  # a refit at 4, three labels after it
        policy.observe(LabelEvent(item=int(rng.integers(6)), worker=int(rng.integers(3)), label=1))
    before = [np.copy(getattr(policy.posterior_, name)) for name in "abcd"]
    final = policy._final_posterior()  # type: ignore[attr-defined]
    assert final is not policy.posterior_
    for name, old in zip("abcd", before, strict=True):
        np.testing.assert_array_equal(getattr(policy.posterior_, name), old)
    with pytest.raises(InvalidParameterError, match="refit-items needs posterior=one-coin"):
        make_policy("opt-kg:posterior=two-coin:refit-items=exact")
