"""The lean load of the policies' cached Numba kernels (``crowdbudget._lean_load``).

Each check runs in fresh processes (the first makes sure the kernel is in the on-disk cache,
the second loads it): a lean load must leave Numba's lowering modules unimported, give the
values Numba's own loader gives, and leave compilation working afterwards.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from crowdbudget import _lean_load
from fresh_process import run_python

_SCRIPT = """
import json, sys
import numpy as np
lean = sys.argv[1] == "lean"
if lean:
    import crowdbudget.policies.worker_aware  # gives the kernels the lean loader
from crowdbudget.policies import _one_coin_kernel as k
a = np.array([1.0, 2.5, 3.0, 1.25]); b = np.array([1.0, 1.5, 0.75, 2.0])
out = np.empty(4)
k.item_errors(a, b, out)
moments = np.empty((4, 2, 6))
k.fill_moments(a, b, moments)
loaded = "numba.np.linalg" in sys.modules
import numba
norm = numba.njit(lambda x: np.linalg.norm(x))(np.array([3.0, 4.0]))  # compiles after it
print(json.dumps({
    "errors": out.tolist(), "moments": moments.ravel().tolist(), "lowering": loaded,
    "norm": float(norm), "cache": type(k.item_errors._cache).__name__,
}))
"""


def _run(mode: str) -> dict[str, object]:
    last = run_python(_SCRIPT, mode, jit=True).strip().splitlines()[-1]
    result: dict[str, object] = json.loads(last)
    return result


@pytest.mark.skipif(not _lean_load._AVAILABLE, reason="this Numba has no lean loader to test")
def test_lean_load_skips_the_lowering_registries_and_gives_the_same_values() -> None:
    _run("plain")  # the kernels compiled and cached if they were not
    plain, lean = _run("plain"), _run("lean")
    assert plain["lowering"] is True  # Numba's own loader imports the lowering modules
    assert lean["lowering"] is False  # the lean loader does not
    assert lean["cache"] == "LeanFunctionCache"
    assert lean["errors"] == plain["errors"]  # the same machine code: the same bits
    assert lean["moments"] == plain["moments"]
    assert lean["norm"] == plain["norm"] == 5.0  # a compilation after a lean load works


_FALLBACK_SCRIPT = """
import sys
import numba.core.caching as caching
from crowdbudget import _lean_load
own = caching.Cache._load_overload
def needs_refresh(self, sig, target_context):  # a Numba whose cached load needs the refresh
    if "numba.np.linalg" not in sys.modules:
        raise RuntimeError("the target context was not refreshed")
    return own(self, sig, target_context)
caching.Cache._load_overload = needs_refresh  # the lean path fails; Numba's own loader runs
import crowdbudget.policies.worker_aware
from crowdbudget.policies import _one_coin_kernel as k
import numpy as np
out = np.empty(1)
k.item_errors(np.array([2.5]), np.array([1.5]), out)
print(repr(float(out[0])), "numba.np.linalg" in sys.modules)
"""


@pytest.mark.skipif(not _lean_load._AVAILABLE, reason="this Numba has no lean loader to test")
def test_a_failing_lean_load_falls_back_to_numbas_own_loader() -> None:
    """A Numba whose cached load fails without the target context's refresh: the lean path
    raises, Numba's own loader refreshes and loads, and the kernel gives the same value."""
    plain = _run("plain")
    value, lowering = run_python(_FALLBACK_SCRIPT, jit=True).split()
    assert float(value) == plain["errors"][1]  # type: ignore[index]
    assert lowering == "True"


def _plus_one(x: float) -> float:
    return x + 1.0


def test_lean_loads_changes_only_disk_caches() -> None:
    from numba import njit

    from crowdbudget.policies import _class_prior

    class Module:  # a namespace with a cached, an uncached and a plain function
        pass

    namespace = Module()
    namespace.cached = njit(cache=True)(_plus_one)  # type: ignore[attr-defined]
    namespace.uncached = njit(_plus_one)  # type: ignore[attr-defined]
    namespace.plain = len  # type: ignore[attr-defined]
    before = type(namespace.uncached._cache)  # type: ignore[attr-defined]
    assert _lean_load.lean_loads(namespace) == 1  # type: ignore[arg-type]
    assert type(namespace.uncached._cache) is before  # type: ignore[attr-defined]
    assert type(namespace.cached._cache).__name__ == "LeanFunctionCache"  # type: ignore[attr-defined]
    assert namespace.cached(np.float64(1.0)) == 2.0  # type: ignore[attr-defined]
    # the policy modules' kernels have it once the policy is imported (and it is idempotent)
    import crowdbudget.policies.worker_aware  # noqa: F401

    assert _lean_load.lean_loads(_class_prior) >= 1
