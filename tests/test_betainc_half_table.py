"""The table kernel of I_{1/2}(p, q) (crowdbudget._betainc_half_table) against SciPy's
``betainc``: within 1e-13 relatively on a dense grid of its region, SciPy's own bits outside."""

from __future__ import annotations

import numpy as np
from numpy.polynomial.polynomial import polyval2d
from scipy import special

from crowdbudget._betainc_half_table import (
    _TABLE,
    SMALL_LOW,
    SMALL_STEP,
    SUM_LOW,
    SUM_PIECES,
    SUM_STEP,
    betainc_half_small,
)
from kernel_loops import elementwise

_all = elementwise(betainc_half_small)  # the scalar kernel at every point


def _region_grid() -> tuple[np.ndarray, np.ndarray]:
    """Every (p, q) with s = p + q on a grid of step 1/400 over [2, 4) and q of step 1/400
    over [1/2, s/2] (the pieces' edges and the diagonal p = q included), and a random cloud."""
    s_top = SUM_LOW + SUM_STEP * SUM_PIECES
    s = np.arange(SUM_LOW, s_top, 1.0 / 400.0)
    q = np.arange(SMALL_LOW, s_top / 2.0 + 1e-12, 1.0 / 400.0)
    total, small = np.meshgrid(s, q)
    keep = small <= total / 2.0
    total, small = total[keep], small[keep]
    rng = np.random.default_rng(3)
    cloud_s = rng.uniform(SUM_LOW, s_top, 200_000)
    cloud_q = rng.uniform(SMALL_LOW, cloud_s / 2.0)
    diagonal = np.nextafter(s / 2.0, 0.0)  # just below p = q
    p = np.concatenate([total - small, cloud_s - cloud_q, s - diagonal])
    q = np.concatenate([small, cloud_q, diagonal])
    keep = q <= p
    return p[keep], q[keep]


def test_within_1e13_of_scipy_on_its_region() -> None:
    p, q = _region_grid()
    assert p.shape[0] > 300_000
    reference = special.betainc(p, q, 0.5)
    relative = np.abs(_all(p, q) - reference) / reference
    assert float(relative.max()) <= 1e-13, float(relative.max())


def test_scipys_bits_outside_its_region() -> None:
    rng = np.random.default_rng(4)
    p = np.concatenate([rng.gamma(2.0, 5.0, 20_000), [1.9, 4.0, 3.0, 0.4, np.nan, 1.0]])
    q = np.concatenate([rng.gamma(1.0, 3.0, 20_000), [0.1, 0.5, 0.49, 2.0, 1.0, np.nan]])
    outside = ~(((p + q) >= 2.0) & ((p + q) < 4.0) & (q >= 0.5) & (q <= p))
    p, q = p[outside], q[outside]
    assert np.array_equal(_all(p, q), special.betainc(p, q, 0.5), equal_nan=True)


def test_the_whole_table_is_needed() -> None:
    """The tolerance sees a poorer table: the same pieces cut to their first 7 × 7 power
    coefficients miss SciPy by more than 1e-13 (so the first test can fail), and the full
    table evaluated by NumPy is the kernel's within rounding."""
    p, q = _region_grid()
    p, q = p[::50], q[::50]
    s = p + q
    x = (s - SUM_LOW) / SUM_STEP
    i = np.minimum(x.astype(np.int64), SUM_PIECES - 1)
    y = (q - SMALL_LOW) / SMALL_STEP
    j = np.minimum(y.astype(np.int64), _TABLE.shape[1] - 1)
    u, v = 2.0 * (x - i) - 1.0, 2.0 * (y - j) - 1.0
    reference = special.betainc(p, q, 0.5)
    full = np.array([polyval2d(u[n], v[n], _TABLE[i[n], j[n]]) for n in range(p.shape[0])])
    cut = np.array([polyval2d(u[n], v[n], _TABLE[i[n], j[n], :7, :7]) for n in range(p.shape[0])])
    assert np.max(np.abs(full - _all(p, q)) / reference) < 1e-14
    assert np.max(np.abs(cut - reference) / reference) > 1e-13


def test_half_error_is_the_scalar_kernel_bit_for_bit() -> None:
    """The NumPy form (a ufunc over the same compiled kernel, what the worker-aware policies'
    NumPy paths call) gives the scalar kernel's bits — in the region, outside it, on ties
    (exactly 1/2) and on mirrored states (the same value) — and error_probability's
    ``table=True`` is it at d = 1/2, while its default keeps SciPy's bits."""
    from crowdbudget._betainc_half_table import half_error
    from crowdbudget.posteriors.beta_bernoulli import error_probability

    rng = np.random.default_rng(5)
    a = np.concatenate([rng.uniform(0.3, 3.0, 50_000), rng.gamma(2.0, 5.0, 5_000), [1.5, 2.0]])
    b = np.concatenate([rng.uniform(0.3, 3.0, 50_000), rng.gamma(1.0, 3.0, 5_000), [1.5, 1.0]])
    b[:1000] = a[:1000]  # ties
    hi, lo = np.maximum(a, b), np.minimum(a, b)
    expected = np.where(a == b, 0.5, _all(hi, lo))
    bits = expected.view(np.int64)
    assert np.array_equal(half_error(a, b).view(np.int64), bits)
    assert np.array_equal(half_error(b, a).view(np.int64), bits)  # mirrored: same bits
    assert np.all(half_error(a[:1000], b[:1000]) == 0.5)
    table = error_probability(a, b, 0.5, table=True)
    assert np.array_equal(table.view(np.int64), bits)
    assert half_error(a[:10].reshape(5, 2), b[:2]).shape == (5, 2)  # broadcasting
    scipy_bits = np.where(a == b, 0.5, special.betainc(hi, lo, 0.5))
    assert np.array_equal(error_probability(a, b, 0.5).view(np.int64), scipy_bits.view(np.int64))
    assert not np.array_equal(table, scipy_bits)  # the table's bits are its own
    # other thresholds: table=True is ignored (SciPy's formula)
    d = np.full(a.shape, 0.3)
    assert np.array_equal(error_probability(a, b, d, table=True), error_probability(a, b, d))


def test_the_default_policy_loads_no_compiler() -> None:
    """The worker-aware default (which scores with this kernel, the NumPy path included) runs a
    small replay without Numba's target set-up (its lowering registries, e.g. numba.np.linalg,
    which any compilation — a ufunc's build included — loads): its kernels come from the
    on-disk cache (a first run fills it) through the lean loader."""
    from fresh_process import imported_by_cli

    replay = ["replay", "--dataset", "rte", "--budget", "200", "--reps", "1", "--jobs", "1"]
    replay += ["--no-progress", "--policies", "opt-kg:posterior=one-coin"]
    imported_by_cli([replay], "numba.np.linalg")  # fills the on-disk cache
    assert not imported_by_cli([replay], "numba.np.linalg")
