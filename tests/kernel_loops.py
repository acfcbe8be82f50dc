"""The compiled kernels' test set-ups: a scalar kernel applied over arrays, for the tests that
hold a kernel against SciPy's ufuncs point by point (the kernel's own bits at every point:
the loop adds no operation of its own), and the one-coin kernel's per-item arrays."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from crowdbudget.policies._one_coin_kernel import fill_moments, item_errors


def elementwise(kernel: Callable[[float, float], float]) -> Callable[..., np.ndarray]:
    """A compiled loop ``out[n] = kernel(p[n], q[n])`` over two 1-D float arrays of one
    length, returning ``out`` (a new array of that shape); ``kernel`` a two-argument ``njit``
    function."""

    @njit(cache=False)
    def loop(p: np.ndarray, q: np.ndarray) -> np.ndarray:
        out = np.empty_like(p)
        for n in range(p.shape[0]):
            out[n] = kernel(p[n], q[n])
        return out

    return loop


def state_arrays(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The one-coin kernel's per-item arrays of the Beta(a, b) states ``a``, ``b`` (n,):
    ``(moments, errors)``, shapes (n, 2, 6) and (n,), filled by ``fill_moments`` and
    ``item_errors`` as the policy fills its own."""
    moments = np.empty((a.shape[0], 2, 6))
    fill_moments(a, b, moments)
    errors = np.empty(a.shape[0])
    item_errors(a, b, errors)
    return moments, errors
