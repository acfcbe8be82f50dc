"""Every ``crowdbudget`` command the README and the user docs show is accepted by the
parser as written (a newcomer pastes them): a required option the text leaves out, or an
option that does not exist, fails here instead of in the reader's shell."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from crowdbudget.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    ROOT / "docs" / "index.md",
    ROOT / "docs" / "guides" / "requesters.md",
    ROOT / "docs" / "guides" / "researchers.md",
]


def shown_commands(page: Path) -> list[str]:
    """The ``crowdbudget …`` lines of the page's bash blocks, continuation lines joined and
    trailing comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words and words[0].endswith("crowdbudget"):
                    commands.append(shlex.join(words[1:]))
    return commands


CASES = [(page.name, command) for page in PAGES for command in shown_commands(page)]


def test_the_pages_show_commands() -> None:
    names = {name for name, _ in CASES}
    assert {"README.md", "index.md", "researchers.md", "requesters.md"} <= names
    assert len(CASES) >= 25


@pytest.mark.parametrize(("page", "command"), CASES)
def test_shown_command_parses(page: str, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        build_parser().parse_args(shlex.split(command))
    except SystemExit:
        pytest.fail(f"{page}: `crowdbudget {command}` is refused: {capsys.readouterr().err}")
