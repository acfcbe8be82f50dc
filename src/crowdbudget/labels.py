"""The collected crowd labels as one integer-coded table (core, DESIGN §11).

Arrays inside, ids at the edge (DESIGN §7): a :class:`LabelData` holds one row per collected
label as three integer arrays (``items``, ``workers``, ``labels``) plus the string ids they
code, so aggregators, verdicts and the replay environment never loop over Python objects per
row. Reading files and the bundled sets is :mod:`crowdbudget.datasets` (which re-exports
:class:`LabelData`, its result type).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from crowdbudget.exceptions import DataFormatError
from crowdbudget.types import IntArray


@dataclass(frozen=True, eq=False)
class LabelData:
    """Collected crowd labels, integer-coded.

    Attributes:
        items, workers, labels: one entry per collected label, shape (n_labels,), int64;
            ``items`` index ``item_ids``, ``workers`` index ``worker_ids``, ``labels`` index
            ``classes``.
        item_ids: string id of each item, shape (n_items,).
        worker_ids: string id of each worker, shape (n_workers,).
        classes: string label of each class, in class order.
        gold: true class per item, shape (n_items,), ``-1`` where unknown; None: no gold.
        contexts: per item, the tuple of its context names (task types), or None.
        name: a display name.
    """

    items: IntArray
    workers: IntArray
    labels: IntArray
    item_ids: npt.NDArray[np.object_]
    worker_ids: npt.NDArray[np.object_]
    classes: tuple[str, ...]
    gold: IntArray | None = None
    contexts: tuple[tuple[str, ...], ...] | None = None
    name: str = "labels"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return int(self.item_ids.shape[0])

    def permuted(
        self, *, classes: bool = False, workers: bool = False, seed: int = 0, items: bool = False
    ) -> LabelData:
        """The same labels under another coding (the fairness check of ``--permute-*``): with
        ``classes``, class code c becomes (c + 1) mod L — labels, gold and the class names
        move together, so every answer and its truth are unchanged, only the codes; with
        ``workers``, the worker indices are shuffled (a seeded permutation); with ``items``,
        the item order is reversed (item i becomes n − 1 − i, with its ids, gold, contexts
        and labels: the order a smallest-index tie rule is most sensitive to). A policy and
        verdict that do not depend on the coding give the same accuracy up to Monte-Carlo
        error."""
        labels, gold, names = self.labels, self.gold, self.classes
        item_codes, item_ids, contexts = self.items, self.item_ids, self.contexts
        if items:
            item_codes = (self.n_items - 1) - self.items
            item_ids = self.item_ids[::-1].copy()
            if gold is not None:
                gold = gold[::-1].copy()
            if contexts is not None:
                contexts = tuple(reversed(contexts))
        if classes:
            shift = np.roll(np.arange(self.n_classes), -1)  # new code of class c: (c+1) mod L
            labels = shift[self.labels]
            if self.gold is not None:
                gold = np.where(self.gold >= 0, shift[np.maximum(self.gold, 0)], -1)
            inverse = np.argsort(shift)
            names = tuple(self.classes[int(inverse[k])] for k in range(self.n_classes))
        worker_codes, worker_ids = self.workers, self.worker_ids
        if workers:
            order = np.random.default_rng(seed).permutation(self.n_workers)
            worker_codes = order[self.workers]
            worker_ids = np.empty_like(self.worker_ids)
            worker_ids[order] = self.worker_ids
        what = " and ".join(
            w for w, on in (("classes", classes), ("workers", workers), ("items", items)) if on
        )
        return replace(
            self,
            items=np.asarray(item_codes, dtype=np.int64),
            item_ids=item_ids,
            contexts=contexts,
            labels=np.asarray(labels, dtype=np.int64),
            gold=None if gold is None else np.asarray(gold, dtype=np.int64),
            classes=names,
            workers=np.asarray(worker_codes, dtype=np.int64),
            worker_ids=worker_ids,
            name=f"{self.name} ({what} permuted)" if what else self.name,
        )

    def labels_subset(self, keep: npt.NDArray[np.bool_] | IntArray) -> LabelData:
        """Only the labels ``keep`` selects (a boolean mask of shape (n_labels,) or label
        indices); items, workers, classes, gold and their codes are unchanged, so an item
        whose labels are all dropped stays, with none."""
        return replace(
            self,
            items=self.items[keep],
            workers=self.workers[keep],
            labels=self.labels[keep],
        )

    @property
    def n_workers(self) -> int:
        return int(self.worker_ids.shape[0])

    @property
    def n_labels(self) -> int:
        return int(self.items.shape[0])

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def gold_mask(self) -> npt.NDArray[np.bool_]:
        """Items with a known true label, shape (n_items,)."""
        if self.gold is None:
            return np.zeros(self.n_items, dtype=bool)
        return self.gold >= 0

    def label_counts(self) -> IntArray:
        """Votes per item and class, shape (n_items, n_classes) (one bincount, no loop)."""
        flat = self.items * self.n_classes + self.labels
        counts = np.bincount(flat, minlength=self.n_items * self.n_classes)
        return counts.reshape(self.n_items, self.n_classes).astype(np.int64)

    def to_frame(self) -> pd.DataFrame:
        """crowd-kit's long table: columns ``task, worker, label`` with the string ids."""
        return pd.DataFrame(
            {
                "task": self.item_ids[self.items],
                "worker": self.worker_ids[self.workers],
                "label": np.asarray(self.classes, dtype=object)[self.labels],
            }
        )

    def gold_series(self) -> pd.Series:
        """Gold labels as a ``task``-indexed Series of class strings (known items only)."""
        mask = self.gold_mask
        assert self.gold is not None or not mask.any()
        gold = self.gold if self.gold is not None else np.zeros(0, dtype=np.int64)
        values = np.asarray(self.classes, dtype=object)[gold[mask]]
        return pd.Series(values, index=pd.Index(self.item_ids[mask], name="task"), name="label")

    def accuracy(self, predicted: npt.ArrayLike) -> float:
        """Accuracy of integer class predictions (n_items,) over the items with gold."""
        pred = np.asarray(predicted)
        mask = self.gold_mask
        if not mask.any():
            raise DataFormatError(f"data set {self.name!r} has no gold labels")
        assert self.gold is not None
        return float(np.mean(pred[mask] == self.gold[mask]))
