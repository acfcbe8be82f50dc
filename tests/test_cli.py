"""The command-line tool: documents, tables, plots, and one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crowdbudget.cli import build_parser, main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_simulate_json_document(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        "simulate", "--policies", "uniform,opt-kg,cvar-kg:alpha=0.3", "--items", "10",
        "--budget-per-item", "1,3", "--reps", "4", "--seed", "3", "--json", "--jobs", "1",
        "--no-progress",
    )  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    assert doc["command"] == "simulate" and doc["seed"] == 3
    cells = {(r["policy"], r["budget"]) for r in doc["results"]}
    assert cells == {(p, b) for p in ("uniform", "opt-kg", "cvar-kg:alpha=0.3") for b in (10, 30)}
    for row in doc["results"]:
        assert row["reps"] == 4
        assert 0.0 <= row["accuracy_mean"] <= 1.0
        assert row["accuracy_ci_low"] <= row["accuracy_mean"] <= row["accuracy_ci_high"]
        assert row["budget_per_item"] == row["budget"] / 10
        assert row["labels_used_mean"] == pytest.approx(row["budget"])


def test_simulate_same_seed_same_document(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--policies", "kg-random,uniform", "--items", "8", "--budget", "20",
            "--reps", "3", "--json", "--no-progress"]  # fmt: skip
    _, first, _ = run_cli(capsys, *argv, "--jobs", "1")
    _, second, _ = run_cli(capsys, *argv, "--jobs", "2")
    strip = lambda d: [{k: v for k, v in r.items() if not k.startswith("seconds")} for r in d]  # noqa: E731
    assert strip(json.loads(first)["results"]) == strip(json.loads(second)["results"])


def test_simulate_table_and_plot(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    plot = tmp_path / "acc.png"
    code, out, _ = run_cli(
        capsys, "simulate", "--policies", "opt-kg", "--items", "5", "--budget", "10,20",
        "--reps", "2", "--plot", str(plot), "--jobs", "1", "--no-progress",
    )  # fmt: skip
    assert code == 0
    assert "opt-kg" in out and "±" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_reproduce_quick_writes_plot(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli(
        capsys, "reproduce", "chen2013-fig2a", "--quick", "--json", "--out", str(tmp_path),
        "--jobs", "2", "--no-progress",
    )  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    assert doc["settings"]["id"] == "chen2013-fig2a" and doc["settings"]["quick"] is True
    policies = {r["policy"] for r in doc["results"]}
    assert {"uniform", "kg-random", "opt-kg"} <= policies
    assert any("paper_accuracy" in r for r in doc["results"])
    assert (tmp_path / "chen2013-fig2a-quick.png").exists()


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["simulate", "--policies", "nope", "--items", "5", "--budget", "5"], "unknown policy"),
        (["simulate", "--policies", "opt-kg", "--items", "5", "--budget", "0"], "budget"),
        (["simulate", "--policies", "opt-kg", "--items", "5", "--budget", "-3"], "budget"),
        (["simulate", "--policies", "opt-kg", "--items", "5", "--budget", "x"], "numbers"),
        (
            [
                "simulate",
                "--policies",
                "opt-kg",
                "--items",
                "5",
                "--budget",
                "5",
                "--prior",
                "-1,1",
            ],
            "prior",
        ),
        (["simulate", "--policies", "cvar-kg:alpha=2", "--items", "5", "--budget", "5"], "alpha"),
        (["simulate", "--policies", "opt-kg:zeta=2", "--items", "5", "--budget", "5"], "zeta"),
        (["simulate", "--policies", "opt-kg", "--items", "0", "--budget", "5"], "--items"),
        (["simulate", "--policies", "opt-kg", "--items", "5"], "budget"),
        (
            [
                "simulate",
                "--policies",
                "opt-kg",
                "--items",
                "5",
                "--budget",
                "5",
                "--threshold",
                "1.5",
            ],
            "threshold",
        ),
        (["reproduce", "no-such-figure"], "unknown reproduction"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_user_errors_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    with pytest.raises(SystemExit) as info:
        code = main([*argv, "--reps", "1"] if argv[0] == "simulate" else argv)
        raise SystemExit(code)
    assert info.value.code == 2
    _, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert needle in lines[0]
    assert "Traceback" not in err


def test_every_command_has_help() -> None:
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"simulate", "reproduce", "policies"} <= set(commands)
    for name in commands:
        result = subprocess.run(
            [sys.executable, "-m", "crowdbudget", name, "--help"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert "usage: crowdbudget" in result.stdout


def test_policies_lists_registry(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "policies", "--json")
    assert code == 0
    ids = {row["id"] for row in json.loads(out)["results"]}
    assert {"uniform", "round-robin", "kg", "kg-random", "opt-kg", "cvar-kg"} <= ids


def test_replay_json_on_bundled_rte(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        "replay",
        "--dataset",
        "rte",
        "--policies",
        "uniform,opt-kg",
        "--budget-per-item",
        "2,10",
        "--reps",
        "2",
        "--jobs",
        "1",
        "--json",
        "--no-progress",
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["command"] == "replay" and doc["settings"]["n_labels"] == 8000
    rows = {(r["policy"], r["budget"]): r for r in doc["results"]}
    assert set(rows) == {("uniform", 1600), ("uniform", 8000), ("opt-kg", 1600), ("opt-kg", 8000)}
    # all 8000 labels replayed: every policy ends with the same votes, hence the same accuracy
    assert rows[("uniform", 8000)]["accuracy_mean"] == rows[("opt-kg", 8000)]["accuracy_mean"]
    assert rows[("opt-kg", 1600)]["accuracy_mean"] > rows[("uniform", 1600)]["accuracy_mean"]


def test_replay_from_csv_files(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    from crowdbudget.datasets import load_dataset

    data = load_dataset("temp")
    data.to_frame().to_csv(tmp_path / "labels.csv", index=False)
    data.gold_series().to_csv(tmp_path / "gold.csv")
    code, out, _ = run_cli(
        capsys,
        "replay",
        "--labels",
        str(tmp_path / "labels.csv"),
        "--gold",
        str(tmp_path / "gold.csv"),
        "--policies",
        "opt-kg",
        "--budget",
        "4620",
        "--reps",
        "1",
        "--json",
        "--no-progress",
    )
    assert code == 0
    row = json.loads(out)["results"][0]
    assert row["labels_used_mean"] == 4620 and row["accuracy_mean"] > 0.9


def test_compare_writes_plot(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli(
        capsys,
        "compare",
        "--policies",
        "uniform,opt-kg",
        "--budget-per-item",
        "1,3",
        "--reps",
        "2",
        "--jobs",
        "1",
        "--out",
        str(tmp_path),
        "--no-progress",
    )
    assert code == 0
    assert "opt-kg" in out and (tmp_path / "compare-rte.png").stat().st_size > 1000


def test_datasets_lists_and_describes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "datasets", "--json")
    assert code == 0 and "rte" in {r["name"] for r in json.loads(out)["datasets"]}
    code, out, _ = run_cli(capsys, "datasets", "wsd", "--json")
    assert json.loads(out)["dataset"]["classes"] == ["1", "2", "3"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["replay", "--policies", "opt-kg", "--budget", "9000"], "the maximum is 8000"),
        (["replay", "--dataset", "nope", "--policies", "opt-kg", "--budget", "9"], "unknown data"),
        (
            ["replay", "--labels", "/nonexistent.csv", "--policies", "opt-kg", "--budget", "9"],
            "does not exist",
        ),
        (["replay", "--policies", "opt-kg", "--budget-per-item", "0"], "buys no label"),
        (["replay", "--policies", "opt-kg", "--budget", "1.5"], "whole numbers of labels"),
        (["compare", "--policies", "nope"], "unknown policy"),
    ],
)
def test_replay_user_errors(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    code = main([*argv, "--reps", "1", "--jobs", "1", "--no-progress"])
    assert code == 2
    _, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], err


def test_reproduce_rte_figure_quick(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run_cli(
        capsys,
        "reproduce",
        "chen2013-fig3a",
        "--quick",
        "--json",
        "--jobs",
        "1",
        "--out",
        str(tmp_path),
        "--no-progress",
    )
    assert code == 0
    doc = json.loads(out)
    acc = {(r["policy"], r["budget_per_item"]): r["accuracy_mean"] for r in doc["results"]}
    assert acc[("opt-kg", 4.0)] > acc[("uniform", 4.0)]
    assert acc[("opt-kg", 10.0)] == acc[("uniform", 10.0)]  # all recorded labels used


def test_reproduce_on_dask_prints_exactly_the_same_results(
    capsys: pytest.CaptureFixture[str], tmp_path
) -> None:  # type: ignore[no-untyped-def]
    argv = [
        "reproduce",
        "chen2013-fig2a",
        "--quick",
        "--json",
        "--no-progress",
        "--out",
        str(tmp_path),
    ]
    code, serial, _ = run_cli(capsys, *argv)
    code_dask, on_dask, _ = run_cli(capsys, *argv, "--scheduler", "local", "--jobs", "2")
    assert code == code_dask == 0
    assert json.loads(serial)["results"] == json.loads(on_dask)["results"]
    assert "timing" in json.loads(serial)


def test_replay_with_requallo_reports_quantity_quality_rows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The issue's command (fewer reps): rows carry Li et al.'s §4.1 metrics, and Requallo
    labels more items (3+ labels) than Opt-KG, with higher accuracy among them (Fig. 1)."""
    code, out, _ = run_cli(
        capsys,
        "replay",
        "--dataset",
        "rte",
        "--policies",
        "opt-kg,label-uncertainty,round-robin,requallo:fisher=0.2:max-labels=14,"
        "requallo:ratio=4:max-labels=14",
        "--budget",
        "800,1600",
        "--reps",
        "3",
        "--seed",
        "0",
        "--json",
        "--no-progress",
    )
    assert code == 0
    rows = {(r["policy"], r["budget"]): r for r in json.loads(out)["results"]}
    for row in rows.values():
        for key in ("quantity_mean", "correct_mean", "accuracy_labeled_mean", "spent_mean"):
            assert key in row
        assert row["spent_mean"] <= row["budget"]
    requallo = rows[("requallo:fisher=0.2:max-labels=14", 1600.0)]
    opt_kg = rows[("opt-kg", 1600.0)]
    assert requallo["quantity_mean"] > 1.5 * opt_kg["quantity_mean"]
    assert requallo["accuracy_labeled_mean"] > opt_kg["accuracy_labeled_mean"]


