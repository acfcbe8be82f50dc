"""Reproductions on the one registry (issue #16) and ``crowdbudget reproduce --all`` (issue #21).

The registry lists every id with its paper, figure, replications and parameter table;
``reproduce --list --json`` is that table; ``reproduce --all --quick --only ID,ID`` writes every
figure, one combined JSON and one Markdown report with when each id finished, and its
numbers are those of ``reproduce ID`` (the golden ``reproduce/*`` hashes pin them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crowdbudget.cli import main
from crowdbudget.cli.reproduce import slowest_first
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.papers import REPRODUCTIONS, TYPICAL_TIMES, ReproductionSpec
from crowdbudget.registry import REPRODUCTIONS as REGISTRY
from crowdbudget.registry import registered_reproductions

#: the ids of the five papers (the golden file records one case per id)
IDS = {
    "chen2013-fig2a", "chen2013-fig2b", "chen2013-fig3a", "chen2013-fig3b", "chen2013-features",
    "hu-frazier-fig1", "hu-frazier-fig2",
    "requallo-fig1", "requallo-fig2", "requallo-table3", "requallo-fig3",
    "bkube-fig1", "bkube-fig2",
    "bbta-fig2", "bbta-fig3", "bbta-rte",
}  # fmt: skip

#: two of the cheapest quick runs (a few seconds together)
SUBSET = "chen2013-fig2a,requallo-fig1"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_registry_lists_every_id_with_its_paper() -> None:
    entries = registered_reproductions()
    assert set(entries) == IDS
    assert list(REPRODUCTIONS) == list(entries)  # the mapping reads the registry
    for rid, entry in entries.items():
        assert isinstance(entry, ReproductionSpec)
        assert entry.reproduction_id == rid and entry.run is entry.factory
        assert entry.source is not None
        assert entry.source.title and entry.source.authors and entry.source.venue
        assert entry.paper == entry.source.citation
        assert entry.figure and entry.title == entry.summary
        assert {"seed", "quick", "jobs", "progress"} <= set(entry.params)
        assert not entry.params["jobs"].network_settable
        quick, full = entry.reps
        assert quick and full
        assert TYPICAL_TIMES[rid] == entry.times
        assert entry.typical_seconds(True) is not None


def test_the_parameter_table_checks_reproduction_ids() -> None:
    spec = REGISTRY.spec("bbta-fig2:quick=true:reps=2")
    assert spec.values == {"quick": True, "reps": 2}
    with pytest.raises(InvalidParameterError, match="reps must be in"):
        REGISTRY.spec("bbta-fig2:reps=0")
    with pytest.raises(InvalidParameterError, match="has no parameter 'reps'"):
        REGISTRY.spec("requallo-fig1:reps=2")  # its function has no reps= to set
    with pytest.raises(InvalidParameterError, match="unknown reproduction"):
        REGISTRY.spec("chen2013-fig9")


def test_list_json_parses_and_names_every_paper(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "reproduce", "--list", "--json")
    assert code == 0
    rows = json.loads(out)["reproductions"]
    assert {row["id"] for row in rows} == IDS
    for row in rows:
        assert {"title", "quick_time", "full_time", "figure", "reps", "parameters"} <= set(row)
        assert row["paper"]["title"] and row["paper"]["authors"] and row["paper"]["venue"]
        assert {"quick", "full"} == set(row["reps"])
    fig1 = next(row for row in rows if row["id"] == "hu-frazier-fig1")
    assert fig1["reps"]["quick"] == {"K=10": 40, "K=100": 20, "K=1000": 4}


def test_list_text_groups_ids_under_their_papers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "reproduce", "--list")
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 120
    assert "Crowdsourcing High Quality Labels with a Tight Budget. WSDM 2016." in out
    starts = {line.split()[0] for line in lines if line and not line[0].isspace()}
    assert starts >= IDS


def test_slowest_first_orders_by_the_typical_time(monkeypatch: pytest.MonkeyPatch) -> None:
    order = slowest_first(["requallo-fig3", "bbta-fig2", "chen2013-fig2a"], quick=False)
    assert order == ["bbta-fig2", "chen2013-fig2a", "requallo-fig3"]  # 16 min, 1 min, 31 s
    assert slowest_first(["requallo-fig3", "chen2013-fig3a"], quick=False)[0] == "chen2013-fig3a"
    # a full time not recorded ("-") falls back to the --quick time (5 s), below 31 s
    recorded = ReproductionSpec.typical_seconds

    def fig3a_unrecorded(spec: ReproductionSpec, quick: bool) -> float | None:
        if spec.reproduction_id == "chen2013-fig3a" and not quick:
            return None
        return recorded(spec, quick)

    monkeypatch.setattr(ReproductionSpec, "typical_seconds", fig3a_unrecorded)
    assert slowest_first(["chen2013-fig3a", "requallo-fig3"], quick=False)[0] == "requallo-fig3"


def test_all_on_a_subset_writes_json_report_plots_and_times(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = _run(
        capsys, "reproduce", "--all", "--quick", "--only", SUBSET, "--jobs", "2", "--json",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc == json.loads((tmp_path / "reproduce-all-quick.json").read_text())
    ids = SUBSET.split(",")
    assert doc["settings"]["ids"] == ids and doc["settings"]["quick"] is True
    assert doc["settings"]["order"] == ["requallo-fig1", "chen2013-fig2a"]  # slowest first
    assert [row["id"] for row in doc["timing"]] == ids
    assert all(row["seconds"] > 0 and row["status"] == "ok" for row in doc["timing"])
    # fanned out: both ids at once, their campaigns on one pool of two workers, whose CPU
    # time is each id's (the coordinating thread alone would be a fraction of its wall time)
    assert doc["settings"]["executor"] == "worker processes" and doc["settings"]["workers"] == 2
    assert all(row["cpu_seconds"] > 0 for row in doc["timing"])
    assert doc["total_seconds"] > 0
    per_id = {d["settings"]["id"]: d for d in doc["reproductions"]}
    for rid in ids:
        assert (tmp_path / f"{rid}-quick.png").is_file()
        assert Path(per_id[rid]["plot"]) == tmp_path / f"{rid}-quick.png"
    # the paper's numbers beside ours, as `reproduce ID --json` gives them
    assert any("paper_accuracy" in row for row in per_id["chen2013-fig2a"]["results"])
    report = (tmp_path / "reproduce-all-quick.md").read_text()
    assert "| [chen2013-fig2a](#chen2013-fig2a) | Chen, Lin, Zhou (2013) | Fig. 2(a) |" in report
    assert "## requallo-fig1" in report and "(paper 0.92)" in report
    assert "![chen2013-fig2a-quick.png](chen2013-fig2a-quick.png)" in report
    # the same numbers as the one-id command (which runs on all cores by default)
    code, single, _ = _run(
        capsys, "reproduce", "chen2013-fig2a", "--quick", "--json", "--no-progress",
        "--out", str(tmp_path / "one"),
    )  # fmt: skip
    assert code == 0
    assert json.loads(single)["results"] == per_id["chen2013-fig2a"]["results"]


def test_all_prints_the_wall_time_of_each_id(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = _run(
        capsys, "reproduce", "--all", "--quick", "--only", "chen2013-fig2a", "--jobs", "1",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    assert "reproduce --all: [1/1] chen2013-fig2a" in err
    row = next(line for line in out.splitlines() if line.startswith("chen2013-fig2a"))
    assert re.fullmatch(r"chen2013-fig2a +[0-9.]+ s +[0-9.]+ s  ok", row), row
    assert "total wall time" in out and "CPU time" in out
    assert f"report written to {tmp_path / 'reproduce-all-quick.md'}" in out


def test_a_failing_reproduction_is_reported_and_the_others_go_on(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**_: object) -> None:
        raise InvalidParameterError("its data set is missing")

    entry = ReproductionSpec("broken-fig1", broken, "Broken (2024) Fig. 1: fails", figure="Fig. 1")
    monkeypatch.setitem(REGISTRY._entries, "broken-fig1", entry)
    code, out, err = _run(
        capsys, "reproduce", "--all", "--quick", "--only", "broken-fig1,chen2013-fig2a",
        "--jobs", "1", "--no-progress", "--json", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 1
    assert "1 of 2 reproductions failed: broken-fig1 (its data set is missing)" in err
    doc = json.loads(out)
    status = {row["id"]: row["status"] for row in doc["timing"]}
    assert status == {"chen2013-fig2a": "ok", "broken-fig1": "failed"}
    assert (
        "**Failed:** its data set is missing" in (tmp_path / "reproduce-all-quick.md").read_text()
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--only", "chen2013-fig2a"], "--only picks ids for --all"),
        (["chen2013-fig2a", "--all"], "not both"),
        (["--all", "--only", "chen2013-fig9"], "unknown reproduction 'chen2013-fig9'"),
        (["chen2013-fig2a", "--resume"], "--resume goes with --all"),
    ],
)
def test_all_refuses_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    code, _, err = _run(capsys, "reproduce", *argv, "--out", str(tmp_path))
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_all_on_dask_fans_the_campaigns_out_with_the_same_numbers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("dask.distributed")
    code, out, err = _run(
        capsys, "reproduce", "--all", "--quick", "--only", SUBSET, "--scheduler",
        "local", "--jobs", "2", "--json", "--no-progress", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["settings"]["executor"] == "Dask workers"
    assert [row["status"] for row in doc["timing"]] == ["ok", "ok"]
    assert (tmp_path / "chen2013-fig2a-quick.png").is_file()
    code, single, _ = _run(
        capsys, "reproduce", "chen2013-fig2a", "--quick", "--json", "--no-progress",
        "--jobs", "1", "--out", str(tmp_path / "one"),
    )  # fmt: skip
    assert code == 0
    per_id = {d["settings"]["id"]: d for d in doc["reproductions"]}
    assert json.loads(single)["results"] == per_id["chen2013-fig2a"]["results"]


def test_all_saves_each_id_as_it_ends_and_resume_reads_it_back(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crowdbudget.cli import reproduce as cli_reproduce

    argv = ["reproduce", "--all", "--quick", "--only", SUBSET, "--jobs", "1", "--json",
            "--no-progress", "--out", str(tmp_path)]  # fmt: skip
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    first = json.loads(out)
    for rid in SUBSET.split(","):
        part = json.loads((tmp_path / f"{rid}-quick.json").read_text())
        assert part["id"] == rid and part["seed"] == 0 and part["quick"] is True
        assert part["document"]["settings"]["id"] == rid and part["text"]
    assert not list(tmp_path.glob(".*.partial"))  # written whole, then renamed

    ran: list[str] = []
    original = cli_reproduce._run_one

    def counting(rid: str, *rest: object) -> object:
        ran.append(rid)
        return original(rid, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(cli_reproduce, "_run_one", counting)
    code, out, err = _run(capsys, *argv, "--resume")
    assert code == 0, err
    again = json.loads(out)
    assert ran == []  # nothing ran: both read back
    assert again["settings"]["resumed"] == SUBSET.split(",")
    assert [row["resumed"] for row in again["timing"]] == [True, True]
    assert again["reproductions"] == first["reproductions"]
    report = (tmp_path / "reproduce-all-quick.md").read_text()
    assert "all read back from an earlier run" in report and "ok (read back: --resume)" in report

    # a torn or foreign part, or another seed's, is run again
    (tmp_path / "chen2013-fig2a-quick.json").write_text("{not json")
    code, out, err = _run(capsys, *argv, "--resume")
    assert code == 0, err
    assert ran == ["chen2013-fig2a"]
    doc = json.loads(out)
    assert doc["settings"]["resumed"] == ["requallo-fig1"]
    # the same numbers (its timings are measured again)
    assert [d["results"] for d in doc["reproductions"]] == [
        d["results"] for d in first["reproductions"]
    ]
    ran.clear()
    code, out, err = _run(capsys, *argv[:-2], "--seed", "1", "--out", str(tmp_path), "--resume")
    assert code == 0, err
    assert sorted(ran) == sorted(SUBSET.split(","))


def test_ctrl_c_stops_all_at_once_quietly(tmp_path: Path) -> None:
    """Ctrl-C during a fanned-out --all: exit status 130 within seconds (the shared pool's
    processes are stopped, not awaited) and one line — no traceback from the threads whose
    campaigns were stopped under them."""
    import signal
    import subprocess
    import sys
    import time

    process = subprocess.Popen(
        # the papers' full runs (minutes to an hour each), so the signal lands mid-work on
        # any machine: the quick runs finish within the wait on a quiet one
        [sys.executable, "-m", "crowdbudget", "reproduce", "--all", "--only",
         "bbta-fig2,chen2013-fig3b,requallo-fig1", "--jobs", "2", "--out", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a background job may inherit SIGINT ignored: give the child the default handler
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    time.sleep(8.0)  # imports done, campaigns in the pool
    assert process.poll() is None, process.communicate()
    process.send_signal(signal.SIGINT)
    stopped = time.perf_counter()
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert time.perf_counter() - stopped < 10.0
    assert "crowdbudget: interrupted" in err and "Traceback" not in err
