"""SciPy's special functions and NumPy's NaN rules for compiled (Numba) kernels.

The compiled kernels must give the same bits as the NumPy code they replace, so they call
the very implementations SciPy's ufuncs call: ``scipy.special.cython_special`` exports each
function's C entry point, registered here under a fixed symbol name (not an address baked into
the machine code) so that the compiled functions can be cached on disk. Each name's
double-precision specialisation is picked by its C signature (checked in
``tests/test_compiled_special.py`` against the ufunc, bit for bit).

- :data:`betainc` ``(a, b, x, 0)``: the regularised incomplete beta function (Boost ``ibeta``).
- :data:`ndtr` ``(x, 0)``: the standard normal CDF.
- :data:`expit` ``(x, 0)``: the logistic sigmoid; :data:`logit` ``(p, 0)``: its inverse.
- :data:`digamma` ``(x, 0)`` (SciPy's ``psi``), :data:`gammaln` ``(x, 0)`` and :data:`betaln`
  ``(a, b, 0)``: ψ, ln|Γ| and ln|B| (the Bayesian Dawid–Skene's compiled iteration).

The trailing ``0`` is Cython's ``skip_dispatch`` flag of the exported function.

One kernel of our own, where SciPy's general code was the cost of the paper suite:
:func:`betainc_half`, the incomplete beta at x = 1/2 (the error probability of a Beta belief at
the threshold 1/2), about twice as fast as Boost's ``ibeta`` and within 1e-12 of it relatively
(3.2e-13 measured on the dense grid of ``tests/test_compiled_special.py``) — not the same bits.
And :func:`normal_cdf`, Φ for the feature model's n_items² look-ahead, from a table of
polynomial pieces and an inline exponential (within 5e-15 of 40-digit values), where SciPy's
``ndtr`` was the cost of ``chen2013-features``.
"""

from __future__ import annotations

import ctypes
import math
import re
from typing import Any

import llvmlite.binding as llvm
import numpy as np
import scipy.special.cython_special as cython_special
from numba import njit, types
from numba.extending import get_cython_function_address

_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]


def double_specialisation(function: str, n_double_arguments: int) -> str:
    """The ``__pyx_capi__`` name of ``cython_special``'s all-double ``function``.

    SciPy exports a function either under its own name (one C type only; e.g. ``betainc``
    before SciPy 1.12) or as fused specialisations ``__pyx_fuse_<k><function>`` whose order
    differs between functions and releases (``ndtr``'s 0 is the complex one). The capsule's
    name is the C signature, so the one that reads ``double (double, …, int
    __pyx_skip_dispatch)`` is the right one on every release. Raises ``ImportError`` when none
    matches (a SciPy without the function).
    """
    wanted = "double (" + "double, " * n_double_arguments + "int __pyx_skip_dispatch)"
    candidate = re.compile(rf"(__pyx_fuse_\d+)?{re.escape(function)}")
    for name, capsule in cython_special.__pyx_capi__.items():
        if candidate.fullmatch(name) and _capsule_name(capsule).decode() == wanted:
            return str(name)
    raise ImportError(f"scipy.special.cython_special exports no {wanted!r} {function}")


def _scipy_special(symbol: str, function: str, n_double_arguments: int) -> Any:
    """An external function the kernels call by ``symbol``: ``cython_special``'s double
    ``function`` of ``n_double_arguments`` doubles (and the ``skip_dispatch`` flag)."""
    capi_name = double_specialisation(function, n_double_arguments)
    llvm.add_symbol(symbol, get_cython_function_address("scipy.special.cython_special", capi_name))
    _f8 = types.float64
    return types.ExternalFunction(symbol, _f8(*([_f8] * n_double_arguments), types.intc))


betainc: Any = _scipy_special("crowdbudget_betainc", "betainc", 3)
ndtr: Any = _scipy_special("crowdbudget_ndtr", "ndtr", 1)
expit: Any = _scipy_special("crowdbudget_expit", "expit", 1)
logit: Any = _scipy_special("crowdbudget_logit", "logit", 1)
digamma: Any = _scipy_special("crowdbudget_psi", "psi", 1)
gammaln: Any = _scipy_special("crowdbudget_gammaln", "gammaln", 1)
betaln: Any = _scipy_special("crowdbudget_betaln", "betaln", 2)


@njit(cache=True, nogil=True)
def maximum(x: float, y: float) -> float:
    """``np.maximum`` of two scalars: NaN if either is NaN, else the larger."""
    if x != x:
        return x
    if y != y:
        return y
    return x if x >= y else y


