"""The import direction of DESIGN §11 (issue #16): nothing points up, no cycle.

Layers, lowest first (a module may import its own layer or lower ones):

0. **core** — ``types`` (``Problem``, ``CampaignState``, …), ``labels`` (``LabelData``),
   ``registry``, ``exceptions`` and the private helpers ``_*``: what every layer speaks.
   (``problem`` of the DESIGN is ``types.Problem`` for now.)
1. **leaves** — ``posteriors``, ``aggregation``, ``bounds`` (exact DP, Lagrangian, Gittins
   index), and three modules that compute or read rather than define: ``priors`` (a Beta
   prior fitted to held-back tasks), ``requirements`` (Requallo's completion rules) and
   ``datasets`` (CSV and bundled sets read into the core's ``LabelData``; aggregators read
   crowd-kit frames through its ``from_frame``). None of them is imported by the core, so
   none is core.
2. ``policies`` ← 3. ``simulation`` (worlds only) ← 4. ``engine`` ← 5. ``experiments``,
   ``campaign``, ``testing`` ← 6. ``cli`` (one package, a module per command), ``service``,
   ``client``, ``integrations`` and the package's curated exports (``crowdbudget/__init__``,
   ``__main__``).

Every import counts (inside functions too), except under ``TYPE_CHECKING``; so does
``importlib.import_module("crowdbudget.…")``, and an import by a run-time name is allowed only
where :data:`DYNAMIC_IMPORTS` says why (a registry's declared plugin), so no circle hides
behind ``importlib``.

``KNOWN_UPWARD`` would list upward imports tolerated for a while; the first build's last ones
(the priced-worker policies on simulation's loop) are gone, so it is empty and the test fails
on any upward import — and on a listed one that is gone (so the list only shrinks).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import crowdbudget

PACKAGE = Path(crowdbudget.__file__).parent

LAYERS: dict[str, int] = {
    **dict.fromkeys(["_cache", "_random", "_validation", "exceptions", "types", "labels"], 0),
    "_compiled_special": 0,  # SciPy special functions for the Numba kernels (no package import)
    "_betainc_half_table": 0,  # a table kernel of I_{1/2}(p, q) (imports _compiled_special only)
    "_lean_load": 0,  # cached Numba kernels loaded without the whole target set-up (no import)
    "registry": 0,
    **dict.fromkeys(["posteriors", "aggregation", "bounds"], 1),
    **dict.fromkeys(["priors", "requirements", "datasets"], 1),
    "policies": 2,
    "simulation": 3,
    "engine": 4,
    **dict.fromkeys(["experiments", "campaign", "testing"], 5),
    **dict.fromkeys(["cli", "service", "client", "integrations", "__main__", ""], 6),
}

#: (importing module, imported module) pairs that may point up for a while (none left)
KNOWN_UPWARD: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            skipped.update(id(sub) for sub in ast.walk(node))
    return skipped


def import_graph() -> dict[str, set[str]]:
    """Module → the package modules it imports (run time, anywhere in the file)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        skipped = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if not node.module.startswith("crowdbudget"):
                    continue
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    graph[name].add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in modules)
            elif _is_import_module(node):
                # importlib.import_module("crowdbudget.x"): an import all the same
                target = _literal_target(node)
                if target is not None and target.startswith("crowdbudget"):
                    graph[name].add(target)
    return graph


def _is_import_module(node: ast.AST) -> bool:
    """A call of ``importlib.import_module`` (or a bare ``import_module``)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id == "import_module"
    )


def _literal_target(node: ast.Call) -> str | None:
    first = node.args[0] if node.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


#: modules that import a module named at run time (not a literal the graph can see), and why;
#: anywhere else such a call could hide an upward import or a circle, so it fails the test
DYNAMIC_IMPORTS = {
    "crowdbudget.registry": "a Registry loads the plugin module it was declared with",
    "crowdbudget": "the package's lazy public attributes (PEP 562 __getattr__)",
    "crowdbudget.cli.reproduce": "the reproductions' paper modules, found by package walk",
}


def test_no_import_hides_behind_importlib() -> None:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    dynamic = set()
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if _is_import_module(node) and _literal_target(node) is None:  # type: ignore[arg-type]
                dynamic.add(name)
    unexplained = sorted(dynamic - set(DYNAMIC_IMPORTS))
    assert not unexplained, f"imports by a run-time name (list them with a reason): {unexplained}"
    gone = sorted(set(DYNAMIC_IMPORTS) - dynamic)
    assert not gone, f"remove from DYNAMIC_IMPORTS, no longer importing by name: {gone}"


def _layer(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    assert top in LAYERS, f"{module}: add its layer to LAYERS in tests/test_layering.py"
    return LAYERS[top]


def _upward(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(a, b) for a, bs in graph.items() for b in bs if _layer(b) > _layer(a)}


def test_no_import_points_up() -> None:
    upward = _upward(import_graph())
    new = sorted(upward - KNOWN_UPWARD)
    assert not new, "upward imports (a lower layer importing a higher one): " + ", ".join(
        f"{a} -> {b}" for a, b in new
    )
    gone = sorted(KNOWN_UPWARD - upward)
    assert not gone, "remove from KNOWN_UPWARD, no longer imported: " + ", ".join(
        f"{a} -> {b}" for a, b in gone
    )


def test_no_cycle_between_layers_once_the_known_arrows_are_gone() -> None:
    """Between top-level parts of the package (policies, simulation, ...), no cycle."""
    graph = import_graph()
    parts: dict[str, set[str]] = defaultdict(set)
    for a, bs in graph.items():
        for b in bs:
            if (a, b) in KNOWN_UPWARD:
                continue
            pa, pb = (m.split(".")[1] if "." in m else "" for m in (a, b))
            if pa != pb:
                parts[pa].add(pb)
    # depth-first search for a back edge
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(parts.get(node, ())):
            assert state.get(nxt) != 1, "import cycle: " + " -> ".join([*path, node, nxt])
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for node in sorted(parts):
        if node not in state:
            visit(node, [])
