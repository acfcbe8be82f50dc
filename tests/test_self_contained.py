"""A clone is self-contained: nothing in the project refers to folders beside the checkout,
and CI runs the tests in a copy placed where nothing lies beside it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# spelled in pieces so that this file does not match itself
OUTSIDE = ["../" + "shared", "shared" + "/data", "shared" + "/papers", "shared" + "/DESIGN"]


def test_no_file_refers_to_a_folder_beside_the_checkout() -> None:
    offenders = []
    roots = [ROOT / "src", ROOT / "tests", ROOT / "docs", ROOT / "examples", ROOT / "benchmarks"]
    files = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / ".ci" / "run"]
    for root in roots:
        files += [
            p
            for p in root.rglob("*")
            if p.is_file() and p.suffix in {".py", ".md", ".toml", ".yml", ".txt", ".html"}
        ]
    for path in files:
        if not path.is_file() or "egg-info" in str(path):
            continue
        text = path.read_text(errors="replace")
        offenders += [f"{path.relative_to(ROOT)}: {needle}" for needle in OUTSIDE if needle in text]
    assert not offenders, offenders


def test_ci_runs_the_tests_in_a_copy_with_nothing_beside_it() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "mktemp -d" in ci and "unset CROWDBUDGET_DATA_DIR" in ci
    lines = ci.splitlines()
    copy_line = next(i for i, line in enumerate(lines) if line.startswith('cd "$CLEAN"'))
    test_line = next(i for i, line in enumerate(lines) if "python -m pytest -q" in line)
    assert copy_line < test_line  # the README's test command runs in the copy