@njit(cache=True, nogil=True)
def minimum(x: float, y: float) -> float:
    """``np.minimum`` of two scalars: NaN if either is NaN, else the smaller."""
    if x != x:
        return x
    if y != y:
        return y
    return x if x <= y else y


_LN2 = math.log(2.0)
_HALF_LN_2PI = 0.5 * math.log(2.0 * math.pi)
#: above this a + b, :func:`betainc_half` hands over to Boost (its own accuracy is tested up
#: to here; the prefactor's error grows like (a + b)·eps where Stirling's form loses digits)
_BETAINC_HALF_MAX_SUM = 1000.0


@njit(cache=True, nogil=True)
def _stirling_tail(z: float) -> float:
    """δ(z) = ln Γ(z) − [(z − ½) ln z − z + ½ ln 2π], for z > 0.

    From 10 on the asymptotic series (seven terms: the next is below 3e-17 at z = 10); below,
    from ``lgamma`` itself, where ln Γ(z) is small (|ln Γ| < 13) so the subtraction loses
    nothing that matters."""
    if z < 10.0:
        return math.lgamma(z) - ((z - 0.5) * math.log(z) - z + _HALF_LN_2PI)
    r = 1.0 / z
    r2 = r * r
    series = 691.0 / 360360.0 - r2 / 156.0
    series = 1.0 / 1188.0 - r2 * series
    series = 1.0 / 1680.0 - r2 * series
    series = 1.0 / 1260.0 - r2 * series
    series = 1.0 / 360.0 - r2 * series
    return r * (1.0 / 12.0 - r2 * series)


@njit(cache=True, nogil=True)
def _half_log_prefactor(a: float, b: float) -> float:
    """ln[2^−(a+b) Γ(a+b) / (a Γ(a) Γ(b))], the factor in front of the continued fraction.

    With Stirling's form the large terms cancel analytically: what is left is
    a·ln((a+b)/2a) + b·ln((a+b)/2b) + ½ ln(b / (a(a+b))) − ½ ln 2π + δ(a+b) − δ(a) − δ(b),
    each logarithm of a ratio taken by ``log1p`` — no difference of two large ``lgamma``
    values, whose rounding would grow with a + b. Below a + b = 10 ``lgamma`` directly."""
    s = a + b
    if s < 10.0:
        return math.lgamma(s) - math.lgamma(a) - math.lgamma(b) - s * _LN2 - math.log(a)
    return (
        a * math.log1p((b - a) / (2.0 * a))
        + b * math.log1p((a - b) / (2.0 * b))
        + 0.5 * math.log(b / (a * s))
        - _HALF_LN_2PI
        + (_stirling_tail(s) - _stirling_tail(a) - _stirling_tail(b))
    )


@njit(cache=True, nogil=True)
def _half_fraction(a: float, b: float) -> float:
    """The continued fraction of I_x(a, b) at x = 1/2 (DLMF 8.17.22), for a ≥ b > 0:

        1 / (1 + d₁ / (1 + d₂ / (1 + …))),
        d₂ₘ₊₁ = −(a+m)(a+b+m) x / ((a+2m)(a+2m+1)),  d₂ₘ = m(b−m) x / ((a+2m−1)(a+2m)),

    which converges fast for x < (a+1)/(a+b+2) — true at x = 1/2 whenever a ≥ b (about ten
    steps of each kind for a + b up to a few hundred). Evaluated by the forward (Wallis)
    recurrence of numerators and denominators, renormalised after each pair of steps: the
    recurrence's chain is multiplications and additions only (the d's do not depend on it),
    faster than Lentz's method and as accurate here, where no denominator comes near 0
    (B₁ = (a + 2 − b) / (2(a + 1)) > 0 and the d's are bounded by 1 in magnitude)."""
    s = a + b
    num_prev, den_prev = 1.0, 1.0
    num, den = 1.0, 1.0 - 0.5 * s / (a + 1.0)
    value = num / den
    for m in range(1, 100_000):
        twice = 2.0 * m
        even = 0.5 * m * (b - m) / ((a + twice - 1.0) * (a + twice))
        odd = -0.5 * (a + m) * (s + m) / ((a + twice) * (a + twice + 1.0))
        num_even = num + even * num_prev
        den_even = den + even * den_prev
        num_odd = num_even + odd * num
        den_odd = den_even + odd * den
        scale = 1.0 / den_odd
        num, den = num_odd * scale, 1.0
        num_prev, den_prev = num_even * scale, den_even * scale
        if abs(num - value) <= 2.0**-53 * abs(num):
            return num
        value = num
    return value


