"""Python code run in a fresh process, for the tests of what a process imports or loads: the
import-time and lean-load checks, which the test process itself (its modules already
imported, its kernels already loaded) cannot see."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")

_CLI = """
import sys
from crowdbudget.cli import main
for argv in {commands!r}:
    sys.argv = ['crowdbudget', *argv]
    try:
        main()
    except SystemExit:
        pass
print('IMPORTED', {module!r} in sys.modules)
"""


def run_python(code: str, *args: str, jit: bool = False) -> str:
    """Run ``python -c code *args`` with this checkout's ``src`` first on the path and return
    its stdout; a failing process fails the test (``CalledProcessError``). ``jit=True`` drops
    ``NUMBA_DISABLE_JIT`` from its environment (the compiled kernels themselves are checked)."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if jit:
        env.pop("NUMBA_DISABLE_JIT", None)
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=600,
    )
    return done.stdout


def imported_by_cli(commands: Sequence[Sequence[str]], module: str) -> bool:
    """Whether ``module`` is in ``sys.modules`` after a fresh process has run the CLI
    ``crowdbudget`` on each of ``commands`` (argument lists without the program name) in turn."""
    code = _CLI.format(commands=[list(argv) for argv in commands], module=module)
    last = run_python(code).strip().splitlines()[-1]
    assert last in ("IMPORTED True", "IMPORTED False"), last
    return last == "IMPORTED True"
