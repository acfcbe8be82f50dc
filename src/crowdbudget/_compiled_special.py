"""SciPy's special functions and NumPy's NaN rules for compiled (Numba) kernels.

The kernels of issue 21 must give the same bits as the NumPy code they replace, so they call
the very implementations SciPy's ufuncs call: ``scipy.special.cython_special`` exports each
function's C entry point, registered here under a fixed symbol name (not an address baked into
the machine code) so that the compiled functions can be cached on disk. Each name's
double-precision specialisation is picked by its C signature (checked in
``tests/test_compiled_special.py`` against the ufunc, bit for bit).

- :data:`betainc` ``(a, b, x, 0)``: the regularised incomplete beta function (Boost ``ibeta``).
- :data:`ndtr` ``(x, 0)``: the standard normal CDF.
- :data:`expit` ``(x, 0)``: the logistic sigmoid.

The trailing ``0`` is Cython's ``skip_dispatch`` flag of the exported function.
"""

from __future__ import annotations

from typing import Any

import llvmlite.binding as llvm
from numba import njit, types
from numba.extending import get_cython_function_address


def _scipy_special(symbol: str, capi_name: str, signature: Any) -> Any:
    """An external function the kernels call by ``symbol``: ``cython_special``'s ``capi_name``."""
    llvm.add_symbol(symbol, get_cython_function_address("scipy.special.cython_special", capi_name))
    return types.ExternalFunction(symbol, signature)


_F8 = types.float64
# the fused specialisation 0 of betainc and 1 of ndtr are the double ones (0 of ndtr: complex)
betainc: Any = _scipy_special(
    "crowdbudget_betainc", "__pyx_fuse_0betainc", _F8(_F8, _F8, _F8, types.intc)
)
ndtr: Any = _scipy_special("crowdbudget_ndtr", "__pyx_fuse_1ndtr", _F8(_F8, types.intc))
# expit's specialisations: 0 double, 1 float, 2 long double
expit: Any = _scipy_special("crowdbudget_expit", "__pyx_fuse_0expit", _F8(_F8, types.intc))


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