@njit(cache=True, nogil=True)
def betainc_half(a: float, b: float) -> float:
    """I_{1/2}(a, b), the regularised incomplete beta function at x = 1/2, for a, b > 0.

    ``P(θ ≤ 1/2)`` for θ ~ Beta(a, b) — with a ≥ b the smaller tail, the Bayes error of a Beta
    belief at threshold 1/2. For a ≥ b: the prefactor 2^−(a+b) / (a B(a, b))
    (:func:`_half_log_prefactor`) times the continued fraction (:func:`_half_fraction`); for
    a < b: 1 − I_{1/2}(b, a) (the result is above 1/2 there, so the subtraction keeps its
    relative accuracy). Relative error against SciPy's ``betainc`` (Boost ``ibeta``) at most
    about 1e-13 wherever the result is above 1e-280 (tested on a dense grid); about twice as
    fast. Not finite, not positive, or a + b above 1000: SciPy's ``betainc`` itself."""
    s = a + b
    if not (a > 0.0 and b > 0.0 and s <= _BETAINC_HALF_MAX_SUM):
        return betainc(a, b, 0.5, 0)
    if a >= b:
        return math.exp(_half_log_prefactor(a, b)) * _half_fraction(a, b)
    return 1.0 - math.exp(_half_log_prefactor(b, a)) * _half_fraction(b, a)


# ---- the normal CDF of the feature model's look-ahead ---------------------------------------

#: Φ(−y) for y at or above this is below half the smallest subnormal: exactly 0.0 (SciPy's
#: ``ndtr`` is 0 from about −37.68 on; from −38.5 the true value itself rounds to 0)
NORMAL_CDF_ZERO_BELOW = -38.5
_TAIL_STEP = 0.5  # width of each polynomial piece of the tail, in y
_TAIL_DEGREE = 12  # degree of each piece (1e-15 relative, probed: 10 gives 1e-14); fixed:
#: :func:`normal_lower_tail` spells out its 13 terms
#: the first pieces (y < 3, where Φ(−y) > 1e-3) fit Φ(−y) itself — no exponential to take;
#: beyond, the scaled tail Q(y) = Φ(−y)·exp(y²/2), which a polynomial follows far out
_DIRECT_PIECES = 6
_VELTKAMP = 134217729.0  # 2^27 + 1: splits a double into two halves of 26 bits


def _tail_table() -> Any:
    """Power-basis coefficients of the lower tail's pieces [j·h, (j + 1)·h], j = 0 … 76
    (h = 1/2), in the local variable t = 4(y − j·h) − 1 ∈ [−1, 1]; shape (77, 13), row j's
    coefficient of tᵏ at column k. Rows below :data:`_DIRECT_PIECES`: Φ(−y); the others:
    Q(y) = Φ(−y)·exp(y²/2) = erfcx(y/√2)/2.

    Each piece interpolates its function at the piece's 13 Chebyshev points (SciPy's ``ndtr``
    and ``erfcx``, within 7e-16 of 40-digit values there): both are entire and, on their
    range, slowly varying (Φ(−y) by at most e^−1.5 over a piece below y = 3, Q ≈ 1/(y√2π)
    for large y), so degree 12 on a width of 1/2 leaves an interpolation error near 1e-16; the
    power basis on [−1, 1] at that degree is well conditioned (3.3e-15 measured for the direct
    pieces, 1e-15 for the scaled ones, against mpmath)."""
    from numpy.polynomial import chebyshev
    from scipy import special

    degree, step = _TAIL_DEGREE, _TAIL_STEP
    pieces = math.ceil(-NORMAL_CDF_ZERO_BELOW / step)
    nodes = np.cos(np.pi * (np.arange(degree + 1) + 0.5) / (degree + 1))
    table = np.empty((pieces, degree + 1))
    for j in range(pieces):  # 20 ms at import
        y = j * step + 0.5 * step * (nodes + 1.0)
        scaled_tail = 0.5 * special.erfcx(y / math.sqrt(2.0))
        values = special.ndtr(-y) if j < _DIRECT_PIECES else scaled_tail
        table[j] = chebyshev.cheb2poly(chebyshev.chebfit(nodes, values, degree))
    return table


#: :func:`_tail_table`, frozen into the compiled :func:`normal_cdf` as a constant (a cached
#: compile keeps the table it was built with: same bits on the same install)
_TAIL = _tail_table()


