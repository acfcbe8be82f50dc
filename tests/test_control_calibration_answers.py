"""The ``"answers"`` calibration on control answers: prediction-powered accuracy with a
worker-aware item-effect model (:mod:`crowdbudget.aggregation.control_calibration`)."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.aggregation import make_aggregator
from crowdbudget.aggregation.control_calibration import (
    CALIBRATION_METHODS,
    calibrate_on_control,
    effect_posterior,
    fit_item_effect,
    prediction_powered_accuracy,
)
from crowdbudget.datasets import load_dataset
from crowdbudget.labels import LabelData


def _crowd(scale: float, seed: int, n_items: int = 400, n_workers: int = 20) -> LabelData:
    """Binary crowd: worker accuracy a_w in [0.65, 0.9], item effect u ~ N(0, scale²) on the
    logit, 5 labels per item."""
    rng = np.random.default_rng(seed)
    accuracy = rng.uniform(0.65, 0.9, n_workers)
    effect = rng.normal(0.0, scale, n_items)
    truth = rng.integers(0, 2, n_items)
    items = np.repeat(np.arange(n_items), 5)
    workers = np.concatenate([rng.choice(n_workers, 5, replace=False) for _ in range(n_items)])
    logit = np.log(accuracy[workers] / (1 - accuracy[workers])) + effect[items]
    right = rng.random(items.size) < 1 / (1 + np.exp(-logit))
    labels = np.where(right, truth[items], 1 - truth[items])
    return LabelData(
        items=items,
        workers=workers,
        labels=labels,
        item_ids=np.array([f"i{i}" for i in range(n_items)], dtype=object),
        worker_ids=np.array([f"w{j}" for j in range(n_workers)], dtype=object),
        classes=("0", "1"),
        gold=truth,
    )


def test_prediction_powered_accuracy_limits() -> None:
    correct = np.array([1, 1, 0, 1, 1, 1, 0, 1], dtype=bool)
    # a prediction that does not vary on the labelled items: nothing to lean on (λ = 0)
    estimate, weight = prediction_powered_accuracy(np.full(50, 0.2), np.full(8, 0.5), correct)
    assert weight == 0.0 and estimate == pytest.approx(correct.mean())
    # a prediction equal to the correctness: λ ≈ 1 and the estimate is the prediction's mean
    # on the unlabelled items, plus a rectifier of ~0
    unlabelled = np.r_[np.ones(90), np.zeros(10)]
    estimate, weight = prediction_powered_accuracy(unlabelled, correct.astype(float), correct)
    assert weight == pytest.approx(1 / (1 + 8 / 100))
    assert estimate == pytest.approx(weight * 0.9 + (1 - weight) * correct.mean())
    # a prediction biased by a constant: the rectifier removes the bias
    biased = correct * 0.6 + 0.2
    estimate, weight = prediction_powered_accuracy(np.full(100, 0.2 + 0.6 * 0.75), biased, correct)
    assert estimate == pytest.approx(0.75, abs=1e-9)


@pytest.mark.parametrize("scale", [0.3, 2.0])
def test_fit_item_effect_recovers_the_spread_of_item_difficulty(scale: float) -> None:
    data = _crowd(scale, seed=1)
    # worker logits of the simulation itself, so that only (μ, σ) is estimated
    rng = np.random.default_rng(1)
    accuracy = rng.uniform(0.65, 0.9, 20)
    logits = np.log(accuracy[data.workers] / (1 - accuracy[data.workers]))
    items = np.arange(data.n_items)
    mean, spread = fit_item_effect(data, logits, items, data.gold)
    assert abs(mean) < 0.5
    assert spread == pytest.approx(scale, abs=0.5 if scale > 1 else 0.35)
    # under the model that made the crowd, the posterior with the effect integrated out is
    # calibrated in the large: its mean confidence is its accuracy (400 items: ± ~0.03)
    posterior = effect_posterior(data, logits, np.array([0.5, 0.5]), mean, spread)
    assert posterior.shape == (data.n_items, 2)
    assert np.allclose(posterior.sum(axis=1), 1.0)
    accuracy = float((posterior.argmax(axis=1) == data.gold).mean())
    assert posterior.max(axis=1).mean() == pytest.approx(accuracy, abs=0.04)


def test_answers_calibration_is_cross_fitted_reproducible_and_keeps_the_labels() -> None:
    assert "answers" in CALIBRATION_METHODS
    data = load_dataset("rte")
    sample = np.random.default_rng(0).choice(800, 60, replace=False)
    control = {int(i): int(data.gold[i]) for i in sample}
    aggregator = make_aggregator("bds-oc")
    probas, report = calibrate_on_control(aggregator, data, control, rng=0, method="answers")
    plain = make_aggregator("bds-oc").fit(data, known_truth=control)
    assert np.array_equal(probas.argmax(axis=1), plain.probas_.argmax(axis=1))
    assert report["method"] == "answers" and 0.0 <= report["power"] <= 1.0
    assert 0.0 < report["floor"] <= 0.5
    assert report["cross_fitted"]["nll"] < report["raw"]["nll"]
    again = calibrate_on_control("bds-oc", data, control, rng=0, method="answers")[1]
    assert again == report
