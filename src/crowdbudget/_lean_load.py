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

The cached library itself is read without two costs of Numba's ``_unserialize`` that running
it does not need (:func:`_unserialize_lean`; about 3 ms a library, 13 libraries on a default
replay): the parse of the library's *shared bitcode* — its IR, kept so that a later
compilation can link the kernel into its own library — is put off to the first such link
(:class:`_LeanLibrary`), and the engine's table of defined symbols, which Numba fills from
that parsed IR, is filled from the object's own ELF symbol table (the same names: the IR's
defined functions and globals are the object's defined symbols;
``tests/test_lean_load.py`` compares them). The machine code is the cached object either
way. Another object format, or another kind of cached library: Numba's own.

Only a cache whose ``load_overload`` is Numba's own is changed, and only when the pieces
named above exist; otherwise (another Numba, ``NUMBA_DISABLE_JIT``) nothing is changed and
Numba's own loader runs. ``tests/test_lean_load.py`` checks, in fresh processes, that a lean
load leaves the lowering modules unimported, gives the values of Numba's own load, and that
a compilation after it still works.
"""

from __future__ import annotations

import struct
from functools import partial
from types import ModuleType
from typing import Any

try:  # the pieces the lean loader calls; without any of them, Numba's own loader runs
    import llvmlite.binding as ll
    from numba.core.caching import Cache
    from numba.core.codegen import JITCodeLibrary
    from numba.core.registry import CPUDispatcher
    from numba.core.runtime.nrt import rtsys

    _AVAILABLE = all(
        hasattr(Cache, name)
        for name in ("load_overload", "_load_overload", "_guard_against_spurious_io_errors")
    ) and hasattr(rtsys, "initialize")
    #: the lean unserialisation's pieces (else Numba's own ``_unserialize`` runs)
    _LEAN_UNSERIALIZE = all(
        hasattr(JITCodeLibrary, name)
        for name in (
            "_unserialize",
            "_get_module_for_linking",
            "_set_compiled_object",
            "enable_object_caching",
            "_finalize_final_module",
        )
    )

    class _LeanLibrary(JITCodeLibrary):
        """A cached library whose shared bitcode (``_lean_bitcode``) is parsed at the first
        link into another library, not at its load."""

        _lean_bitcode: bytes | None = None

        def _get_module_for_linking(self) -> Any:
            if self._shared_module is None and self._lean_bitcode is not None:
                self._shared_module = ll.parse_bitcode(self._lean_bitcode)
                self._lean_bitcode = None
            return super()._get_module_for_linking()

except ImportError:  # pragma: no cover - another Numba
    _AVAILABLE = _LEAN_UNSERIALIZE = False

#: the lean subclass made for each cache class (one per class)
_LEAN_CLASSES: dict[type, type] = {}


def _elf_defined_symbols(object_code: bytes) -> set[str] | None:
    """The names of the symbols an ELF64 little-endian relocatable object defines (its
    ``.symtab`` entries with a section, other than section and file symbols), or None when
    ``object_code`` is not such an object (then Numba's own unserialisation runs)."""
    if object_code[:6] != b"\x7fELF\x02\x01":  # ELF, 64-bit, little-endian
        return None
    section_offset = struct.unpack_from("<Q", object_code, 0x28)[0]
    entry_size, n_sections = struct.unpack_from("<HH", object_code, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", object_code, section_offset + k * entry_size)
        for k in range(n_sections)
    ]
    names: set[str] = set()
    for _, kind, _, _, offset, size, link, _, _, symbol_size in sections:
        if kind != 2 or symbol_size != 24:  # SHT_SYMTAB of Elf64_Sym entries
            continue
        strings = sections[link][4]
        for name, info, _, index, _, _ in struct.iter_unpack(
            "<IBBHQQ", object_code[offset : offset + size]
        ):
            # defined (a section, not SHN_UNDEF), not STT_SECTION (3) nor STT_FILE (4)
            if index != 0 and (info & 0xF) not in (3, 4) and name != 0:
                end = object_code.index(b"\0", strings + name)
                names.add(object_code[strings + name : end].decode())
    return names


def _unserialize_lean(codegen: Any, state: Any) -> Any:
    """``JITCodeLibrary._unserialize`` of a cached object without parsing the library's
    shared bitcode (its IR for linking into later compilations: parsed at the first such
    link, :class:`_LeanLibrary`) and with the engine's defined symbols read from the
    object's own symbol table instead of the parsed IR's functions and globals. Anything
    else — another kind of cached library, another object format — Numba's own."""
    name, kind, data = state
    library_class = codegen._library_class
    if kind != "object" or library_class is not JITCodeLibrary:
        return library_class._unserialize(codegen, state)
    object_code, shared_bitcode = data
    symbols = _elf_defined_symbols(object_code)
    defined = getattr(getattr(codegen, "_engine", None), "_defined_symbols", None)
    if symbols is None or not isinstance(defined, set):
        return library_class._unserialize(codegen, state)
    library = codegen.create_library(name)
    library.__class__ = _LeanLibrary
    library.enable_object_caching()
    library._set_compiled_object(object_code)
    library._lean_bitcode = shared_bitcode
    library._finalize_final_module()
    defined |= symbols
    return library


def _load_overload_lean(self: Any, sig: Any, target_context: Any) -> Any:
    """``Cache.load_overload`` without the target context's refresh: the runtime
    initialised (idempotent), then Numba's own ``_load_overload`` (None on a miss: the
    dispatcher then compiles, refreshing the contexts first), its library unserialised by
    :func:`_unserialize_lean`. Should that raise — a Numba whose cached load needs the
    refreshed context — Numba's own loader loads it instead, so the lean path can cost a
    refresh but never a kernel."""
    codegen = None
    try:
        rtsys.initialize(target_context)
        codegen = target_context.codegen()
        if _LEAN_UNSERIALIZE:
            # an attribute of this codegen for this load only (Numba's compiler lock is held:
            # no other load or compilation runs meanwhile)
            codegen.unserialize_library = partial(_unserialize_lean, codegen)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)
    except Exception:  # any failure of the lean path: Numba's own loader
        _restore(codegen)
        return Cache.load_overload(self, sig, target_context)
    finally:
        _restore(codegen)
    return None  # the guard swallowed an error (Windows): a miss, as Numba's loader


def _restore(codegen: Any) -> None:
    """Numba's own ``unserialize_library`` on ``codegen`` again."""
    if codegen is not None and "unserialize_library" in vars(codegen):
        del codegen.unserialize_library


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
