"""A live labeling campaign: the online object behind the service (DESIGN §5).

Workers ask for work (:meth:`Campaign.next_assignment`, pull mode; in push mode the policy
chooses the worker too, :meth:`Campaign.push_assignments`), answer later
(:meth:`Campaign.record_label`) or never (the assignment expires after ``ttl`` seconds and its
budget comes back), or give work back (:meth:`Campaign.cancel_assignment`). Several
assignments are pending at once; the budget counts them (``committed``), so it is never
overspent. A worker never receives an item they already labeled or hold, an item never
receives more than ``max_labels_per_item`` labels (pending ones count), and items with work
pending are offered last: the live rules of :mod:`crowdbudget.engine.live`. The problem the
policy runs on (worker slots, push mode's team and pairs, the rebuild on new items or
workers, the policy's random stream) is :mod:`crowdbudget.campaign.problem_build`'s.

Event sourcing: every accepted change is an event appended to the
:class:`~crowdbudget.campaign.store.EventStore` *before* it is applied in memory and returned,
and the in-memory state is a pure function of the events: :meth:`Campaign.load` replays them
and gets the same state (tested). Event kinds and payloads:

- ``created``: the configuration (items, classes, budget, policy id, prior, prices, ttl, seed);
- ``items_added``: ``{"items": [...]}`` — new items (the policy is rebuilt: reset on the larger
  problem, then every label observed again in order);
- ``workers_added``: ``{"workers": [...]}`` — workers who joined (registered by the requester,
  or arriving in pull mode for a policy that models workers);
- ``assigned``: ``{"id", "item", "worker", "price", "expires_at"}``;
- ``labeled``: ``{"id", "label"}`` (a class index; ``"worker"`` too: :mod:`.slots`);
- ``released``: ``{"id", "reason"}`` with reason ``cancelled`` or ``expired``;
- ``imported``: ``{"rows": [[item, worker, label], ...]}`` — labels collected elsewhere; they
  inform the posterior and the results but cost nothing from this campaign's budget;
- ``settings_changed``: ``{"ttl": ..., "max_pending_per_worker": ...}`` (either or both) —
  for assignments handed out from then on;
- ``no_work``: ``{}`` — a request answered with nothing after asking a policy that keeps
  select-side state (its questions, ``"asked"``: :mod:`.problem_build`);
- ``gold_set``: ``{"rows": [[item, label], ...]}`` (indices, in item order) — the requester's
  gold labels for a sample of the items, replacing any earlier gold; ``gold_removed``: ``{}``.
  Gold is an evaluation aid only (:meth:`Campaign.calibration`): neither the policy nor the
  verdict reads it, and gold events do not count in the policy's random stream, so
  uploading gold never changes an allocation;
- control tasks and blocking (``control_items_added``, ``control_settings_changed``,
  ``worker_blocked``, ``worker_unblocked``, ``blocked_labels_set``): see
  :mod:`crowdbudget.campaign.control`.

Validate, then commit: an event is stored only once the code that applies it is known to
succeed — ``created`` and ``items_added`` build the problem and reset the policy before the
event is written (:meth:`Campaign.create`, :meth:`Campaign.add_items`), the other events are
checked by the operation that writes them — so a refused operation leaves the store as it was.
A reloaded campaign is the never-restarted one: its state, and its later decisions — the
allocation's events carry the policy's random stream state (``"rng"``, when it moved), which a
replay restores, and, for a policy that keeps select-side state, the questions asked of it
(``"asked"``), which a replay asks again (:mod:`crowdbudget.campaign.problem_build`, "Policy
randomness" and "Select-side state"; the one exception: draws another policy made for a
request answered with nothing, after the last event).

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd

from crowdbudget._validation import short_repr as _short
from crowdbudget.campaign.config import (
    CampaignConfig,
    check_added_attributes,
    check_imported,
    check_settings,
    checked_config,
    class_code,
)
from crowdbudget.campaign.config import check_ids as _check_ids
from crowdbudget.campaign.control import CampaignEvidence, check_control
from crowdbudget.campaign.events import CampaignEventHandlers
from crowdbudget.campaign.ledger import Ledger
from crowdbudget.campaign.problem_build import (
    STREAM_EVENTS,
    PolicyStream,
    QuestionLog,
    Rebuild,
    ask,
    pair_index,
)
from crowdbudget.campaign.problem_build import rebuild as rebuild_problem
from crowdbudget.campaign.read_models import CampaignReadModel, CampaignReports, push_cause
from crowdbudget.campaign.records import AssignmentError as AssignmentError
from crowdbudget.campaign.records import AssignmentRecord as _Record
from crowdbudget.campaign.records import PendingAssignment as PendingAssignment
from crowdbudget.campaign.records import UnknownAssignmentError as UnknownAssignmentError
from crowdbudget.campaign.store import CommitTicket, ConcurrentWriteError, EventStore, StoredEvent
from crowdbudget.exceptions import DataFormatError, InvalidParameterError

_EPOCHS = itertools.count(1)


class Campaign(CampaignEvidence, CampaignReports, CampaignEventHandlers):
    """A live campaign (use :meth:`create` or :meth:`load`, not the constructor). Its
    reports (results, status, calibration, …) are :class:`~crowdbudget.campaign.read_models.
    CampaignReports`' methods, which hand over to ``self.read_model``; gold, control tasks
    and blocking are :class:`~crowdbudget.campaign.control.CampaignEvidence`'s; the handlers
    that apply each event to the in-memory state are :class:`~crowdbudget.campaign.events.
    CampaignEventHandlers`' (last in the bases: the campaign's and the control mixin's own
    methods come before its declarations of them)."""

    def __init__(self, store: EventStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._seq = 0
        self._evaluation_events = 0  # gold events so far (not in the policy's stream)
        self._gold: dict[int, int] = {}  # item -> gold class (evaluation only)
        self._epoch = next(_EPOCHS)  # names this in-memory copy for deferred durability
        self._deferring = False
        self._last_ticket: CommitTicket | None = None
        self._config: CampaignConfig | None = None  # set by the ``created`` event
        # a rebuild computed before its ``items_added`` event was stored (validate, then
        # commit), used by the event's handler instead of computing it again
        self._prepared: tuple[tuple[str, ...], Rebuild] | None = None
        self._stream = PolicyStream()  # the policy's random stream state, in the events
        self._questions = QuestionLog()  # questions asked of a policy with select-side state
        # why the last request for work got none since the allocation state last changed,
        # per asking worker (pull) or for the team (push; key None): read_models.stop_reason_of;
        # not an event: it describes answers, not decisions
        self._no_work: dict[int | None, str] = {}
        #: what the campaign reports (results, status, calibration, …; read_models.py)
        self.read_model = CampaignReadModel(self)

    @property
    def config(self) -> CampaignConfig:
        """The campaign's configuration: its ``created`` event, with the ``settings_changed``
        events since. Every campaign :meth:`create` or :meth:`load` returns has one (the
        ``created`` event is the first of every campaign), so readers need no None check."""
        if self._config is None:
            raise InvalidParameterError(
                "this campaign has no created event; use Campaign.create or Campaign.load"
            )
        return self._config

    @config.setter
    def config(self, config: CampaignConfig) -> None:
        self._config = config

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
        worker_capacities: dict[str, int] | None = None,
        default_price: float = 1.0,
        ttl: float | None = None,
        seed: int = 0,
        max_labels_per_item: int | None = None,
        max_pending_per_worker: int | None = None,
        verdict: str | None = None,
        workers: Sequence[str] = (),
        mode: str = "pull",
        pairs: Sequence[Sequence[str]] | None = None,
        contexts: Sequence[int] | None = None,
        features: Sequence[Sequence[float]] | None = None,
        control: Mapping[str, Any] | None = None,
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
            worker_capacities: the most labels a worker id may give (others: no limit);
                pending assignments count, so it is never exceeded. A policy that models
                workers in push mode sees them (``Problem.workers.capacities``; B-KUBE).
            ttl: seconds an assignment may stay unanswered before it expires (None: never).
            max_labels_per_item: an item receives at most this many labels (pending ones
                count, so it is never exceeded); then it leaves the campaign.
            max_pending_per_worker: a worker holds at most this many unanswered assignments;
                asking again at the limit returns the oldest one again (so a response lost
                on the way is recovered, and one worker cannot reserve the whole budget).
                None: no limit.
            seed: the policy's random seed (an integer >= 0).
            verdict: where final labels and their confidence come from (:meth:`results`):
                ``"posterior"`` (the policy's own model) or an aggregator id fitted on the
                labels (``"ds"``, ``"one-coin-em"``, ``"mv"``, …); None: the one the
                policy id names, else the policy's ``default_verdict`` (``posterior`` for
                most; the registry's ``DEFAULT_VERDICT`` for ``…:posterior=one-coin``).
            workers: worker ids known from the start (more join with :meth:`add_workers` or
                by asking for work). A policy that models workers numbers them in this order.
            mode: ``"pull"`` (workers ask for work; they may come and go) or ``"push"`` (the
                policy picks (item, worker) pairs among a team: :meth:`push_assignments`).
            pairs: push mode: the (item id, worker id) pairs that may be asked (default:
                every item with every worker); workers named here join the team.
            contexts: the context (task type) of each item, integers >= 0, aligned with
                ``items`` (BBTA and the per-context policies; Zhang, Ma, Sugiyama 2015 §3).
            features: a feature vector per item, aligned with ``items`` (feature-based
                policies such as ``opt-kg:features=logistic``; Chen, Lin, Zhou 2013 §5).
                A campaign with contexts or features needs them for every item it adds.
            control: control tasks (:mod:`crowdbudget.campaign.control`): ``{"items": {item
                id: class}, "first_k", "rate", "block_below", "block_confidence",
                "min_answers", "prior", "blocked_labels"}``, every key optional.
            store: where events go (default: an in-memory SQLite database).

        Nothing is stored unless the whole configuration works: the ``created`` event is
        applied to the new object (building the problem, resetting the policy) before it is
        written, so a policy refusing the problem (``kg`` with three classes, …) stores nothing.
        """
        config = checked_config(
            items,
            budget=budget,
            classes=classes,
            policy=policy,
            prior=prior,
            worker_prices=worker_prices,
            worker_capacities=worker_capacities,
            default_price=default_price,
            ttl=ttl,
            seed=seed,
            max_labels_per_item=max_labels_per_item,
            max_pending_per_worker=max_pending_per_worker,
            verdict=verdict,
            workers=workers,
            mode=mode,
            pairs=pairs,
            contexts=contexts,
            features=features,
            campaign_id=campaign_id or uuid.uuid4().hex,
            name=name,
        )
        config.control = check_control(control, config.items, config.classes)
        campaign = cls(store if store is not None else EventStore("sqlite://"), clock)
        payload = config.to_payload()
        # validate, then commit: apply the event to the new (still private) object first; a
        # configuration the policy refuses raises here and nothing reaches the store
        campaign._apply(StoredEvent(config.campaign_id, 1, "created", payload, clock()))
        stored = campaign.store.append(config.campaign_id, 1, "created", payload)
        campaign._seq = stored.seq
        campaign._start_policy_stream()
        return campaign

    @classmethod
    def load(
        cls, store: EventStore, campaign_id: str, clock: Callable[[], float] = time.time
    ) -> Campaign:
        """Rebuild a campaign by replaying all its events (a cost in proportion to the
        campaign's history: a process that is merely behind the store uses :meth:`refresh`)."""
        campaign = cls(store, clock)
        store.activity["loads"] += 1
        for event in store.events(campaign_id):
            campaign._apply(event)
            if event.kind == "created":
                campaign._start_policy_stream()  # as create() does
        if campaign._config is None:
            raise InvalidParameterError(f"no campaign {campaign_id!r} in {store.url}")
        if not campaign._stream.restored:  # a store from before stream states
            campaign._start_policy_stream()
        return campaign

    def can_refresh(self) -> bool:
        """Whether :meth:`refresh` is safe now: nothing this object applied is still waiting
        for its commit, and nothing it applied failed to commit (:attr:`diverged`). (A
        staged event may lose its number to another process's event; the store's events
        after it would then be applied on top of one it never held.)"""
        ticket = self._last_ticket
        return ticket is None or (ticket.settled and ticket.error is None)

    @property
    def diverged(self) -> bool:
        """Whether this object applied an event the store refused (deferred durability: it
        lost its event number to another process, or the database failed). Its state then
        holds a decision that never happened; only :meth:`load` gives a true copy again.
        Once true it stays true: every later event it stages fails as well (the store fails
        the whole epoch)."""
        ticket = self._last_ticket
        return ticket is not None and ticket.settled and ticket.error is not None

    def refresh(self) -> int:
        """Catch up with the store: apply, one at a time through the same handlers as a
        replay, the events other processes appended since this object last saw the store;
        returns how many. The cost is one indexed read (:meth:`EventStore.events_after`,
        empty when the copy is current) plus the new events — not the campaign's history,
        which only :meth:`load` replays. Refuses (:class:`ConcurrentWriteError`) while an
        event this object staged is not yet committed, or after one failed to commit (see
        :meth:`can_refresh`): wait for it first, or reload a diverged copy.

        Why applying only the new events gives the store's state: every event this object
        applied holds its number in the store (nothing it applied was refused), so the
        store's events 1 … ``self._seq`` are exactly the ones this object applied, and those
        after it — including ``assigned`` events of assignments this object never saw — are
        applied in the store's order, as :meth:`load` would — the policy's random stream
        included, set to the state the events carry.)"""
        if self.diverged:
            raise ConcurrentWriteError(
                "this campaign copy applied an event the store refused; reload the campaign"
            )
        if not self.can_refresh():
            raise ConcurrentWriteError(
                "this campaign copy has uncommitted events; wait for them before refreshing"
            )
        events = self.store.events_after(self.config.campaign_id, self._seq)
        for event in events:
            self._apply(event)
        return len(events)

    # ------------------------------------------------------------------ the event machinery
    def _commit(self, kind: str, payload: dict[str, Any], campaign_id: str | None = None) -> None:
        """Durably append, then apply (write-ahead: nothing is acknowledged before it is
        stored). Under :meth:`deferred_durability` the event is staged and applied at once;
        the caller makes it durable (:meth:`wait_durable`) before acknowledging anything."""
        cid = campaign_id or (self.config.campaign_id if self.config else "")
        if kind in STREAM_EVENTS:  # the allocation's events: its stream, the questions asked
            payload = self._stream.tagged(self._questions.tagged(payload))
        if not self._deferring:
            stored = self.store.append(cid, self._seq + 1, kind, payload)
            self._questions.committed(kind)
            self._apply(stored, own=True)
            return
        ticket = self.store.stage(cid, self._seq + 1, kind, payload, epoch=self._epoch)
        self._questions.committed(kind)
        self._last_ticket = ticket
        self._apply(ticket.event, own=True)

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

    def _worker(self, worker_id: str) -> int:
        index = self._worker_index.get(worker_id)
        if index is None:
            index = self._worker_index[worker_id] = len(self.worker_ids)
            self.worker_ids.append(worker_id)
            if self._models_workers and index >= self._worker_slots and hasattr(self, "policy"):
                # past the last slot: more slots (doubled; push mode: one more) and the policy
                # rebuilt on them (a policy that took n slots takes more of the same kind)
                self._install((), self._rebuild(()))
        return index

    def _extend_items(self, new_items: list[str], attributes: dict[str, Any]) -> None:
        """Add items and (re)build the policy on the larger problem, replaying the labels."""
        self._install(tuple(new_items), self._rebuild(new_items, attributes), attributes)

    def _rebuild(
        self, new_items: Sequence[str], attributes: dict[str, Any] | None = None
    ) -> Rebuild:
        """The problem, state and policy with ``new_items`` appended, computed without changing
        this object (:func:`~crowdbudget.campaign.problem_build.rebuild`)."""
        return rebuild_problem(self, new_items, attributes)

    def _spent(self) -> float:
        return float(self._ledger.spent)

    def _money_left(self) -> float:
        return float(self._ledger.remaining)

    def _capacity_of(self, worker_id: str) -> int | None:
        """``worker_id``'s capacity (None: unlimited)."""
        return self.config.worker_capacities.get(worker_id)

    def _pair(self, item: int, worker: int) -> int | None:
        """The index of pair (item, worker) in ``state.pairs`` (None: not a listed pair).
        Push mode: the live step takes a pair when it is assigned, so no batch gives it twice,
        and gives it back when the assignment is released (``LiveStep(pair_of=...)``); a
        blocked worker's pairs stay closed (None)."""
        if self._blocked_index(worker):
            return None
        return pair_index(self.config, self.problem.n_workers or 0, self._pair_lookup, item, worker)

    def _install(
        self, new_items: Sequence[str], rebuilt: Rebuild, attributes: dict[str, Any] | None = None
    ) -> None:
        """Make ``rebuilt`` (with ``new_items`` and their ``attributes``) the campaign's."""
        attributes = attributes or {}
        if self._item_contexts is not None:
            self._item_contexts.extend(attributes.get("contexts", []))
        if self._item_features is not None:
            self._item_features.extend(attributes.get("features", []))
        for item_id in new_items:
            self._item_index[item_id] = len(self.item_ids)
            self.item_ids.append(item_id)
        self.problem, self.state, self.policy = rebuilt.problem, rebuilt.state, rebuilt.policy
        self._stream.rebuilt(rebuilt.rng)
        self._worker_slots = rebuilt.problem.n_workers or 0
        self._pair_lookup = rebuilt.pair_lookup

    def _start_policy_stream(self) -> None:
        self._stream.start(self.policy, self.config, self._policy_seq)

    # ------------------------------------------------------------------ the public operations
    @property
    def campaign_id(self) -> str:
        return self.config.campaign_id

    @property
    def event_count(self) -> int:
        """Events applied so far (stored and staged): every change of the campaign's state is
        an event, so an answer computed from the state stays right while this is unchanged
        (answers that depend on the clock, such as expiries, must expire first)."""
        return self._seq

    def price_of(self, worker_id: str) -> float:
        return self.config.worker_prices.get(worker_id, self.config.default_price)

    def add_items(
        self,
        items: Sequence[str],
        *,
        contexts: Sequence[int] | None = None,
        features: Sequence[Sequence[float]] | None = None,
    ) -> None:
        """Add new items (ids must be new), with their contexts and features when the
        campaign has them."""
        new = _check_ids(items, "item")
        attributes = check_added_attributes(
            len(new),
            contexts,
            features,
            has_contexts=self._item_contexts is not None,
            has_features=self._item_features is not None,
            n_features=len(self._item_features[0]) if self._item_features else None,
        )
        if self.config.pairs is not None and new:
            raise InvalidParameterError(
                "this campaign lists its (item, worker) pairs; new items would have none "
                "(create a campaign with the new items and their pairs)"
            )
        clash = [i for i in new if i in self._item_index]
        if clash:
            raise DataFormatError(f"item id {clash[0]!r} already exists in this campaign")
        if new:
            # validate, then commit: the rebuild that the event's handler would do runs
            # first, so a policy refusing the larger problem stores nothing
            self._prepared = (tuple(new), self._rebuild(new, attributes))
            try:
                self._commit("items_added", {"items": new, **attributes})
            finally:
                self._prepared = None

    def add_workers(self, workers: Sequence[str]) -> None:
        """Register workers (ids new to the campaign are added in order; known ones are
        ignored). A policy that models workers numbers them in joining order."""
        new = [w for w in _check_ids(workers, "worker") if w not in self._worker_index]
        if new:
            self._commit("workers_added", {"workers": new})

    def update_settings(
        self, *, ttl: float | None = None, max_pending_per_worker: int | None = None
    ) -> None:
        """Change the time-to-live (seconds) and the unanswered assignments one worker may
        hold; None keeps a setting. Both apply to assignments handed out from now on."""
        changes = check_settings(ttl, max_pending_per_worker)
        if changes:
            self._commit("settings_changed", changes)

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
        worker = self._worker_index.get(worker_id)
        if worker is None and self._models_workers and self._live.affords(self.state, price):
            # the policy answers for this worker: they join first (an event, which rebuilds
            # the policy), so that the policy has a slot for them
            self._commit("workers_added", {"workers": [worker_id]})
        decision = ask(self, worker_id)  # the live step (worker_id's price, capacity, …)
        if decision.held is not None:
            return self.assignment(str(decision.held))  # at the limit: the oldest pending one
        if decision.assignment is None:
            cause = decision.cause or "policy"
            if cause == "policy" and self._models_workers:
                cause = "declined"  # a policy that models workers may take the next worker
            self._note_no_work(decision.worker, cause)
            return None
        return self._assign(decision.assignment.item, worker_id, decision.assignment.price)

    def _note_no_work(self, worker: int | None, cause: str) -> None:
        """Remember why a request got no work (read by ``read_models.stop_reason_of``):
        ``budget``, ``capacity`` (the worker's), ``done`` (the open items, or the one offered,
        are the worker's already), ``pairs`` (push: none left), ``policy`` (no further
        assignment although items are open), ``declined`` (so, but the policy models workers:
        its answer may differ for another worker)."""
        if worker is not None or self._push:
            self._no_work[worker] = cause

    def _assign(self, item: int, worker_id: str, price: float) -> PendingAssignment:
        """Commit an ``assigned`` event (checked by the caller) and return it."""
        assignment_id = uuid.uuid4().hex
        expires = None if self.config.ttl is None else self.clock() + self.config.ttl
        payload = {"id": assignment_id, "item": item, "worker": worker_id, "price": price}
        self._commit("assigned", {**payload, "expires_at": expires})
        return self.assignment(assignment_id)

    def next_assignments(self, worker_ids: Sequence[str]) -> list[PendingAssignment]:
        """Push mode for a managed team: one assignment per worker in turn, while any is
        available (a worker with nothing left, or holding ``max_pending_per_worker``
        assignments already, is skipped)."""
        out = []
        for worker_id in worker_ids:
            worker = self._worker_index.get(str(worker_id))
            if self._live.held(worker, self.config.max_pending_per_worker) is not None:
                continue
            assignment = self.next_assignment(worker_id)
            if assignment is not None:
                out.append(assignment)
        return out

    def push_assignments(self, count: int = 1) -> list[PendingAssignment]:
        """Push mode: up to ``count`` assignments whose workers the policy chose (the
        requester dispatches each to its worker); fewer when the budget, the pairs or the
        policy run out, or a chosen worker already holds ``max_pending_per_worker``.

        Items with work pending are offered last, as in pull mode; a pair already pending is
        never given again. With control tasks, a team worker whose next task the control
        rule says is one gets a control item first (:meth:`LiveStep.control_for_team`)."""
        if not self._push:
            raise InvalidParameterError(
                "this campaign is in pull mode: workers ask for work (create it with "
                "mode='push' for the policy to choose workers)"
            )
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
            raise InvalidParameterError(f"count must be an integer >= 1, got {_short(count)}")
        self.expire_overdue()
        out: list[PendingAssignment] = []
        for _ in range(int(count)):
            decision = ask(self, None)  # the live step: the policy's pair, or a control task
            if decision.assignment is None:
                if decision.cause is None and not out:  # the policy chose no pair
                    self._note_no_work(None, push_cause(self))
                break  # the policy's choice cannot be given now: stop this batch
            chosen = decision.assignment
            assert chosen.worker is not None  # the step gives only (item, worker) pairs
            out.append(self._assign(chosen.item, self.worker_ids[chosen.worker], chosen.price))
        return out

    def _record(self, assignment_id: str, worker_id: str | None = None) -> _Record:
        """The assignment's record; refused when unknown, or not ``worker_id``'s (if given)."""
        record = self._records.get(assignment_id)
        if record is None:
            raise UnknownAssignmentError(f"no assignment {_short(assignment_id)} in this campaign")
        if worker_id is not None and self.worker_ids[record.worker] != worker_id:
            raise AssignmentError(f"assignment {assignment_id!r} belongs to another worker")
        return record

    def assignment(self, assignment_id: str) -> PendingAssignment:
        """The assignment ``assignment_id`` as the outside world sees it (string ids)."""
        record = self._record(assignment_id)
        return record.public(assignment_id, self.item_ids, self.worker_ids, self.config.classes)

    def pending_assignments(self, worker_id: str | None = None) -> list[PendingAssignment]:
        """The unanswered assignments (of ``worker_id``, or all), oldest first per worker,
        after releasing the overdue ones; a requester cancels any of them with
        :meth:`cancel_assignment` and its budget returns at once."""
        self.expire_overdue()
        if worker_id is not None:
            worker = self._worker_index.get(worker_id)
            ids = list(self._live.worker_pending.get(worker, {})) if worker is not None else []
        else:
            ids = [a for pending in self._live.worker_pending.values() for a in pending]
        return [self.assignment(str(a)) for a in ids]

    def record_label(
        self, assignment_id: str, label: str, *, worker_id: str | None = None
    ) -> PendingAssignment:
        """Accept the answer to a pending assignment (idempotent: the same label twice is
        recorded once). ``worker_id``, when given, must be the assignment's worker."""
        record = self._record(assignment_id, worker_id)
        code = class_code(label, self._class_index, self.config.classes, f"label {_short(label)}")
        if record.check_label(assignment_id, code, self.clock, self.config.classes):
            self._commit("labeled", {"id": assignment_id, "label": code})
            self._record_blocks()  # a control answer may block the worker
        return self.assignment(assignment_id)

    def cancel_assignment(self, assignment_id: str, *, worker_id: str | None = None) -> None:
        """Give a pending assignment back (its budget returns). Cancelling twice is a no-op."""
        record = self._record(assignment_id, worker_id)
        if record.status == "cancelled":
            return
        if record.status != "pending":
            raise AssignmentError(f"assignment {assignment_id!r} is {record.status}")
        self._commit("released", {"id": assignment_id, "reason": "cancelled"})

    def import_labels(self, labels: pd.DataFrame) -> int:
        """Add labels collected elsewhere (crowd-kit table ``task, worker, label``); they
        inform the posterior and the results, and cost nothing from the budget."""
        rows = check_imported(labels, self._item_index, self._class_index, self.config.classes)
        if rows:
            self._commit("imported", {"rows": rows})
            self._record_blocks()
        return len(rows)

    # ------------------------------------------------------------------ what read models read
    @property
    def ledger(self) -> Ledger:
        """The campaign's money (exact decimals): budget, spent, committed, remaining."""
        return self._ledger

    @property
    def spend_timeline(self) -> Sequence[tuple[float, float, int]]:
        """``(time, spent, labels received)`` after each ``labeled`` or ``imported`` event,
        in order (the dashboard's spend curve)."""
        return self._timeline
