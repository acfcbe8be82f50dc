"""One-coin moment matching against numerical integration of the exact posterior."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from crowdbudget.posteriors.one_coin import OneCoinPosterior, one_coin_rewards, one_coin_update
from crowdbudget.types import LabelEvent


def exact_moments(a: float, b: float, c: float, d: float, z: int) -> dict[str, float]:
    """Normaliser and first two moments of θ and ρ under the exact (unapproximated)
    posterior, by brute-force 2-D Gauss–Legendre quadrature on a 400 × 400 grid."""
    x, w = np.polynomial.legendre.leggauss(400)
    x, w = (x + 1) / 2, w / 2
    t, r = np.meshgrid(x, x, indexing="ij")
    weight = np.outer(w, w) * stats.beta.pdf(t, a, b) * stats.beta.pdf(r, c, d)
    lik = t * r + (1 - t) * (1 - r) if z == 1 else (1 - t) * r + t * (1 - r)
    dens = weight * lik
    z_norm = dens.sum()
    return {
        "p": float(z_norm),
        "t1": float((dens * t).sum() / z_norm),
        "t2": float((dens * t**2).sum() / z_norm),
        "r1": float((dens * r).sum() / z_norm),
        "r2": float((dens * r**2).sum() / z_norm),
    }


@pytest.mark.parametrize(
    "a, b, c, d",
    [(1, 1, 4, 1), (2.3, 1.7, 4, 1), (5, 2, 2, 2), (1.5, 6.0, 3.0, 1.3), (12.0, 9.0, 7.0, 2.0)],
)
@pytest.mark.parametrize("z", [0, 1])
def test_moment_matching_matches_exact_moments(
    a: float, b: float, c: float, d: float, z: int
) -> None:
    exact = exact_moments(a, b, c, d, z)
    na, nb, nc, nd, p = one_coin_update(a, b, c, d, z)
    assert float(p) == pytest.approx(exact["p"], abs=1e-6)
    n = na + nb
    assert float(na / n) == pytest.approx(exact["t1"], abs=1e-6)
    assert float(na * (na + 1) / (n * (n + 1))) == pytest.approx(exact["t2"], abs=1e-6)
    m = nc + nd
    assert float(nc / m) == pytest.approx(exact["r1"], abs=1e-6)
    assert float(nc * (nc + 1) / (m * (m + 1))) == pytest.approx(exact["r2"], abs=1e-6)


def test_perfect_worker_limit_is_conjugate_update() -> None:
    # ρ concentrated at 1: the label is the noiseless label, so θ's update is exactly Beta(a+1, b)
    na, nb, _, _, _ = one_coin_update(2.0, 3.0, 1e7, 1e-3, 1)
    assert float(na) == pytest.approx(3.0, rel=1e-5)
    assert float(nb) == pytest.approx(3.0, rel=1e-5)


def test_rewards_and_posterior_object() -> None:
    r1, r0, p1 = one_coin_rewards(np.array([1.0, 3.0]), np.array([1.0, 1.0]), 4.0, 1.0)
    assert np.all(np.maximum(r1, r0) > 0)
    assert np.all((p1 > 0) & (p1 < 1))
    post = OneCoinPosterior([1.0, 1.0], [1.0, 4.0], n_items=3, n_workers=2)
    before = post.worker_reliability().copy()
    post.update(LabelEvent(item=0, worker=1, label=1))
    post.update(LabelEvent(item=0, worker=0, label=1))
    assert post.predict()[0] == 1
    assert post.confidence()[0] > 0.5
    assert post.worker_reliability()[0] > before[0]  # agreed with the other worker
    np.testing.assert_allclose(post.class_probabilities().sum(axis=1), 1.0)