def test_compare_defaults_fit_a_multiclass_data_set(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """wsd has 3 classes: binary-only default policies (kg-random) are left out, and the
    default budget grid stays within the recorded labels."""
    code, out, _ = run_cli(
        capsys, "compare", "--dataset", "wsd", "--reps", "2", "--json", "--out", str(tmp_path),
        "--no-progress",
    )  # fmt: skip
    assert code == 0
    document = json.loads(out)
    policies = {row["policy"] for row in document["results"]}
    assert "kg-random" not in policies and {"uniform", "opt-kg"} <= policies
    budgets = sorted({row["budget"] for row in document["results"]})
    assert budgets[-1] <= document["settings"]["n_labels"] and len(budgets) == 10


def test_compare_defaults_include_worker_aware_opt_kg_on_small_sets_only(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Worker-aware Opt-KG is a default of the main job up to COMPARE_WORKER_AWARE_MAX_LABELS
    recorded labels (its cost per label grows with the busiest worker's records)."""
    from crowdbudget.cli.compare import COMPARE_WORKER_AWARE_MAX_LABELS

    rng = np.random.default_rng(0)

    def policies_for(n_items: int, per_item: int) -> set[str]:
        n = n_items * per_item
        frame = pd.DataFrame(
            {
                "task": np.repeat(np.arange(n_items), per_item),
                "worker": np.tile(np.arange(per_item), n_items),
                "label": rng.integers(2, size=n),
            }
        )
        frame.to_csv(tmp_path / "labels.csv", index=False)
        pd.DataFrame({"task": np.arange(n_items), "label": rng.integers(2, size=n_items)}).to_csv(
            tmp_path / "gold.csv", index=False
        )
        code, out, _ = run_cli(
            capsys, "compare", "--labels", str(tmp_path / "labels.csv"), "--gold",
            str(tmp_path / "gold.csv"), "--budget", "50", "--reps", "1", "--jobs", "1",
            "--json", "--out", str(tmp_path), "--no-progress",
        )  # fmt: skip
        assert code == 0
        return {row["policy"] for row in json.loads(out)["results"]}

    assert "opt-kg:posterior=one-coin" in policies_for(100, 3)
    large = policies_for(COMPARE_WORKER_AWARE_MAX_LABELS // 4 + 1, 4)
    assert "opt-kg:posterior=one-coin" not in large and "opt-kg" in large


def test_policy_list_keeps_a_pair_parameter_whole() -> None:
    """``worker-prior=8,2`` inside ``--policies a,b``: the ``2`` continues the pair (an id
    starts with a letter), so the list is two ids, not three."""
    from crowdbudget.cli.common import policy_list

    assert policy_list("opt-kg:posterior=one-coin:worker-prior=8,2,uniform") == [
        "opt-kg:posterior=one-coin:worker-prior=8,2",
        "uniform",
    ]
    assert policy_list(" uniform , opt-kg ,") == ["uniform", "opt-kg"]
    args = build_parser().parse_args(
        ["replay", "--dataset", "rte", "--policies", "opt-kg:worker-prior=2,1,kg", "--budget", "9"]
    )
    assert args.policies == ["opt-kg:worker-prior=2,1", "kg"]


def test_a_replay_does_not_import_scipy_stats() -> None:
    """``scipy.stats`` costs about 0.6 s to import; a replay (homogeneous or worker-aware, its
    summary's confidence intervals included) needs none of it: the modules that use it for
    control tasks or Requallo's test import it where they call it."""
    from fresh_process import imported_by_cli

    replay = ["replay", "--dataset", "rte", "--budget", "100", "--reps", "2", "--jobs", "1"]
    replay += ["--no-progress", "--policies"]
    policies = ("opt-kg", "opt-kg:posterior=one-coin")
    assert not imported_by_cli([[*replay, policy] for policy in policies], "scipy.stats")
