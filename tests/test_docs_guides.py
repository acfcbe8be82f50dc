"""The Python examples of the guides (docs/guides/requesters.md, contributors.md) run as
written, and each prints its result."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

GUIDES = Path(__file__).resolve().parents[1] / "docs" / "guides"
GUIDE = GUIDES / "requesters.md"
BLOCKS = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
CONTRIBUTORS = GUIDES / "contributors.md"
CONTRIBUTOR_BLOCKS = re.findall(
    r"```python\n(.*?)```", CONTRIBUTORS.read_text(encoding="utf-8"), re.S
)


@pytest.mark.parametrize("block", range(len(BLOCKS)))
def test_requesters_guide_example_runs(block: int, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(BLOCKS[block], f"{GUIDE.name}[{block}]", "exec"), {})
    assert capsys.readouterr().out.strip()  # each example prints its result


@pytest.fixture
def registries_restored() -> Iterator[None]:
    """The contributors' examples register ids: take them out again, so that other tests in
    the same process see only the built-in ones."""
    from crowdbudget.registry import _REGISTRIES

    saved = {}
    for registry in _REGISTRIES.values():
        registry.entries()  # load the built-in entries first
        saved[registry] = (dict(registry._entries), dict(registry._aliases))
    yield
    for registry, (entries, aliases) in saved.items():
        registry._entries.clear()
        registry._entries.update(entries)
        registry._aliases.clear()
        registry._aliases.update(aliases)


@pytest.mark.parametrize("block", range(len(CONTRIBUTOR_BLOCKS)))
def test_contributors_guide_example_runs(
    block: int, capsys: pytest.CaptureFixture[str], registries_restored: None
) -> None:
    source = CONTRIBUTOR_BLOCKS[block]
    exec(compile(source, f"{CONTRIBUTORS.name}[{block}]", "exec"), {})
    assert capsys.readouterr().out.strip().endswith("conforms")  # it ran to its checks
