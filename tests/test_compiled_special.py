"""SciPy's special functions as the compiled kernels call them (crowdbudget._compiled_special):
the same bits as the ufuncs, on values across their ranges and edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from scipy import special

from crowdbudget._compiled_special import (
    betainc,
    betainc_half,
    betaln,
    digamma,
    expit,
    gammaln,
    logit,
    maximum,
    minimum,
    ndtr,
)
from kernel_loops import elementwise


@njit(cache=False)
def _ndtr_all(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = ndtr(x[i], 0)
    return out


@njit(cache=False)
def _betainc_all(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = betainc(a[i], b[i], x[i], 0)
    return out


@njit(cache=False)
def _pairwise(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    high = np.empty_like(x)
    low = np.empty_like(x)
    for i in range(x.shape[0]):
        high[i] = maximum(x[i], y[i])
        low[i] = minimum(x[i], y[i])
    return high, low


def test_ndtr_is_scipys_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.normal(scale=3.0, size=20_000),
            -np.abs(rng.normal(scale=15.0, size=5_000)),
            np.array([0.0, -0.0, -37.5, -38.5, 8.3, 40.0, -np.inf, np.inf, np.nan, -1e-300]),
        ]
    )
    assert np.array_equal(_ndtr_all(x), special.ndtr(x), equal_nan=True)


@njit(cache=False)
def _logistic_all(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    up = np.empty_like(x)
    down = np.empty_like(x)
    for i in range(x.shape[0]):
        up[i] = expit(x[i], 0)
        down[i] = logit(up[i], 0)
    return up, down


def test_expit_and_logit_are_scipys_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate(
        [
            rng.normal(scale=4.0, size=20_000),
            rng.normal(scale=300.0, size=2_000),
            np.array([0.0, -0.0, 36.0, -36.0, 710.0, -745.0, np.inf, -np.inf, np.nan]),
        ]
    )
    up, down = _logistic_all(x)
    assert np.array_equal(up, special.expit(x), equal_nan=True)
    assert np.array_equal(down, special.logit(special.expit(x)), equal_nan=True)


@njit(cache=False)
def _gamma_family_all(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    psi = np.empty_like(x)
    log_gamma = np.empty_like(x)
    log_beta = np.empty_like(x)
    for i in range(x.shape[0]):
        psi[i] = digamma(x[i], 0)
        log_gamma[i] = gammaln(x[i], 0)
        log_beta[i] = betaln(x[i], y[i], 0)
    return psi, log_gamma, log_beta


def test_digamma_gammaln_betaln_are_scipys_bit_for_bit() -> None:
    rng = np.random.default_rng(4)
    x = np.concatenate(
        [
            rng.random(20_000) * 10.0,
            rng.random(5_000) * 5_000.0,
            np.exp(rng.normal(0.0, 6.0, size=5_000)),
            np.array([0.0, -0.0, 1e-300, -1.5, -2.0, 1e308, np.inf, -np.inf, np.nan]),
        ]
    )
    y = rng.permutation(x)
    psi, log_gamma, log_beta = _gamma_family_all(x, y)
    assert np.array_equal(psi, special.digamma(x), equal_nan=True)
    assert np.array_equal(log_gamma, special.gammaln(x), equal_nan=True)
    assert np.array_equal(log_beta, special.betaln(x, y), equal_nan=True)


def test_betainc_is_scipys_bit_for_bit() -> None:
    rng = np.random.default_rng(1)
    a = rng.gamma(1.0, 20.0, size=10_000) + 1e-3
    b = rng.gamma(1.0, 20.0, size=10_000) + 1e-3
    x = np.where(rng.random(10_000) < 0.5, 0.5, rng.random(10_000))
    assert np.array_equal(_betainc_all(a, b, x), special.betainc(a, b, x), equal_nan=True)


def test_maximum_and_minimum_follow_numpys_nan_rule() -> None:
    x = np.array([1.0, np.nan, 2.0, np.nan, -0.0, 3.0])
    y = np.array([2.0, 1.0, np.nan, np.nan, 0.0, 3.0])
    high, low = _pairwise(x, y)
    assert np.array_equal(high, np.maximum(x, y), equal_nan=True)
    assert np.array_equal(low, np.minimum(x, y), equal_nan=True)


def test_pairwise_sum_is_numpys_sum_bit_for_bit() -> None:
    """Every length class of NumPy's pairwise summation: below 8, up to 128, split halves."""
    from crowdbudget.posteriors._logistic_kernel import NUMPY_SUM_CHUNK, pairwise_sum

    rng = np.random.default_rng(2)
    lengths = [0, 1, 5, 7, 8, 9, 127, 128, 129, 136, 255, 256, 257, 768, 1000, 5000, 8192]
    for n in [*lengths, 8193, 16_385, 20_000, 24_576, 50_000]:
        for _ in range(5):
            x = rng.random(n + 3) * 10.0 ** rng.uniform(-8, 8, size=n + 3)
            assert pairwise_sum(x, 3, n, NUMPY_SUM_CHUNK) == np.sum(x[3:]), n


