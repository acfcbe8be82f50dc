"""Conformance checks for aggregators (``check_aggregator``).

``check_aggregator(aggregator)`` fits copies of an *unfitted* aggregator on small synthetic
label sets (binary, and three classes unless the aggregator refuses them with a one-line
:class:`~crowdbudget.exceptions.InvalidParameterError`) and raises ``AssertionError`` naming
the first broken rule:

1. ``fit`` returns the aggregator; ``probas_`` has shape (n_items, n_classes), finite values in
   [0, 1], rows summing to 1; ``labels_`` has shape (n_items,), integer classes;
2. ``labels_`` is an argmax of ``probas_`` (exact ties may go either way);
3. the same ``rng`` gives the same result (fit twice on copies);
4. invariance to the order of the rows and to renaming items and workers: the same
   probabilities per item (to ``atol``) and the same labels where the top class is not tied;
5. DataFrame round trip: ``fit_predict`` on crowd-kit's ``task, worker, label`` table gives a
   ``task``-indexed Series of class strings, ``fit_predict_proba`` a task × class DataFrame,
   both matching the integer-coded fit.

``check_aggregator_entry(component_id)`` checks a *registered* id
(:data:`crowdbudget.registry.AGGREGATORS`) end to end:

6. its entry has a summary, and every row of its parameter table a type, a one-line doc and
   a keyword the factory takes; every id takes ``seed``;
7. built with no parameters, every row's default is the aggregator's value; giving the
   default as text builds the same aggregator; every alias builds the same aggregator;
8. bad values — unreadable text, a value outside the row's choices or range — are refused
   before anything is built, in one :class:`~crowdbudget.exceptions.InvalidParameterError`
   line naming the id as typed and the parameter;
9. the ``binary_only`` capability is the truth: such an aggregator refuses three classes in
   one line, any other fits them;
10. the built aggregator passes :func:`check_aggregator` (``behaviour=False`` skips it).
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import numpy as np
import pandas as pd

from crowdbudget.aggregation.base import Aggregator
from crowdbudget.datasets.loaders import LabelData, from_frame
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.registry import Param


def synthetic_frame(
    n_items: int = 40,
    n_workers: int = 12,
    labels_per_item: int = 5,
    n_classes: int = 2,
    seed: int = 0,
) -> pd.DataFrame:
    """A crowd-kit table: each item labeled by ``labels_per_item`` distinct one-coin workers
    (accuracies uniform in [0.55, 0.95]), string ids, class names ``c0, c1, …``."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(n_classes, size=n_items)
    accuracy = rng.uniform(0.55, 0.95, size=n_workers)
    keys = rng.random((n_items, n_workers))
    workers = np.argsort(keys, axis=1)[:, :labels_per_item].reshape(-1)
    items = np.repeat(np.arange(n_items), labels_per_item)
    correct = rng.random(items.size) < accuracy[workers]
    wrong = (truth[items] + rng.integers(1, n_classes, size=items.size)) % n_classes
    labels = np.where(correct, truth[items], wrong)
    return pd.DataFrame(
        {
            "task": [f"t{i:03d}" for i in items],
            "worker": [f"w{j:02d}" for j in workers],
            "label": [f"c{c}" for c in labels],
        }
    )


def _fitted(aggregator: Aggregator, labels: LabelData | pd.DataFrame) -> Aggregator:
    fresh = copy.deepcopy(aggregator)
    out = fresh.fit(labels)
    assert out is fresh, f"{type(aggregator).__name__}.fit must return the aggregator"
    return fresh


def _by_task(agg: Aggregator) -> pd.DataFrame:
    return pd.DataFrame(agg.probas_, index=pd.Index(agg.data_.item_ids, name="task"))


