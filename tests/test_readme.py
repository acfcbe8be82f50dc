"""The README's Python example runs, and .ci/run calls the README's test command verbatim."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _blocks(language: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def test_readme_python_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = _blocks("python")
    assert blocks, "README has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "[" in out  # printed final labels


def test_ci_runs_readme_test_command() -> None:
    commands = [b.strip() for b in _blocks("bash") if "pytest" in b and "venv" in b]
    assert len(commands) == 1, "README must show exactly one set-up-and-test command"
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[0] in ci.splitlines()
