"""Replay of a real data set: labels come only from what the data set recorded.

Chen, Lin, Zhou (2013, §7.2) replay RTE this way: "once we decide to label an instance, we
randomly choose a worker (who provides the label in the full dataset) to acquire the label".
The rules implemented here:

- a label for (item, worker) exists only if the data set holds it; each recorded label is used
  at most once (a pair recorded twice can be asked twice);
- an item-only policy (``Assignment.worker is None``) receives the label of a uniformly chosen
  unused record of that item;
- an item–worker policy must choose a pair that still has an unused record
  (:attr:`ReplayEnvironment.pairs` tells which; asking for another is an
  :class:`IneligibleAssignmentError`);
- an item with no unused record becomes ineligible (``eligible[item] = False``);
- the episode terminates when every record is used; a budget above the number of records is an
  error that says the maximum.

Accuracy is measured on the items that have a gold label (``evaluation_mask``).

Data structures: records are grouped by item (CSR offsets ``_item_ptr``); inside an item's
segment the unused records come first, so a uniform unused record is one random index and a
swap — O(1) per step. Distinct (item, worker) pairs keep a count of unused records.
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike

from crowdbudget._random import as_seed_sequence
from crowdbudget.exceptions import BudgetError, DataFormatError, IneligibleAssignmentError
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.types import (
    Assignment,
    BoolArray,
    LabelEvent,
    PairAvailability,
    Problem,
    StepResult,
)


class ReplayEnvironment(LabelingEnvironment):
    """Replay recorded labels (see the module docstring for the rules).

    Args:
        items, workers, labels: the records, integer-coded, shape (n_records,) each.
        gold: true class per item, shape (n_items,), −1 where unknown.
        n_items, n_workers, n_classes: sizes (default: from the arrays).
        prior: pseudo-counts given to policies, shape (n_classes,) or (n_items, n_classes).
        name: data set name (for reports).
    """

    def __init__(
        self,
        items: ArrayLike,
        workers: ArrayLike,
        labels: ArrayLike,
        gold: ArrayLike,
        *,
        n_items: int | None = None,
        n_workers: int | None = None,
        n_classes: int | None = None,
        prior: ArrayLike | None = None,
        name: str = "replay",
    ) -> None:
        self.items = np.asarray(items, dtype=np.int64)
        self.workers = np.asarray(workers, dtype=np.int64)
        self.labels = np.asarray(labels, dtype=np.int64)
        if (
            not (self.items.shape == self.workers.shape == self.labels.shape)
            or self.items.ndim != 1
        ):
            raise DataFormatError("items, workers and labels must be 1-D arrays of one length")
        if self.items.size == 0:
            raise DataFormatError("a replay needs at least one recorded label")
        self.true_labels = np.asarray(gold, dtype=np.int64)
        self.n_items = int(n_items if n_items is not None else self.true_labels.shape[0])
        self.n_workers = int(n_workers if n_workers is not None else self.workers.max() + 1)
        self.n_classes = int(n_classes if n_classes is not None else max(self.labels.max() + 1, 2))
        if self.true_labels.shape != (self.n_items,):
            raise DataFormatError(f"gold must have shape ({self.n_items},)")
        if self.items.min() < 0 or self.items.max() >= self.n_items:
            raise DataFormatError("record items must lie in 0..n_items-1")
        if self.labels.min() < 0 or self.labels.max() >= self.n_classes:
            raise DataFormatError(f"record labels must lie in 0..{self.n_classes - 1}")
        self.prior = prior
        self.name = name
        self.evaluation_mask: BoolArray = self.true_labels >= 0
        # records grouped by item
        order = np.argsort(self.items, kind="stable")
        self._order = order
        self._item_ptr = np.zeros(self.n_items + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.items, minlength=self.n_items), out=self._item_ptr[1:])
        # distinct (item, worker) pairs and which pair each record belongs to
        keys = self.items * self.n_workers + self.workers
        pair_keys, record_pair = np.unique(keys, return_inverse=True)
        self._record_pair = record_pair
        self._pair_items = pair_keys // self.n_workers
        self._pair_workers = pair_keys % self.n_workers
        self._pair_lookup = {int(k): p for p, k in enumerate(pair_keys.tolist())}
        self._pair_count = np.bincount(record_pair, minlength=pair_keys.shape[0])
        # records of each pair (CSR), for item–worker assignments
        pair_order = np.argsort(record_pair, kind="stable")
        self._pair_records = pair_order
        self._pair_ptr = np.zeros(pair_keys.shape[0] + 1, dtype=np.int64)
        np.cumsum(self._pair_count, out=self._pair_ptr[1:])
        self._eligible = np.ones(self.n_items, dtype=bool)
        self.eligible = self._eligible
        self.pairs: PairAvailability | None = None

    @classmethod
    def from_label_data(cls, data: Any, prior: ArrayLike | None = None, **extra: Any) -> Self:
        """Build from a :class:`crowdbudget.datasets.LabelData` (gold required); ``extra``:
        further keywords of a subclass's constructor."""
        if data.gold is None:
            raise DataFormatError(f"data set {data.name!r} has no gold labels to evaluate against")
        return cls(
            data.items,
            data.workers,
            data.labels,
            data.gold,
            n_items=data.n_items,
            n_workers=data.n_workers,
            n_classes=data.n_classes,
            prior=prior,
            name=data.name,
            **extra,
        )

    @property
    def n_records(self) -> int:
        """Number of recorded labels: the largest budget a replay can spend."""
        return int(self.items.shape[0])

    @property
    def max_budget(self) -> float:
        return float(self.n_records)

    def check_budget(self, budget: float) -> None:
        """Raise :class:`BudgetError` when ``budget`` exceeds the recorded labels."""
        if budget > self.n_records:
            raise BudgetError(
                f"budget {budget:g} exceeds the {self.n_records} labels recorded in "
                f"{self.name!r}; the maximum is {self.n_records}"
            )

    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> dict[str, Any]:
        self._rng = np.random.default_rng(as_seed_sequence(seed))
        self._perm = self._order.copy()  # per item segment: unused records first
        # where each record sits in _perm (kept with every swap: no search of the segment)
        self._slot_of = np.empty(self.n_records, dtype=np.int64)
        self._slot_of[self._perm] = np.arange(self.n_records, dtype=np.int64)
        self._unused = np.diff(self._item_ptr)
        self._pair_unused = self._pair_count.copy()
        self._pair_perm = self._pair_records.copy()
        self._used = np.zeros(self.n_records, dtype=bool)
        self._eligible = self._unused > 0
        self.eligible = self._eligible
        self._n_used = 0
        self._arrival_order = self._rng.permutation(self.n_records)
        self._arrival_next = 0
        self.pairs = PairAvailability(
            items=self._pair_items, workers=self._pair_workers, remaining=self._pair_unused
        )
        return {}

    def _take_record(self, record: int) -> None:
        item = int(self.items[record])
        self._used[record] = True
        self._n_used += 1
        pair = int(self._record_pair[record])
        self._pair_unused[pair] -= 1
        self._unused[item] -= 1
        if self._unused[item] == 0:
            self._eligible[item] = False

    def _to_tail(self, slot: int, last: int) -> None:
        """Swap the records at ``slot`` and ``last`` of ``_perm`` (``_slot_of`` kept)."""
        perm = self._perm
        moved, tail = int(perm[slot]), int(perm[last])
        perm[slot], perm[last] = tail, moved
        self._slot_of[tail], self._slot_of[moved] = slot, last

    def step(self, assignment: Assignment) -> StepResult:
        item = assignment.item
        if not 0 <= item < self.n_items or self._unused[item] == 0:
            raise IneligibleAssignmentError(f"item {item} has no unused recorded label")
        start = int(self._item_ptr[item])
        if assignment.worker is None:
            # uniform unused record of the item: unused ones occupy the segment's head
            n = int(self._unused[item])
            slot = start + int(self._rng.integers(n))
            record = int(self._perm[slot])
            self._to_tail(slot, start + n - 1)
        else:
            pair = self._pair_lookup.get(item * self.n_workers + assignment.worker)
            if pair is None or self._pair_unused[pair] == 0:
                raise IneligibleAssignmentError(
                    f"worker {assignment.worker} has no unused recorded label for item {item}"
                )
            lo, hi = int(self._pair_ptr[pair]), int(self._pair_ptr[pair + 1])
            if hi - lo == 1:  # one record (every pair of most sets): unused, as counted
                record = int(self._pair_perm[lo])
            else:
                record = next(int(r) for r in self._pair_perm[lo:hi] if not self._used[r])
            # keep the item's segment invariant (unused first): move this record to the tail
            self._to_tail(int(self._slot_of[record]), start + int(self._unused[item]) - 1)
        self._take_record(record)
        event = LabelEvent(
            item=item,
            worker=int(self.workers[record]),
            label=int(self.labels[record]),
            cost=assignment.price,
        )
        return StepResult(event, terminated=self._n_used == self.n_records)

    def record_arrays(self) -> tuple[np.ndarray, ...]:
        """What a compiled push step reads and writes in place
        (:func:`~crowdbudget.policies._push_replay.push_replay_labels`, the steps of
        :meth:`step` with a worker): the records' workers, labels, items and pairs, the item
        and pair CSR, the kept permutation and positions, the used flags, the unused counts
        per pair and per item, the eligible items, then the used records' count as a (1,)
        array — written back by :meth:`records_used`."""
        return (
            self.workers,
            self.labels,
            self.items,
            self._record_pair,
            self._item_ptr,
            self._pair_ptr,
            self._pair_perm,
            self._perm,
            self._slot_of,
            self._used,
            self._pair_unused,
            self._unused,
            self._eligible,
            np.array([self._n_used], dtype=np.int64),
        )

    def records_used(self, arrays: tuple[np.ndarray, ...]) -> None:
        """The used records' count after a compiled step on :meth:`record_arrays`."""
        self._n_used = int(arrays[-1][0])

    def arriving_worker(self) -> int:
        """Pull mode: the worker of the next unused record of a random order of the records
        (so a worker arrives as often as they have labels to give).

        The order moves on at every arrival, whichever of the worker's items the policy then
        chooses: over a pass a worker arrives once per record of theirs still unused when its
        turn comes. (Waiting at a record until that very record is used would keep the worker
        arriving for about (n + 1)/2 of their n labels, a handful of heavy workers giving a
        whole campaign: docs/stress-bed.md.) When the order runs out (arrivals the policy
        declined), the unused records are shuffled anew from the world's generator, which pull
        mode draws from nowhere else."""
        while True:
            while self._arrival_next < self._arrival_order.shape[0]:
                record = int(self._arrival_order[self._arrival_next])
                self._arrival_next += 1
                if not self._used[record]:
                    return int(self.workers[record])
            unused = np.flatnonzero(~self._used)
            if unused.shape[0] == 0:
                return 0
            self._arrival_order = self._rng.permutation(unused)
            self._arrival_next = 0

    def problem(self, budget: float) -> Problem:
        self.check_budget(budget)
        prior = np.ones(self.n_classes) if self.prior is None else self.prior
        return Problem(
            n_items=self.n_items,
            budget=budget,
            n_classes=self.n_classes,
            prior=np.asarray(prior, dtype=float),
            n_workers=self.n_workers,
        )