def _check_basic(agg: Aggregator, data: LabelData, name: str) -> None:
    probas, labels = np.asarray(agg.probas_), np.asarray(agg.labels_)
    shape = (data.n_items, data.n_classes)
    assert probas.shape == shape, f"{name}: probas_ shape {probas.shape}, expected {shape}"
    assert np.all(np.isfinite(probas)), f"{name}: probas_ has non-finite values"
    assert np.all((probas >= -1e-12) & (probas <= 1 + 1e-12)), f"{name}: probas_ outside [0, 1]"
    assert np.allclose(probas.sum(axis=1), 1.0, atol=1e-9), f"{name}: probas_ rows must sum to 1"
    assert labels.shape == (data.n_items,), f"{name}: labels_ shape {labels.shape}"
    assert np.issubdtype(labels.dtype, np.integer), f"{name}: labels_ must be integers"
    assert np.all((labels >= 0) & (labels < data.n_classes)), f"{name}: labels_ out of range"
    top = probas.max(axis=1)
    chosen = probas[np.arange(data.n_items), labels]
    assert np.all(chosen >= top - 1e-9), f"{name}: labels_ is not the argmax of probas_"


def _untied(probas: np.ndarray, margin: float) -> np.ndarray:
    ordered = np.sort(probas, axis=1)
    return np.asarray(ordered[:, -1] - ordered[:, -2] > margin)


def _check_one(aggregator: Aggregator, frame: pd.DataFrame, atol: float, seed: int) -> None:
    name = type(aggregator).__name__
    data = from_frame(frame)
    first = _fitted(aggregator, data)
    _check_basic(first, data, name)
    again = _fitted(aggregator, data)
    assert np.array_equal(first.probas_, again.probas_) and np.array_equal(
        first.labels_, again.labels_
    ), f"{name}: same rng, different result"

    reference = _by_task(first)
    untied = pd.Series(_untied(first.probas_, 10 * atol), index=reference.index)
    ref_labels = pd.Series(first.labels_, index=reference.index)
    rng = np.random.default_rng(seed)
    # 4a: rows shuffled
    shuffled = frame.iloc[rng.permutation(len(frame))].reset_index(drop=True)
    other = _fitted(aggregator, from_frame(shuffled))
    _check_basic(other, other.data_, name)
    probas = _by_task(other).loc[reference.index]
    assert np.allclose(probas.to_numpy(), reference.to_numpy(), atol=atol), (
        f"{name}: probas_ change when the rows are reordered"
    )
    labels = pd.Series(other.labels_, index=other.data_.item_ids).loc[reference.index]
    assert np.array_equal(labels[untied].to_numpy(), ref_labels[untied].to_numpy()), (
        f"{name}: labels_ change when the rows are reordered"
    )
    # 4b: items and workers renamed (and rows shuffled again)
    item_names = {t: f"item-{k}" for k, t in enumerate(rng.permutation(frame["task"].unique()))}
    worker_names = {w: f"who-{k}" for k, w in enumerate(rng.permutation(frame["worker"].unique()))}
    renamed = shuffled.assign(
        task=shuffled["task"].map(item_names), worker=shuffled["worker"].map(worker_names)
    ).iloc[rng.permutation(len(frame))]
    other = _fitted(aggregator, from_frame(renamed))
    probas = _by_task(other).loc[[item_names[t] for t in reference.index]]
    assert np.allclose(probas.to_numpy(), reference.to_numpy(), atol=atol), (
        f"{name}: probas_ change when items and workers are renamed"
    )
    # 5: DataFrame in, DataFrame out
    predicted = copy.deepcopy(aggregator).fit_predict(frame)
    assert isinstance(predicted, pd.Series), f"{name}.fit_predict(DataFrame) must give a Series"
    assert predicted.index.name == "task", f"{name}: fit_predict Series must be indexed by task"
    expected = np.asarray(data.classes, dtype=object)[first.labels_]
    assert list(predicted.index) == list(data.item_ids), f"{name}: fit_predict lost tasks"
    assert np.array_equal(predicted.to_numpy(dtype=object), expected), (
        f"{name}: fit_predict(DataFrame) disagrees with the integer-coded fit"
    )
    proba_frame = copy.deepcopy(aggregator).fit_predict_proba(frame)
    assert isinstance(proba_frame, pd.DataFrame), f"{name}.fit_predict_proba must give a frame"
    assert list(proba_frame.columns) == list(data.classes), f"{name}: columns must be classes"
    assert np.allclose(proba_frame.to_numpy(dtype=float), first.probas_), (
        f"{name}: fit_predict_proba(DataFrame) disagrees with the integer-coded fit"
    )


