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
    assert "confidence" in out and "q6" in out  # printed the final labels per question


def test_readme_example_survives_the_swaps_its_comment_suggests(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The example says which policy ids to try; each must run as pasted (issue 18: the old
    example crashed when "opt-kg" was swapped for "uniform")."""
    (block,) = [b for b in _blocks("python") if 'policy="opt-kg"' in b]
    suggested = re.findall(r'"([a-z][a-z0-9:=.-]*)"', block.split("try", 1)[1].splitlines()[0])
    assert len(suggested) >= 3, suggested
    for policy_id in suggested:
        exec(
            compile(block.replace('policy="opt-kg"', f'policy="{policy_id}"'), "README", "exec"), {}
        )
        out = capsys.readouterr().out
        assert out.count("cat") + out.count("dog") >= 6, (policy_id, out)


def test_ci_runs_readme_test_command() -> None:
    commands = [b.strip() for b in _blocks("bash") if "pytest" in b and "venv" in b]
    assert len(commands) == 1, "README must show exactly one set-up-and-test command"
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[0] in ci.splitlines()


def test_readme_says_how_long_the_tests_take_what_skips_need_and_a_first_check() -> None:
    text = (ROOT / "README.md").read_text()
    tests_part = text.split("Set up and run the tests", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"about \d+ minutes on a quiet 2-core", tests_part)
    for needed in ("PostgreSQL", "Label Studio", "crowd-kit", "Chromium"):
        assert f"**{needed}**" in tests_part, needed
    for variable in ("POSTGRES", "LABELSTUDIO", "CROWDKIT", "BROWSER"):
        assert f"CROWDBUDGET_REQUIRE_{variable}" in tests_part, variable
    (first_check,) = re.findall(r"`(\.venv/bin/python -m pytest -q tests/[^`]+)`", tests_part)
    files = first_check.split("-q", 1)[1].split()
    assert len(files) >= 3 and all((ROOT / name).is_file() for name in files), files


def test_readme_says_how_to_browse_the_built_docs() -> None:
    docs_part = (ROOT / "README.md").read_text().split("## Documentation", 1)[1]
    assert "site/index.html" in docs_part and "mkdocs serve" in docs_part
    assert "http.server" in docs_part
    assert "use_directory_urls: false" in (ROOT / "mkdocs.yml").read_text()
