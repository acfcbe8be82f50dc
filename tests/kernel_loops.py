"""Compiled scalar kernels applied over arrays, for the tests that hold a kernel against
SciPy's ufuncs point by point (the kernel's own bits at every point: the loop adds no
operation of its own)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit


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
