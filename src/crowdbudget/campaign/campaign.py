"""A live labeling campaign: the online object behind the service (DESIGN §5).

Workers arrive and ask for work (:meth:`Campaign.next_assignment`, pull mode), answer later
(:meth:`Campaign.record_label`) or never (the assignment expires after ``ttl`` seconds and its
budget comes back), or give work back (:meth:`Campaign.cancel_assignment`). Several
assignments are pending at once; the budget counts them (``committed``), so it is never
overspent. A worker never receives an item they already labeled or hold, and an item never
receives more than ``max_labels_per_item`` labels (pending ones count).

Items with work pending are offered last: a sequential policy's scores change only when
labels come back, so Opt-KG (Algorithm 1) would otherwise hand its top item to every worker
who arrives meanwhile. Skipping busy items (while others are left) makes it close to the
sequential policy run on the labels in the order they return — the offline replay; measured
in ``examples/live_campaign.py``.

Event sourcing: every accepted change is an event appended to the
:class:`~crowdbudget.campaign.store.EventStore` *before* it is applied in memory and returned,
and the in-memory state is a pure function of the events: :meth:`Campaign.load` replays them
and gets the same state (tested). Event kinds and payloads:

- ``created``: the configuration (items, classes, budget, policy id, prior, prices, ttl, seed);
- ``items_added``: ``{"items": [...]}`` — new items (the policy is rebuilt: reset on the larger
  problem, then every label observed again in order);
- ``assigned``: ``{"id", "item", "worker", "price", "expires_at"}``;
- ``labeled``: ``{"id", "label"}`` (label as a class index);
- ``released``: ``{"id", "reason"}`` with reason ``cancelled`` or ``expired``;
- ``imported``: ``{"rows": [[item, worker, label], ...]}`` — labels collected elsewhere; they
  inform the posterior and the results but cost nothing from this campaign's budget.

Policy randomness: the policy's generator is ``default_rng([seed, n])`` where n is the number of
events when the campaign was created or loaded, so a reloaded campaign is deterministic; its
decisions after a reload are valid draws of the policy, not the ones the never-restarted
process would have made (the state — counts, spending, posterior — is identical).

Example:
    >>> from crowdbudget.campaign import Campaign, EventStore
    >>> c = Campaign.create(["q1", "q2", "q3"], budget=6, store=EventStore("sqlite://"))
    >>> a = c.next_assignment("alice")
    >>> c.record_label(a.assignment_id, "1").status
    'answered'
    >>> c.status()["spent"]
    1.0
"""

from __future__ import annotations

import heapq
import itertools
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from crowdbudget.campaign.store import CommitTicket, EventStore, StoredEvent
from crowdbudget.exceptions import (
    BudgetError,
    CrowdBudgetError,
    DataFormatError,
    InvalidParameterError,
)
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.posteriors.beta_bernoulli import positive_probability
from crowdbudget.posteriors.dirichlet import largest_class_probabilities
from crowdbudget.registry import make_policy
from crowdbudget.types import Assignment, CampaignState, LabelEvent, Problem

_EPOCHS = itertools.count(1)


class AssignmentError(CrowdBudgetError):
    """A label or cancellation names an assignment that cannot take it (unknown, expired,
    cancelled, another worker's, or already answered differently)."""


