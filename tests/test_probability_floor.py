"""The probability floor fitted on a gold sample (issue 19): the fit is the likelihood's
maximiser, the cross-fitted report never scores an item with a floor fitted on it, and
``aggregate --fit-floor`` writes the floored probabilities."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from crowdbudget.aggregation.calibration import (
    MAX_FLOOR,
    apply_probability_floor,
    calibration_metrics,
    fit_probability_floor,
    floor_calibration,
    negative_log_likelihood,
)
from crowdbudget.cli import main


def _log_likelihood(probas: np.ndarray, gold: np.ndarray, eps: float) -> float:
    floored = apply_probability_floor(probas, eps)
    return float(np.sum(np.log(floored[np.arange(gold.shape[0]), gold])))


def _overconfident(n: int, n_wrong: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A verdict sure of every item (p = 1 − 1e-9) with ``n_wrong`` of them wrong."""
    gold = rng.integers(0, 2, size=n)
    chosen = gold.copy()
    chosen[:n_wrong] = 1 - chosen[:n_wrong]
    probas = np.full((n, 2), 1e-9)
    probas[np.arange(n), chosen] = 1 - 1e-9
    return probas, gold


def test_apply_keeps_rows_ordered_and_summing_to_one() -> None:
    probas = np.array([[0.7, 0.2, 0.1], [0.0, 0.0, 1.0]])
    floored = apply_probability_floor(probas, 0.3)
    np.testing.assert_allclose(floored.sum(axis=1), 1.0)
    assert (floored.argmax(axis=1) == probas.argmax(axis=1)).all()
    assert floored.min() == pytest.approx(0.1)


def test_the_fit_maximises_the_gold_likelihood() -> None:
    rng = np.random.default_rng(3)
    probas, gold = _overconfident(200, 20, rng)
    eps = fit_probability_floor(probas, gold)
    grid = np.linspace(0.0, MAX_FLOOR, 5001)
    best = grid[np.argmax([_log_likelihood(probas, gold, e) for e in grid])]
    assert eps == pytest.approx(best, abs=2 * (grid[1] - grid[0]))
    # 10% confidently wrong: the floored verdict says 0.9 where it is right 90% of the time
    # (ε = 0.2: half of the uniform mass lands on the gold class), and its NLL is the binary
    # entropy of 0.1 instead of ~2 nats
    assert eps == pytest.approx(0.2, abs=1e-6)
    entropy = -(0.9 * np.log(0.9) + 0.1 * np.log(0.1))
    assert negative_log_likelihood(apply_probability_floor(probas, eps), gold) == pytest.approx(
        entropy, rel=1e-6
    )
    assert negative_log_likelihood(probas, gold) > 2.0


def test_no_floor_for_an_under_confident_verdict_and_no_gold() -> None:
    gold = np.array([0, 1, 1, 0])
    probas = np.array([[0.6, 0.4], [0.4, 0.6], [0.4, 0.6], [0.6, 0.4]])  # always right
    assert fit_probability_floor(probas, gold) == 0.0
    assert fit_probability_floor(probas, np.full(4, -1)) == 0.0
    # always wrong and sure: the largest floor allowed
    assert fit_probability_floor(probas[:, ::-1] ** 8, gold) == MAX_FLOOR


def test_cross_fitting_scores_each_item_with_a_floor_fitted_on_the_others() -> None:
    rng = np.random.default_rng(0)
    probas, gold = _overconfident(40, 4, rng)
    gold[-5:] = -1  # not gold
    report = floor_calibration(probas, gold, n_folds=40, rng=np.random.default_rng(1))
    assert report["floor"] == pytest.approx(fit_probability_floor(probas, gold))
    assert report["n_folds"] == 35  # one item per fold: leave-one-out
    # leave-one-out by hand
    floored = np.empty_like(probas)
    for i in np.flatnonzero(gold >= 0):
        others = gold.copy()
        others[i] = -1
        floored[i] = apply_probability_floor(
            probas[i : i + 1], fit_probability_floor(probas, others)
        )
    scored = np.flatnonzero(gold >= 0)
    expected = calibration_metrics(floored[scored], gold[scored])
    assert report["cross_fitted"] == pytest.approx(expected)
    # an item's own gold is not in its fit: a wrong item gets less than the in-sample floor
    wrong = scored[probas[scored, gold[scored]] < 0.5][0]
    assert (
        floored[wrong, gold[wrong]]
        < apply_probability_floor(probas, report["floor"])[wrong, gold[wrong]]
    )


def test_cross_fitting_needs_two_gold_items() -> None:
    probas = np.array([[0.9, 0.1], [0.2, 0.8]])
    report = floor_calibration(probas, np.array([1, -1]))
    assert report["cross_fitted"] is None and report["n_folds"] == 0


def _csvs(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(5)
    rows, gold = ["task,worker,label"], ["task,label"]
    for t in range(60):
        truth = int(rng.integers(0, 2))
        # the crowd agrees on the wrong label for a few tasks (what the floor is for)
        crowd = 1 - truth if t % 10 == 0 else truth
        for w in range(5):
            label = crowd if rng.random() < 0.85 else 1 - crowd
            rows.append(f"t{t},w{w},{label}")
        gold.append(f"t{t},{truth}")
    labels_csv, gold_csv = tmp_path / "labels.csv", tmp_path / "gold.csv"
    labels_csv.write_text("\n".join(rows) + "\n")
    gold_csv.write_text("\n".join(gold) + "\n")
    return labels_csv, gold_csv


def test_aggregate_fit_floor_writes_floored_confidences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels_csv, gold_csv = _csvs(tmp_path)
    raw_out, floored_out = tmp_path / "raw.csv", tmp_path / "floored.csv"
    args = [str(labels_csv), "--gold", str(gold_csv), "--method", "ds", "--json"]
    assert main(["aggregate", *args, "--out", str(raw_out)]) == 0
    raw = json.loads(capsys.readouterr().out)["results"]
    assert main(["aggregate", *args, "--out", str(floored_out), "--fit-floor"]) == 0
    found = json.loads(capsys.readouterr().out)["results"]
    eps = found["floor"]["epsilon"]
    assert raw["floor"] is None and 0 < eps <= MAX_FLOOR
    assert found["floor"]["n_folds"] == 5
    assert found["floor"]["cross_fitted"]["nll"] < raw["calibration"]["nll"]
    assert found["calibration"] == raw["calibration"]  # the verdict's own, unfloored
    import pandas as pd

    before, after = pd.read_csv(raw_out), pd.read_csv(floored_out)
    assert (before["label"] == after["label"]).all()
    np.testing.assert_allclose(after["confidence"], (1 - eps) * before["confidence"] + eps / 2)


def test_aggregate_fit_floor_needs_gold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels_csv, _ = _csvs(tmp_path)
    assert main(["aggregate", str(labels_csv), "--fit-floor"]) == 2
    assert "--fit-floor needs --gold" in capsys.readouterr().err
