"""Aggregators read control items as labels of known truth (``fit(..., known_truth=...)``):
conformance over every registered aggregator — no known truth is today's fit bit for bit, and
an aggregator that reads it learns its workers from it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crowdbudget.aggregation import make_aggregator, registered_aggregators
from crowdbudget.aggregation.base import KnownTruth, known_truth_arrays
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import DataFormatError

IDS = sorted(registered_aggregators())

#: aggregators with worker parameters that do not read known truth, and why
#: (docs/calibration.md, "With control tasks")
NOT_READING = {
    "mv": "a vote rule",
    "bayes": "a vote rule (Beta/Dirichlet posterior of the counts)",
    "kos": "messages without a likelihood to fix a known item in",
    "kos-mean": "as kos",
    "mmsr": "skills from the workers' covariance, no item posterior",
    "auto": "chooses among candidates; no pass-through in this build",
}


def _crowd(seed: int = 3, n_items: int = 60, n_workers: int = 9) -> tuple[LabelData, np.ndarray]:
    """A binary crowd of mixed accuracy, 5 labels per item, and its truth (n_items,)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_items)
    accuracy = np.linspace(0.55, 0.9, n_workers)
    items, workers = [], []
    for i in range(n_items):
        for j in rng.choice(n_workers, 5, replace=False):
            items.append(i)
            workers.append(int(j))
    items_a, workers_a = np.array(items), np.array(workers)
    right = rng.random(items_a.size) < accuracy[workers_a]
    labels = np.where(right, truth[items_a], 1 - truth[items_a])
    return _data(items_a, workers_a, labels, n_items, n_workers), truth


def _data(items, workers, labels, n_items, n_workers, n_classes=2):  # type: ignore[no-untyped-def]
    return LabelData(
        items=np.asarray(items, dtype=np.int64),
        workers=np.asarray(workers, dtype=np.int64),
        labels=np.asarray(labels, dtype=np.int64),
        item_ids=np.array([f"i{k}" for k in range(n_items)], dtype=object),
        worker_ids=np.array([f"w{k}" for k in range(n_workers)], dtype=object),
        classes=tuple(str(c) for c in range(n_classes)),
    )


@pytest.mark.parametrize("aggregator_id", IDS)
def test_no_known_truth_is_todays_fit_bit_for_bit(aggregator_id: str) -> None:
    data, _ = _crowd()
    plain = make_aggregator(aggregator_id).fit(data)
    for empty in (None, {}):
        again = make_aggregator(aggregator_id).fit(data, known_truth=empty)
        assert again.probas_.tobytes() == plain.probas_.tobytes()
        assert again.labels_.tobytes() == plain.labels_.tobytes()


@pytest.mark.parametrize("aggregator_id", IDS)
def test_every_aggregator_says_whether_it_reads_known_truth(aggregator_id: str) -> None:
    aggregator = make_aggregator(aggregator_id)
    assert aggregator.reads_known_truth == (aggregator_id not in NOT_READING)


@pytest.mark.parametrize("aggregator_id", sorted(NOT_READING))
def test_an_aggregator_that_does_not_read_it_ignores_it(aggregator_id: str) -> None:
    data, truth = _crowd()
    plain = make_aggregator(aggregator_id).fit(data)
    known = {i: int(1 - truth[i]) for i in range(10)}  # even wrong truth changes nothing
    again = make_aggregator(aggregator_id).fit(data, known_truth=known)
    assert again.probas_.tobytes() == plain.probas_.tobytes()


def _honest_and_contrary() -> tuple[LabelData, np.ndarray]:
    """Two workers who disagree on every item (one says the truth, one its opposite) and a
    third at random: without known truth nothing tells them apart."""
    rng = np.random.default_rng(0)
    n_items = 40
    truth = rng.integers(0, 2, n_items)
    items = np.repeat(np.arange(n_items), 3)
    workers = np.tile([0, 1, 2], n_items)
    labels = np.column_stack([truth, 1 - truth, rng.integers(0, 2, n_items)]).reshape(-1)
    return _data(items, workers, labels, n_items, 3), truth