class UnknownAssignmentError(AssignmentError, KeyError):
    """No such assignment in this campaign."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True)
class PendingAssignment:
    """One assignment as the outside world sees it (string ids)."""

    assignment_id: str
    item_id: str
    worker_id: str
    price: float
    expires_at: float | None
    status: str = "pending"  # pending | answered | cancelled | expired
    label: str | None = None


@dataclass(slots=True)
class _Record:
    item: int
    worker: int
    price: float
    expires_at: float | None
    status: str = "pending"
    label: int | None = None


@dataclass
class CampaignConfig:
    """What a campaign was created with (the payload of its ``created`` event)."""

    campaign_id: str
    items: list[str]
    classes: list[str]
    budget: float
    policy: str = "opt-kg"
    prior: list[float] | None = None
    worker_prices: dict[str, float] = field(default_factory=dict)
    default_price: float = 1.0
    ttl: float | None = None
    seed: int = 0
    name: str = ""
    max_labels_per_item: int | None = None

    def to_payload(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def _check_ids(values: Iterable[Any], what: str) -> list[str]:
    out = []
    for value in values:
        if not isinstance(value, str | int) or isinstance(value, bool) or str(value) == "":
            raise DataFormatError(f"{what} ids must be non-empty strings, got {value!r}")
        out.append(str(value))
    seen: set[str] = set()
    for value in out:
        if value in seen:
            raise DataFormatError(f"{what} id {value!r} appears more than once")
        seen.add(value)
    return out


class Campaign:
    """A live campaign (use :meth:`create` or :meth:`load`, not the constructor)."""

    def __init__(self, store: EventStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._seq = 0
        self._epoch = next(_EPOCHS)  # names this in-memory copy for deferred durability
        self._deferring = False
        self._last_ticket: CommitTicket | None = None
        self.config: CampaignConfig | None = None

    # ------------------------------------------------------------------ creation and loading
    @classmethod
    def create(
        cls,
        items: Sequence[str],
        *,
        budget: float,
        classes: Sequence[str] = ("0", "1"),
        policy: str = "opt-kg",
        prior: Sequence[float] | None = None,
        worker_prices: dict[str, float] | None = None,
        default_price: float = 1.0,
        ttl: float | None = None,
        seed: int = 0,
        max_labels_per_item: int | None = None,
        store: EventStore | None = None,
        campaign_id: str | None = None,
        name: str = "",
        clock: Callable[[], float] = time.time,
    ) -> Campaign:
        """Validate the configuration, write the ``created`` event, return the campaign.

        Args:
            items: item ids (strings, unique); more can be added with :meth:`add_items`.
            budget: total spend: label units, or money when workers have prices.
            classes: the class labels (>= 2); for two classes the second is "positive".
            policy: a policy id with parameters (``opt-kg``, ``cvar-kg:alpha=0.3``, …).
            prior: pseudo-counts per class, shared by all items (default 1 each).
            worker_prices: price of one label per worker id; others pay ``default_price``.
            ttl: seconds an assignment may stay unanswered before it expires (None: never).
            max_labels_per_item: an item receives at most this many labels (pending ones
                count, so it is never exceeded); then it leaves the campaign.
            seed: the policy's random seed.
            store: where events go (default: an in-memory SQLite database).
        """
        classes_ = _check_ids(classes, "class")
        if len(classes_) < 2:
            raise InvalidParameterError(f"a campaign needs at least 2 classes, got {classes_}")
        try:
            budget_ = float(budget)
        except (TypeError, ValueError):
            raise BudgetError(f"budget must be a number > 0, got {budget!r}") from None
        if not np.isfinite(budget_) or budget_ <= 0:
            raise BudgetError(f"budget must be a number > 0, got {budget!r}")
        prior_ = None
        if prior is not None:
            prior_ = [float(p) for p in prior]
            if len(prior_) != len(classes_) or min(prior_) <= 0:
                raise InvalidParameterError(
                    f"prior must be {len(classes_)} pseudo-counts > 0 (one per class), got {prior}"
                )
        prices = {str(k): float(v) for k, v in (worker_prices or {}).items()}
        if any(not np.isfinite(p) or p <= 0 for p in [*prices.values(), default_price]):
            raise InvalidParameterError("worker prices must be numbers > 0")
        if ttl is not None and not (np.isfinite(ttl) and ttl > 0):
            raise InvalidParameterError(f"ttl must be a number of seconds > 0, got {ttl!r}")
        if max_labels_per_item is not None and int(max_labels_per_item) < 1:
            raise InvalidParameterError(
                f"max_labels_per_item must be an integer >= 1, got {max_labels_per_item!r}"
            )
        make_policy(policy)  # an unknown id or bad parameter fails here, before any write
        config = CampaignConfig(
            campaign_id=campaign_id or uuid.uuid4().hex,
            items=_check_ids(items, "item"),
            classes=classes_,
            budget=budget_,
            policy=policy,
            prior=prior_,
            worker_prices=prices,
            default_price=float(default_price),
            ttl=None if ttl is None else float(ttl),
            seed=int(seed),
            name=name,
            max_labels_per_item=None if max_labels_per_item is None else int(max_labels_per_item),
        )
        campaign = cls(store if store is not None else EventStore("sqlite://"), clock)
        campaign._commit("created", config.to_payload(), campaign_id=config.campaign_id)
        campaign._start_policy_stream()
        return campaign

    @classmethod
    def load(
        cls, store: EventStore, campaign_id: str, clock: Callable[[], float] = time.time
    ) -> Campaign:
        """Rebuild a campaign by replaying its events."""
        campaign = cls(store, clock)
        for event in store.events(campaign_id):
            campaign._apply(event)
        if campaign.config is None:
            raise InvalidParameterError(f"no campaign {campaign_id!r} in {store.url}")
        campaign._start_policy_stream()
        return campaign

    def refresh(self) -> int:
        """Apply events other processes appended since this object last saw the store;
        returns how many."""
        assert self.config is not None
        n = 0
        for event in self.store.events(self.config.campaign_id, after=self._seq):
            self._apply(event)
            n += 1
        return n

    # ------------------------------------------------------------------ the event machinery
    def _commit(self, kind: str, payload: dict[str, Any], campaign_id: str | None = None) -> None:
        """Durably append, then apply (write-ahead: nothing is acknowledged before it is
        stored). Under :meth:`deferred_durability` the event is staged and applied at once;
        the caller makes it durable (:meth:`wait_durable`) before acknowledging anything."""
        cid = campaign_id or (self.config.campaign_id if self.config else "")
        if not self._deferring:
            self._apply(self.store.append(cid, self._seq + 1, kind, payload))
            return
        ticket = self.store.stage(cid, self._seq + 1, kind, payload, epoch=self._epoch)
        self._last_ticket = ticket
        self._apply(ticket.event)

    @contextmanager
    def deferred_durability(self) -> Iterator[None]:
        """Apply changes before they are durable, so that a caller holding this object's
        lock can release it before the commit (group commit: concurrent requests share one
        transaction and one fsync). The caller must call :meth:`wait_durable` after leaving
        the block and before acknowledging any result, and on its error discard this object
        and reload the campaign (its state then holds events the store never got)."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False

    def durability_ticket(self) -> CommitTicket | None:
        """The last event this object staged (settled once everything it applied is
        durable); take it while holding the lock, wait on it after releasing."""
        return self._last_ticket

    def wait_durable(self, ticket: CommitTicket | None) -> None:
        """Block until every event staged up to ``ticket`` is committed (see
        :meth:`deferred_durability`); raises :class:`ConcurrentWriteError` or a store error."""
        self.store.wait(ticket)

    def _apply(self, event: StoredEvent) -> None:
        handler = getattr(self, f"_on_{event.kind}")
        handler(event.payload)
        self._seq = event.seq
        if event.kind in ("labeled", "imported"):
            self._timeline.append((event.created_at, float(self.state.spent), len(self._log_items)))

    def _on_created(self, p: dict[str, Any]) -> None:
        self.config = CampaignConfig(**p)
        self.item_ids: list[str] = []
        self._item_index: dict[str, int] = {}
        self.worker_ids: list[str] = []
        self._worker_index: dict[str, int] = {}
        self._class_index = {c: k for k, c in enumerate(self.config.classes)}
        self._records: dict[str, _Record] = {}
        self._expiry: list[tuple[float, str]] = []
        self._worker_items: dict[int, set[int]] = {}
        self._saturated: set[int] = set()  # items whose pending work fills their label cap
        self._busy: set[int] = set()  # items with pending assignments
        self._log_items: list[int] = []
        self._log_workers: list[int] = []
        self._log_labels: list[int] = []
        self._log_costs: list[float] = []
        self._timeline: list[tuple[float, float, int]] = []  # (time, spent, labels) per event
        self._extend_items(self.config.items)

    def _on_items_added(self, p: dict[str, Any]) -> None:
        self._extend_items(p["items"])

    def _on_assigned(self, p: dict[str, Any]) -> None:
        worker = self._worker(p["worker"])
        record = _Record(p["item"], worker, p["price"], p["expires_at"])
        self._records[p["id"]] = record
        self.state.record_assignment(Assignment(record.item, None, record.price))
        self._worker_items.setdefault(worker, set()).add(record.item)
        self._check_cap(record.item)
        self._check_busy(record.item)
        if record.expires_at is not None:
            heapq.heappush(self._expiry, (record.expires_at, p["id"]))

    def _on_labeled(self, p: dict[str, Any]) -> None:
        record = self._records[p["id"]]
        record.status, record.label = "answered", int(p["label"])
        self._observe(record.item, record.worker, record.label, record.price, pending=True)

    def _on_released(self, p: dict[str, Any]) -> None:
        record = self._records[p["id"]]
        record.status = p["reason"]
        self.state.release_assignment(Assignment(record.item, None, record.price))
        self._worker_items[record.worker].discard(record.item)
        self._check_cap(record.item)
        self._check_busy(record.item)

    def _on_imported(self, p: dict[str, Any]) -> None:
        for item, worker_id, label in p["rows"]:
            worker = self._worker(worker_id)
            self._worker_items.setdefault(worker, set()).add(int(item))
            self._observe(int(item), worker, int(label), 0.0, pending=False)

    def _observe(self, item: int, worker: int, label: int, cost: float, *, pending: bool) -> None:
        event = LabelEvent(item=item, worker=worker, label=label, cost=cost)
        self.state.record_label(event, Assignment(item, None, cost) if pending else None)
        self.policy.observe(event)
        self._log_items.append(item)
        self._log_workers.append(worker)
        self._log_labels.append(label)
        self._log_costs.append(cost)
        self._check_cap(item)
        self._check_busy(item)

    def _check_busy(self, item: int) -> None:
        if self.state.pending[item] > 0:
            self._busy.add(item)
        else:
            self._busy.discard(item)

    def _check_cap(self, item: int) -> None:
        """Keep the label cap: an item whose received labels reach it leaves for good; one
        whose received + pending labels reach it is skipped until a pending one is released."""
        assert self.config is not None
        cap = self.config.max_labels_per_item
        if cap is None:
            return
        received = int(self.state.label_counts[item].sum())
        if received >= cap:
            self.state.eligible[item] = False
            self._saturated.discard(item)
        elif received + int(self.state.pending[item]) >= cap:
            self._saturated.add(item)
        else:
            self._saturated.discard(item)

    def _worker(self, worker_id: str) -> int:
        index = self._worker_index.get(worker_id)
        if index is None:
            index = self._worker_index[worker_id] = len(self.worker_ids)
            self.worker_ids.append(worker_id)
        return index

    def _extend_items(self, new_items: list[str]) -> None:
        """Add items and (re)build the policy on the larger problem, replaying the labels."""
        assert self.config is not None
        for item_id in new_items:
            self._item_index[item_id] = len(self.item_ids)
            self.item_ids.append(item_id)
        n_items, n_classes = len(self.item_ids), len(self.config.classes)
        prior = None
        if self.config.prior is not None:
            prior = np.tile(np.asarray(self.config.prior, dtype=float), (n_items, 1))
        self.problem = Problem(
            n_items=n_items, budget=self.config.budget, n_classes=n_classes, prior=prior
        )
        old = getattr(self, "state", None)
        state = CampaignState.initial(self.problem)
        if old is not None:
            k = old.label_counts.shape[0]
            state.label_counts[:k] = old.label_counts
            state.pending[:k] = old.pending
            state.eligible[:k] = old.eligible
            state.spent, state.committed, state.n_events = old.spent, old.committed, old.n_events
        self.state = state
        self.policy: AllocationPolicy = make_policy(self.config.policy)
        self.policy.reset(self.problem, np.random.default_rng([self.config.seed, self._seq]))
        for item, worker, label, cost in zip(
            self._log_items, self._log_workers, self._log_labels, self._log_costs, strict=True
        ):
            self.policy.observe(LabelEvent(item=item, worker=worker, label=label, cost=cost))

    def _start_policy_stream(self) -> None:
        assert self.config is not None
        self.policy.rng_ = np.random.default_rng([self.config.seed, self._seq])

    # ------------------------------------------------------------------ the public operations
    @property
    def campaign_id(self) -> str:
        assert self.config is not None
        return self.config.campaign_id

    def price_of(self, worker_id: str) -> float:
        assert self.config is not None
        return self.config.worker_prices.get(worker_id, self.config.default_price)

    def add_items(self, items: Sequence[str]) -> None:
        """Add new items (ids must be new)."""
        new = _check_ids(items, "item")
        clash = [i for i in new if i in self._item_index]
        if clash:
            raise DataFormatError(f"item id {clash[0]!r} already exists in this campaign")
        if new:
            self._commit("items_added", {"items": new})

    def expire_overdue(self) -> int:
        """Release every pending assignment past its time-to-live; returns how many."""
        now = self.clock()
        n = 0
        while self._expiry and self._expiry[0][0] <= now:
            _, assignment_id = self._expiry[0]
            if self._records[assignment_id].status == "pending":
                # commit first: if another process wrote meanwhile this raises and the entry
                # stays in the heap for the retry
                self._commit("released", {"id": assignment_id, "reason": "expired"})
                n += 1
            heapq.heappop(self._expiry)
        return n

    def next_assignment(self, worker_id: str) -> PendingAssignment | None:
        """The next item for ``worker_id`` (pull mode), or None: nothing worth asking or
        affordable for this worker now (budget, all items done, or all left already theirs)."""
        worker_id = _check_ids([worker_id], "worker")[0]
        self.expire_overdue()
        price = self.price_of(worker_id)
        if not self.state.can_afford(price):
            return None
        worker = self._worker_index.get(worker_id)
        excluded = self._worker_items.get(worker, set()) if worker is not None else set()
        if self._saturated:
            excluded = excluded | self._saturated
        # items with work pending come last: the policy's scores do not move until a label
        # comes back, so without this every arriving worker would get the same top item
        choice = self.policy.select_excluding(self.state, excluded | self._busy)
        if choice is None and self._busy:  # only items with pending work are left
            choice = self.policy.select_excluding(self.state, excluded)
        if choice is None:
            return None
        choice = replace(choice, price=price)
        assignment_id = uuid.uuid4().hex
        assert self.config is not None
        expires = None if self.config.ttl is None else self.clock() + self.config.ttl
        self._commit(
            "assigned",
            {
                "id": assignment_id,
                "item": choice.item,
                "worker": worker_id,
                "price": price,
                "expires_at": expires,
            },
        )
        return self.assignment(assignment_id)

    def next_assignments(self, worker_ids: Sequence[str]) -> list[PendingAssignment]:
        """Push mode for a managed team: one assignment per worker in turn, while any is
        available (a worker with nothing left is skipped)."""
        out = []
        for worker_id in worker_ids:
            assignment = self.next_assignment(worker_id)
            if assignment is not None:
                out.append(assignment)
        return out

    def _record(self, assignment_id: str) -> _Record:
        record = self._records.get(assignment_id)
        if record is None:
            raise UnknownAssignmentError(f"no assignment {assignment_id!r} in this campaign")
        return record

    def assignment(self, assignment_id: str) -> PendingAssignment:
        record = self._record(assignment_id)
        assert self.config is not None
        return PendingAssignment(
            assignment_id=assignment_id,
            item_id=self.item_ids[record.item],
            worker_id=self.worker_ids[record.worker],
            price=record.price,
            expires_at=record.expires_at,
            status=record.status,
            label=None if record.label is None else self.config.classes[record.label],
        )

    def record_label(
        self, assignment_id: str, label: str, *, worker_id: str | None = None
    ) -> PendingAssignment:
        """Accept the answer to a pending assignment (idempotent: the same label twice is
        recorded once). ``worker_id``, when given, must be the assignment's worker."""
        record = self._record(assignment_id)
        assert self.config is not None
        if worker_id is not None and self.worker_ids[record.worker] != worker_id:
            raise AssignmentError(f"assignment {assignment_id!r} belongs to another worker")
        code = self._class_index.get(str(label))
        if code is None:
            raise DataFormatError(
                f"label {label!r} is not a class; classes: {', '.join(self.config.classes)}"
            )
        if record.status == "answered":
            if record.label == code:
                return self.assignment(assignment_id)  # a retry of the same answer
            raise AssignmentError(
                f"assignment {assignment_id!r} was already answered with "
                f"{self.config.classes[record.label or 0]!r}"
            )
        expired = record.expires_at is not None and record.expires_at <= self.clock()
        if record.status == "pending" and expired:
            self.expire_overdue()
        if record.status != "pending":
            raise AssignmentError(
                f"assignment {assignment_id!r} is {record.status}; it takes no label"
            )
        self._commit("labeled", {"id": assignment_id, "label": code})
        return self.assignment(assignment_id)

    def cancel_assignment(self, assignment_id: str, *, worker_id: str | None = None) -> None:
        """Give a pending assignment back (its budget returns). Cancelling twice is a no-op."""
        record = self._record(assignment_id)
        if worker_id is not None and self.worker_ids[record.worker] != worker_id:
            raise AssignmentError(f"assignment {assignment_id!r} belongs to another worker")
        if record.status == "cancelled":
            return
        if record.status != "pending":
            raise AssignmentError(f"assignment {assignment_id!r} is {record.status}")
        self._commit("released", {"id": assignment_id, "reason": "cancelled"})

    def import_labels(self, labels: pd.DataFrame) -> int:
        """Add labels collected elsewhere (crowd-kit table ``task, worker, label``); they
        inform the posterior and the results, and cost nothing from the budget."""
        assert self.config is not None
        for column in ("task", "worker", "label"):
            if column not in labels.columns:
                raise DataFormatError(f"imported labels lack column {column!r}")
        rows = []
        for task, worker, label in (
            labels[["task", "worker", "label"]].astype(str).itertuples(index=False)
        ):
            item = self._item_index.get(task)
            if item is None:
                raise DataFormatError(f"imported label for unknown item {task!r}")
            code = self._class_index.get(label)
            if code is None:
                raise DataFormatError(
                    f"imported label {label!r} is not a class; classes: "
                    + ", ".join(self.config.classes)
                )
            rows.append([item, worker, code])
        if rows:
            self._commit("imported", {"rows": rows})
        return len(rows)

    # ------------------------------------------------------------------ reading
    def class_probabilities(self) -> np.ndarray:
        """Posterior class probabilities per item from the prior and the votes,
        shape (n_items, n_classes): ``[1 − I, I]`` (binary) or P(class is the largest)."""
        alpha = self.problem.prior_array + self.state.label_counts
        if alpha.shape[1] == 2:
            p = positive_probability(alpha[:, 1], alpha[:, 0])
            return np.column_stack([1.0 - p, p])
        return largest_class_probabilities(alpha)

    def results(self) -> pd.DataFrame:
        """Final label, confidence and number of labels per item (``task``-indexed)."""
        assert self.config is not None
        labels = self.policy.final_labels(self.state)
        probabilities = self.class_probabilities()
        classes = np.asarray(self.config.classes, dtype=object)
        return pd.DataFrame(
            {
                "label": classes[labels],
                "confidence": probabilities[np.arange(labels.shape[0]), labels],
                "n_labels": self.state.label_counts.sum(axis=1),
            },
            index=pd.Index(self.item_ids, name="task"),
        )

    def export_labels(self) -> pd.DataFrame:
        """Every label received (answered and imported), crowd-kit's ``task, worker, label``."""
        assert self.config is not None
        items = np.asarray(self.item_ids, dtype=object)
        workers = np.asarray(self.worker_ids, dtype=object)
        classes = np.asarray(self.config.classes, dtype=object)
        return pd.DataFrame(
            {
                "task": items[np.asarray(self._log_items, dtype=np.int64)],
                "worker": workers[np.asarray(self._log_workers, dtype=np.int64)],
                "label": classes[np.asarray(self._log_labels, dtype=np.int64)],
            }
        )

    def status(self) -> dict[str, Any]:
        """Spending and progress: spent, pending, remaining, labels, estimated accuracy (the
        mean posterior probability that each item's final label is right).

        A policy that reports its own progress (``policy.status()``, e.g. Requallo's items
        meeting the requirement) adds it under ``policy_status``; ``items_complete`` is its
        count of complete items when it has one (else the items with posterior confidence
        >= 0.95). ``stopped`` is true once the policy has stopped by itself (no item gains
        from another label, Li et al. Algorithm 1) with nothing pending; ``saved`` is then
        the budget it left unspent.
        """
        assert self.config is not None
        self.expire_overdue()
        confidence = self.class_probabilities().max(axis=1)
        counts = self.state.label_counts.sum(axis=1)
        report = getattr(self.policy, "status", None)
        policy_status: dict[str, Any] = report() if callable(report) else {}
        pending = int(self.state.pending.sum())
        stopped = bool(policy_status.get("stopped_early", False)) and pending == 0
        confident = int(np.count_nonzero(confidence >= 0.95))
        return {
            "campaign_id": self.config.campaign_id,
            "name": self.config.name,
            "policy": self.config.policy,
            "budget": self.config.budget,
            "spent": float(self.state.spent),
            "committed": float(self.state.committed),
            "remaining": float(self.state.remaining),
            "pending": pending,
            "n_items": len(self.item_ids),
            "n_workers": len(self.worker_ids),
            "n_labels": len(self._log_items),
            "items_labeled": int(np.count_nonzero(counts)),
            "items_confident": confident,
            "items_complete": int(policy_status.get("complete", confident)),
            "estimated_accuracy": float(confidence.mean()) if confidence.size else None,
            "stopped": stopped,
            "saved": float(self.state.remaining) if stopped else 0.0,
            "policy_status": policy_status,
            "events": self._seq,
        }

    def worker_reliability(self) -> pd.DataFrame:
        """Per worker: labels given and agreement with the current final labels (a quick
        reliability estimate, the one majority-vote aggregators report as ``skills_``)."""
        n_workers = len(self.worker_ids)
        if not self._log_items:
            return pd.DataFrame({"worker": [], "n_labels": [], "agreement": []})
        labels = self.policy.final_labels(self.state)
        items = np.asarray(self._log_items, dtype=np.int64)
        workers = np.asarray(self._log_workers, dtype=np.int64)
        agree = (labels[items] == np.asarray(self._log_labels)).astype(float)
        n = np.bincount(workers, minlength=n_workers)
        hits = np.bincount(workers, weights=agree, minlength=n_workers)
        return pd.DataFrame(
            {"worker": self.worker_ids, "n_labels": n, "agreement": hits / np.maximum(n, 1)}
        )

    def dashboard_data(self, max_points: int = 400, max_workers: int = 30) -> dict[str, Any]:
        """What the dashboard draws: status, spend over time (at most ``max_points``),
        the histogram of labels per item, and the most active workers' reliability."""
        status = self.status()
        timeline = self._timeline
        if len(timeline) > max_points:
            keep = np.linspace(0, len(timeline) - 1, max_points).round().astype(int)
            timeline = [timeline[k] for k in keep]
        counts = self.state.label_counts.sum(axis=1)
        histogram = np.bincount(counts) if counts.size else np.zeros(1, dtype=np.int64)
        workers = self.worker_reliability().sort_values("n_labels", ascending=False)
        workers = workers.head(max_workers)
        return {
            "status": status,
            "spend": [{"time": t, "spent": s, "labels": n} for t, s, n in timeline],
            "labels_per_item": [int(v) for v in histogram],
            "workers": [
                {"worker": str(w), "n_labels": int(n), "agreement": float(a)}
                for w, n, a in workers.itertuples(index=False)
            ],
        }