def check_aggregator(aggregator: Aggregator, *, atol: float = 1e-6, seed: int = 0) -> None:
    """Raise ``AssertionError`` if ``aggregator`` (unfitted) breaks the aggregator contract
    (see the module docstring). ``atol``: tolerance on ``probas_`` across row orders."""
    assert isinstance(aggregator, Aggregator), "an aggregator must subclass Aggregator"
    params = aggregator.get_params()
    assert isinstance(params, dict), "get_params must return a dict"
    assert type(aggregator).__name__ in repr(aggregator)
    _check_one(aggregator, synthetic_frame(seed=seed), atol, seed)
    multi = synthetic_frame(n_classes=3, seed=seed + 1)
    try:
        copy.deepcopy(aggregator).fit(multi)
    except InvalidParameterError as exc:
        assert "\n" not in str(exc), "errors must be one line"
        return
    _check_one(aggregator, multi, atol, seed + 1)


def bad_values(row: Param) -> list[str]:
    """Texts the row must refuse: unreadable, outside its choices, just outside its range."""
    out: list[str] = []
    if row.choices is not None:
        out.append("not-one-of-them")
    elif row.read is not str:
        out.append("not-a-value")
    low_open = bool(getattr(row, "low_open", False))
    high_open = bool(getattr(row, "high_open", False))
    if row.low is not None:
        out.append(f"{row.low:g}" if low_open else f"{row.low - 1:g}")
    if row.high is not None:
        out.append(f"{row.high:g}" if high_open else f"{row.high + 1:g}")
    return out


def _same(a: Aggregator, b: Aggregator) -> bool:
    return type(a) is type(b) and repr(a) == repr(b)


def _keyword(row: Param) -> str:
    return row.argument or row.name.replace("-", "_")


def check_aggregator_entry(component_id: str, *, behaviour: bool = True) -> None:
    """Raise ``AssertionError`` if the registered aggregator ``component_id`` breaks the
    registration contract (rules 6–10 of the module docstring)."""
    from crowdbudget.aggregation.registry import make_aggregator
    from crowdbudget.registry import AGGREGATORS

    entry = AGGREGATORS.entry(component_id)
    name = entry.component_id
    assert entry.summary.strip(), f"{name}: no summary"
    assert "seed" in entry.params, f"{name}: every aggregator id takes seed"
    signature = inspect.signature(entry.factory).parameters
    for key, row in entry.params.items():
        assert row.name == key, f"{name}: row {row.name!r} filed under {key!r}"
        assert row.doc.strip() and "\n" not in row.doc, f"{name}: {key} needs a one-line doc"
        assert row.type_name, f"{name}: {key} has no type"
        assert _keyword(row) in signature, f"{name}: the factory takes no {_keyword(row)!r}"
    built = make_aggregator(name)
    params = built.get_params()
    for key, row in entry.params.items():
        if row.default is None:
            continue
        actual: Any = params.get(_keyword(row))
        assert actual == row.default, (
            f"{name}: {key} defaults to {actual!r}, its row says {row.default!r}"
        )
        text = f"{name}:{key}={row.default}"
        assert _same(make_aggregator(text), built), f"{name}: {text} differs from {name}"
    for alias in entry.aliases:
        assert _same(make_aggregator(alias), built), f"{name}: alias {alias} builds another"
    for typed in (name, *entry.aliases[:1]):
        for key, row in entry.params.items():
            for value in bad_values(row):
                text = f"{typed}:{key}={value}"
                try:
                    make_aggregator(text)
                except InvalidParameterError as error:
                    message = str(error)
                    assert "\n" not in message, f"{text}: the refusal must be one line"
                    assert repr(typed) in message, f"{text}: the refusal must name {typed!r}"
                    assert key in message, f"{text}: the refusal must name {key}"
                else:
                    raise AssertionError(f"{text} must be refused by {name}'s table")
    multi = synthetic_frame(n_items=12, n_workers=6, labels_per_item=3, n_classes=3)
    binary_only = AGGREGATORS.spec(name).capabilities.binary_only
    try:
        copy.deepcopy(built).fit(multi)
    except InvalidParameterError as error:
        assert binary_only, f"{name} refuses three classes but is not binary_only ({error})"
        assert "\n" not in str(error), f"{name}: the refusal must be one line"
    else:
        assert not binary_only, f"{name} is binary_only but fits three classes"
    if behaviour:
        check_aggregator(built)
