"""What the commands leave behind and say: output folders checked before any work, the report
printed before the files are written, the table kept beside the plot, data sets named after
their file, notes where numbers look like bugs, ``--quick`` marked a smoke run, one message
for a missing or non-UTF-8 file.

An unwritable folder for the tests: they run as root in CI, and root ignores permission bits,
so a folder is made unwritable with the immutable attribute (``chattr +i``, which the kernel
enforces for root too, on ext4/xfs/btrfs); as another user, ``chmod 0o555`` is enough. The
fixture checks that creating a file there really fails before a test relies on it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import matplotlib.axes
import pandas as pd
import pytest

from crowdbudget.cli import main

Lock = Callable[[Path], None]


def _lock(folder: Path) -> None:
    """Make ``folder`` refuse new files (for root too: the immutable attribute)."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: no way to make a folder unwritable")
        done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"chattr +i is not supported here: {done.stderr.strip()}")
    else:
        folder.chmod(0o555)
    try:
        (folder / "probe").touch()
    except OSError:
        return
    (folder / "probe").unlink()
    pytest.skip(f"{folder} stays writable after locking it (file system without the attribute)")


def _unlock(folder: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
    else:
        folder.chmod(0o755)


@pytest.fixture
def lock(tmp_path: Path) -> Iterator[Lock]:
    """``lock(folder)`` makes a folder under ``tmp_path`` unwritable until the test ends."""
    locked: list[Path] = []

    def do(folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        _lock(folder)
        locked.append(folder)

    yield do
    for folder in locked:
        _unlock(folder)


def _votes(tmp_path: Path) -> tuple[Path, Path]:
    """A small labels file named ``my_votes.csv`` (12 items, 3 workers) and its gold."""
    rows, gold = [], []
    for item in range(12):
        truth = item % 2
        gold.append(f"i{item},{truth}")
        for worker in range(3):
            label = truth if (item + worker) % 4 else 1 - truth
            rows.append(f"i{item},w{worker},{label}")
    labels = tmp_path / "my_votes.csv"
    labels.write_text("task,worker,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    gold_path = tmp_path / "my_gold.csv"
    gold_path.write_text("task,label\n" + "\n".join(gold) + "\n", encoding="utf-8")
    return labels, gold_path


SMALL_RUN = ["--reps", "1", "--no-progress", "--jobs", "1"]


def _commands(tmp_path: Path, folder: Path) -> dict[str, list[str]]:
    labels, gold = _votes(tmp_path)
    token = tmp_path / "token"
    token.write_text("abc\n", encoding="utf-8")
    return {
        # nothing listens on port 9 of loopback: the folder must be refused before connecting
        "labelstudio export --out": [
            "labelstudio",
            "export",
            "--url",
            "http://127.0.0.1:9",
            "--token-file",
            str(token),
            "--project",
            "1",
            "--out",
            str(folder / "labels.csv"),
        ],
        "compare": ["compare", "--policies", "uniform", "--budget", "800", "--out", str(folder)],
        "replay --plot": [
            "replay",
            "--policies",
            "uniform",
            "--budget",
            "800",
            "--plot",
            str(folder / "p.png"),
        ],
        "reproduce ID": ["reproduce", "chen2013-fig2a", "--quick", "--out", str(folder)],
        "reproduce --all": [
            "reproduce",
            "--all",
            "--only",
            "chen2013-fig2a",
            "--quick",
            "--out",
            str(folder),
        ],
        "simulate --plot": [
            "simulate",
            "--items",
            "5",
            "--policies",
            "uniform",
            "--budget",
            "10",
            "--plot",
            str(folder / "s.png"),
        ],
        "aggregate --out": ["aggregate", str(labels), "--method", "mv", "--out", str(folder / "a")],
        "aggregate --reliability": [
            "aggregate",
            str(labels),
            "--gold",
            str(gold),
            "--method",
            "mv",
            "--reliability",
            str(folder / "r.png"),
        ],
    }


def _argv(argv: list[str]) -> list[str]:
    """``argv`` with the small-run options a run command takes."""
    if argv[0] in ("compare", "replay", "simulate"):
        return [*argv, *SMALL_RUN]
    if argv[0] == "reproduce":
        return [*argv, "--no-progress", "--jobs", "1"]
    return argv


@pytest.mark.parametrize(
    "command",
    [
        "compare",
        "replay --plot",
        "reproduce ID",
        "reproduce --all",
        "simulate --plot",
        "aggregate --out",
        "aggregate --reliability",
        "labelstudio export --out",
    ],
)
def test_an_unwritable_output_folder_is_one_line_before_any_work(
    command: str, tmp_path: Path, lock: Lock, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "locked"
    lock(folder)
    argv = _argv(_commands(tmp_path, folder)[command])
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert "cannot write in folder" in err and str(folder) in err, err
    assert captured.out == ""  # refused before the run: nothing computed, nothing printed


@pytest.fixture
def locked_after_check(lock: Lock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every output folder passes the check, then becomes unwritable while the command runs
    (a disk that fills, a folder made read-only meanwhile)."""
    import crowdbudget.cli.io as cli_io

    checked = cli_io.check_folder_writable

    def check_then_lock(target: Path, flag: str, path: str | Path) -> None:
        checked(target, flag, path)
        lock(target)

    monkeypatch.setattr(cli_io, "check_folder_writable", check_then_lock)


@pytest.mark.usefixtures("locked_after_check")
@pytest.mark.parametrize(
    "command", ["compare", "replay --plot", "simulate --plot", "reproduce ID", "reproduce --all"]
)
def test_a_failure_while_writing_leaves_the_table_on_stdout(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "out"
    assert main(_argv(_commands(tmp_path, folder)[command])) == 2
    captured = capsys.readouterr()
    if command == "reproduce --all":  # its table of times (the figures' are in the report)
        assert "chen2013-fig2a" in captured.out and "finished after" in captured.out
    else:
        assert "budget  per item" in captured.out and " ± " in captured.out, captured.out
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "could not write" in err, err
    assert "the results are printed above" in err


@pytest.mark.usefixtures("locked_after_check")
def test_aggregate_rows_reach_stdout_when_the_out_file_cannot_be_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels, _ = _votes(tmp_path)
    out = tmp_path / "out" / "rows.csv"
    assert main(["aggregate", str(labels), "--method", "mv", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "task,label,confidence" in captured.out and "i11," in captured.out
    assert "could not write" in captured.err and len(captured.err.strip().splitlines()) == 1


def test_compare_keeps_the_table_beside_the_plot_named_after_the_labels_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels, gold = _votes(tmp_path)
    out = tmp_path / "results"
    argv = ["compare", "--labels", str(labels), "--gold", str(gold), "--policies", "uniform"]
    argv += ["--budget", "12,24", "--out", str(out), *SMALL_RUN]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith("compare: my_votes (12 items")  # the table names the file's set
    assert sorted(p.name for p in out.iterdir()) == [
        "compare-my_votes.csv",
        "compare-my_votes.md",
        "compare-my_votes.png",
    ]
    rows = pd.read_csv(out / "compare-my_votes.csv")
    assert list(rows["budget"]) == [12, 24] and set(rows["dataset"]) == {"my_votes"}
    markdown = (out / "compare-my_votes.md").read_text(encoding="utf-8")
    assert "| budget | per item | uniform |" in markdown
    first = rows.iloc[0]
    assert f"{first['accuracy_mean']:.4f} ± {first['accuracy_std']:.4f}" in markdown
    assert main([*argv, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["settings"]["dataset"] == "my_votes"
    assert document["table_csv"] == str(out / "compare-my_votes.csv")


def test_reproduce_keeps_the_table_and_marks_quick_a_smoke_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import crowdbudget.experiments.report as report

    titles: list[str] = []
    draw = report.plot_metrics

    def recording(*args: object, **kwargs: object) -> Path:
        titles.append(str(kwargs.get("title", "")))
        return draw(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(report, "plot_metrics", recording)
    argv = ["reproduce", "chen2013-fig2a", "--quick", "--out", str(tmp_path), "--no-progress"]
    assert main([*argv, "--jobs", "1"]) == 0
    text = capsys.readouterr().out
    assert "smoke run (--quick)" in text.splitlines()[0]
    assert titles and all("smoke run (--quick)" in title for title in titles)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "chen2013-fig2a-quick.csv",
        "chen2013-fig2a-quick.md",
        "chen2013-fig2a-quick.png",
    ]
    markdown = (tmp_path / "chen2013-fig2a-quick.md").read_text(encoding="utf-8")
    assert "smoke run (--quick)" in markdown and "| budget |" in markdown
    rows = pd.read_csv(tmp_path / "chen2013-fig2a-quick.csv")
    assert {"policy", "budget", "accuracy_mean"} <= set(rows.columns) and len(rows) > 1


def test_no_confidence_band_from_fewer_than_five_replications(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crowdbudget.experiments.report import plot_metrics

    bands: list[int] = []
    fill = matplotlib.axes.Axes.fill_between

    def counting(self: matplotlib.axes.Axes, *args: object, **kwargs: object) -> object:
        where = kwargs.get("where")
        bands.append(len(args[0]) if where is None else int(sum(where)))  # type: ignore[arg-type,call-overload]
        return fill(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(matplotlib.axes.Axes, "fill_between", counting)

    def summary(reps: int) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "policy": ["uniform"] * 3,
                "budget": [10.0, 20.0, 30.0],
                "reps": [reps] * 3,
                "accuracy_mean": [0.6, 0.7, 0.8],
                "accuracy_std": [0.2, 0.2, 0.2],
                "accuracy_ci_low": [0.15, 0.25, 0.35],
                "accuracy_ci_high": [0.95, 0.95, 0.95],
            }
        )

    plot_metrics(summary(2), tmp_path / "two.png")
    assert sum(bands) == 0  # two replications: the line only
    plot_metrics(summary(5), tmp_path / "five.png")
    assert sum(bands) == 3  # five: the band at every point


def test_round_robin_zig_zag_is_explained_in_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["replay", "--policies", "round-robin", "--budget-per-item", "1,2,3", *SMALL_RUN]
    assert main(argv) == 0
    out = capsys.readouterr().out
    notes = " ".join(line.strip() for line in out.splitlines() if line.startswith(("note", " ")))
    assert "round-robin zig-zags" in notes and "tied votes" in notes


def test_kos_at_chance_is_explained_in_a_note() -> None:
    from crowdbudget.experiments.papers.chen2013 import kos_at_chance_notes

    at_chance = pd.DataFrame(
        {"policy": ["kos", "kos", "uniform"], "budget": [800.0, 8000.0, 800.0]}
        | {"accuracy_mean": [0.66, 0.4975, 0.5]}
    )
    notes = kos_at_chance_notes(at_chance, 800)
    assert len(notes) == 1 and "0.4975 at 10 per item" in notes[0] and "kos-mean" in notes[0]
    working = at_chance.assign(accuracy_mean=[0.66, 0.91, 0.5])
    assert kos_at_chance_notes(working, 800) == []


def test_chen2013_fig3a_notes_kos_at_chance(capsys: pytest.CaptureFixture[str]) -> None:
    from crowdbudget.experiments.papers.chen2013 import _rte

    result = _rte("fig3a", ["kos"], {}, seed=0, quick=True, n_jobs=1, progress=False, reps=1)
    assert any(note.startswith("kos is at chance") for note in result.notes), result.notes


def test_non_utf8_labels_name_the_line_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = tmp_path / "latin.csv"
    labels.write_bytes("task,worker,label\na,w1,1\nb,Jos\xe9,0\n".encode("latin-1"))
    assert main(["aggregate", str(labels)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "not UTF-8" in err and "line 3" in err and "iconv" in err, err


def test_a_missing_file_gets_the_same_message_from_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing.csv")
    labels, _ = _votes(tmp_path)
    run = ["--policies", "uniform", "--budget", "5", *SMALL_RUN]
    cases = {
        "labels": [
            ["aggregate", missing],
            ["replay", "--labels", missing, *run],
            ["compare", "--labels", missing, "--out", str(tmp_path / "o"), *run],
        ],
        "gold": [
            ["aggregate", str(labels), "--gold", missing],
            ["replay", "--labels", str(labels), "--gold", missing, *run],
        ],
    }
    for what, argvs in cases.items():
        messages = set()
        for argv in argvs:
            assert main(argv) == 2
            err = capsys.readouterr().err.strip()
            messages.add(err.split(": error: ", 1)[1])
        assert len(messages) == 1, messages
        (message,) = messages
        assert message.startswith(f"{what} file {missing} does not exist (expected a CSV")


def test_reproduce_all_calls_each_ids_time_finished_after(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["reproduce", "--all", "--only", "chen2013-fig2a", "--quick", "--out", str(tmp_path)]
    assert main([*argv, "--no-progress", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("id "))
    assert "finished after" in header and "wall time" not in header
    assert "total wall time" in out  # the whole run's time is a wall time
    report = (tmp_path / "reproduce-all-quick.md").read_text(encoding="utf-8")
    assert "| finished after | CPU time |" in report and "| wall time |" not in report
    assert (tmp_path / "chen2013-fig2a-quick.csv").is_file()  # --all keeps the tables too