@pytest.mark.parametrize("aggregator_id", sorted(set(IDS) - set(NOT_READING)))
def test_known_truth_is_honoured(aggregator_id: str) -> None:
    data, truth = _honest_and_contrary()
    known = {i: int(truth[i]) for i in range(8)}
    fitted = make_aggregator(aggregator_id).fit(data, known_truth=known)
    # a known item's probabilities are its one-hot truth
    rows = np.array(sorted(known))
    assert np.array_equal(fitted.probas_[rows], np.eye(2)[truth[rows]])
    # the worker who contradicts every known item loses
    if aggregator_id in ("wmv", "wawa", "zbs"):
        # weights from agreement with the (weighted) majority, where the random third worker
        # decides every split; the known items still rank honest above contrary
        weights = getattr(fitted, "skills_", None)
        weights = fitted.weights_ if weights is None else weights
        assert weights[0] > weights[1]
        return
    # every other reader: the unknown items follow the honest worker
    unknown = np.setdiff1d(np.arange(data.n_items), rows)
    assert np.all(fitted.probas_[unknown, truth[unknown]] > 0.5), aggregator_id
    assert np.all(fitted.labels_ == truth)


def test_a_new_worker_starts_from_their_control_answers() -> None:
    data, truth = _crowd()
    # worker 9 answers only the 6 control items, all wrong
    control = np.arange(6)
    extra = _data(
        np.concatenate([data.items, control]),
        np.concatenate([data.workers, np.full(6, 9)]),
        np.concatenate([data.labels, 1 - truth[control]]),
        data.n_items,
        10,
    )
    known = {int(i): int(truth[i]) for i in control}
    for aggregator_id in ("ds", "bds-oc", "one-coin-em"):
        without = make_aggregator(aggregator_id).fit(extra)
        with_truth = make_aggregator(aggregator_id).fit(extra, known_truth=known)
        accuracy_without = np.trace(without.errors_[9]) / 2
        accuracy_with = np.trace(with_truth.errors_[9]) / 2
        assert accuracy_with < accuracy_without, aggregator_id
        assert accuracy_with < 0.5, aggregator_id  # (bds-oc: the crowd prior holds it at 0.4)


def test_a_frame_takes_task_ids_and_label_values() -> None:
    frame = pd.DataFrame(
        {
            "task": ["a", "a", "b", "b", "c", "c"],
            "worker": ["x", "y", "x", "y", "x", "y"],
            "label": ["no", "yes", "no", "yes", "yes", "no"],
        }
    )
    fitted = make_aggregator("ds").fit(frame, known_truth={"a": "yes"})
    row = list(fitted.data_.item_ids).index("a")
    yes = list(fitted.data_.classes).index("yes")
    assert fitted.probas_[row, yes] == 1.0
    proba = make_aggregator("ds").fit_predict_proba(frame, known_truth={"a": "yes"})
    assert isinstance(proba, pd.DataFrame) and proba.loc["a", "yes"] == 1.0
    with pytest.raises(DataFormatError, match="task 'z'"):
        make_aggregator("ds").fit(frame, known_truth={"z": "yes"})
    with pytest.raises(DataFormatError, match="label 'maybe'"):
        make_aggregator("ds").fit(frame, known_truth={"a": "maybe"})


def test_bad_indices_are_refused_in_one_line() -> None:
    data, _ = _crowd()
    for bad in ({-1: 0}, {data.n_items: 0}, {0: 2}, {"x": 0}):
        with pytest.raises(DataFormatError):
            known_truth_arrays(bad, data, data)
    known = known_truth_arrays({3: 1, 0: 0}, data, data)
    assert isinstance(known, KnownTruth)
    assert known.mask(data.n_items).sum() == 2
