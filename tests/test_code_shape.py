"""The shape the code keeps (DESIGN §11, the contributor's guide): modules a reader can hold,
functions a reader can follow, contract in the code and history in docs/.

- every module of the package has at most :data:`MAX_MODULE_LINES` lines;
- every function or method at most :data:`MAX_FUNCTION_LINES` lines, except compiled kernels
  (decorated with Numba's ``njit`` / ``jit``), whose loops stay whole so the compiler sees them;
- no history tags in the source: "issue 12", "issue #12", "stop 30" belong in
  ``docs/decisions.md``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import crowdbudget

PACKAGE = Path(crowdbudget.__file__).parent
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 120
_HISTORY = re.compile(r"\b(issue\s*#?\d+|stop\s+\d+)\b", re.IGNORECASE)


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _compiled(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated with a Numba compiler (``njit``, ``jit``, ``numba.njit(...)``)."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("njit", "jit"):
            return True
    return False


def test_modules_are_at_most_800_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE)): n
        for path in _modules()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_functions_are_at_most_120_lines_except_compiled_kernels() -> None:
    long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _compiled(node):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.name}"] = n
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_history_tags_in_the_source() -> None:
    tagged = [
        f"{path.relative_to(PACKAGE)}:{k}: {line.strip()}"
        for path in _modules()
        for k, line in enumerate(path.read_text().splitlines(), start=1)
        if _HISTORY.search(line)
    ]
    assert not tagged, "history belongs in docs/decisions.md:\n" + "\n".join(tagged[:20])


def test_the_checks_can_fail() -> None:
    # a 121-line plain function is caught, a compiled one is not; a tag is found
    body = "\n".join(["def f():"] + ["    x = 1"] * 120)
    (node,) = ast.parse(body).body
    assert isinstance(node, ast.FunctionDef)
    assert node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES and not _compiled(node)
    (kernel,) = ast.parse("@njit(cache=True)\n" + body).body
    assert isinstance(kernel, ast.FunctionDef) and _compiled(kernel)
    assert _HISTORY.search("fixed in issue #12") and _HISTORY.search("since stop 30")
    assert not _HISTORY.search("the stop reason of 3 campaigns")