#: exp(−a) for a = 0 … 741 and exp(−b/64) for b = 0 … 63 (``math.exp``, within an ulp): the
#: integer and 1/64 parts of :func:`_exp_minus`'s argument
_EXP_MINUS_INTEGER = np.exp(-np.arange(742.0))
_EXP_MINUS_SIXTY_FOURTH = np.exp(-np.arange(64.0) / 64.0)


@njit(cache=True, nogil=True, inline="always")
def _exp_minus(z: float, correction: float) -> float:
    """exp(−(z + correction)) for 0 ≤ z < 742 and |correction| < 1e-12, inline (no call into
    the C library, so the look-ahead's loop runs several at once).

    z = a + b/64 + r with a, b integers and 0 ≤ r < 1/64, each part exact (z < 1024: z − a
    and 64·(z − a) − b lose no bit); exp(−a)·exp(−b/64) from the tables and exp(−(r + c)) by
    its Taylor polynomial of degree 7 (the next term is below 1e-19). Three roundings of an
    ulp at most: a relative error of a few 1e-16 while the result is a normal double."""
    whole = int(z)
    rest = (z - whole) * 64.0
    sixty_fourths = int(rest)
    r = (rest - sixty_fourths) * (1.0 / 64.0) + correction
    series = 1.0 / 720.0 - r / 5040.0
    for inverse_factorial in (1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0):
        series = inverse_factorial - r * series
    return series * _EXP_MINUS_SIXTY_FOURTH[sixty_fourths] * _EXP_MINUS_INTEGER[whole]


@njit(cache=True, nogil=True, inline="always")
def normal_lower_tail(y: float) -> float:
    """Φ(−y) for 0 ≤ y < 38.5 (:func:`normal_cdf`; no check of the range: the caller's)."""
    piece = int(y * (1.0 / _TAIL_STEP))
    t = (y - piece * _TAIL_STEP) * (2.0 / _TAIL_STEP) - 1.0
    c = _TAIL[piece]
    # Estrin's scheme (pairs, then powers t², t⁴, t⁸): a chain four multiply-adds deep where
    # Horner's is twelve — the latency is the cost here; |t| ≤ 1 and the coefficients fall
    # off, so the rounding is Horner's within an ulp or two
    t2 = t * t
    t4 = t2 * t2
    low = (c[0] + c[1] * t) + (c[2] + c[3] * t) * t2
    middle = (c[4] + c[5] * t) + (c[6] + c[7] * t) * t2
    high = (c[8] + c[9] * t) + (c[10] + c[11] * t) * t2
    value = (low + middle * t4) + (high + c[12] * t4) * (t4 * t4)
    if piece < _DIRECT_PIECES:
        return value
    # y² = square + error exactly: y split into 26-bit halves whose products are exact
    split = _VELTKAMP * y
    high = split - (split - y)
    low = y - high
    square = y * y
    error = ((high * high - square) + 2.0 * high * low) + low * low
    return value * _exp_minus(0.5 * square, 0.5 * error)


@njit(cache=True, nogil=True, inline="always")
def normal_cdf(x: float) -> float:
    """Φ(x), the standard normal CDF — our kernel for the feature model's n_items² look-ahead
    (:mod:`crowdbudget.posteriors._logistic_kernel`), faster than SciPy's ``ndtr``.

    For x ≤ 0 with y = −x, from a table of degree-12 polynomial pieces (:func:`_tail_table`):
    below y = 3 Φ(−y) itself; beyond, Φ(x) = exp(−y²/2)·Q(y), Q(y) = erfcx(y/√2)/2 the scaled
    tail. The exponent is taken without the rounding of y² (whose error, y²·2⁻⁵³ ≈ 1e-13 at
    y = 38, would reach the result relatively): y² = p + e exactly (Veltkamp's split,
    Dekker's product), then exp(−p/2 − e/2) by tables and a short series
    (:func:`_exp_minus`), no library call.
    For x > 0: 1 − Φ(−x). At or below −38.5: 0.0.

    Within 5e-15 relatively of 40-digit values wherever Φ(x) is a normal double (x > −37.5),
    absolute below 1e-300 beyond; SciPy's ``ndtr`` differs from it by at most 1e-15·(1 + x²)
    relatively (2.4e-13 at x ≈ −37: mostly SciPy's own error, its ``erfc`` of x/√2 rounded) —
    tested on a dense grid in ``tests/test_normal_cdf.py``; not the same bits. NaN gives
    NaN."""
    if x != x:
        return x
    if x > 0.0:
        return 1.0 - normal_lower_tail(x) if x < -NORMAL_CDF_ZERO_BELOW else 1.0
    if x <= NORMAL_CDF_ZERO_BELOW:
        return 0.0
    return normal_lower_tail(-x)
