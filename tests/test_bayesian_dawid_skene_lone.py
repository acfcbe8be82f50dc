"""Lone labels in the Bayesian Dawid–Skene (``lone_labels``; bayesian_dawid_skene module
docstring, "Lone labels"; docs/stress-bed.md, 2026-12-07 "lone labels")."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.aggregation import BayesianDawidSkene, make_aggregator
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.labels import LabelData


def lone_heavy_crowd(seed: int = 1) -> tuple[LabelData, np.ndarray]:
    """A campaign-like crowd (binary, 1,200 items, 20 workers, 80 % accurate, 75 % class 1):
    300 items with two labels, 900 with one, and the lone class-0 items all sent to half of
    the workers — as an allocation may — so that those workers say class 0 on about half of
    their lone labels. Returns the labels and the truth (n_items,)."""
    rng = np.random.default_rng(seed)
    n_items, n_workers, partnered = 1200, 20, 300
    truth = (rng.random(n_items) < 0.75).astype(np.int64)
    leaning = np.flatnonzero(rng.random(n_workers) < 0.5)
    items: list[int] = []
    workers: list[int] = []
    for i in range(partnered, n_items):
        w = int(rng.choice(leaning)) if truth[i] == 0 else int(rng.integers(n_workers))
        items.append(i)
        workers.append(w)
    for i in range(partnered):
        for w in rng.choice(n_workers, 2, replace=False):
            items.append(i)
            workers.append(int(w))
    item_array, worker_array = np.array(items), np.array(workers)
    right = rng.random(item_array.size) < 0.8
    labels = np.where(right, truth[item_array], 1 - truth[item_array])
    data = LabelData(
        items=item_array,
        workers=worker_array,
        labels=labels,
        item_ids=np.arange(n_items).astype(str).astype(object),
        worker_ids=np.arange(n_workers).astype(str).astype(object),
        classes=("0", "1"),
        gold=truth,
    )
    return data, truth


def test_lone_labels_no_longer_confirm_their_worker() -> None:
    """Counted, the lone class-0 labels of the workers who say class 0 often move to class 1
    (each moved label is an error in its own worker's class-1 row, which moves the next):
    0.719 against majority vote's 0.783, 88 % moved. Skipped, the workers are judged by
    their partnered labels and the lone labels stand (0.792)."""
    data, truth = lone_heavy_crowd()
    per_item = np.bincount(data.items, minlength=data.n_items)
    lone_zero = data.items[(per_item[data.items] == 1) & (data.labels == 0)]
    accuracy, moved = {}, {}
    for method in ("mv", "bds-oc:lone-labels=count", "bds-oc"):
        labels = make_aggregator(method).fit(data).labels_
        accuracy[method] = float(np.mean(labels == truth))
        moved[method] = float(np.mean(labels[lone_zero] == 1))
    assert moved["bds-oc:lone-labels=count"] > 0.5, moved
    assert accuracy["bds-oc:lone-labels=count"] < accuracy["mv"] - 0.03, accuracy
    assert moved["bds-oc"] < 0.5 * moved["bds-oc:lone-labels=count"], moved
    assert accuracy["bds-oc"] >= accuracy["mv"] - 0.01, accuracy


def test_one_label_per_item_skip_counts_every_label() -> None:
    """With no partnered label anywhere, ``skip`` is ``count`` (nothing can be checked),
    prior and posterior alike."""
    data, _ = lone_heavy_crowd()
    alone = data.items >= 300
    lone = LabelData(
        items=data.items[alone] - 300,
        workers=data.workers[alone],
        labels=data.labels[alone],
        item_ids=data.item_ids[300:],
        worker_ids=data.worker_ids,
        classes=data.classes,
    )
    counted = BayesianDawidSkene(prior_form="one-coin", prior_floor=0.1).fit(lone)
    skipped = make_aggregator("bds-oc").fit(lone)
    assert np.array_equal(counted.probas_, skipped.probas_)
    assert np.array_equal(counted.confusion_prior_, skipped.confusion_prior_)
    # one partnered item (two workers) is enough to switch: the workers' counts change, the
    # prior (fitted on every label) does not; "skip-prior" fits that on the partnered too
    pair = LabelData(
        items=np.append(lone.items, [lone.n_items, lone.n_items]),
        workers=np.append(lone.workers, [1, 2]),
        labels=np.append(lone.labels, [0, 0]),
        item_ids=np.append(lone.item_ids, "pair").astype(object),
        worker_ids=lone.worker_ids,
        classes=lone.classes,
    )
    counted = BayesianDawidSkene(prior_form="one-coin", prior_floor=0.1).fit(pair)
    skipped = make_aggregator("bds-oc").fit(pair)
    assert np.array_equal(counted.confusion_prior_, skipped.confusion_prior_)
    assert not np.allclose(counted.errors_, skipped.errors_)
    alone = make_aggregator("bds-oc:lone-labels=skip-prior").fit(pair)
    assert not np.allclose(alone.confusion_prior_, counted.confusion_prior_)


def test_a_known_item_is_a_partner() -> None:
    """A lone label on an item of known truth is checked by it, so it still counts: the
    worker wrong on its known items is seen wrong."""
    data, _ = lone_heavy_crowd()
    worker = int(data.workers[data.items >= 300][0])
    mine = np.flatnonzero((data.workers == worker) & (data.items >= 300))
    known = {int(data.items[n]): int(1 - data.labels[n]) for n in mine}  # all its lone wrong
    truth = {data.item_ids[i]: data.classes[c] for i, c in known.items()}
    fitted = make_aggregator("bds-oc").fit(data, known_truth=truth)
    blind = make_aggregator("bds-oc").fit(data)
    # trace of the 2×2 confusion: 0.79 against 1.51 unchecked
    assert np.trace(fitted.errors_[worker]) < np.trace(blind.errors_[worker]) - 0.3


def test_lone_labels_refused_and_registered() -> None:
    data, _ = lone_heavy_crowd()
    with pytest.raises(InvalidParameterError, match="lone_labels must be one of"):
        BayesianDawidSkene(lone_labels="drop").fit(data)
    assert make_aggregator("bds-oc").get_params()["lone_labels"] == "skip"
    assert make_aggregator("bds").get_params()["lone_labels"] == "count"
    assert make_aggregator("bds-oc:lone-labels=skip-prior").get_params()["lone_labels"] == (
        "skip-prior"
    )
    with pytest.raises(InvalidParameterError, match="lone-labels"):
        make_aggregator("bds-oc:lone-labels=drop")
