"""The lean load of the policies' cached Numba kernels (``crowdbudget._lean_load``).

Each check runs in fresh processes (the first makes sure the kernel is in the on-disk cache,
the second loads it): a lean load must leave Numba's lowering modules unimported, give the
values Numba's own loader gives, and leave compilation working afterwards.
"""

from __future__ import annotations

import json
import sys

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


_LINK_SCRIPT = """
import json, sys
import numpy as np
import numba
from crowdbudget import _lean_load
_lean_load._LEAN_UNSERIALIZE = sys.argv[1] == "lean"
import crowdbudget.policies.worker_aware  # gives the kernels the lean loader
from crowdbudget.policies import _one_coin_kernel as k
a = np.array([1.0, 2.5, 3.0, 1.25]); b = np.array([1.0, 1.5, 0.75, 2.0])
out = np.empty(4)
k.item_errors(a, b, out)  # loaded from the cache
library = k.item_errors.overloads[k.item_errors.signatures[0]].library
lean_class = type(library).__name__
parsed_at_load = library._shared_module is not None
@numba.njit
def twice(a, b):  # a new compilation that links the loaded kernel's library
    errors = np.empty(a.shape[0])
    k.item_errors(a, b, errors)
    return 2.0 * errors
print(json.dumps({
    "errors": out.tolist(), "twice": twice(a, b).tolist(), "class": lean_class,
    "parsed_at_load": parsed_at_load, "parsed_at_link": library._shared_module is not None,
}))
"""


@pytest.mark.skipif(
    not _lean_load._LEAN_UNSERIALIZE or not sys.platform.startswith("linux"),
    reason="the lean unserialisation reads ELF objects (Linux)",
)
def test_the_lean_library_parses_its_bitcode_only_when_linked() -> None:
    """The cached library is loaded without its shared bitcode parsed; a later compilation
    that calls the kernel links it (parsing it then) and gets the same values."""
    _run("plain")  # the kernels compiled and cached if they were not
    runs = {}
    for mode in ("plain", "lean"):
        last = run_python(_LINK_SCRIPT, mode, jit=True).strip().splitlines()[-1]
        runs[mode] = json.loads(last)
    plain, lean = runs["plain"], runs["lean"]
    assert lean["class"] == "_LeanLibrary" and plain["class"] == "JITCodeLibrary"
    assert lean["parsed_at_load"] is False and plain["parsed_at_load"] is True
    assert lean["parsed_at_link"] is True
    assert lean["errors"] == plain["errors"]
    assert lean["twice"] == plain["twice"] == [2.0 * e for e in plain["errors"]]


_SYMBOLS_SCRIPT = """
import json, sys
import llvmlite.binding as ll
import numpy as np
from numba.core import codegen
from crowdbudget import _lean_load
_lean_load._LEAN_UNSERIALIZE = False  # Numba's own unserialisation, whose states we read
states = []
own = codegen.JITCodeLibrary._unserialize.__func__
def keep(cls, cg, state):
    states.append(state)
    return own(cls, cg, state)
codegen.JITCodeLibrary._unserialize = classmethod(keep)
import crowdbudget.policies.worker_aware
from crowdbudget.policies import _one_coin_kernel as k
from crowdbudget.engine import replay_push  # noqa: F401
a = np.array([1.0, 2.5]); b = np.array([1.0, 1.5])
k.item_errors(a, b, np.empty(2))
k.fill_moments(a, b, np.empty((2, 2, 6)))
same = []
for name, kind, data in states:
    if kind != "object":
        continue
    object_code, bitcode = data
    module = ll.parse_bitcode(bitcode)
    defined = {g.name for group in (module.functions, module.global_variables)
               for g in group if not g.is_declaration}
    same.append([name, sorted(_lean_load._elf_defined_symbols(object_code)) == sorted(defined),
                 len(defined)])
print(json.dumps(same))
"""


@pytest.mark.skipif(
    not _lean_load._LEAN_UNSERIALIZE or not sys.platform.startswith("linux"),
    reason="the lean unserialisation reads ELF objects (Linux)",
)
def test_the_objects_symbol_table_names_what_the_ir_defines() -> None:
    """The defined symbols read from a cached object's ELF symbol table are exactly the
    functions and globals its IR defines (what Numba's own unserialisation registers)."""
    _run("plain")
    last = run_python(_SYMBOLS_SCRIPT, jit=True).strip().splitlines()[-1]
    checked = json.loads(last)
    assert len(checked) >= 2
    for name, same, n_defined in checked:
        assert same, name
        assert n_defined > 0
    assert _lean_load._elf_defined_symbols(b"not an object") is None
