"""The aggregator contract (crowd-kit / scikit-learn names; DESIGN §5).

An aggregator turns collected labels into one label per item. The constructor only stores
parameters; :meth:`Aggregator.fit` computes and sets the fitted attributes, which end in ``_``:

- ``probas_``: class probabilities (or normalized scores), shape (n_items, n_classes);
- ``labels_``: the chosen class per item, shape (n_items,), int64 — the argmax of
  ``probas_`` with exact ties broken uniformly at random by the generator built from
  ``rng`` (an int seed gives the same tie-breaks on every fit);
- ``data_``: the integer-coded :class:`~crowdbudget.datasets.LabelData` that was fitted.

Input is either a :class:`~crowdbudget.datasets.LabelData` or crowd-kit's long DataFrame
(columns ``task, worker, label``). ``fit_predict`` / ``fit_predict_proba`` answer in the
input's language: integer arrays for ``LabelData``; for a DataFrame, a ``task``-indexed
Series of the original label strings and a DataFrame with one column per class (exactly
crowd-kit's shapes).

Subclasses implement :meth:`Aggregator._fit_probas` on integer arrays, with no per-row
Python loops.

**Known truth** (control tasks: items whose answer the requester knows). ``fit(labels,
known_truth={item: class, ...})`` hands the aggregator labels of known truth. An aggregator
with worker parameters whose class flag :attr:`Aggregator.reads_known_truth` is True fits
them **semi-supervised** (Dawid & Skene 1979 §4, "some patients' true responses known"): in
every E-step the posterior of a known item is its one-hot truth, so the M-step learns each
worker's parameters from their control answers as definite successes / failures (a worker
seen only on control items starts from evidence) and the class proportions count the known
items at their true class; ``probas_`` of a known item is its one-hot truth. Such a class
implements :meth:`Aggregator._fit_probas_known` — most through
:class:`KnownTruthAggregator`'s one fit for both cases. Every other aggregator (the vote rules,
and the methods listed in docs/calibration.md "With control tasks" as not reading it)
ignores ``known_truth``: its fit is the one without it. ``known_truth=None`` (or an empty
mapping) is the fit without it, bit for bit.

For :class:`~crowdbudget.datasets.LabelData` input ``known_truth`` maps item index → class
index; for a DataFrame, task id → label value (as in the table's ``label`` column), read
through the table's coding (:func:`known_truth_arrays`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt
import pandas as pd

from crowdbudget._random import as_generator
from crowdbudget.datasets.loaders import LabelData, from_frame
from crowdbudget.exceptions import DataFormatError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

LabelsInput = LabelData | pd.DataFrame


def as_label_data(labels: LabelsInput) -> LabelData:
    """Accept a :class:`LabelData` or a crowd-kit ``task, worker, label`` DataFrame."""
    if isinstance(labels, LabelData):
        return labels
    if isinstance(labels, pd.DataFrame):
        return from_frame(labels)
    raise DataFormatError(
        f"labels must be a LabelData or a DataFrame with columns task, worker, label; "
        f"got {type(labels).__name__}"
    )


def argmax_random_ties(
    scores: FloatArray, rng: np.random.Generator, *, rtol: float = 1e-12
) -> IntArray:
    """Row-wise argmax of ``scores`` (n_rows, n_cols), ties broken uniformly at random.

    Scores within ``rtol`` (relative to the row maximum) of the maximum count as tied, so
    that float noise in EM does not decide ties. One uniform per cell, vectorized.
    """
    scores = np.asarray(scores, dtype=float)
    top = scores.max(axis=1, keepdims=True)
    tied = scores >= top - rtol * np.maximum(np.abs(top), 1e-300)
    keys = np.where(tied, rng.random(scores.shape), -1.0)
    return np.argmax(keys, axis=1).astype(np.int64)


def vote_counts(data: LabelData, weights: npt.ArrayLike | None = None) -> FloatArray:
    """Votes (or summed per-label ``weights``) per item and class, (n_items, n_classes)."""
    flat = data.items * data.n_classes + data.labels
    w = None if weights is None else np.asarray(weights, dtype=float)
    counts = np.bincount(flat, weights=w, minlength=data.n_items * data.n_classes)
    return counts.reshape(data.n_items, data.n_classes).astype(float)


@dataclass(frozen=True)
class KnownTruth:
    """Items of known class (the module docstring's "known truth"), integer-coded.

    Attributes:
        items: item indices, shape (n_known,), distinct, in [0, n_items).
        classes: their true class indices, shape (n_known,), in [0, n_classes).
    """

    items: IntArray
    classes: IntArray

    def clamp(self, posteriors: FloatArray) -> FloatArray:
        """``posteriors`` (n_items, n_classes) with every known item's row set to its one-hot
        truth, in place (returned for chaining)."""
        posteriors[self.items] = 0.0
        posteriors[self.items, self.classes] = 1.0
        return posteriors

    def mask(self, n_items: int) -> npt.NDArray[np.bool_]:
        """Whether each item is known, shape (n_items,)."""
        known = np.zeros(n_items, dtype=bool)
        known[self.items] = True
        return known


def known_truth_arrays(
    known_truth: Mapping[Any, Any] | None, data: LabelData, labels: LabelsInput
) -> KnownTruth | None:
    """``known_truth`` as :class:`KnownTruth` for ``data`` (None when absent or empty).

    ``labels`` is the input ``data`` was read from: for a DataFrame the keys are task ids and
    the values label values (compared as strings, the table's coding); for
    :class:`LabelData`, item indices and class indices. Raises DataFormatError (one line) for
    an item or class the data does not have."""
    if known_truth is None or len(known_truth) == 0:
        return None
    if not isinstance(known_truth, Mapping):
        raise DataFormatError(
            f"known_truth must be a mapping item -> class, got {type(known_truth).__name__}"
        )
    keys, values = list(known_truth.keys()), list(known_truth.values())
    if isinstance(labels, pd.DataFrame):
        item_index = {str(item): i for i, item in enumerate(data.item_ids)}
        class_index = {str(c): k for k, c in enumerate(data.classes)}
        for key, value in zip(keys, values, strict=True):
            if str(key) not in item_index:
                raise DataFormatError(f"known_truth names task {key!r}, which has no labels")
            if str(value) not in class_index:
                raise DataFormatError(
                    f"known_truth gives task {key!r} the label {value!r}, not one of "
                    f"{', '.join(map(str, data.classes))}"
                )
        items = np.array([item_index[str(k)] for k in keys], dtype=np.int64)
        classes = np.array([class_index[str(v)] for v in values], dtype=np.int64)
    else:
        try:
            items = np.array([int(k) for k in keys], dtype=np.int64)
            classes = np.array([int(v) for v in values], dtype=np.int64)
        except (TypeError, ValueError):
            raise DataFormatError(
                "known_truth must map item indices to class indices (integers)"
            ) from None
        if items.min() < 0 or items.max() >= data.n_items:
            raise DataFormatError(f"known_truth item index out of range 0..{data.n_items - 1}")
        if classes.min() < 0 or classes.max() >= data.n_classes:
            raise DataFormatError(f"known_truth class index out of range 0..{data.n_classes - 1}")
    return KnownTruth(items=items, classes=classes)


class Aggregator(ABC):
    """Base class: final labels from collected labels (see the module docstring)."""

    #: whether :meth:`fit` reads ``known_truth`` (semi-supervised; module docstring): the
    #: class then implements :meth:`_fit_probas_known`
    reads_known_truth: ClassVar[bool] = False

    def __init__(self, rng: int | np.random.Generator | None = 0) -> None:
        self.rng = rng

    # -- scikit-learn style parameter access -------------------------------------------
    def get_params(self) -> dict[str, Any]:
        # constructor parameters only: fitted attributes end in "_", a fit's private
        # working state starts with it
        return {k: v for k, v in vars(self).items() if not (k.endswith("_") or k.startswith("_"))}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    # -- the work ----------------------------------------------------------------------
    @abstractmethod
    def _fit_probas(self, data: LabelData) -> FloatArray:
        """Class probabilities (n_items, n_classes) for integer-coded ``data``."""

    def _fit_probas_known(self, data: LabelData, known: KnownTruth) -> FloatArray:
        """Class probabilities (n_items, n_classes) with the items of ``known`` of known
        class (module docstring); only called when :attr:`reads_known_truth`."""
        raise NotImplementedError(f"{type(self).__name__} does not read known truth")

    def fit(self, labels: LabelsInput, *, known_truth: Mapping[Any, Any] | None = None) -> Self:
        """Fit on ``labels``; ``known_truth``: items of known class (module docstring)."""
        data = as_label_data(labels)
        known = known_truth_arrays(known_truth, data, labels)
        if known is not None and self.reads_known_truth:
            probas = np.asarray(self._fit_probas_known(data, known), dtype=float)
        else:
            probas = np.asarray(self._fit_probas(data), dtype=float)
        if probas.shape != (data.n_items, data.n_classes):
            raise AssertionError(
                f"{type(self).__name__} returned probas of shape {probas.shape}, "
                f"expected {(data.n_items, data.n_classes)}"
            )
        self.data_ = data
        self.probas_ = probas
        self.labels_ = argmax_random_ties(probas, as_generator(self._tie_seed()))
        return self

    def _tie_seed(self) -> int | np.random.Generator | None:
        return self.rng

    def fit_predict(
        self, labels: LabelsInput, *, known_truth: Mapping[Any, Any] | None = None
    ) -> IntArray | pd.Series:
        """Final labels: int array (LabelData input) or task-indexed Series (DataFrame)."""
        self.fit(labels, known_truth=known_truth)
        if isinstance(labels, pd.DataFrame):
            classes = np.asarray(self.data_.classes, dtype=object)
            index = pd.Index(self.data_.item_ids, name="task")
            return pd.Series(classes[self.labels_], index=index, name="agg_label")
        return self.labels_

    def fit_predict_proba(
        self, labels: LabelsInput, *, known_truth: Mapping[Any, Any] | None = None
    ) -> FloatArray | pd.DataFrame:
        """Class probabilities: array (LabelData input) or task × class DataFrame."""
        self.fit(labels, known_truth=known_truth)
        if isinstance(labels, pd.DataFrame):
            index = pd.Index(self.data_.item_ids, name="task")
            return pd.DataFrame(self.probas_, index=index, columns=list(self.data_.classes))
        return self.probas_


class KnownTruthAggregator(Aggregator):
    """Base of an aggregator that reads known truth (module docstring) with one fit for both
    cases, :meth:`_fit`: ``known=None`` is the fit without it; with it, every known item's
    row of the result is set to its one-hot truth (the EM fits already hold it so in every
    step: setting the same 0.0 and 1.0 again changes no bit)."""

    reads_known_truth: ClassVar[bool] = True

    @abstractmethod
    def _fit(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        """Class probabilities (n_items, n_classes) for integer-coded ``data``, ``known``
        items (if any) of known class."""

    def _fit_probas(self, data: LabelData) -> FloatArray:
        return self._fit(data, None)

    def _fit_probas_known(self, data: LabelData, known: KnownTruth) -> FloatArray:
        return known.clamp(self._fit(data, known))
