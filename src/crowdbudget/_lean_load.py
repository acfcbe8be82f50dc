"""Loading the policies' cached Numba kernels without Numba's whole target set-up.

Numba's on-disk cache loader (``numba.core.caching.Cache.load_overload``) refreshes the CPU
target context before it reads a cached kernel. At the first load of a process that imports
and installs every lowering registry of Numba — about 200 modules (the implementations of
NumPy's functions, the typed containers, linear algebra, random, ...) and their typing
templates, 0.2–0.3 s of CPU — which the kernel's machine code never reads: the registries are
what Numba *compiles* with. For the worker-aware default on a replay this was most of the
command's fixed cost over the homogeneous policy's (benchmarks/README.md, 2026-12-07).

:func:`lean_loads` gives the cached dispatchers of the named modules a loader that does what
running a cached kernel needs and no more: Numba's runtime (NRT) initialised — what the
refresh does first — then the cached library read, linked and wrapped by Numba's own
``_load_overload`` (the modules its environments name are imported there, as always). The
kernels run the same machine code: the same bits. A cache miss compiles as always, and
Numba's compiler refreshes both contexts itself before it types anything
(``numba.core.compiler.CompilerBase``), so a later compilation in the process (ours or a
user's) sees every registry.

Only a cache whose ``load_overload`` is Numba's own is changed, and only when the pieces
named above exist; otherwise (another Numba, ``NUMBA_DISABLE_JIT``) nothing is changed and
Numba's own loader runs. ``tests/test_lean_load.py`` checks, in fresh processes, that a lean
load leaves the lowering modules unimported, gives the values of Numba's own load, and that
a compilation after it still works.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

try:  # the pieces the lean loader calls; without any of them, Numba's own loader runs
    from numba.core.caching import Cache
    from numba.core.registry import CPUDispatcher
    from numba.core.runtime.nrt import rtsys

    _AVAILABLE = all(
        hasattr(Cache, name)
        for name in ("load_overload", "_load_overload", "_guard_against_spurious_io_errors")
    ) and hasattr(rtsys, "initialize")
except ImportError:  # pragma: no cover - another Numba
    _AVAILABLE = False

#: the lean subclass made for each cache class (one per class)
_LEAN_CLASSES: dict[type, type] = {}


def _load_overload_lean(self: Any, sig: Any, target_context: Any) -> Any:
    """``Cache.load_overload`` without the target context's refresh: the runtime
    initialised (idempotent), then Numba's own ``_load_overload`` (None on a miss: the
    dispatcher then compiles, refreshing the contexts first). Should that raise — a Numba
    whose cached load needs the refreshed context — Numba's own loader loads it instead, so
    the lean path can cost a refresh but never a kernel."""
    try:
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)
    except Exception:  # any failure of the lean path: Numba's own loader
        return Cache.load_overload(self, sig, target_context)
    return None  # the guard swallowed an error (Windows): a miss, as Numba's loader


def _lean_class(cls: type) -> type:
    lean = _LEAN_CLASSES.get(cls)
    if lean is None:
        lean = type(
            f"Lean{cls.__name__}",
            (cls,),
            {"load_overload": _load_overload_lean, "__module__": __name__},
        )
        _LEAN_CLASSES[cls] = lean
    return lean


def lean_loads(*modules: ModuleType) -> int:
    """Give every cached Numba dispatcher defined at the top level of ``modules`` the lean
    loader (module docstring). Returns how many dispatchers now have it (0 when Numba's own
    loader is kept)."""
    if not _AVAILABLE:
        return 0
    done = 0
    for module in modules:
        for value in vars(module).values():
            if not isinstance(value, CPUDispatcher):
                continue
            cache = getattr(value, "_cache", None)
            cls = type(cache)
            if cls in _LEAN_CLASSES.values():
                done += 1
                continue
            if cache is None or getattr(cls, "load_overload", None) is not Cache.load_overload:
                continue  # not a disk cache (NullCache), or a loader of its own: left alone
            cache.__class__ = _lean_class(cls)
            done += 1
    return done
