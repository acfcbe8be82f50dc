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
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Self

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


class Aggregator(ABC):
    """Base class: final labels from collected labels (see the module docstring)."""

    def __init__(self, rng: int | np.random.Generator | None = 0) -> None:
        self.rng = rng

    # -- scikit-learn style parameter access -------------------------------------------
    def get_params(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.endswith("_")}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    # -- the work ----------------------------------------------------------------------
    @abstractmethod
    def _fit_probas(self, data: LabelData) -> FloatArray:
        """Class probabilities (n_items, n_classes) for integer-coded ``data``."""

    def fit(self, labels: LabelsInput) -> Self:
        data = as_label_data(labels)
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

    def fit_predict(self, labels: LabelsInput) -> IntArray | pd.Series:
        """Final labels: int array (LabelData input) or task-indexed Series (DataFrame)."""
        self.fit(labels)
        if isinstance(labels, pd.DataFrame):
            classes = np.asarray(self.data_.classes, dtype=object)
            index = pd.Index(self.data_.item_ids, name="task")
            return pd.Series(classes[self.labels_], index=index, name="agg_label")
        return self.labels_

    def fit_predict_proba(self, labels: LabelsInput) -> FloatArray | pd.DataFrame:
        """Class probabilities: array (LabelData input) or task × class DataFrame."""
        self.fit(labels)
        if isinstance(labels, pd.DataFrame):
            index = pd.Index(self.data_.item_ids, name="task")
            return pd.DataFrame(self.probas_, index=index, columns=list(self.data_.classes))
        return self.probas_