def test_ndtr_is_exactly_zero_where_the_logistic_kernel_skips_it() -> None:
    from crowdbudget._compiled_special import NORMAL_CDF_ZERO_BELOW

    x = np.concatenate([np.linspace(NORMAL_CDF_ZERO_BELOW, -1e4, 200_001), [-1e300, -np.inf]])
    assert np.all(special.ndtr(x) == 0.0)
    assert np.all(np.diff(special.ndtr(np.linspace(-45.0, 0.0, 100_001))) >= 0)


def test_the_double_specialisation_is_picked_by_its_signature() -> None:
    """Each name's capsule reads ``double (double, …, int __pyx_skip_dispatch)`` on the
    installed SciPy (betainc is unfused before SciPy 1.12; ndtr's fuse 0 is the complex one)."""
    import ctypes

    import scipy.special.cython_special as cython_special

    from crowdbudget._compiled_special import double_specialisation

    name_of = ctypes.pythonapi.PyCapsule_GetName
    name_of.restype = ctypes.c_char_p
    name_of.argtypes = [ctypes.py_object]
    for function, n_doubles in [
        ("betainc", 3),
        ("ndtr", 1),
        ("expit", 1),
        ("logit", 1),
        ("psi", 1),
        ("gammaln", 1),
        ("betaln", 2),
    ]:
        capi_name = double_specialisation(function, n_doubles)
        assert capi_name.endswith(function)
        signature = name_of(cython_special.__pyx_capi__[capi_name]).decode()
        assert signature == "double (" + "double, " * n_doubles + "int __pyx_skip_dispatch)"
    with pytest.raises(ImportError, match="no_such_function"):
        double_specialisation("no_such_function", 1)
    with pytest.raises(ImportError, match="betainc"):
        double_specialisation("betainc", 2)  # no two-argument betainc


_betainc_half_all = elementwise(betainc_half)


def _dense_half_grid() -> tuple[np.ndarray, np.ndarray]:
    """Every pair of 400 values log-spaced over [1e-3, 1e4] (both orders), the diagonal and
    its neighbours one part in 10^3 and 10^9 apart, and random pairs of sums just below and
    above the kernel's limit (a + b = 1000)."""
    values = np.geomspace(1e-3, 1e4, 400)
    a, b = (g.ravel() for g in np.meshgrid(values, values))
    near = np.concatenate([values * (1 + 1e-3), values * (1 + 1e-9)])
    twice = np.concatenate([values, values])
    rng = np.random.default_rng(2)
    split = rng.uniform(0.5, 999.5, 20_000)
    total = np.where(rng.random(20_000) < 0.5, 1000.0, 1000.5)
    a = np.concatenate([a, values, near, twice, split])
    b = np.concatenate([b, values, twice, near, total - split])
    return a, b


def test_betainc_half_matches_scipy_on_a_dense_grid() -> None:
    """The kernel's accuracy, stated: relative error ≤ 1e-12 against SciPy's betainc at
    x = 1/2 wherever SciPy's value is positive (measured on this grid: 3.2e-13, the worst at
    sums near 1000 and values below 1e-200, where SciPy itself is the less accurate one — up
    to 3e-11 off against 40-digit arithmetic at a ≈ 1000; below a + b = 100: 3.4e-14).
    Where SciPy underflows to 0 too early, the kernel gives a value below 1e-250."""
    a, b = _dense_half_grid()
    ours = _betainc_half_all(a, b)
    reference = special.betainc(a, b, 0.5)
    positive = reference > 0
    relative = np.abs(ours[positive] - reference[positive]) / reference[positive]
    assert relative.max() <= 1e-12
    small = (a + b)[positive] < 100
    assert relative[small].max() <= 1e-13
    assert np.all(ours[~positive] < 1e-250)


def test_betainc_half_hands_the_rest_to_scipy() -> None:
    """Outside its domain (a + b > 1000, non-positive or not finite) the kernel is SciPy's
    own betainc, bit for bit (NaN where SciPy gives NaN)."""
    a = np.array([2e4, 600.0, 1.0, 0.0, -1.0, np.nan, np.inf, 3.0, 1.0])
    b = np.array([1e4, 400.5, 2e4, 1.0, 2.0, 1.0, 1.0, np.nan, np.inf])
    assert np.array_equal(_betainc_half_all(a, b), special.betainc(a, b, 0.5), equal_nan=True)


def test_betainc_half_is_one_half_on_the_diagonal_and_symmetric() -> None:
    """I_{1/2}(a, a) = 1/2 and I_{1/2}(a, b) + I_{1/2}(b, a) = 1, to rounding."""
    values = np.geomspace(1e-3, 1e4, 200)
    assert np.allclose(_betainc_half_all(values, values), 0.5, rtol=0, atol=1e-13)
    rng = np.random.default_rng(3)
    a, b = rng.gamma(1.0, 30.0, 5_000) + 1e-3, rng.gamma(1.0, 30.0, 5_000) + 1e-3
    assert np.allclose(_betainc_half_all(a, b) + _betainc_half_all(b, a), 1.0, rtol=0, atol=1e-13)
