"""The connector surface: what a labeling platform sees of a live campaign.

A platform (Label Studio, a vendor's queue, an in-house tool) serves tasks to its own
annotators; a :class:`~crowdbudget.campaign.Campaign` decides how many more annotations each
task is worth. :class:`CampaignConnector` is the one place where the two meet:

- **Open slots in.** A slot is committed budget for one more annotation on one item — not a
  worker: the platform decides who fills it. :meth:`CampaignConnector.open_slot` asks the
  campaign's policy for the next item (the budget is committed at once, so the campaign never
  promises more than it has); :meth:`~CampaignConnector.settle` fills an item's oldest open
  slot with a label from a named annotator — recorded **under that annotator**
  (``annotator_prefix + annotator``), the slot's reservation paying for it
  (:mod:`crowdbudget.campaign.slots`) — or records an **over-submission** when the item
  has none; :meth:`~CampaignConnector.release` gives a slot back (its budget returns);
  :meth:`~CampaignConnector.expire_overdue` releases the slots past their time-to-live.
- **Events out.** Every change is read back from the campaign's event store
  (:meth:`crowdbudget.campaign.EventStore.events`) and translated into
  :class:`ConnectorEvent` rows with the store's sequence numbers:
  ``assignment_given``, ``label_accepted``, ``label_free`` (over-submissions and other
  imported labels), ``assignment_released``, ``assignment_expired``, and ``stopped`` once no
  slot is open and none can be opened. A platform module reads them from a sequence number
  (:meth:`~CampaignConnector.events`), so a subscriber that restarts resumes where it was.
- **Restarts lose nothing.** The open slots, the labels per item and the items are rebuilt from
  the store, never from memory; :meth:`~CampaignConnector.record` records a task's
  annotations idempotently (an annotation is new when its annotator has no label on the item
  yet: one per annotator and task, the platform's first), so reading a task twice, after a
  crash, or with annotations committed out of order records each exactly once, under its
  annotator.

What a platform module provides (:class:`PlatformTasks`, checked by
``tests/test_connector.py`` with an in-memory platform): list its task ids, read a task's
finished annotations (first per annotator, in a stable order, ``label`` None when unusable),
open a task for exactly its open slots or close it, and write a prediction (the verdict) back.

What the surface guarantees:

- **the budget is never exceeded**: a slot is opened only when the campaign can pay for it, and
  a label arriving with no open slot costs nothing, so ``labels ≤ budget + over-submissions``;
- **restarts lose nothing**: every accepted label is one stored event before it is
  acknowledged, and the slots, counts and events are rebuilt from the store;
- **over-submissions are recorded**: they inform the verdict (worker id ``annotator_prefix +
  annotator``), cost nothing and are reported (:attr:`CampaignConnector.over_submissions`);
- **every label is its annotator's**: a paid label is the answer to the slot it filled, given
  by the annotator (one ``labeled`` event naming them), so the worker-aware posteriors and
  verdicts read each annotator's labels as theirs, and the ledger stays exact (a slot paid
  once, by one label; a label paid by one slot or free).

**Slot holders.** A slot is an assignment held by a placeholder worker (``slot-<k>``: the first
of a small pool holding no open slot, so the pool is as large as the most slots open at once;
each holder is released from the item when its slot is settled, and labels nothing itself).

**The item choice.** An item-only policy (Opt-KG, …) chooses as in a simulation. A worker-aware
one (``opt-kg:posterior=one-coin``, ``kg:…``) would choose for the asking worker, who is unknown
when a slot opens: the slots then go to the items of largest *expected* score over the
annotators who are active, each weighted by their share of the last :attr:`share_window`
labels (:mod:`crowdbudget.integrations.crowd_choice`). Other policies that choose workers
(BBTA, KOS, …) are refused by :meth:`CampaignConnector.check_policy`: the worker they pick
could not be made to come. One connector per campaign at a time: it is the campaign's only
writer.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from crowdbudget.campaign import AssignmentError, Campaign
from crowdbudget.campaign.slots import record_answer
from crowdbudget.engine.control import expected_right
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.integrations.crowd_choice import (
    active_shares,
    crowd_posterior,
    expected_scores,
    ranking,
    steered,
    worker_weights,
)
from crowdbudget.policies.worker_aware import (
    OneCoinKnowledgeGradient,
    TwoCoinKnowledgeGradient,
)
from crowdbudget.registry import make_policy, split_verdict

__all__ = [
    "SLOT_WORKER_PREFIX",
    "Annotation",
    "CampaignConnector",
    "ConnectorEvent",
    "OpenSlot",
    "PlatformTasks",
    "Settlement",
    "unrecorded",
]

SLOT_WORKER_PREFIX = "slot-"
"""The campaign worker ids that hold open slots (a small pool: module docstring; the platform
picks the annotator). Only this module writes or reads them."""

EVENT_KINDS = (
    "assignment_given",
    "label_accepted",
    "label_free",
    "assignment_released",
    "assignment_expired",
    "stopped",
)


@dataclass(frozen=True, slots=True)
class OpenSlot:
    """Committed budget for one more annotation on ``item_id`` (``expires_at``: when it is
    released unless filled, seconds on the campaign's clock; None: never)."""

    slot_id: str
    item_id: str
    expires_at: float | None


@dataclass(frozen=True, slots=True)
class ConnectorEvent:
    """One change, as a platform sees it. ``seq`` is the campaign's event number (a
    ``stopped`` event repeats the last one: it is a state, not a stored change); ``slot``
    says whether the assignment is an open slot (else a named worker's assignment, e.g. one
    the HTTP service gave); ``worker_id`` is the slot's holder or the label's worker."""

    seq: int
    kind: str
    item_id: str | None = None
    assignment_id: str | None = None
    worker_id: str | None = None
    label: str | None = None
    slot: bool = False
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Settlement:
    """What :meth:`CampaignConnector.settle` did with a label: filled slot ``slot_id`` (paid
    from the budget) or, with ``slot_id`` None, recorded an over-submission (free)."""

    item_id: str
    label: str
    annotator: str
    slot_id: str | None

    @property
    def over_submission(self) -> bool:
        return self.slot_id is None


class Annotation(Protocol):
    """A platform's annotation as the surface reads it: who gave it and its class (None: no
    usable answer, e.g. an empty or invalid choice; it fills no slot)."""

    @property
    def annotator(self) -> Any: ...

    @property
    def label(self) -> str | None: ...


class PlatformTasks(Protocol):
    """The platform calls a connector module wraps (one module per platform).

    - ``list_tasks()``: every task id of the project, as strings (the campaign's item ids);
    - ``read_annotations(task_ids)``: each task's finished annotations, first per annotator,
      in a stable order (:class:`Annotation`);
    - ``set_open(task_id, n_annotators, n_open_slots)``: let exactly ``n_open_slots`` more
      annotators take the task (0: close it);
    - ``write_prediction(task_id, label, score)``: show the verdict and its probability.
    """

    def list_tasks(self) -> list[str]: ...

    def read_annotations(self, task_ids: Sequence[str]) -> Mapping[str, Sequence[Annotation]]: ...

    def set_open(self, task_id: str, n_annotators: int, n_open_slots: int) -> None: ...

    def write_prediction(self, task_id: str, label: str, score: float) -> None: ...


def unrecorded(annotations: Sequence[Any], n_recorded: int) -> list[Any]:
    """The usable annotations (``label`` not None) of a task the campaign has not recorded yet.

    The campaign records a task's usable annotations in the platform's order, one event each,
    so its label count ``n_recorded`` for the task is the length of the recorded prefix: the
    rest is new. (A count above the usable annotations — the platform lost one, e.g. deleted —
    records nothing; labels are never taken back.)
    """
    usable = [a for a in annotations if a.label is not None]
    return usable[n_recorded:]


class CampaignConnector:
    """The connector surface of one campaign (module docstring: the contract).

    Parameters
    ----------
    campaign : Campaign
        A campaign created or loaded with a durable event store; the connector is its only
        writer while it runs.
    annotator_prefix : str
        Prefix of the campaign worker ids of the platform's annotators (``annotator_prefix +
        str(annotator)``), e.g. ``"ls-user-"``: names the platform the annotator belongs to.
    share_window : int
        How many of the last labels estimate the annotators' shares (worker-aware policies:
        :mod:`crowdbudget.integrations.crowd_choice`).
    """

    def __init__(
        self, campaign: Campaign, *, annotator_prefix: str = "annotator-", share_window: int = 100
    ) -> None:
        self.campaign = campaign
        self.annotator_prefix = annotator_prefix
        self.share_window = share_window
        #: False: a worker-aware policy chooses for the slot's holder (a worker with the
        #: prior reliability) instead of by the expected score over the active annotators
        self.crowd_choice = True
        #: annotators whose labels count for nothing in the shares (blocked ones too)
        self.inactive: set[str] = set()
        #: item -> annotators blocked when their annotation of it was read: not recorded
        self.not_counted: dict[str, set[str]] = {}
        #: labels an annotator gives before agreement alone may block them
        self.agreement_min_labels = 20
        #: labels between two agreement checks (each fits the verdict once)
        self.agreement_every = 10
        self._agreement_checked = 0
        #: annotator -> the agreement evidence of their block (:meth:`block_by_agreement`)
        self.agreement_blocks: dict[str, dict[str, float]] = {}
        self._holders: dict[str, int] = {}  # slot holder -> its open slots
        self._label_workers: list[str] = []  # the worker of every label, in order
        self._seq = 0
        self._log: list[ConnectorEvent] = []
        self._log_seqs: list[int] = []
        self.item_ids: list[str] = []
        self.classes: tuple[str, ...] = ()
        self.budget = 0.0
        self.policy = ""
        self._known: set[str] = set()  # self.item_ids as a set
        self._labels: dict[str, int] = {}  # labels recorded per item (paid and free)
        self._item_workers: dict[str, set[str]] = {}  # item -> workers with a label on it
        self._anonymous: dict[str, int] = {}  # item -> labels under slot holders (old runs)
        self._assignments: dict[str, tuple[str, str]] = {}  # id -> (item id, worker id)
        self._slots: dict[str, dict[str, OpenSlot]] = {}  # item -> open slots, oldest first
        self.over_submissions = 0
        self._stopped = False
        self._catch_up()

    # ------------------------------------------------------------------ events out
    def _catch_up(self) -> None:
        """Translate the store's events the connector has not read yet (one query; none when
        the campaign applied nothing new)."""
        if self._seq and self.campaign.event_count == self._seq:
            return
        store = self.campaign.store
        for event in store.events(self.campaign.campaign_id, after=self._seq):
            for row in self._translate(event.kind, event.payload, event.seq, event.created_at):
                self._log.append(row)
                self._log_seqs.append(row.seq)
            self._seq = event.seq
            self._stopped = False

    def _translate(self, kind: str, p: dict[str, Any], seq: int, at: float) -> list[ConnectorEvent]:
        if kind == "created":
            self.classes = tuple(str(c) for c in p["classes"])
            self.budget = float(p["budget"])
            self.policy = str(p["policy"])
            self._extend(p["items"])
        elif kind == "items_added":
            self._extend(p["items"])
        elif kind == "assigned":
            item_id, worker_id = self.item_ids[int(p["item"])], str(p["worker"])
            self._assignments[p["id"]] = (item_id, worker_id)
            slot = worker_id.startswith(SLOT_WORKER_PREFIX)
            if slot:
                open_slot = OpenSlot(p["id"], item_id, p["expires_at"])
                self._slots.setdefault(item_id, {})[p["id"]] = open_slot
                self._holders[worker_id] = self._holders.get(worker_id, 0) + 1
            return [
                ConnectorEvent(seq, "assignment_given", item_id, p["id"], worker_id, None, slot, at)
            ]
        elif kind == "labeled":
            item_id, holder = self._assignments[p["id"]]
            self._close_slot(item_id, p["id"], holder)
            self._labels[item_id] = self._labels.get(item_id, 0) + 1
            label = self.classes[int(p["label"])]
            slot = holder.startswith(SLOT_WORKER_PREFIX)
            worker_id = str(p.get("worker", holder))  # who answered (a slot: the annotator)
            self._note_label(item_id, worker_id)
            return [
                ConnectorEvent(seq, "label_accepted", item_id, p["id"], worker_id, label, slot, at)
            ]
        elif kind == "released":
            item_id, worker_id = self._assignments[p["id"]]
            self._close_slot(item_id, p["id"], worker_id)
            kind_out = "assignment_expired" if p["reason"] == "expired" else "assignment_released"
            slot = worker_id.startswith(SLOT_WORKER_PREFIX)
            return [ConnectorEvent(seq, kind_out, item_id, p["id"], worker_id, None, slot, at)]
        elif kind == "imported":
            rows = []
            for item, worker_id, label in p["rows"]:
                item_id = self.item_ids[int(item)]
                self._labels[item_id] = self._labels.get(item_id, 0) + 1
                if str(worker_id).startswith(self.annotator_prefix):
                    self.over_submissions += 1
                self._note_label(item_id, str(worker_id))
                rows.append(
                    ConnectorEvent(
                        seq,
                        "label_free",
                        item_id,
                        None,
                        str(worker_id),
                        self.classes[int(label)],
                        False,
                        at,
                    )
                )
            return rows
        return []

    def _note_label(self, item_id: str, worker_id: str) -> None:
        self._label_workers.append(worker_id)
        if worker_id.startswith(SLOT_WORKER_PREFIX):  # a campaign recorded before annotators
            self._anonymous[item_id] = self._anonymous.get(item_id, 0) + 1
        else:
            self._item_workers.setdefault(item_id, set()).add(worker_id)

    def _extend(self, items: Iterable[Any]) -> None:
        new = [str(i) for i in items]
        self.item_ids.extend(new)
        self._known.update(new)

    def _close_slot(self, item_id: str, assignment_id: str, holder: str) -> None:
        slots = self._slots.get(item_id)
        if slots is None or slots.pop(assignment_id, None) is None:
            return
        if not slots:
            del self._slots[item_id]
        self._holders[holder] -= 1

    @property
    def last_seq(self) -> int:
        """The sequence number of the last event read (the next :meth:`events` starts here)."""
        self._catch_up()
        return self._seq

    def events(self, after: int = 0) -> list[ConnectorEvent]:
        """The events with sequence number above ``after``, in order; a ``stopped`` event
        ends the list when the last :meth:`fill` found nothing to open and no slot is open."""
        self._catch_up()
        start = bisect.bisect_right(self._log_seqs, after)
        out = self._log[start:]
        if self._stopped:
            out.append(ConnectorEvent(self._seq, "stopped"))
        return out

    # ------------------------------------------------------------------ what is open
    def open_slots(self, item_id: str | None = None) -> list[OpenSlot]:
        """The open slots (of ``item_id``, or all), oldest first per item."""
        self._catch_up()
        if item_id is not None:
            return list(self._slots.get(item_id, {}).values())
        return [s for slots in self._slots.values() for s in slots.values()]

    def n_open_slots(self, item_id: str | None = None) -> int:
        self._catch_up()
        if item_id is not None:
            return len(self._slots.get(item_id, ()))
        return sum(len(slots) for slots in self._slots.values())

    def items_with_open_slots(self) -> list[str]:
        self._catch_up()
        return list(self._slots)

    def labels_recorded(self, item_id: str) -> int:
        """Labels the campaign holds for the item (slot labels and free ones)."""
        self._catch_up()
        return self._labels.get(item_id, 0)

    # ------------------------------------------------------------------ assign and settle in
    def _free_holder(self) -> str:
        """The first slot holder of the pool that holds no open slot (a new one if none)."""
        self._catch_up()
        for k in range(len(self._holders) + 1):
            holder = f"{SLOT_WORKER_PREFIX}{k}"
            if self._holders.get(holder, 0) == 0:
                return holder
        raise AssertionError("unreachable: the pool has a free holder")  # pragma: no cover

    def active_annotators(self) -> set[str]:
        """The annotators among the last :attr:`share_window` labels, blocked ones and
        :attr:`inactive` ones left out."""
        self._catch_up()
        recent = {
            w
            for w in self._label_workers[-self.share_window :]
            if w.startswith(self.annotator_prefix)
        }
        return {w for w in recent - self.inactive if not self.campaign.is_blocked(w)}

    def room(self, item_id: str, active: set[str] | None = None) -> int | None:
        """How many more annotations the active annotators can give the item: those of them
        with no annotation of it (None while nobody is active: unknown)."""
        active = self.active_annotators() if active is None else active
        if not active:
            return None
        done = self._item_workers.get(item_id, set()) | self.not_counted.get(item_id, set())
        return len(active - done)

    def exhausted_items(self) -> set[int]:
        """Items (indices) whose open slots already take all the annotations the active
        annotators can still give them (:meth:`room`): one more slot there could only be
        filled by someone blocked or gone (empty while nobody is active)."""
        active = self.active_annotators()
        if not active:
            return set()
        index = {item_id: k for k, item_id in enumerate(self.item_ids)}
        candidates = set(self._item_workers) | set(self._slots)
        return {
            index[item_id]
            for item_id in candidates
            if (self.room(item_id, active) or 0) <= self.n_open_slots(item_id)
        }

    def release_unfillable(self) -> int:
        """Release the open slots beyond an item's :meth:`room` (newest first: a slot opened
        when someone could still fill it, before the last of them did or was blocked); their
        budget returns. Returns how many."""
        active = self.active_annotators()
        if not active:
            return 0
        released = 0
        for item_id in list(self.items_with_open_slots()):
            slots = self.open_slots(item_id)
            excess = len(slots) - (self.room(item_id, active) or 0)
            for slot in reversed(slots[len(slots) - excess :] if excess > 0 else []):
                self.release(slot.slot_id)
                released += 1
        return released

    def crowd_order(self) -> np.ndarray | None:
        """The items in the order a worker-aware policy wants them when the next annotator
        is unknown (:mod:`~crowdbudget.integrations.crowd_choice`); None: the policy's own
        choice (an item-only policy, or no active annotator yet)."""
        self._catch_up()
        campaign = self.campaign
        posterior = crowd_posterior(campaign.policy)
        if posterior is None or not self.crowd_choice:
            return None
        recent = [
            w
            for w in self._label_workers[-self.share_window :]
            if not w.startswith(SLOT_WORKER_PREFIX)
        ]
        blocked = {w for w in set(recent) if campaign.is_blocked(w)}
        shares = active_shares(recent, exclude=self.inactive | blocked)
        index = {w: j for j, w in enumerate(campaign.worker_ids)}
        workers, weights = worker_weights(shares, index, posterior.n_workers)
        if workers.shape[0] == 0:
            return None
        optimistic = bool(getattr(campaign.policy, "optimistic", True))
        scores = expected_scores(posterior, workers, weights, optimistic=optimistic)
        rng = np.random.default_rng([campaign.config.seed, campaign.event_count])
        return ranking(scores, rng)

    def open_slot(
        self, order: np.ndarray | None = None, excluded: Collection[int] = ()
    ) -> OpenSlot | None:
        """Commit budget for one more annotation on the item the policy wants most (``order``:
        the first open item of it, :meth:`crowd_order`; never an item of ``excluded``,
        :meth:`exhausted_items`); None when the budget, the items or the policy allow none
        now."""
        holder = self._free_holder()
        if order is not None or excluded:
            # the holder joins first: a joining worker rebuilds the policy, which would
            # replace the stand-in that takes ``order``
            self.campaign.add_workers([holder])
        with steered(self.campaign, order, excluded):
            assignment = self.campaign.next_assignment(holder)
        if assignment is None:
            return None
        self._catch_up()
        return self._slots[assignment.item_id][assignment.assignment_id]

    def fill(self, target: int) -> list[OpenSlot]:
        """Open slots until ``target`` are open or none can be; the slots opened. When none
        is open afterwards the campaign has stopped (a ``stopped`` event is emitted). A
        worker-aware policy ranks the items once per call (:meth:`crowd_order`)."""
        self.expire_overdue()
        opened: list[OpenSlot] = []
        if self.n_open_slots() >= target:
            self._stopped = self.n_open_slots() == 0
            return opened
        order = self.crowd_order()
        while self.n_open_slots() < target:
            # anew per slot: a slot just opened may fill the item's room
            slot = self.open_slot(order, self.exhausted_items())
            if slot is None:
                break
            opened.append(slot)
        self._stopped = self.n_open_slots() == 0
        return opened

    def settle(self, item_id: str, label: str, annotator: Any) -> Settlement:
        """Record ``label`` from ``annotator`` on the item: it fills the item's oldest open
        slot (paid), or, with none left, it is an over-submission (free, recorded, counted).
        A slot past its time-to-live takes no label (the next one is tried)."""
        worker_id = self.worker_id(annotator)
        for slot in self.open_slots(item_id):
            try:
                record_answer(self.campaign, slot.slot_id, label, worker_id)
            except AssignmentError:
                continue
            self._catch_up()
            return Settlement(item_id, label, str(annotator), slot.slot_id)
        self.campaign.import_labels(
            pd.DataFrame({"task": [item_id], "worker": [worker_id], "label": [label]})
        )
        self._catch_up()
        return Settlement(item_id, label, str(annotator), None)

    def worker_id(self, annotator: Any) -> str:
        """The campaign worker id of a platform annotator."""
        return f"{self.annotator_prefix}{annotator}"

    def new_annotations(self, item_id: str, annotations: Sequence[Annotation]) -> list[Any]:
        """The usable annotations of the task the campaign has no label of: those whose
        annotator has none on the item (one annotation per annotator and task: the
        platform's first), in the platform's order. An item with labels recorded under the
        slots (a campaign of an earlier version) keeps the recorded-prefix rule
        (:func:`unrecorded`)."""
        self._catch_up()
        if self._anonymous.get(item_id):
            return unrecorded(annotations, self.labels_recorded(item_id))
        have = self._item_workers.get(item_id, set())
        return [
            a
            for a in annotations
            if a.label is not None and self.worker_id(a.annotator) not in have
        ]

    def record(self, item_id: str, annotations: Sequence[Annotation]) -> list[Settlement]:
        """Settle the task's annotations the campaign has not recorded yet (idempotent:
        :meth:`new_annotations`); adds the item first if the platform has a task the
        campaign does not know (imported meanwhile). An annotation of an annotator who is
        blocked (:meth:`Campaign.is_blocked`) is not counted: it fills no slot, is not
        recorded and is listed in :attr:`not_counted` (unblocked, the annotator's unrecorded
        annotations count again at the next read)."""
        self._catch_up()
        if item_id not in self._known:
            self.add_items([item_id])
        settled = []
        skipped = set()
        for annotation in self.new_annotations(item_id, annotations):
            worker_id = self.worker_id(annotation.annotator)
            if self.campaign.is_blocked(worker_id):
                skipped.add(worker_id)
                continue
            settled.append(self.settle(item_id, str(annotation.label), annotation.annotator))
        if skipped:
            self.not_counted[item_id] = skipped
        else:
            self.not_counted.pop(item_id, None)
        return settled

    def block_by_agreement(self) -> list[str]:
        """Block the annotators whose agreement with the campaign's verdict puts their
        accuracy below its ``block_below`` with probability ``block_confidence`` (the control
        rule's settings and prior; nothing without a level).

        The evidence on annotator u: the verdict's probability that each of u's ``n`` labels
        is the item's class, summed: ``k = Σ P(class_i = label)`` (the expected number of
        right answers given everything the campaign holds; for a worker-aware verdict this is
        its own M-step estimate of u's accuracy, times n). As with control answers, u's
        accuracy is then Beta(α + k, β + n − k) under the rule's prior, and u is blocked once
        ``n >= agreement_min_labels`` and ``I_level(α + k, β + n − k) >= confidence`` — the
        control rule, with the verdict's posterior in place of the known answer. The soft
        count matters on an adaptive campaign: an item stops early when its first labels
        agree, so hard agreement with the final label over-rates a careless annotator (half
        their labels meet agreeing ones), while the posterior weighs each agreement by how
        sure it is. u's own label moves the verdict a little, so k errs on u's side: a
        conservative test. The block is the campaign's (:meth:`Campaign.block_worker`,
        recorded ``by: agreement`` with these numbers as its ``evidence``, reversible); an
        annotator the requester unblocked is left
        alone. Checked every :attr:`agreement_every` labels, or every 5 % more labels when
        that is more (one verdict fit each). Returns the annotators blocked."""
        campaign = self.campaign
        ledger = campaign.control_ledger
        if ledger is None or ledger.tasks.block_below is None:
            return []
        n_labels = len(self._label_workers)
        # every agreement_every labels, or every 5 % more on a large campaign (a verdict fit
        # costs O(labels): the fits then cost O(labels) in all, amortised)
        if n_labels - self._agreement_checked < max(self.agreement_every, 0.05 * n_labels):
            return []
        self._agreement_checked = n_labels
        level, confidence = ledger.tasks.block_below, ledger.tasks.block_confidence
        _, probabilities = campaign.verdict_probabilities()
        log = campaign.state.label_log
        # Σ P(class = the label) per annotator, and their labels (the simulation's soft count)
        expected, counts = expected_right(
            probabilities, log.items, log.labels, log.workers, len(campaign.worker_ids)
        )
        blocked = []
        for j, worker_id in enumerate(campaign.worker_ids):
            n, k = int(counts[j]), float(expected[j])
            if not worker_id.startswith(self.annotator_prefix) or n < self.agreement_min_labels:
                continue
            if j in ledger.exempt or campaign.is_blocked(worker_id):
                continue
            p_below = ledger.p_below(k, n, j)  # the control rule's test and prior
            if p_below >= confidence:
                evidence = {
                    "labels": n,
                    "expected_right": round(k, 3),
                    "level": level,
                    "p_below": p_below,
                }
                # stored in the event (by: agreement), so it survives a restart
                campaign.block_worker(worker_id, by="agreement", evidence=evidence)
                self.agreement_blocks[worker_id] = evidence
                blocked.append(worker_id)
        self._catch_up()
        return blocked

    def add_control(self, truth: Mapping[str, str]) -> tuple[int, list[str]]:
        """Make the items of ``truth`` (``{item id: class}``, e.g. a platform's ground
        truth) control items of the campaign; returns how many are new and the items whose
        answer differs from the one the campaign holds (kept: a known answer does not
        change; the platform should be told)."""
        self._catch_up()
        known = self.campaign.control_items()
        conflicts = sorted(i for i, c in truth.items() if i in known and known[i] != c)
        new = {i: c for i, c in truth.items() if i not in known and i in self._known}
        added = self.campaign.add_control_items(new) if new else 0
        self._catch_up()
        return added, conflicts

    def reconcile(
        self, annotations: Mapping[str, Sequence[Annotation]], target: int
    ) -> tuple[int, set[str]]:
        """One round of a platform module: release the overdue slots, :meth:`record` each
        task's annotations (``{item id: annotations}``, those the platform just read), then
        :meth:`fill` up to ``target`` open slots. Returns the labels recorded and the items
        whose open state the platform must write (``set_open``): those read, those that got a
        slot and those holding one."""
        self.expire_overdue()
        recorded = sum(len(self.record(item_id, rows)) for item_id, rows in annotations.items())
        if recorded:
            self.block_by_agreement()
        touched = set(annotations)
        touched.update(slot.item_id for slot in self.open_slots())  # released ones close
        self.release_unfillable()
        touched.update(slot.item_id for slot in self.fill(target))
        touched.update(self.items_with_open_slots())
        return recorded, touched

    def release(self, slot_id: str) -> None:
        """Give an open slot back (its budget returns at once)."""
        self.campaign.cancel_assignment(slot_id)
        self._catch_up()

    def expire_overdue(self) -> int:
        """Release the slots (and other assignments) past their time-to-live."""
        n = self.campaign.expire_overdue()
        self._catch_up()
        return n

    def add_items(self, item_ids: Iterable[str]) -> None:
        self.campaign.add_items(list(item_ids))
        self._catch_up()

    @property
    def stopped(self) -> bool:
        """No slot open and the last :meth:`fill` could open none."""
        self._catch_up()
        return self._stopped

    @staticmethod
    def check_policy(policy: str, platform: str) -> None:
        """Refuse a policy that chooses workers: ``platform`` lets any annotator take an open
        task, so the worker it would choose could not be made to come. A worker-aware
        one-coin KG policy is kept: its slots go by the expected score over the active
        annotators (module docstring)."""
        # unknown ids fail here with the known ones; ``…:verdict=ds`` names the verdict
        policy_object = make_policy(split_verdict(policy)[0])
        if isinstance(policy_object, OneCoinKnowledgeGradient) and not isinstance(
            policy_object, TwoCoinKnowledgeGradient
        ):
            return
        if type(policy_object).chooses_workers:
            raise InvalidParameterError(
                f"policy {policy!r} chooses workers; {platform} lets any annotator take an "
                "open task, so only item-only policies (opt-kg, …) can run here"
            )
