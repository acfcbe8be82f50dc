"""SciPy's special functions and NumPy's NaN rules for compiled (Numba) kernels.

The compiled kernels must give the same bits as the NumPy code they replace, so they call
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

import ctypes
import re
from typing import Any

import llvmlite.binding as llvm
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
