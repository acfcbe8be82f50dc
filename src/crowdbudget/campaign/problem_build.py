"""The problem a live campaign's policy runs on, and the rebuild that resets the policy on a
larger one (DESIGN §5, §11).

A campaign's policy runs on a :class:`~crowdbudget.types.Problem` with a
:class:`~crowdbudget.types.CampaignState`, as in simulations: the campaign's items (with
their ``contexts`` and ``features`` when it has them), its classes, budget and prior, and the
cheapest price a worker can have as ``Problem.default_price`` — the campaign checks the
asking worker's real price first (the live step, :mod:`crowdbudget.engine.live`), so the
policy never refuses a label the campaign can pay for (budget 1 at 0.1 a label: 10 labels).

**Workers and slots.** A policy that models workers (``opt-kg:posterior=one-coin``,
``bbta``, …: capability ``needs_workers``; in push mode also one that chooses workers, such
as ``kos``, so that it chooses among the team rather than among workers of its own invention)
gets a :class:`~crowdbudget.types.WorkerSpec`. Workers join a live campaign over time, so in
pull mode the problem holds *worker slots*: the campaign's workers (indices in order of
joining, the ``workers`` given at creation first) and, above them, slots nobody holds yet — a
power of two, at least 4 (:func:`slots_wanted`). When a worker joins beyond the last slot the
slots double and the policy is rebuilt, so joining costs O(labels · log n_workers) over the
whole campaign rather than a rebuild per worker. An unheld slot never labels anything, so it
changes no posterior; and the campaign only asks the policy on behalf of a real worker (pull
mode, or push for a named team), so no assignment ever goes to an unheld slot. Pull mode
gives the count only (the campaign checks prices and capacities before asking the policy).

**Push mode** (``mode="push"``: the policy chooses the worker as well as the item;
B-KUBE-like and BBTA-like policies, worker-aware Opt-KG; the requester dispatches each (item,
worker) assignment): the problem has exactly the campaign's workers (no unheld slots: a
joining worker rebuilds the policy, which suits a managed team), with their prices when they
differ and their capacities when any is set (:func:`worker_spec`), and the state lists the
(item, worker) pairs that may still be asked (:class:`~crowdbudget.types.PairAvailability`,
the structure a replay uses; :func:`available_pairs`): every item with every worker, or the
``pairs`` given at creation (a qualification table, or the recorded pairs of a data set being
replayed live), each usable once — a worker labels an item at most once.

**The rebuild** (:func:`rebuild`, on ``created``, ``items_added`` and a worker joining past
the last slot): a new problem and state with the new items appended (counts, pending work,
eligibility, spending and the label log carried over; capacities left reduced by the labels
given and the pending work), and a new policy reset on the problem and then shown every label
again, in order. It changes nothing in the campaign, so a policy refusing the larger problem
raises before the event is stored (validate, then commit).

**Policy randomness.** The rebuilt policy's generator is ``default_rng([seed, n])``, n the
campaign's event count then, gold events not counted (they are no part of the allocation, so
uploading gold never changes an allocation); a created campaign starts the stream from its
event count (:func:`policy_rng`), and the stream then runs on through every decision, as the
offline engine's does. Decisions draw from it without writing an event (a worker answered
with nothing may have cost a tie draw), so the event count alone cannot say where it stands:
the allocation's events carry its state (``"rng"``, :func:`stream_state`, whenever it moved
since the last one), and a replay sets it back (:func:`restore_stream`) before applying each.
So a reloaded campaign makes the decisions the never-restarted process would have made —
unless draws were made after the last event carrying a state (a request answered with
nothing just before the restart), or the store predates stream states (then the stream
restarts at the event count: valid draws of the policy, not the same ones).

**Select-side state.** Some policies change in ``select`` state that ``observe`` does not
rebuild (round-robin's queue, the Lagrangian index's bucket order, the plan positions of
KOS, BBTA, B-KUBE, the ε-first family, CrowdSense and IEThresh, …; they declare
``keeps_select_state``), so a replay of the labels alone does not give them back. For such a
policy the campaign logs every question that reached ``select`` — the asking worker's id in
pull mode, None for a push — in the event that follows it (``"asked"``, :class:`QuestionLog`):
the ``assigned`` event that answers it (``[question]``), or, for a request answered with
nothing, the next event the campaign stores (``[question, n]``: n such questions in a row).
The first request answered with nothing after any other event writes that event itself
(``no_work``, with the stream state; not in the policy's event count, so it moves no
generator's seed), and so does a log that has grown to :data:`PENDING_RUNS` runs; the
requests between wait for the next event. So a worker polling a campaign with nothing open
adds at most one event per change of the campaign (and one per 64 alternations of askers),
and a restart loses at most the polls since the last event — the stream's hole above,
widened to such polls: a reload then decides validly, not necessarily as the running process
would have. A replay asks those questions
again, through the same live step, before applying the event: the campaign's state then is
the one they were asked in (every change of it is an event), and the stream stands where it
stood, so the policy makes the same choices, draws the same numbers and changes the same
state. Each replayed answer is checked against the log (nothing, or the event's own item and
worker) and the stream against the event's ``"rng"``; a difference — a store written by
other policy code — is counted (:attr:`QuestionLog.mismatches`) and warned about once, and
the store stays the truth: the logged event is applied, the policy keeps the state its
replayed questions gave it (what a campaign of that policy could have reached), and later
decisions are valid ones of the policy, not the ones the writer would have made. Nothing is
restored from the store into the policy: a log holds questions only, which the server
writes itself (no payload a client sends carries a key of its own), and even a forged one
could only ask the policy questions it might have been asked. Not logged: a decision
steered by a stand-in (``integrations.crowd_choice.steered``), so a policy the stand-in
itself asked is not asked again on a reload; and a copy that asks questions of its own and
then refreshes from another writer's events holds state the store does not describe.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from crowdbudget.campaign.config import CampaignConfig
from crowdbudget.engine.live import Decision, Policy
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.registry import make_policy, split_verdict
from crowdbudget.types import (
    Assignment,
    CampaignState,
    FloatArray,
    IntArray,
    LabelEvent,
    PairAvailability,
    Problem,
    WorkerSpec,
)

if TYPE_CHECKING:
    from crowdbudget.campaign.campaign import Campaign
    from crowdbudget.campaign.store import StoredEvent

#: a worker's capacity when the requester sets none: more labels than any campaign buys
UNLIMITED = 2**40


@dataclass(frozen=True, slots=True)
class Rebuild:
    """What :func:`rebuild` computes: the campaign's problem, state and policy, and in push
    mode with listed pairs the index of each (item, worker) pair in ``state.pairs``."""

    problem: Problem
    state: CampaignState
    policy: AllocationPolicy
    pair_lookup: dict[tuple[int, int], int]
    #: the generator the policy was reset with (it may keep it under another name than
    #: ``rng_``, as worker-aware Opt-KG does: both are part of the campaign's stream state)
    rng: np.random.Generator


def policy_rng(config: CampaignConfig, policy_seq: int) -> np.random.Generator:
    """The policy's generator at event count ``policy_seq`` (gold events not counted)."""
    return np.random.default_rng([config.seed, policy_seq])


