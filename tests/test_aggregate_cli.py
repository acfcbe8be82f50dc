"""``crowdbudget aggregate``: task,label rows from any registered aggregator."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crowdbudget.aggregation import DEFAULT_VERDICT, make_aggregator
from crowdbudget.cli import main
from crowdbudget.datasets import load_dataset
from crowdbudget.datasets.loaders import bundled_files


def _rte_paths() -> tuple[str, str]:
    files = bundled_files("rte")
    return str(files["labels"]), str(files["gold"])


def test_dawid_skene_rows_match_the_aggregator(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    labels, _ = _rte_paths()
    out = tmp_path / "labels_ds.csv"
    assert main(["aggregate", labels, "--method", "dawid-skene", "--out", str(out)]) == 0
    rows = pd.read_csv(out, dtype=str)
    assert list(rows.columns) == ["task", "label", "confidence"]
    data = load_dataset("rte")
    expected = make_aggregator("ds").fit(data)
    confidence = rows["confidence"].astype(float).to_numpy()
    top = expected.probas_.max(axis=1)
    order = [list(data.item_ids).index(t) for t in rows["task"]]
    np.testing.assert_allclose(confidence, top[order], rtol=1e-12)
    by_task = dict(zip(rows["task"], rows["label"], strict=True))
    assert len(by_task) == data.n_items
    predicted = [data.classes.index(by_task[str(t)]) for t in data.item_ids]
    assert data.accuracy(predicted) == pytest.approx(data.accuracy(expected.labels_))
    assert data.accuracy(predicted) >= 0.92  # issue 3: DS on full RTE at least 0.92


def test_proba_json_and_gold(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    labels, gold = _rte_paths()
    code = main(["aggregate", labels, "--method", "mv", "--proba", "--gold", gold, "--json"])
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    assert document["results"]["n_tasks"] == 800
    assert document["results"]["accuracy"] == pytest.approx(0.8969, abs=0.02)
    first = document["results"]["rows"][0]
    assert set(first) == {"task", "0", "1"}
    assert first["0"] + first["1"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["aggregate", "missing.csv"], "labels file missing.csv does not exist"),
        (["aggregate", "LABELS", "--method", "nope"], "unknown aggregator 'nope'"),
        (["aggregate", "LABELS", "--reliability", "x.png"], "--reliability needs --gold"),
    ],
)
def test_user_errors_are_one_line_exit_2(argv: list[str], message: str, capsys) -> None:  # type: ignore[no-untyped-def]
    labels, _ = _rte_paths()
    argv = [labels if a == "LABELS" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_gold_reports_calibration_and_draws_the_reliability_diagram(  # type: ignore[no-untyped-def]
    tmp_path: Path, capsys
) -> None:
    from crowdbudget.experiments.metrics import calibration_metrics

    labels, gold = _rte_paths()
    png = tmp_path / "reliability.png"
    code = main(["aggregate", labels, "--gold", gold, "--json", "--reliability", str(png)])
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    assert document["settings"]["method"] == DEFAULT_VERDICT
    calibration = document["results"]["calibration"]
    data = load_dataset("rte")
    fitted = make_aggregator(DEFAULT_VERDICT).fit(data)
    expected = calibration_metrics(fitted.probas_, data.gold, labels=fitted.labels_)
    assert calibration == pytest.approx(expected)
    assert set(calibration) == {"accuracy", "confidence", "ece", "ece_mass", "nll", "brier"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    first = document["results"]["rows"][0]
    assert set(first) == {"task", "label", "confidence"}
