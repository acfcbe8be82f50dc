"""One rule for data validation and output paths on every command (issue 18): each bad case
is one line on stderr and exit status 2, before any work starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crowdbudget.cli import main


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


@pytest.fixture
def labels(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "l.csv").write_text("task,worker,label\n1,a,cat\n2,a,dog\n1,b,cat\n2,b,dog\n")
    (tmp_path / "g.csv").write_text("task,label\n1,cat\n2,dog\n3,cat\n")
    return tmp_path / "l.csv", tmp_path / "g.csv"


def test_output_paths_one_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], labels: tuple[Path, Path]
) -> None:
    a_file = tmp_path / "FILE"
    a_file.write_text("x")
    folder = tmp_path / "folder"
    folder.mkdir()
    lab, _ = labels
    _one_line_error(capsys, ["aggregate", str(lab), "--out", str(folder)], "is a folder")
    _one_line_error(
        capsys, ["aggregate", str(lab), "--out", str(a_file / "x.csv")], "is a file, so nothing"
    )
    sim = ["simulate", "--items", "4", "--policies", "uniform", "--budget", "8", "--reps", "1"]
    _one_line_error(capsys, [*sim, "--plot", str(a_file / "a.png")], "is a file, so nothing")
    _one_line_error(capsys, ["compare", "--out", str(a_file)], "is a file; --out names a folder")
    _one_line_error(capsys, ["reproduce", "chen2013-fig2a", "--out", str(a_file)], "is a file")
    # missing parents are created
    out = tmp_path / "missing" / "dir" / "x.csv"
    assert main(["aggregate", str(lab), "--method", "mv", "--out", str(out)]) == 0
    assert out.read_text().startswith("task,label")


def test_label_budgets_are_whole_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    sim = ["simulate", "--items", "4", "--policies", "uniform", "--reps", "1"]
    _one_line_error(capsys, [*sim, "--budget", "1.5"], "whole numbers of labels > 0, got 1.5")


def test_validation_flags_and_gold_without_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], labels: tuple[Path, Path]
) -> None:
    lab, gold = labels
    with lab.open("a") as fh:
        fh.write("2,c,bird\n")
    base = ["replay", "--labels", str(lab), "--gold", str(gold), "--budget", "4", "--reps", "1"]
    _one_line_error(capsys, [*base, "--policies", "uniform"], "line 6: label 'bird'")
    three = [*base, "--classes", "cat,dog,bird", "--no-progress", "--jobs", "1"]
    _one_line_error(
        capsys, [*three, "--policies", "kg-random"], "'kg-random' handles binary labels only"
    )
    # the refusal names the ids that would work on this data (issue 15)
    _one_line_error(
        capsys,
        [*three, "--policies", "opt-kg:posterior=two-coin"],
        "ids that work here: b-kube, bounded-eps-first, eps-first, opt-kg, random-bp, "
        "requallo, round-robin, trailsourcing, uniform",
    )
    # the one-coin worker model takes any number of classes (issue 15)
    assert main([*three, "--policies", "opt-kg:posterior=one-coin"]) == 0
    capsys.readouterr()
    assert main([*three, "--policies", "uniform", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["settings"]["gold_items_without_labels"] == 1
    assert document["settings"]["n_classes"] == 3


def test_compare_notes_explain_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "--dataset", "wsd", "--budget-per-item", "2,10", "--reps", "2"]
    argv += ["--out", str(tmp_path), "--no-progress", "--jobs", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert 3 <= len(notes) <= 4, out
    assert "best mean accuracy per budget" in out
    assert "at budget 1770 = every recorded label" in out  # wsd: 177 items × 10 labels
    # wsd has 3 classes: the binary-only default policies are left out, and said so
    joined = " ".join(line.strip() for line in out.splitlines()).replace("note: ", "")
    assert "default policies left out: kg-random ('kg-random' handles binary labels only" in joined
    assert max(len(line) for line in out.splitlines()) <= 120


def test_datasets_lists_a_user_folder_and_reproduce_takes_data_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], labels: tuple[Path, Path]
) -> None:
    mine = tmp_path / "data" / "mine"
    mine.mkdir(parents=True)
    lab, gold = labels
    (mine / "labels.csv").write_text(lab.read_text())
    (mine / "gold.csv").write_text(gold.read_text())
    assert main(["datasets", "--data-dir", str(tmp_path / "data"), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["datasets"]}
    assert rows["mine"]["location"] == str(mine) and rows["millionaire"]["available"]
    _one_line_error(capsys, ["datasets", "--data-dir", str(tmp_path / "nope")], "not a folder")
    _one_line_error(
        capsys,
        ["reproduce", "chen2013-fig2a", "--quick", "--data-dir", str(tmp_path / "nope")],
        "not a folder",
    )


def test_scheduler_without_dask_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    sim = ["simulate", "--items", "4", "--policies", "uniform", "--budget", "8", "--reps", "1"]
    _one_line_error(capsys, [*sim, "--scheduler", "local"], "--scheduler needs Dask")


def test_client_without_httpx_says_what_to_install() -> None:
    code = "import sys; sys.modules['httpx'] = None; import crowdbudget.client"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: crowdbudget.client needs httpx") and "[service]" in last


def test_every_help_ends_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    from crowdbudget.cli import all_commands, build_parser

    commands = all_commands(build_parser())
    assert {"labelstudio sync", "labelstudio serve-webhook", "labelstudio export"} <= set(commands)
    for name in commands:
        with pytest.raises(SystemExit):
            main([*name.split(), "--help"])
        out = capsys.readouterr().out.rstrip().splitlines()
        at = max(i for i, line in enumerate(out) if line.startswith("examples:"))
        examples = out[at + 1 :]
        assert 1 <= len(examples) <= 2, (name, examples)
        assert all(line.strip().startswith(f"crowdbudget {name}") for line in examples), name
        assert max(len(line) for line in out) <= 120, name


def test_reproduce_list_names_every_id(capsys: pytest.CaptureFixture[str]) -> None:
    from crowdbudget.experiments.papers import REPRODUCTIONS

    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 120
    listed = {line.split()[0] for line in out.splitlines()[1:] if line and not line[0].isspace()}
    assert set(REPRODUCTIONS) <= listed


def test_accuracy_among_labeled_items_is_blank_when_nothing_is_labeled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["replay", "--dataset", "rte", "--policies", "requallo,opt-kg", "--budget", "100"]
    assert main([*argv, "--reps", "1", "--quality", "--no-progress", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    table = out.split("accuracy among labeled items")[1].split("budget spent")[0]
    assert "—" in table and "0.5000" not in table  # opt-kg labeled no item 3 times
    assert "no item reached 3 labels" in out
