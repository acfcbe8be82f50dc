"""The Python examples of docs/guides/requesters.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "requesters.md"
BLOCKS = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("block", range(len(BLOCKS)))
def test_requesters_guide_example_runs(block: int, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(BLOCKS[block], f"{GUIDE.name}[{block}]", "exec"), {})
    assert capsys.readouterr().out.strip()  # each example prints its result
