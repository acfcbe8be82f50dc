"""The live step: the rules by which a campaign hands out work and settles it (DESIGN §11).

One :class:`LiveStep` holds what the live rules need beyond the :class:`CampaignState`: each
worker's own items (held or labeled), each worker's pending work (oldest first), the labels
each worker gave, the items with work pending (*busy*) and the items whose pending work fills
their label cap (*saturated*). Two callers, one set of rules:

- a live :class:`~crowdbudget.campaign.Campaign` calls :meth:`LiveStep.assign` /
  :meth:`LiveStep.push` from ``next_assignment`` / ``push_assignments`` and the settling
  methods from its event handlers (assigned, labeled, released, imported);
- :func:`crowdbudget.engine.loop.drive` calls the same methods on every arrival and
  completion when given :class:`LiveRules` (prices, capacities, a label cap, a pending limit,
  a time-to-live), so a simulated campaign follows the live rules.

The rules of one question (pull mode, a worker asks):

1. the worker's price must be affordable (``budget``);
2. a worker holding ``max_pending_per_worker`` assignments gets their oldest one again
   (no decision);
3. a worker at their capacity (labels given + pending) gets nothing (``capacity``);
4. the policy is asked **once** with the worker's own items and the saturated items closed
   and the busy items last (``state.availability``: a policy that searches does so through
   :meth:`~crowdbudget.types.Availability.search`); an answer naming a closed item is no
   answer (``done``); no answer is ``done`` when no open item is left, else ``policy``.

Push mode (the policy picks the worker): the policy is asked once with the busy items last; its
(item, worker) is refused when the worker cannot pay, holds the item already, is at the
pending limit or at capacity, or the item is saturated.

A label cap ``C``: an item with ``C`` labels received leaves ``eligible`` for good; one whose
received + pending labels reach ``C`` is closed until a pending one is released.

Control tasks (``LiveRules.control``, a :class:`~crowdbudget.engine.control.ControlLedger`;
rule in :mod:`crowdbudget.engine.control`): the control items are closed to the policy; in
pull mode, after rules 1–3, a blocked worker gets nothing (``blocked``) and a worker whose
next task is a control task gets a control item (the policy is not asked); in push mode a
control task due on the campaign's count goes to no named worker before the policy is
asked (a simulated campaign: the world picks who answers), or, in a live campaign whose
assignments name their worker, to the team worker whose own next task is a control task
(:meth:`LiveStep.control_for_team`); a pair naming a blocked worker is refused
(``blocked``). Every label of a control
item is evidence on its worker. The campaign is exhausted when no item outside the control
items is eligible, or every worker is blocked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from crowdbudget.engine.control import BlockEvidence, ControlLedger
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.types import Assignment, CampaignState, LabelEvent


def policy_blocks(policy: object) -> Mapping[int, Mapping[str, Any]]:
    """The workers ``policy`` blocked by its own rule, with its evidence (``{worker: {name:
    number or string}}``): a policy's ``worker_blocks()`` (Requallo's spammer test, Li et
    al. WSDM 2016 §3.2), empty for a policy without one. The live rules make each one a
    block like the control rule's (:meth:`LiveStep.adopt_policy_blocks`; a live campaign
    records it as a ``worker_blocked`` event ``by: policy``), so every rule blocks through
    one ledger."""
    blocks = getattr(policy, "worker_blocks", None)
    return blocks() if callable(blocks) else {}


class Policy(Protocol):
    """What the live step asks of a policy: ``select`` (an
    :class:`~crowdbudget.policies.base.AllocationPolicy` is one)."""

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None: ...


@dataclass(frozen=True)
class LiveRules:
    """The live rules of a simulated campaign, by worker index (a live campaign reads its
    own from its configuration).

    Attributes:
        worker_prices: price of one label per worker (absent: ``default_price``).
        default_price: the price of a worker without one.
        worker_capacities: labels a worker may give in all, pending ones included (absent:
            unlimited).
        max_labels_per_item: the label cap per item (None: none).
        max_pending_per_worker: assignments one worker may hold unanswered (None: any).
        ttl: work not answered within ``ttl`` of being handed out expires and is released
            (None: never).
        pair_of: the index of (item, worker) in ``state.pairs`` when each pair may be asked
            once (a push campaign's pairs; :class:`LiveStep`), None: the world keeps them.
        control: the campaign's control tasks and their ledger (None: none); the ledger is
            the one campaign's record (served tasks, control answers, blocked workers).
    """

    worker_prices: Mapping[int, float] = field(default_factory=dict)
    default_price: float = 1.0
    worker_capacities: Mapping[int, int] = field(default_factory=dict)
    max_labels_per_item: int | None = None
    max_pending_per_worker: int | None = None
    ttl: float | None = None
    pair_of: Callable[[int, int], int | None] | None = None
    control: ControlLedger | None = None

    def __post_init__(self) -> None:
        if self.ttl is not None and not self.ttl > 0:
            raise InvalidParameterError(f"ttl must be > 0, got {self.ttl!r}")

    def price_of(self, worker: int | None) -> float:
        """The price of one label from ``worker``."""
        return (
            self.default_price
            if worker is None
            else self.worker_prices.get(worker, self.default_price)
        )

    @property
    def cheapest_price(self) -> float:
        """The lowest price any worker can have."""
        return min([self.default_price, *self.worker_prices.values()])

    def capacity_of(self, worker: int | None) -> int | None:
        """``worker``'s capacity (None: unlimited)."""
        return None if worker is None else self.worker_capacities.get(worker)


@dataclass(frozen=True)
class Decision:
    """The live step's answer to one question.

    ``assignment``: the work to hand out (its price the worker's), or None. ``worker``: the
    asking (pull) or chosen (push) worker's index, None when unknown. ``held``: the key of the
    worker's oldest pending assignment when they are at the pending limit (handed out again;
    nothing new). ``cause``: why there is no assignment — ``budget``, ``capacity``, ``done``
    (every open item is the worker's, or the policy named one of theirs), ``policy`` (the
    policy had nothing although items are open) or, in push mode, ``refused`` (the policy's
    pair cannot be given now) and None (the policy chose no pair).
    """

    assignment: Assignment | None
    worker: int | None = None
    held: Hashable | None = None
    cause: str | None = None


class LiveStep:
    """The live rules' bookkeeping and questions (module docstring).

    Parameters:
        max_labels_per_item: the label cap (None: none).
        affords: ``affords(price)``: whether one more label at ``price`` fits the budget
            (None: ``state.can_afford``; a live campaign passes its exact ledger's).
        pair_of: ``pair_of(item, worker)``: the index of the pair in ``state.pairs`` (None:
            not listed), when each pair may be asked once — a live push campaign's pairs: a
            pair is taken when assigned or labeled (imported) and given back when released.
            None: the step leaves ``state.pairs`` alone (a replay's world keeps its own).

    Attributes (read them, the methods keep them):
        worker_items: worker -> the items they hold or labeled.
        worker_pending: worker -> their pending assignments' keys, oldest first.
        labels_by_worker: worker -> labels received from them.
        busy: items with pending work.
        saturated: items whose received + pending labels reach the label cap.
        control: the control tasks' ledger (None: none; :meth:`under` takes it from the
            rules).
    """

    def __init__(
        self,
        max_labels_per_item: int | None = None,
        affords: Callable[[float], bool] | None = None,
        pair_of: Callable[[int, int], int | None] | None = None,
    ) -> None:
        self.max_labels_per_item = max_labels_per_item
        self._affords = affords
        self._pair_of = pair_of
        self.worker_items: dict[int, set[int]] = {}
        self.worker_pending: dict[int, dict[Hashable, None]] = {}
        self.labels_by_worker: dict[int, int] = {}
        self.busy: set[int] = set()
        self.saturated: set[int] = set()
        self.control: ControlLedger | None = None

    # ------------------------------------------------------------------------ questions
    def affords(self, state: CampaignState, price: float) -> bool:
        """Whether one more label at ``price`` fits the budget."""
        return state.can_afford(price) if self._affords is None else self._affords(price)

    def held(self, worker: int | None, max_pending: int | None) -> Hashable | None:
        """The worker's oldest pending assignment if they hold ``max_pending`` already."""
        if max_pending is None or worker is None:
            return None
        pending = self.worker_pending.get(worker)
        if not pending or len(pending) < max_pending:
            return None
        return next(iter(pending))

    def has_capacity(self, worker: int | None, capacity: int | None) -> bool:
        """Whether ``worker`` may take one more assignment (labels given and pending count
        against ``capacity``; None: unlimited)."""
        if capacity is None:
            return True
        if worker is None:
            return capacity > 0
        given = self.labels_by_worker.get(worker, 0)
        return given + len(self.worker_pending.get(worker, ())) < capacity

    def assign(
        self,
        policy: Policy,
        state: CampaignState,
        worker: int | None,
        *,
        price: float,
        capacity: int | None = None,
        max_pending: int | None = None,
    ) -> Decision:
        """Pull mode: the work for ``worker`` (None: a worker the policy does not know yet)
        at ``price``, under the rules of the module docstring."""
        if not self.affords(state, price):
            return Decision(None, worker, cause="budget")
        held = self.held(worker, max_pending)
        if held is not None:
            return Decision(None, worker, held=held)
        if not self.has_capacity(worker, capacity):
            return Decision(None, worker, cause="capacity")
        closed = self.worker_items.get(worker, set()) if worker is not None else set()
        if self.saturated:
            closed = closed | self.saturated
        control = self.control
        if control is not None:
            if control.is_blocked(worker):
                return Decision(None, worker, cause="blocked")
            if control.due(worker):
                item = control.pick(state, worker, closed)
                if item is not None:
                    return Decision(Assignment(item, worker, price), worker)
            closed = closed | control.item_set
        availability = state.availability
        # the policy is told who asks (e.g. Requallo refuses a worker it blocked)
        with availability.question(closed, self.busy, worker_items=self.worker_items):
            choice = policy.select(state, worker=worker)
            if choice is None or choice.item in closed:
                # the policy offered an item the worker has (a new worker could take it),
                # every open item is the worker's, or the policy itself had nothing
                named_closed = choice is not None
                cause = "done" if named_closed or not availability.any_open() else "policy"
                return Decision(None, worker, cause=cause)
        return Decision(Assignment(choice.item, worker, price), worker)

    def push(
        self,
        policy: Policy,
        state: CampaignState,
        *,
        price_of: Callable[[int], float],
        capacity_of: Callable[[int], int | None],
        max_pending: int | None = None,
        team: int = 0,
    ) -> Decision:
        """Push mode: the policy's next (item, worker), asked once with the busy items last,
        or None (``cause`` None: the policy chose no pair; ``refused``: its pair cannot be
        given now — the worker cannot pay, holds the item, is at the pending limit or at
        capacity, or the item is saturated).

        With control tasks (a live campaign's: ``team`` workers, indices 0 … team − 1): a
        control task for the team worker the rule says is due (:meth:`control_for_team`)
        before the policy is asked; the policy is asked with the control items closed, and
        a pair naming a blocked worker is refused (``blocked``)."""
        control = self.control
        if control is not None and team:
            due = self.control_for_team(
                state, team, price_of=price_of, capacity_of=capacity_of, max_pending=max_pending
            )
            if due is not None:
                return due
        closed = control.item_set if control is not None else set()
        # with control tasks the policy may read the blocked workers (their pairs are
        # closed in a live campaign too; a planner re-plans their edges: kos)
        blocked = control.blocked if control is not None else ()
        with state.availability.question(closed, self.busy, blocked=blocked):
            choice = policy.select(state)
        if choice is None or choice.worker is None:
            return Decision(None)
        worker = choice.worker
        if control is not None:
            if choice.item in control.item_set:  # closed to the policy: no answer
                return Decision(None, worker, cause="refused")
            if control.is_blocked(worker):
                return Decision(None, worker, cause="blocked")
        price = price_of(worker)
        if (
            not self.affords(state, price)
            or choice.item in self.worker_items.get(worker, ())
            or self.held(worker, max_pending) is not None
            or not self.has_capacity(worker, capacity_of(worker))
            or (self.max_labels_per_item is not None and choice.item in self.saturated)
        ):
            return Decision(None, worker, cause="refused")
        return Decision(Assignment(choice.item, worker, price), worker)

    def control_for_team(
        self,
        state: CampaignState,
        team: int,
        *,
        price_of: Callable[[int], float],
        capacity_of: Callable[[int], int | None],
        max_pending: int | None = None,
    ) -> Decision | None:
        """Push mode with a named team (a live campaign: an assignment names its worker):
        a control task for the worker whose next task the rule says is one
        (:meth:`ControlLedger.due`, the pull rule on the worker's own count), or None.

        Candidates: the team workers not blocked who can take one more task (price,
        pending limit, capacity), fewest tasks served first (ties: the lowest index), so
        every new worker gets their first ``first_k`` before anyone's later ones; the first
        who is due and has a control item open to them (not theirs, not saturated, their
        pair not taken or unlisted: :meth:`ControlLedger.pick`) gets it. O(team log team)
        plus one rule evaluation per candidate tried."""
        control = self.control
        assert control is not None  # the caller checks
        order = sorted(range(team), key=lambda w: (control.served.get(w, 0), w))
        for worker in order:
            if (
                control.is_blocked(worker)
                or not self.affords(state, price_of(worker))
                or self.held(worker, max_pending) is not None
                or not self.has_capacity(worker, capacity_of(worker))
                or not control.due(worker)
            ):
                continue
            closed = self.worker_items.get(worker, set()) | self.saturated
            closed = closed | self._pairs_closed(state, control.item_set, worker)
            item = control.pick(state, worker, closed)
            if item is not None:
                return Decision(Assignment(item, worker, price_of(worker)), worker)
        return None

    def _pairs_closed(self, state: CampaignState, items: set[int], worker: int) -> set[int]:
        """Of ``items``, those whose pair with ``worker`` may not be asked (not listed, or
        taken) when pairs are taken once (``pair_of``); empty otherwise."""
        pairs = state.pairs
        if pairs is None or self._pair_of is None:
            return set()
        shut = set()
        for item in items:
            k = self._pair_of(item, worker)
            if k is None or pairs.remaining[k] <= 0:
                shut.add(item)
        return shut

    def under(
        self,
        rules: LiveRules,
        policy: Policy,
        state: CampaignState,
        worker: int | None,
        *,
        pull: bool,
    ) -> Decision:
        """One arrival of a simulated campaign under ``rules`` (prices, capacities and the
        pending limit by worker index): :meth:`assign` for ``worker`` (pull) or :meth:`push`
        (with control tasks: :meth:`push_with_control`)."""
        if rules.control is not None and self.control is None:
            self.control = rules.control
        if self.control is not None:
            self.adopt_policy_blocks(policy, float(state.spent))
        if not pull and self.control is not None:
            return self.push_with_control(rules, policy, state)
        if pull:
            return self.assign(
                policy,
                state,
                worker,
                price=rules.price_of(worker),
                capacity=rules.capacity_of(worker),
                max_pending=rules.max_pending_per_worker,
            )
        return self.push(
            policy,
            state,
            price_of=rules.price_of,
            capacity_of=rules.capacity_of,
            max_pending=rules.max_pending_per_worker,
        )

    def push_with_control(self, rules: LiveRules, policy: Policy, state: CampaignState) -> Decision:
        """Push mode with control tasks (module docstring): a control task due on the
        campaign's count goes to no named worker (the world picks one) at the default price;
        else the policy is asked with the control items closed and the busy items last; an
        item-only answer is given at the default price, a pair under :meth:`push`'s checks,
        refused (``blocked``) when it names a blocked worker."""
        control = self.control
        assert control is not None  # under() sets it before calling here
        price = rules.default_price
        if control.due_in_push():
            item = control.pick(state, None, self.saturated)
            if item is not None:
                if not self.affords(state, price):
                    return Decision(None, cause="budget")
                return Decision(Assignment(item, None, price))
        # the policy may read the blocked workers and each worker's items (``pair_open``)
        with state.availability.question(
            control.item_set, self.busy, blocked=control.blocked, worker_items=self.worker_items
        ):
            choice = policy.select(state)
        if choice is None:
            return Decision(None)
        if choice.item in control.item_set:  # closed to the policy: no answer
            return Decision(None, choice.worker, cause="refused")
        worker = choice.worker
        if worker is None:
            if not self.affords(state, price) or choice.item in self.saturated:
                return Decision(None, cause="refused")
            return Decision(Assignment(choice.item, None, price))
        if control.is_blocked(worker):
            return Decision(None, worker, cause="blocked")
        price = rules.price_of(worker)
        if (
            not self.affords(state, price)
            or choice.item in self.worker_items.get(worker, ())
            or self.held(worker, rules.max_pending_per_worker) is not None
            or not self.has_capacity(worker, rules.capacity_of(worker))
            or choice.item in self.saturated
        ):
            return Decision(None, worker, cause="refused")
        return Decision(Assignment(choice.item, worker, price), worker)

    def adopt_policy_blocks(self, policy: object, spent: float) -> list[int]:
        """Make the policy's own blocks (:func:`policy_blocks`) blocks of the control ledger,
        with the worker's control answers as the ledger's evidence (the policy's is its
        own); returns the workers newly blocked. A simulated campaign calls it before every
        question; a live campaign records each as an event instead."""
        control = self.control
        if control is None:
            return []
        new = [w for w in sorted(policy_blocks(policy)) if w not in control.blocked]
        for worker in new:
            c, n = control.correct.get(worker, 0), control.answered.get(worker, 0)
            control.blocked[worker] = BlockEvidence(c, n, math.nan, math.nan, spent)
        return new

    def exhausted(self, state: CampaignState, rules: LiveRules) -> bool:
        """Whether no worker can be given anything any more: the budget left pays for no
        label at the cheapest price, or no item is eligible (with control tasks: no item
        outside the control items, or every worker is blocked)."""
        if not state.can_afford(rules.cheapest_price) or not state.eligible.any():
            return True
        control = self.control
        if control is None:
            return False
        outside = state.eligible.copy()
        outside[control.items] = False
        return not outside.any() or control.all_blocked()

    # ------------------------------------------------------------------------ settling
    def assigned(self, state: CampaignState, key: Hashable, assignment: Assignment) -> None:
        """``assignment`` (recorded in ``state`` already) was handed out under ``key``."""
        item, worker = assignment.item, assignment.worker
        self._use_pair(state, item, worker, 1)
        if worker is not None:
            self.worker_items.setdefault(worker, set()).add(item)
            self.worker_pending.setdefault(worker, {})[key] = None
        if self.control is not None:
            self.control.handed(worker, item)
        self._check(state, item)

    def settled(self, worker: int | None, key: Hashable) -> None:
        """The pending assignment ``key`` of ``worker`` is answered or released."""
        if worker is not None:
            self.worker_pending.get(worker, {}).pop(key, None)

    def labeled(self, state: CampaignState, event: LabelEvent, key: Hashable = None) -> None:
        """``event`` (recorded in ``state`` already) came back: the answer to the pending
        assignment ``key``, or (``key`` None) a label imported from elsewhere, which makes the
        item the worker's own."""
        if key is None:
            self._use_pair(state, event.item, event.worker, 1)
            self.worker_items.setdefault(event.worker, set()).add(event.item)
        else:
            self.settled(event.worker, key)
        self.labels_by_worker[event.worker] = self.labels_by_worker.get(event.worker, 0) + 1
        if self.control is not None:
            self.control.answer(event.worker, event.item, event.label, float(state.spent))
        self._check(state, event.item)

    def released(self, state: CampaignState, key: Hashable, assignment: Assignment) -> None:
        """The pending ``assignment`` (released in ``state`` already) was cancelled or
        expired: the item is no longer the worker's."""
        self.settled(assignment.worker, key)
        self._use_pair(state, assignment.item, assignment.worker, -1)
        if assignment.worker is not None:
            self.worker_items.get(assignment.worker, set()).discard(assignment.item)
        self._check(state, assignment.item)

    def _use_pair(self, state: CampaignState, item: int, worker: int | None, n: int) -> None:
        """Take (n = 1) or give back (n = −1) the pair (item, worker) when pairs are taken
        once (``pair_of``). (Worker-aware KG does not rescore a pair while it is taken; one
        given back keeps its score until the next label of its item or worker rescores it.)"""
        pairs = state.pairs
        if pairs is None or self._pair_of is None or worker is None:
            return
        k = self._pair_of(item, worker)
        if k is not None:
            pairs.remaining[k] = max(0, int(pairs.remaining[k]) - n)

    def _check(self, state: CampaignState, item: int) -> None:
        """Keep the label cap and the busy set for ``item``."""
        cap = self.max_labels_per_item
        if cap is not None:
            received = int(state.label_counts[item].sum())
            if received >= cap:
                state.eligible[item] = False
                self.saturated.discard(item)
            elif received + int(state.pending[item]) >= cap:
                self.saturated.add(item)
            else:
                self.saturated.discard(item)
        if state.pending[item] > 0:
            self.busy.add(item)
        else:
            self.busy.discard(item)
