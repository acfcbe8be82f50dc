"""The crowd's share of symmetric workers at its floor on the first iteration is not a trap
(docs/stress-bed.md, 2026-12-07, "the symmetric share's floor"): on the vote's start the
type-II fixed point of the kinds' weights puts ``w_sym`` at its floor, and the fit leaves it
when the converged counts support symmetric workers; a start with the weights held neutral
reaches the same fixed point and the same reading."""

from __future__ import annotations

import numpy as np
import pytest

import crowdbudget.aggregation.worker_blind as worker_blind
from crowdbudget.aggregation import BayesianDawidSkene, make_aggregator
from crowdbudget.datasets import load_dataset
from crowdbudget.labels import LabelData

DEFAULT = "bds-ev-blind-recheck"


def _fit_logged(
    data: LabelData, monkeypatch: pytest.MonkeyPatch, hold: int = 0
) -> tuple[BayesianDawidSkene, list[np.ndarray]]:
    """The default verdict on the NumPy path (the compiled two-class loop makes the same
    bits), every iteration's weights (3,) recorded; ``hold``: the first ``hold`` iterations'
    weights held at thirds, then fitted from thirds."""
    original = worker_blind.fit_weights
    log: list[np.ndarray] = []

    def logged(log_z: np.ndarray, start: np.ndarray, n_steps: int = 200) -> np.ndarray:
        if n_steps != 200:  # the evidence bound's own fit: untouched
            return original(log_z, start, n_steps)
        if len(log) < hold:
            weights = np.full(3, 1.0 / 3)
        else:
            weights = original(log_z, np.full(3, 1.0 / 3) if len(log) == hold else start)
        log.append(np.array(weights))
        return weights

    monkeypatch.setattr(worker_blind, "fit_weights", logged)
    verdict = make_aggregator(DEFAULT)
    assert isinstance(verdict, BayesianDawidSkene)
    verdict._compiled_iteration = False
    verdict.fit(data)
    monkeypatch.setattr(worker_blind, "fit_weights", original)
    return verdict, log


def test_the_share_leaves_its_first_iteration_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    data = load_dataset("rte")
    verdict, log = _fit_logged(data, monkeypatch)
    assert log[0][0] == pytest.approx(worker_blind.WEIGHT_FLOOR, rel=1e-6)  # the vote's start
    assert verdict.symmetric_share_ > 0.3  # the converged counts: symmetric workers
    compiled = make_aggregator(DEFAULT).fit(data)
    np.testing.assert_array_equal(verdict.probas_, compiled.probas_)


@pytest.mark.parametrize("hold", [5, 15])
def test_a_neutral_start_reaches_the_same_reading(
    monkeypatch: pytest.MonkeyPatch, hold: int
) -> None:
    data = load_dataset("rte")
    verdict, _ = _fit_logged(data, monkeypatch)
    held, log = _fit_logged(data, monkeypatch, hold=hold)
    assert log[hold - 1][0] == pytest.approx(1.0 / 3)
    assert held.symmetric_share_ == pytest.approx(verdict.symmetric_share_, abs=1e-3)
    np.testing.assert_array_equal(held.labels_, verdict.labels_)
