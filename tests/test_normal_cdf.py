"""Our normal CDF (crowdbudget._compiled_special.normal_cdf), the feature model's look-ahead
kernel: its accuracy against SciPy's ``ndtr`` on a dense grid (and against 40-digit values
where mpmath is installed), its edges, and the rank-one update of the cross matrix."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from scipy import special

from crowdbudget._compiled_special import NORMAL_CDF_ZERO_BELOW, normal_cdf


@njit(cache=False)
def _normal_cdf_all(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = normal_cdf(x[i])
    return out


def _dense_grid() -> np.ndarray:
    """4,000,001 points evenly over [−40, 10], the tail pieces' joins (multiples of 1/2) and
    their neighbours one ulp away, and the edges."""
    joins = np.arange(-38.5, 0.5, 0.5)
    edges = [0.0, -0.0, -3.0, 3.0, NORMAL_CDF_ZERO_BELOW, 37.5, 38.5, 40.0, 1e300, -1e300]
    return np.concatenate(
        [
            np.linspace(-40.0, 10.0, 4_000_001),
            joins,
            np.nextafter(joins, -np.inf),
            np.nextafter(joins, np.inf),
            edges,
        ]
    )


def test_normal_cdf_is_within_1e_12_of_scipy_on_a_dense_grid() -> None:
    """Relative difference at most 5e-13 wherever Φ is a normal double (measured 2.4e-13, at
    x ≈ −36.9), within 2e-15·(1 + x²) everywhere (measured 9.7e-16·(1 + x²)): mostly SciPy's
    own error, which grows with x² (its erfc takes x/√2 rounded); ours is within 5e-15 of
    40-digit values (next test). Absolute below 1e-300 in the subnormal tail."""
    x = _dense_grid()
    ours, scipys = _normal_cdf_all(x), special.ndtr(x)
    normal = scipys > 1e-300
    relative = np.abs(ours[normal] / scipys[normal] - 1.0)
    assert relative.max() <= 5e-13
    assert np.all(relative <= 2e-15 * (1.0 + np.clip(x[normal], -100.0, 100.0) ** 2))
    assert relative[x[normal] > -5.0].max() <= 1e-14
    assert np.abs(ours[~normal] - scipys[~normal]).max() <= 1e-300
    assert np.all(ours[x <= NORMAL_CDF_ZERO_BELOW] == 0.0)
    assert np.all((ours >= 0.0) & (ours <= 1.0))


def test_normal_cdf_against_forty_digit_values() -> None:
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    x = np.random.default_rng(3).uniform(-37.5, 8.0, 3000)
    exact = np.array([float(mpmath.ncdf(mpmath.mpf(float(v)))) for v in x])
    assert np.abs(_normal_cdf_all(x) / exact - 1.0).max() <= 1e-14


def test_normal_cdf_edges() -> None:
    values = _normal_cdf_all(np.array([np.nan, -np.inf, np.inf, 0.0, 50.0, -38.5, -38.49]))
    assert np.isnan(values[0])
    assert values[1] == 0.0 and values[2] == 1.0 and values[4] == 1.0 and values[5] == 0.0
    assert values[3] == pytest.approx(0.5, rel=1e-15)
    assert values[6] == special.ndtr(-38.49)  # both round to the same subnormal or 0


def test_rank_one_downdate_is_the_numpy_expression_and_keeps_symmetry() -> None:
    from crowdbudget.posteriors._logistic_kernel import rank_one_downdate
    from crowdbudget.posteriors.logistic import _symmetric

    rng = np.random.default_rng(4)
    x = rng.normal(size=(50, 4))
    cross = _symmetric(x @ x.T)
    assert np.array_equal(cross, cross.T)
    for _ in range(20):
        c = cross[:, int(rng.integers(50))].copy()
        beta = float(rng.uniform(0.0, 0.01))
        expected = cross - beta * np.outer(c, c)
        rank_one_downdate(cross, c, beta)
        assert np.array_equal(cross, expected)
        assert np.array_equal(cross, cross.T)