def stream_state(generators: Sequence[np.random.Generator]) -> list[list[Any]] | None:
    """The state of each generator, JSON-ready: ``[state, inc, has_uint32, uinteger]`` of its
    PCG64 bit generator (the 128-bit words as hex strings, so no JSON reader rounds them);
    None when one is not a PCG64 (then the campaign stores no stream state)."""
    out: list[list[Any]] = []
    for generator in generators:
        state = generator.bit_generator.state
        if state.get("bit_generator") != "PCG64":
            return None
        words = state["state"]
        out.append([hex(words["state"]), hex(words["inc"]), state["has_uint32"], state["uinteger"]])
    return out


def restore_stream(generators: Sequence[np.random.Generator], saved: list[list[Any]]) -> None:
    """Set each generator, in place, to its :func:`stream_state` entry in ``saved``: in place,
    because the policy may hold the same generator under several names (or a pointer to its
    bit generator's state, as the Lagrangian index does), and all of them must see it."""
    for generator, (words, inc, has_uint32, uinteger) in zip(generators, saved, strict=True):
        generator.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": int(words, 16), "inc": int(inc, 16)},
            "has_uint32": int(has_uint32),
            "uinteger": int(uinteger),
        }


#: events of the allocation, which carry the policy's stream state when it moved since the
#: last one (``"rng"``); gold and control events follow an allocation event with no decision
#: between, or change no decision
STREAM_EVENTS = frozenset(
    {
        "assigned",
        "labeled",
        "released",
        "imported",
        "items_added",
        "workers_added",
        "settings_changed",
        "no_work",
    }
)


