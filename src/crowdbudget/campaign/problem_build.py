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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from crowdbudget.campaign.config import CampaignConfig
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.registry import make_policy, split_verdict
from crowdbudget.types import (
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
