"""How each stored event changes a live campaign's in-memory state: the event handlers of
:class:`~crowdbudget.campaign.Campaign` (its module docstring lists the event kinds and their
payloads; the control events' handlers are :mod:`crowdbudget.campaign.control`'s).

The in-memory state is a pure function of the events: :meth:`CampaignEventHandlers._apply`
applies one — a freshly written one or one replayed by ``Campaign.load`` / ``refresh`` — by
its kind's ``_on_<kind>`` handler, after :func:`~crowdbudget.campaign.problem_build.replayed`
has taken the policy's keys (its random stream state, the questions asked of it) out of the
payload. A handler never writes an event and never fails on an event that its operation
accepted (validate, then commit).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from crowdbudget.campaign.config import CampaignConfig
from crowdbudget.campaign.ledger import Ledger
from crowdbudget.campaign.problem_build import Rebuild, replayed
from crowdbudget.campaign.records import AssignmentRecord
from crowdbudget.campaign.slots import apply_answer
from crowdbudget.campaign.store import StoredEvent
from crowdbudget.engine.live import LiveStep
from crowdbudget.policies.verdict import POSTERIOR
from crowdbudget.registry import parse_policy, split_verdict
from crowdbudget.types import Assignment, CampaignState, LabelEvent

if TYPE_CHECKING:
    from crowdbudget.campaign.campaign import Campaign

#: events that only evaluate the campaign (gold), change the verdict alone or log the
#: questions of a request answered with nothing: not in the policy's stream (``_policy_seq``)
EVALUATION_EVENTS = frozenset({"gold_set", "gold_removed", "blocked_labels_set", "no_work"})


class CampaignEventHandlers:
    """The event handlers as :class:`~crowdbudget.campaign.Campaign` methods (module
    docstring). The attributes and the methods declared below are the campaign's."""

    config: CampaignConfig
    state: CampaignState
    policy: Any
    _seq: int
    _evaluation_events: int
    _push: bool
    _no_work: dict[int | None, str]
    _ledger: Ledger
    _records: dict[str, AssignmentRecord]
    _expiry: list[tuple[float, str]]
    _live: LiveStep
    _timeline: list[tuple[float, float, int]]
    _prepared: tuple[tuple[str, ...], Rebuild] | None
    _log_items: list[int]
    _log_workers: list[int]
    _log_labels: list[int]
    _log_costs: list[float]

    def _worker(self, worker_id: str) -> int:
        raise NotImplementedError  # the campaign's

    def _extend_items(self, new_items: list[str], attributes: dict[str, Any]) -> None:
        raise NotImplementedError  # the campaign's

    def _install(
        self, new_items: Sequence[str], rebuilt: Rebuild, attributes: dict[str, Any] | None = None
    ) -> None:
        raise NotImplementedError  # the campaign's

    def _pair(self, item: int, worker: int) -> int | None:
        raise NotImplementedError  # the campaign's

    def _start_control(self) -> None:
        raise NotImplementedError  # the control mixin's

    def _apply(self, event: StoredEvent, *, own: bool = False) -> None:
        """Apply one event (``own``: this object wrote it, and asked its questions)."""
        handler = getattr(self, f"_on_{event.kind}")
        # the policy's keys taken out and replayed
        handler(replayed(cast("Campaign", self), event, own=own))
        self._seq = event.seq
        if event.kind in EVALUATION_EVENTS:
            self._evaluation_events += 1
        elif event.kind != "workers_added" or self._push:
            # the allocation state changed: an earlier "no work" may no longer hold (in pull
            # mode a joining worker changes nothing for the others)
            self._no_work.clear()
        if event.kind in ("labeled", "imported"):
            spent = float(self._ledger.spent)
            self._timeline.append((event.created_at, spent, len(self._log_items)))

    def _on_created(self, p: dict[str, Any]) -> None:
        self.config = CampaignConfig(**p)
        # a policy id that names its verdict (``…:verdict=ds``, or the first build's
        # ``…:final=ds``) gives the campaign's verdict when none was set apart
        named = split_verdict(self.config.policy, POSTERIOR)[1]
        if self.config.verdict == POSTERIOR and not named.is_posterior:
            self.config = replace(self.config, verdict=named.name)
        self.item_ids: list[str] = []
        self._item_index: dict[str, int] = {}
        self.worker_ids: list[str] = []
        self._worker_index: dict[str, int] = {}
        self._class_index = {c: k for k, c in enumerate(self.config.classes)}
        self._ledger = Ledger.of(self.config.budget)
        self._records: dict[str, AssignmentRecord] = {}
        self._expiry: list[tuple[float, str]] = []
        # the live rules' bookkeeping: workers' own and pending items, busy and saturated ones
        self._live = LiveStep(
            self.config.max_labels_per_item,
            affords=lambda price: self._ledger.can_afford(price),
            pair_of=self._pair,
        )
        self._log_items: list[int] = []
        self._log_workers: list[int] = []
        self._log_labels: list[int] = []
        self._log_costs: list[float] = []
        self._timeline: list[tuple[float, float, int]] = []  # (time, spent, labels) per event
        # per-item attributes of the items installed so far (None: the campaign has none)
        self._item_contexts: list[int] | None = None if self.config.contexts is None else []
        self._item_features: list[list[float]] | None = None if self.config.features is None else []
        # a policy that models workers gets worker slots in its problem (module docstring);
        # so does one that chooses workers in push mode (``kos``): it must choose among the
        # team, not among workers of its own invention
        capabilities = parse_policy(self.config.policy).capabilities
        self._push = self.config.mode == "push"
        self._models_workers = capabilities.needs_workers or (
            self._push and capabilities.chooses_workers
        )
        self._worker_slots = 0
        # push mode with listed pairs: (item, worker) -> pair index (built in _rebuild)
        self._pair_lookup: dict[tuple[int, int], int] = {}
        for worker_id in self.config.workers:
            self._worker(worker_id)
        self._extend_items(self.config.items, self._attributes_of(p))
        self._start_control()

    @staticmethod
    def _attributes_of(p: dict[str, Any]) -> dict[str, Any]:
        """The per-item attributes (contexts, features) an event's payload carries."""
        return {k: p[k] for k in ("contexts", "features") if p.get(k) is not None}

    def _on_items_added(self, p: dict[str, Any]) -> None:
        new = tuple(p["items"])
        attributes = self._attributes_of(p)
        prepared = self._prepared
        self._prepared = None
        if prepared is not None and prepared[0] == new:
            self._install(new, prepared[1], attributes)
        else:
            self._extend_items(list(new), attributes)

    def _on_workers_added(self, p: dict[str, Any]) -> None:
        for worker_id in p["workers"]:
            self._worker(worker_id)

    def _on_assigned(self, p: dict[str, Any]) -> None:
        worker = self._worker(p["worker"])
        record = AssignmentRecord(p["item"], worker, p["price"], p["expires_at"])
        self._records[p["id"]] = record
        assignment = Assignment(record.item, worker, record.price)
        self.state.record_assignment(assignment)
        self._ledger.commit(record.price)
        self._live.assigned(self.state, p["id"], assignment)
        if record.expires_at is not None:
            heapq.heappush(self._expiry, (record.expires_at, p["id"]))

    def _on_labeled(self, p: dict[str, Any]) -> None:
        record = self._records[p["id"]]
        record.status, record.label = "answered", int(p["label"])
        self._ledger.settle(record.price)
        if "worker" in p:  # answered by another worker than the holder (an open slot)
            return apply_answer(cast("Campaign", self), p["id"], record, p)
        self._observe(record.item, record.worker, record.label, record.price, key=p["id"])

    def _on_released(self, p: dict[str, Any]) -> None:
        record = self._records[p["id"]]
        record.status = p["reason"]
        assignment = Assignment(record.item, record.worker, record.price)
        self.state.release_assignment(assignment)
        self._ledger.release(record.price)
        self._live.released(self.state, p["id"], assignment)

    def _on_settings_changed(self, p: dict[str, Any]) -> None:
        self.config = replace(self.config, **p)

    def _on_no_work(self, p: dict[str, Any]) -> None:
        """Nothing to apply: the questions it logged were asked again (``problem_build``)."""

    @property
    def _policy_seq(self) -> int:
        """The event count that seeds the policy's generator: every event but the gold ones,
        so a campaign with gold makes exactly the decisions it makes without."""
        return self._seq - self._evaluation_events

    def _on_imported(self, p: dict[str, Any]) -> None:
        for item, worker_id, label in p["rows"]:
            worker = self._worker(worker_id)
            self._observe(int(item), worker, int(label), 0.0, key=None)

    def _observe(self, item: int, worker: int, label: int, cost: float, *, key: str | None) -> None:
        """A label: the answer to the pending assignment ``key``, or imported (None)."""
        event = LabelEvent(item=item, worker=worker, label=label, cost=cost)
        pending = key is not None
        self.state.record_label(event, Assignment(item, worker, cost) if pending else None)
        self.policy.observe(event)
        self._log_items.append(item)
        self._log_workers.append(worker)
        self._log_labels.append(label)
        self._log_costs.append(cost)
        self._live.labeled(self.state, event, key)