class PolicyStream:
    """A campaign's policy's random stream in its events (module docstring): the generators
    that are the stream — the one the policy was reset with and its ``rng_`` (the same object
    after a rebuild, two after create or load), kept here rather than read off the policy,
    which a caller may wrap for a while (``integrations.crowd_choice.steered``) — the state
    the last event carried (None: none since the last rebuild), and whether a replayed event
    carried one (else a load restarts the stream)."""

    def __init__(self) -> None:
        self.generators: list[np.random.Generator] = []
        self.last: list[list[Any]] | None = None
        self.restored = False

    def start(self, policy: AllocationPolicy, config: CampaignConfig, policy_seq: int) -> None:
        """Start ``policy.rng_`` at the event count (create; a load of an old store)."""
        policy.rng_ = policy_rng(config, policy_seq)
        self.generators = [policy.rng_, *self.generators[1:]]

    def rebuilt(self, rng: np.random.Generator) -> None:
        """A new policy, reset with ``rng`` (its ``rng_``): its stream starts afresh."""
        self.generators, self.last = [rng, rng], None

    def tagged(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` with the stream state, if it moved since the last event carried it."""
        state = stream_state(self.generators)
        if state is None or state == self.last:
            return payload
        return {**payload, "rng": state}

    def restore(self, saved: list[list[Any]]) -> None:
        """Set the stream to an event's state (in the process that wrote it: no change)."""
        restore_stream(self.generators, saved)
        self.last, self.restored = saved, True


#: the payload key of the questions asked of a policy that keeps select-side state
QUESTIONS = "asked"
#: the event of a request the live step answered with nothing after asking such a policy
NO_WORK = "no_work"
#: runs of questions answered with nothing that a log holds before they need an event of
#: their own (a bound on one payload and on the events a polling worker can make the store hold)
PENDING_RUNS = 64


class _Asking:
    """A policy as the live step sees it during one question: notes whether ``select`` was
    called (the live step may answer without asking: budget, a pending limit, a control
    task)."""

    __slots__ = ("asked", "policy")

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.asked = False

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        self.asked = True
        return self.policy.select(state, worker=worker)


class QuestionLog:
    """The questions asked of a policy that keeps select-side state, in the campaign's events
    (module docstring, "Select-side state"): ``entries`` are ``[question, n]`` — n questions
    in a row answered with nothing — and ``answered`` the ``[question]`` the next event, an
    ``assigned`` one, answers. A question is the asking worker's id (pull) or None (push)."""

    def __init__(self) -> None:
        self.entries: list[list[Any]] = []
        self.answered: list[Any] | None = None
        #: a ``no_work`` event was stored since the campaign's last other event
        self.no_work_stored = False
        #: replayed questions whose answer, or the stream after them, differed from the log
        self.mismatches = 0

    @staticmethod
    def asking(policy: Policy) -> Policy:
        """What the live step asks for one question: ``policy`` itself, or, when it keeps
        select-side state, a stand-in noting whether it was asked."""
        return _Asking(policy) if getattr(policy, "keeps_select_state", False) else policy

    def asked(self, asking: Policy, question: str | None, *, answered: bool) -> None:
        """Log ``question`` if :meth:`asking`'s stand-in reached ``select``; ``answered``:
        the decision is an assignment (its ``assigned`` event is the next one)."""
        if not isinstance(asking, _Asking) or not asking.asked:
            return
        if answered:
            self.answered = [question]
        elif self.entries and self.entries[-1][0] == question:
            self.entries[-1][1] += 1
        else:
            self.entries.append([question, 1])

    def tagged(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` with the questions asked since the last event (copies), if any."""
        if not self.entries and self.answered is None:
            return payload
        log = [list(entry) for entry in self.entries]
        if self.answered is not None:
            log.append(list(self.answered))
        return {**payload, QUESTIONS: log}

    def committed(self, kind: str) -> None:
        """An event of ``kind`` was stored: an allocation event (:data:`STREAM_EVENTS`)
        carried the questions, so start a new log; any other keeps them for the next one."""
        if kind in STREAM_EVENTS:
            self.entries, self.answered = [], None
            self.no_work_stored = False

    def needs_event(self) -> bool:
        """Whether the questions answered with nothing so far need a ``no_work`` event now:
        the first such question since the campaign's last other event, or :data:`PENDING_RUNS`
        runs of them. Otherwise they wait for the next event, which carries them (module
        docstring, "Select-side state": a poll answered with nothing does not grow the store)."""
        return bool(self.entries) and (not self.no_work_stored or len(self.entries) >= PENDING_RUNS)

    def replay(self, campaign: Campaign, kind: str, payload: Mapping[str, Any]) -> None:
        """Ask ``campaign``'s policy the questions an event of ``kind`` logged, again, before
        the event is applied; count a mismatch when an answer, or the stream after them,
        differs from the log."""
        same = True
        for entry in payload[QUESTIONS]:
            question = entry[0]
            for _ in range(int(entry[1]) if len(entry) > 1 else 1):
                choice = _decide(campaign, question, campaign.policy).assignment
                if len(entry) > 1:
                    same = same and choice is None
                    continue
                # the question the event answers: its item, and its worker (pull: the one
                # who asked; push: the one the policy chose)
                if question is None and choice is not None and choice.worker is not None:
                    question = campaign.worker_ids[choice.worker]
                same = same and (
                    kind == "assigned"
                    and choice is not None
                    and choice.item == payload["item"]
                    and question == payload["worker"]
                )
        stream = campaign._stream
        expected = payload.get("rng", stream.last)
        if expected is not None and stream_state(stream.generators) != expected:
            same = False
        if not same:
            self.mismatches += 1
            if self.mismatches == 1:
                warnings.warn(
                    "a replayed question of this campaign's policy was answered otherwise than "
                    "its log says (a store written by other policy code?): the campaign "
                    "continues from its events, with valid but not the same later decisions",
                    RuntimeWarning,
                    stacklevel=4,
                )


def _decide(campaign: Campaign, question: str | None, policy: Policy) -> Decision:
    """The live step's answer to one question of ``campaign``, asking ``policy``: worker
    ``question`` asks for work (pull), or None: the team is pushed to (push)."""
    config = campaign.config
    if question is None:
        return campaign._live.push(
            policy,
            campaign.state,
            price_of=lambda worker: campaign.price_of(campaign.worker_ids[worker]),
            capacity_of=lambda worker: campaign._capacity_of(campaign.worker_ids[worker]),
            max_pending=config.max_pending_per_worker,
            team=len(campaign.worker_ids),  # control tasks go to a named team worker
        )
    return campaign._live.assign(
        policy,
        campaign.state,
        campaign._worker_index.get(question),
        price=campaign.price_of(question),
        capacity=campaign._capacity_of(question),
        max_pending=config.max_pending_per_worker,
    )


def ask(campaign: Campaign, question: str | None) -> Decision:
    """One question to ``campaign``'s live step (:func:`_decide`), logged when it reached a
    policy that keeps select-side state (:class:`QuestionLog`)."""
    log = campaign._questions
    asking = log.asking(campaign.policy)
    decision = _decide(campaign, question, asking)
    log.asked(asking, question, answered=decision.assignment is not None)
    if decision.assignment is None and log.needs_event():  # no assigned event will carry it
        campaign._commit(NO_WORK, {})
        log.no_work_stored = True
    return decision


def replayed(campaign: Campaign, event: StoredEvent, *, own: bool) -> dict[str, Any]:
    """The payload of ``event`` for its handler, the policy's keys taken out: the questions
    it logged asked again unless ``campaign`` wrote it itself (``own``), then the stream set
    to its ``"rng"`` (module docstring)."""
    payload = event.payload
    if QUESTIONS in payload and not own:
        campaign._questions.replay(campaign, event.kind, payload)
    if "rng" in payload:  # where the stream stood when the event was written
        if own:  # no draw since _commit tagged it: the stream stands there
            campaign._stream.last = payload["rng"]
        else:
            campaign._stream.restore(payload["rng"])
    if "rng" in payload or QUESTIONS in payload:
        payload = {k: v for k, v in payload.items() if k not in ("rng", QUESTIONS)}
    return payload


def cheapest_price(config: CampaignConfig) -> float:
    """The lowest price any worker can have (the default or a listed one)."""
    return min([config.default_price, *config.worker_prices.values()])


def slots_wanted(*, models_workers: bool, push: bool, slots: int, n_workers: int) -> int:
    """Worker slots for the problem, given ``slots`` now and ``n_workers`` joined: 0 for a
    policy that does not model workers; in push mode exactly the team; else a power of two
    (at least 4) holding every worker who joined."""
    if not models_workers:
        return 0
    if push:
        return n_workers
    wanted = max(4, slots)
    while wanted < n_workers:
        wanted *= 2
    return wanted


def worker_spec(
    config: CampaignConfig, worker_ids: Sequence[str], slots: int, *, push: bool
) -> WorkerSpec:
    """The problem's workers. Push mode (exactly the team, ``worker_ids`` in joining order):
    their prices when they differ and their capacities when any is set; pull mode (slots
    above the workers): the count only."""
    if not push:
        return WorkerSpec(slots)
    prices = None
    if config.worker_prices:
        listed = np.array(
            [config.worker_prices.get(w, config.default_price) for w in worker_ids], dtype=float
        )
        if np.any(listed != listed[0]):
            prices = listed
    capacities = None
    if config.worker_capacities:
        capacities = np.array(
            [config.worker_capacities.get(w, UNLIMITED) for w in worker_ids], dtype=np.int64
        )
    return WorkerSpec(slots, prices=prices, capacities=capacities)


def available_pairs(
    config: CampaignConfig,
    worker_index: Mapping[str, int],
    n_items: int,
    n_workers: int,
    taken: tuple[list[int], list[int]],
) -> tuple[PairAvailability, dict[tuple[int, int], int]]:
    """Push mode: the (item, worker) pairs, each usable once, minus the ``taken`` ones
    (items and workers of every label so far and every pending assignment), and the index
    of each listed pair (empty without listed pairs: every item with every worker, item-major,
    pair index = item · n_workers + worker)."""
    log_items = np.asarray(taken[0], dtype=np.int64)
    log_workers = np.asarray(taken[1], dtype=np.int64)
    lookup: dict[tuple[int, int], int] = {}
    if config.pairs is None:
        items = np.repeat(np.arange(n_items, dtype=np.int64), n_workers)
        workers = np.tile(np.arange(n_workers, dtype=np.int64), n_items)
        used = np.bincount(log_items * n_workers + log_workers, minlength=items.shape[0])
    else:
        # a campaign with listed pairs has exactly its creation items (add_items refuses)
        index = {item_id: k for k, item_id in enumerate(config.items)}
        items = np.array([index[i] for i, _ in config.pairs], dtype=np.int64)
        workers = np.array([worker_index[w] for _, w in config.pairs], dtype=np.int64)
        lookup = {(int(i), int(w)): k for k, (i, w) in enumerate(zip(items, workers, strict=True))}
        used = np.zeros(items.shape[0], dtype=np.int64)
        for i, w in zip(log_items.tolist(), log_workers.tolist(), strict=True):
            k = lookup.get((i, w))
            if k is not None:
                used[k] += 1
    remaining = np.maximum(1 - used[: items.shape[0]], 0).astype(np.int64)
    return PairAvailability(items=items, workers=workers, remaining=remaining), lookup


def pair_index(
    config: CampaignConfig,
    n_workers: int,
    lookup: Mapping[tuple[int, int], int],
    item: int,
    worker: int,
) -> int | None:
    """The index of pair (item, worker) in ``state.pairs`` (None: not a listed pair), on a
    problem of ``n_workers`` workers and with :func:`available_pairs`' ``lookup``."""
    if config.pairs is None:
        return item * n_workers + worker if worker < n_workers else None
    return lookup.get((item, worker))


def _attribute_arrays(
    campaign: Campaign, attributes: Mapping[str, Any]
) -> tuple[IntArray | None, FloatArray | None]:
    """The contexts, shape (n_items,), and features, shape (n_items, n_features), of the
    campaign's items and the new ones (None: the campaign has none)."""
    contexts = features = None
    if campaign._item_contexts is not None:
        contexts = np.asarray(
            campaign._item_contexts + attributes.get("contexts", []), dtype=np.int64
        )
    if campaign._item_features is not None:
        features = np.asarray(campaign._item_features + attributes.get("features", []), dtype=float)
    return contexts, features


def rebuild(
    campaign: Campaign, new_items: Sequence[str], attributes: Mapping[str, Any] | None = None
) -> Rebuild:
    """The problem, state and policy of ``campaign`` with ``new_items`` (and their
    ``attributes``) appended, every label observed again in order — computed without
    changing the campaign (module docstring)."""
    config = campaign.config
    n_items = len(getattr(campaign, "item_ids", ())) + len(new_items)
    prior = None
    if config.prior is not None:
        prior = np.tile(np.asarray(config.prior, dtype=float), (n_items, 1))
    slots = slots_wanted(
        models_workers=campaign._models_workers,
        push=campaign._push,
        slots=campaign._worker_slots,
        n_workers=len(campaign.worker_ids),
    )
    contexts, features = _attribute_arrays(campaign, attributes or {})
    problem = Problem(
        n_items=n_items,
        budget=config.budget,
        n_classes=len(config.classes),
        prior=prior,
        default_price=cheapest_price(config),
        workers=worker_spec(config, campaign.worker_ids, slots, push=campaign._push)
        if slots
        else None,
        contexts=contexts,
        features=features,
    )
    old = getattr(campaign, "state", None)
    state = CampaignState.initial(problem)
    if old is not None:
        k = old.label_counts.shape[0]
        state.label_counts[:k] = old.label_counts
        state.pending[:k] = old.pending
        state.eligible[:k] = old.eligible
        state.spent, state.committed, state.n_events = old.spent, old.committed, old.n_events
        state.label_log = old.label_log  # one log for the campaign's life
    lookup: dict[tuple[int, int], int] = {}
    if campaign._push and campaign._models_workers:
        # taken pairs: every label so far and every pending assignment
        pending = [r for r in getattr(campaign, "_records", {}).values() if r.status == "pending"]
        taken = (
            campaign._log_items + [r.item for r in pending],
            campaign._log_workers + [r.worker for r in pending],
        )
        state.pairs, lookup = available_pairs(config, campaign._worker_index, n_items, slots, taken)
        control = campaign._live.control
        for worker in control.blocked if control is not None else ():
            state.pairs.remaining[state.pairs.workers == worker] = 0  # never chosen
    if state.remaining_capacity is not None:
        # capacity left: labels given and pending assignments count
        for worker, given in campaign._live.labels_by_worker.items():
            state.remaining_capacity[worker] -= given
        for worker, pending_ids in campaign._live.worker_pending.items():
            state.remaining_capacity[worker] -= len(pending_ids)
    policy: AllocationPolicy = make_policy(split_verdict(config.policy)[0])
    if hasattr(policy, "refit_spread"):  # a live label pays a slice of a refit, not all of it
        from crowdbudget.policies.worker_aware_refit import LIVE_REFIT_SPREAD

        policy.refit_spread = LIVE_REFIT_SPREAD
    rng = policy_rng(config, campaign._policy_seq)
    policy.reset(problem, rng)
    for item, worker, label, cost in zip(
        campaign._log_items,
        campaign._log_workers,
        campaign._log_labels,
        campaign._log_costs,
        strict=True,
    ):
        policy.observe(LabelEvent(item=item, worker=worker, label=label, cost=cost))
    return Rebuild(problem, state, policy, lookup, rng)
