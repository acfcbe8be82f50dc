"""The errors a newcomer meets in their second hour (a typo in a flag, a plot path without
an image extension, their own labels without gold, an aggregator id with an empty
parameter): each is one line on stderr naming what is wrong and what is allowed, exit status
2, no traceback, and before any work starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crowdbudget.cli import main


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run ``crowdbudget argv``; it must exit 2 (``SystemExit`` from argparse counts) with one
    line on stderr and no traceback. Returns the line."""
    try:
        status = main(argv)
    except SystemExit as stop:
        status = stop.code
    assert status == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    return lines[0]


@pytest.fixture
def votes(tmp_path: Path) -> tuple[Path, Path]:
    """A requester's own labels (string classes) and gold."""
    (tmp_path / "votes.csv").write_text(
        "task,worker,label\nq1,ann,cat\nq2,ann,dog\nq1,bob,cat\nq2,bob,cat\n"
    )
    (tmp_path / "gold.csv").write_text("task,label\nq1,cat\nq2,dog\n")
    return tmp_path / "votes.csv", tmp_path / "gold.csv"


def test_unknown_option_is_refused_by_the_command_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # compare writes its plot into --out; --plot belongs to simulate and replay
    line = _one_line_error(capsys, ["compare", "--plot", "x.png"])
    assert line.startswith("crowdbudget compare: error: unrecognized arguments: --plot x.png")
    assert line.endswith("(see --help)")


@pytest.mark.parametrize("name", ["plot.txt", "plot"])
def test_plot_path_needs_an_image_extension(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], votes: tuple[Path, Path], name: str
) -> None:
    plot = tmp_path / name
    sim = ["simulate", "--items", "4", "--policies", "uniform", "--budget", "8", "--reps", "1"]
    line = _one_line_error(capsys, [*sim, "--no-progress", "--plot", str(plot)])
    assert line.startswith("crowdbudget simulate: error: --plot ")
    assert "allowed: .png, .pdf, .svg" in line
    lab, gold = votes
    replay = ["replay", "--labels", str(lab), "--gold", str(gold), "--policies", "uniform"]
    line = _one_line_error(capsys, [*replay, "--budget", "2", "--reps", "1", "--plot", str(plot)])
    assert line.startswith("crowdbudget replay: error: --plot ") and "allowed: .png" in line
    agg = ["aggregate", str(lab), "--gold", str(gold), "--reliability", str(plot)]
    line = _one_line_error(capsys, agg)
    assert line.startswith("crowdbudget aggregate: error: --reliability ")
    assert not plot.exists() and not plot.with_suffix(".png").exists()  # refused before work


def test_plot_extension_in_capitals_is_an_image(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], votes: tuple[Path, Path]
) -> None:
    lab, gold = votes
    diagram = tmp_path / "diagram.PNG"
    assert main(["aggregate", str(lab), "--gold", str(gold), "--reliability", str(diagram)]) == 0
    assert diagram.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("command", ["replay", "compare"])
def test_own_labels_without_gold_name_the_missing_flag(
    capsys: pytest.CaptureFixture[str], votes: tuple[Path, Path], command: str
) -> None:
    lab, _ = votes
    argv = [command, "--labels", str(lab), "--policies", "uniform", "--budget", "2"]
    line = _one_line_error(capsys, argv)
    assert f"--labels {lab} needs --gold FILE (a CSV with columns task,label)" in line


def test_aggregate_parameter_errors_quote_what_was_typed(
    capsys: pytest.CaptureFixture[str], votes: tuple[Path, Path]
) -> None:
    lab, _ = votes
    line = _one_line_error(capsys, ["aggregate", str(lab), "--method", "mv:"])
    assert "'mv:'" in line and "seed" not in line  # not the seeded id the command builds
    line = _one_line_error(capsys, ["aggregate", str(lab), "--method", "ds:n-iter=x"])
    assert line.startswith("crowdbudget aggregate: error: aggregator 'ds': cannot read n-iter='x'")


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("example", ["live_campaign.py", "live_families.py"])
def test_example_options_are_explained_by_help(example: str) -> None:
    """Every option of a runnable example says what it sets in ``--help`` (they had bare
    ``--budget BUDGET`` lines), and a bad size is refused by the parser, not by the service."""
    env = {**os.environ, "PYTHONPATH": str(EXAMPLES.parent / "src")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / example), "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    options = done.stdout.split("options:", 1)[1]
    entries: list[list[str]] = []
    for line in options.splitlines():
        if line.startswith("  -"):
            entries.append(line.split())
        elif line.strip() and entries:
            entries[-1].extend(line.split())
    for words in entries:
        flags = [w.rstrip(",") for w in words if w.startswith("-")]
        metavars = {w.rstrip(",") for w in words if w.rstrip(",").isupper() or w.startswith("{")}
        text = [w for w in words if w.rstrip(",") not in {*flags, *metavars}]
        assert text, f"{example}: option {flags} has no help text"
    if example == "live_campaign.py":
        refused = subprocess.run(
            [sys.executable, str(EXAMPLES / example), "--budget", "0"],
            capture_output=True,
            text=True,
            env=env,
        )
        assert refused.returncode == 2
        assert "argument --budget: expected an integer >= 1, got 0" in refused.stderr
        assert "Traceback" not in refused.stderr
