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
- ``workers_added``: ``{"workers": [...]}`` — workers who joined (registered by the requester,
  or arriving in pull mode for a policy that models workers); see "Workers" below;
- ``assigned``: ``{"id", "item", "worker", "price", "expires_at"}``;
- ``labeled``: ``{"id", "label"}`` (label as a class index);
- ``released``: ``{"id", "reason"}`` with reason ``cancelled`` or ``expired``;
- ``imported``: ``{"rows": [[item, worker, label], ...]}`` — labels collected elsewhere; they
  inform the posterior and the results but cost nothing from this campaign's budget;
- ``settings_changed``: ``{"ttl": ..., "max_pending_per_worker": ...}`` (either or both) —
  for assignments handed out from then on;
- ``gold_set``: ``{"rows": [[item, label], ...]}`` (indices, in item order) — the requester's
  gold labels for a sample of the items, replacing any earlier gold; ``gold_removed``: ``{}``.
  Gold is an evaluation aid only (:meth:`Campaign.calibration`): neither the policy nor the
  verdict reads it, and gold events do not count in the policy's random stream (below), so
  uploading gold never changes an allocation.

Validate, then commit: an event is stored only once the code that applies it is known to
succeed — ``created`` and ``items_added`` build the problem and reset the policy before the
event is written (:meth:`Campaign.create`, :meth:`Campaign.add_items`), the other events are
checked by the operation that writes them — so a refused operation leaves the store as it was.

Workers: a policy that models workers (``opt-kg:posterior=one-coin``, ``bbta``, …: capability
``needs_workers``) runs on a :class:`~crowdbudget.types.Problem` with a
:class:`~crowdbudget.types.WorkerSpec`, as in simulations. Workers join a live campaign over
time, so the problem holds *worker slots*: the campaign's workers (indices in order of joining,
the ``workers`` given at creation first) and, above them, slots nobody holds yet. When a worker
joins beyond the last slot the slots double and the policy is rebuilt (reset on the larger
problem, every label observed again), so joining costs O(labels · log n_workers) over the whole
campaign rather than a rebuild per worker. An unheld slot never labels anything, so it changes
no posterior; and the campaign only asks the policy on behalf of a real worker (pull mode, or
push for a named team), so no assignment ever goes to an unheld slot.

Push mode (``mode="push"``): the policy chooses the worker as well as the item
(:meth:`Campaign.push_assignments`; B-KUBE-like and BBTA-like policies, worker-aware Opt-KG), and
the requester dispatches each (item, worker) assignment. The problem then has exactly the
campaign's workers (no unheld slots: a joining worker rebuilds the policy, which suits a
managed team), and the state lists the (item, worker) pairs that may still be asked
(:class:`~crowdbudget.types.PairAvailability`, the structure a replay uses): every item with
every worker, or the ``pairs`` given at creation (a qualification table, or the recorded pairs
of a data set being replayed live), each usable once — a worker labels an item at most once.

Policy randomness: the policy's generator is ``default_rng([seed, n])`` where n is the number of
events when the campaign was created or loaded (gold events not counted: they are no part of
the allocation), so a reloaded campaign is deterministic; its
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

import functools
import heapq
import itertools
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd

from crowdbudget.aggregation.calibration import (
    DEFAULT_BINS,
    apply_probability_floor,
    calibration_metrics,
    fit_probability_floor,
    floor_calibration,
    reliability_bins,
)
from crowdbudget.aggregation.registry import make_aggregator
from crowdbudget.campaign.store import (
    CommitTicket,
    ConcurrentWriteError,
    EventStore,
    StoredEvent,
)
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import (
    BudgetError,
    CrowdBudgetError,
    DataFormatError,
    InvalidParameterError,
)
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.policies.verdict import POSTERIOR, check_verdict, make_verdict
from crowdbudget.posteriors.beta_bernoulli import positive_probability
from crowdbudget.posteriors.dirichlet import largest_class_probabilities
from crowdbudget.registry import make_policy, parse_policy, split_verdict
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

#: :func:`fit_verdict`'s answer: final labels (n_items,), class probabilities
#: (n_items, n_classes) and a model-choosing verdict's choice (None for the others)
VerdictFit = tuple[IntArray, FloatArray, dict[str, Any] | None]

_EPOCHS = itertools.count(1)

#: events that only evaluate the campaign (gold labels): no part of the allocation, so they do
#: not count in the policy's random stream (see :attr:`Campaign._policy_seq`)
_EVALUATION_EVENTS = frozenset({"gold_set", "gold_removed"})

#: a worker's capacity when the requester sets none: more labels than any campaign buys
_UNLIMITED = 2**40


#: the reasons :meth:`Campaign.status` gives, per cause; a final one means no assignment is
#: possible for anyone any more (until items, workers or budget change)
_STOP_REASONS: Mapping[str, tuple[str, bool]] = {
    "budget": ("the budget left pays for no further label", True),
    "items": ("every item is finished (at its label cap, or closed by the policy)", True),
    "pairs": ("no (item, worker) pair of the team is left to ask", True),
    "policy": (
        "the policy has no further assignment to give (its plan is complete, or no pair is "
        "worth asking by its own rule)",
        True,
    ),
    "done": (
        "every worker so far has already labeled (or holds, or is at their capacity for) "
        "the items the policy offers; a new worker can still take work",
        False,
    ),
    "declined": (
        "the policy offers no further work to any worker so far (it chooses per worker); "
        "a new worker may get work",
        False,
    ),
}


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


@functools.lru_cache(maxsize=4096)
def _decimal(value: float) -> Decimal:
    """A price or budget as the decimal number it was written as (``0.1`` is one tenth, not
    the binary float nearest to it): its shortest repr, which round-trips exactly. Cached:
    a campaign has few distinct prices, and this runs on every assignment and label."""
    return Decimal(repr(float(value)))


@dataclass(slots=True)
class _Ledger:
    """The campaign's money in exact decimal arithmetic: the authority on affordability.

    Float sums of prices drift (0.1 + 0.1 + 0.1 > 0.3), and a tolerance to absorb the drift
    would let spending pass the budget by that much. Prices and the budget are decimal
    numbers as the requester typed them, so their sums are exact here: a budget of 1 at 0.1 a
    label pays exactly 10 labels and ``spent + committed`` never exceeds the budget, not
    even by 1e-9. (The float state the policies read follows along; its drift is far below
    its own 1e-9 slack, so it never refuses what the ledger allows.)"""

    budget: Decimal
    spent: Decimal = Decimal(0)
    committed: Decimal = Decimal(0)

    def can_afford(self, price: float) -> bool:
        return self.spent + self.committed + _decimal(price) <= self.budget

    @property
    def remaining(self) -> Decimal:
        return self.budget - self.spent - self.committed


@dataclass(frozen=True, slots=True)
class _Rebuild:
    """What :meth:`Campaign._rebuild` computes: the campaign's problem, state and policy."""

    problem: Problem
    state: CampaignState
    policy: AllocationPolicy


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
    max_pending_per_worker: int | None = None
    verdict: str = "posterior"
    workers: list[str] = field(default_factory=list)
    mode: str = "pull"
    pairs: list[list[str]] | None = None
    contexts: list[int] | None = None
    features: list[list[float]] | None = None
    worker_capacities: dict[str, int] = field(default_factory=dict)

    def to_payload(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (an ellipsis marks the cut)."""
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _short(value: Any, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters: error messages name the offending input
    without echoing a large one back."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-1]}"


#: the largest seed NumPy's SeedSequence takes per entry is unbounded, but a seed must be a
#: non-negative integer; 2**63 keeps it an int64 in every store
_MAX_SEED = 2**63 - 1


def _check_ids(values: Iterable[Any], what: str) -> list[str]:
    out = []
    for value in values:
        if not isinstance(value, str | int) or isinstance(value, bool) or str(value) == "":
            raise DataFormatError(f"{what} ids must be non-empty strings, got {_short(value)}")
        out.append(str(value))
    seen: set[str] = set()
    for value in out:
        if value in seen:
            raise DataFormatError(f"{what} id {_short(value)} appears more than once")
        seen.add(value)
    return out


def _check_item_attributes(
    n_items: int,
    contexts: Sequence[int] | None,
    features: Sequence[Sequence[float]] | None,
    *,
    n_features: int | None = None,
) -> dict[str, Any]:
    """``contexts`` and ``features`` of ``n_items`` new items as JSON-ready lists (only those
    given); ``n_features`` (a campaign's) when more items are added."""
    out: dict[str, Any] = {}
    if contexts is not None:
        values = list(contexts)
        if len(values) != n_items or any(
            isinstance(c, bool) or not isinstance(c, int | np.integer) or c < 0 for c in values
        ):
            raise InvalidParameterError(
                f"contexts must be {n_items} integers >= 0 (one per item), got {_short(values)}"
            )
        out["contexts"] = [int(c) for c in values]
    if features is not None:
        try:
            matrix = np.asarray(features, dtype=float)
        except (TypeError, ValueError):
            raise InvalidParameterError(
                "features must be a number per item and feature (a matrix)"
            ) from None
        width = (
            n_features if n_features is not None else (matrix.shape[1] if matrix.ndim == 2 else 0)
        )
        if matrix.shape != (n_items, width) or width < 1 or not np.all(np.isfinite(matrix)):
            raise InvalidParameterError(
                f"features must be finite numbers of shape (items={n_items}, features"
                f"{'' if n_features is None else '=' + str(n_features)}), got shape "
                f"{matrix.shape}"
            )
        out["features"] = matrix.tolist()
    return out


def _check_mode(
    mode: Any,
    pairs: Sequence[Sequence[str]] | None,
    policy: str,
    items: list[str],
    workers: list[str],
) -> list[list[str]] | None:
    """Check ``mode`` and ``pairs`` (see :meth:`Campaign.create`); returns the pairs as
    ``[item, worker]`` lists (workers they name are appended to ``workers``)."""
    if mode not in ("pull", "push"):
        raise InvalidParameterError(f"mode must be 'pull' or 'push', got {_short(mode)}")
    capabilities = parse_policy(policy).capabilities
    if mode == "push" and not capabilities.chooses_workers:
        raise InvalidParameterError(
            f"policy {_short(policy)} picks items only, so it cannot push (item, worker) "
            "pairs; use mode 'pull' (or push to a named team with next_assignments)"
        )
    if mode == "pull" and not capabilities.supports_pull:
        raise InvalidParameterError(
            f"policy {_short(policy)} picks the worker itself, so workers cannot ask it for "
            "work; create the campaign with mode='push'"
        )
    if pairs is None:
        if mode == "push" and not workers:
            raise InvalidParameterError("push mode needs the team: give workers or pairs")
        return None
    if mode != "push":
        raise InvalidParameterError("pairs restrict a push campaign; give mode='push' too")
    known_items = set(items)
    known_workers = set(workers)
    out: list[list[str]] = []
    seen: set[tuple[str, str]] = set()
    for pair in pairs:
        if isinstance(pair, str | bytes) or len(pair) != 2:
            raise DataFormatError(f"a pair is [item id, worker id], got {_short(pair)}")
        item, worker = _check_ids([pair[0]], "item")[0], _check_ids([pair[1]], "worker")[0]
        if item not in known_items:
            raise DataFormatError(f"pair {_short([item, worker])} names an unknown item")
        if (item, worker) in seen:
            raise DataFormatError(f"pair {_short([item, worker])} appears more than once")
        seen.add((item, worker))
        if worker not in known_workers:
            known_workers.add(worker)
            workers.append(worker)
        out.append([item, worker])
    if not out:
        raise InvalidParameterError("pairs is empty: no worker may label any item")
    return out


class Campaign:
    """A live campaign (use :meth:`create` or :meth:`load`, not the constructor)."""

    def __init__(self, store: EventStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._seq = 0
        self._evaluation_events = 0  # gold events so far (not in the policy's stream)
        self._gold: dict[int, int] = {}  # item -> gold class (evaluation only)
        self._epoch = next(_EPOCHS)  # names this in-memory copy for deferred durability
        self._deferring = False
        self._last_ticket: CommitTicket | None = None
        self.config: CampaignConfig | None = None
        # a rebuild computed before its ``items_added`` event was stored (validate, then
        # commit), used by the event's handler instead of computing it again
        self._prepared: tuple[tuple[str, ...], _Rebuild] | None = None
        # why the last request for work got none, per asking worker (pull; key: worker index)
        # or for the team (push; key: None), since the last change of the allocation state
        # (:meth:`_stop_reason`); not an event: it describes answers, not decisions
        self._no_work: dict[int | None, str] = {}
        self._named_excluded = False  # the last _ask named an item closed to its worker
        # what a model-choosing verdict (``auto``) chose at its last fit (:meth:`status`)
        self._verdict_choice: dict[str, Any] | None = None

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
            store: where events go (default: an in-memory SQLite database).

        Nothing is stored unless the whole configuration works: the ``created`` event is
        applied to the new object (building the problem and resetting the policy on it)
        before it is written, so a policy that refuses the problem (``kg`` with three
        classes, ``bbta`` without workers, …) leaves the store unchanged.
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
        capacities: dict[str, int] = {}
        for worker_id, capacity in (worker_capacities or {}).items():
            if (
                isinstance(capacity, bool)
                or not isinstance(capacity, int | np.integer)
                or capacity < 0
            ):
                raise InvalidParameterError(
                    f"worker capacities must be integers >= 0, got {_short(capacity)} for "
                    f"{_short(worker_id)}"
                )
            capacities[str(worker_id)] = int(capacity)
        if any(not np.isfinite(p) or p <= 0 for p in [*prices.values(), default_price]):
            raise InvalidParameterError("worker prices must be numbers > 0")
        if ttl is not None and not (np.isfinite(ttl) and ttl > 0):
            raise InvalidParameterError(f"ttl must be a number of seconds > 0, got {ttl!r}")
        for limit_name, limit in (
            ("max_labels_per_item", max_labels_per_item),
            ("max_pending_per_worker", max_pending_per_worker),
        ):
            if limit is not None and (
                isinstance(limit, bool) or not isinstance(limit, int | np.integer) or limit < 1
            ):
                raise InvalidParameterError(
                    f"{limit_name} must be an integer >= 1, got {_short(limit)}"
                )
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
            raise InvalidParameterError(f"seed must be an integer >= 0, got {_short(seed)}")
        if not 0 <= int(seed) <= _MAX_SEED:
            raise InvalidParameterError(f"seed must be an integer in [0, 2**63), got {seed}")
        # an unknown id or bad parameter fails here, before any work; the id may name the
        # verdict (``opt-kg:verdict=ds``), which must then agree with ``verdict``
        policy_spec, named = split_verdict(policy, POSTERIOR)  # what the id itself names
        make_policy(policy_spec)
        if verdict is None:
            # neither names one: the policy's default (its own model for most)
            verdict = split_verdict(policy)[1].name
        verdict = check_verdict(verdict, len(classes_))
        if not named.is_posterior:
            if verdict not in ("posterior", named.name):
                raise InvalidParameterError(
                    f"policy {policy!r} names the verdict {named.name!r} and verdict= names "
                    f"{verdict!r}; give one"
                )
            verdict = check_verdict(named.name, len(classes_))
        items_ = _check_ids(items, "item")
        workers_ = _check_ids(workers, "worker")
        pairs_ = _check_mode(mode, pairs, policy, items_, workers_)
        attributes = _check_item_attributes(len(items_), contexts, features)
        config = CampaignConfig(
            campaign_id=campaign_id or uuid.uuid4().hex,
            items=items_,
            classes=classes_,
            budget=budget_,
            policy=policy,
            prior=prior_,
            worker_prices=prices,
            worker_capacities=capacities,
            default_price=float(default_price),
            ttl=None if ttl is None else float(ttl),
            seed=int(seed),
            name=name,
            max_labels_per_item=None if max_labels_per_item is None else int(max_labels_per_item),
            max_pending_per_worker=(
                None if max_pending_per_worker is None else int(max_pending_per_worker)
            ),
            verdict=verdict,
            workers=workers_,
            mode=mode,
            pairs=pairs_,
            **attributes,
        )
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
        if campaign.config is None:
            raise InvalidParameterError(f"no campaign {campaign_id!r} in {store.url}")
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
        applied in the store's order, as :meth:`load` would. (The policy's random stream
        continues where it was rather than restarting at the new event count: its next
        decisions are valid draws of the policy, as after a reload.)"""
        assert self.config is not None
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
        if event.kind in _EVALUATION_EVENTS:
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
        self._ledger = _Ledger(_decimal(self.config.budget))
        self._records: dict[str, _Record] = {}
        self._expiry: list[tuple[float, str]] = []
        self._worker_items: dict[int, set[int]] = {}
        # each worker's pending assignment ids, oldest first (a dict: ordered, O(1) removal)
        self._worker_pending: dict[int, dict[str, None]] = {}
        self._saturated: set[int] = set()  # items whose pending work fills their label cap
        self._busy: set[int] = set()  # items with pending assignments
        self._log_items: list[int] = []
        self._log_workers: list[int] = []
        self._log_labels: list[int] = []
        self._log_costs: list[float] = []
        self._labels_by_worker: dict[int, int] = {}
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
        record = _Record(p["item"], worker, p["price"], p["expires_at"])
        self._records[p["id"]] = record
        self.state.record_assignment(Assignment(record.item, worker, record.price))
        self._ledger.committed += _decimal(record.price)
        self._worker_items.setdefault(worker, set()).add(record.item)
        self._worker_pending.setdefault(worker, {})[p["id"]] = None
        self._use_pair(record.item, worker, 1)
        self._check_cap(record.item)
        self._check_busy(record.item)
        if record.expires_at is not None:
            heapq.heappush(self._expiry, (record.expires_at, p["id"]))

    def _on_labeled(self, p: dict[str, Any]) -> None:
        record = self._records[p["id"]]
        record.status, record.label = "answered", int(p["label"])
        self._worker_pending[record.worker].pop(p["id"], None)
        price = _decimal(record.price)
        self._ledger.committed -= price
        self._ledger.spent += price
        self._observe(record.item, record.worker, record.label, record.price, pending=True)

    def _on_released(self, p: dict[str, Any]) -> None:
        record = self._records[p["id"]]
        record.status = p["reason"]
        self._worker_pending[record.worker].pop(p["id"], None)
        self.state.release_assignment(Assignment(record.item, record.worker, record.price))
        self._ledger.committed -= _decimal(record.price)
        self._worker_items[record.worker].discard(record.item)
        self._use_pair(record.item, record.worker, -1)
        self._check_cap(record.item)
        self._check_busy(record.item)

    def _on_settings_changed(self, p: dict[str, Any]) -> None:
        assert self.config is not None
        self.config = replace(self.config, **p)

    def _on_gold_set(self, p: dict[str, Any]) -> None:
        self._gold = {int(item): int(label) for item, label in p["rows"]}

    def _on_gold_removed(self, p: dict[str, Any]) -> None:
        self._gold = {}

    @property
    def _policy_seq(self) -> int:
        """The event count that seeds the policy's generator: every event but the gold ones,
        so a campaign with gold makes exactly the decisions it makes without."""
        return self._seq - self._evaluation_events

    def _on_imported(self, p: dict[str, Any]) -> None:
        for item, worker_id, label in p["rows"]:
            worker = self._worker(worker_id)
            self._worker_items.setdefault(worker, set()).add(int(item))
            self._observe(int(item), worker, int(label), 0.0, pending=False)

    def _observe(self, item: int, worker: int, label: int, cost: float, *, pending: bool) -> None:
        event = LabelEvent(item=item, worker=worker, label=label, cost=cost)
        if not pending:  # an imported label uses its pair (an assigned one did already)
            self._use_pair(item, worker, 1)
        self.state.record_label(event, Assignment(item, worker, cost) if pending else None)
        self.policy.observe(event)
        self._log_items.append(item)
        self._log_workers.append(worker)
        self._log_labels.append(label)
        self._log_costs.append(cost)
        self._labels_by_worker[worker] = self._labels_by_worker.get(worker, 0) + 1
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
            if self._models_workers and index >= self._worker_slots and hasattr(self, "policy"):
                # past the last slot: more slots (doubled; push mode: one more) and the policy
                # rebuilt on them (a policy that took n slots takes more of the same kind)
                self._install((), self._rebuild(()))
        return index

    def _slots_wanted(self) -> int:
        """Worker slots for the problem: 0 for a policy that does not model workers; in push
        mode exactly the team; else a power of two (at least 4) holding every worker who
        joined."""
        if not self._models_workers:
            return 0
        if self._push:
            return len(self.worker_ids)
        slots = max(4, self._worker_slots)
        while slots < len(self.worker_ids):
            slots *= 2
        return slots

    def _extend_items(self, new_items: list[str], attributes: dict[str, Any]) -> None:
        """Add items and (re)build the policy on the larger problem, replaying the labels."""
        self._install(tuple(new_items), self._rebuild(new_items, attributes), attributes)

    def _rebuild(
        self, new_items: Sequence[str], attributes: dict[str, Any] | None = None
    ) -> _Rebuild:
        """The problem, state and policy with ``new_items`` appended, every label observed
        again in order — computed without changing this object, so that a policy refusing
        the larger problem raises before anything is stored (:meth:`add_items`)."""
        assert self.config is not None
        n_items = len(getattr(self, "item_ids", ())) + len(new_items)
        n_classes = len(self.config.classes)
        prior = None
        if self.config.prior is not None:
            prior = np.tile(np.asarray(self.config.prior, dtype=float), (n_items, 1))
        # the policy decides affordability with the cheapest price a worker can have: the
        # campaign checks the arriving worker's real price first (next_assignment), so the
        # policy never refuses a label the campaign can pay for (budget 1 at 0.1 a label:
        # 10 labels)
        cheapest = self._cheapest_price()
        slots = self._slots_wanted()
        attributes = attributes or {}
        contexts = features = None
        if self._item_contexts is not None:
            contexts = np.asarray(
                self._item_contexts + attributes.get("contexts", []), dtype=np.int64
            )
        if self._item_features is not None:
            features = np.asarray(self._item_features + attributes.get("features", []), dtype=float)
        problem = Problem(
            n_items=n_items,
            budget=self.config.budget,
            n_classes=n_classes,
            prior=prior,
            default_price=cheapest,
            workers=self._worker_spec(slots) if slots else None,
            contexts=contexts,
            features=features,
        )
        old = getattr(self, "state", None)
        state = CampaignState.initial(problem)
        if old is not None:
            k = old.label_counts.shape[0]
            state.label_counts[:k] = old.label_counts
            state.pending[:k] = old.pending
            state.eligible[:k] = old.eligible
            state.spent, state.committed, state.n_events = old.spent, old.committed, old.n_events
            state.label_log = old.label_log  # one log for the campaign's life
        if self._push and self._models_workers:
            state.pairs = self._available_pairs(n_items, slots)
        if state.remaining_capacity is not None:
            # capacity left: labels given and pending assignments count
            for worker, given in self._labels_by_worker.items():
                state.remaining_capacity[worker] -= given
            for worker, pending in self._worker_pending.items():
                state.remaining_capacity[worker] -= len(pending)
        policy: AllocationPolicy = make_policy(split_verdict(self.config.policy)[0])
        policy.reset(problem, np.random.default_rng([self.config.seed, self._policy_seq]))
        for item, worker, label, cost in zip(
            self._log_items, self._log_workers, self._log_labels, self._log_costs, strict=True
        ):
            policy.observe(LabelEvent(item=item, worker=worker, label=label, cost=cost))
        return _Rebuild(problem, state, policy)

    def _cheapest_price(self) -> float:
        """The lowest price any worker can have (the default or a listed one)."""
        assert self.config is not None
        return min([self.config.default_price, *self.config.worker_prices.values()])

    def _worker_spec(self, slots: int) -> WorkerSpec:
        """The problem's workers. Push mode (exactly the team): their prices when they differ
        and their capacities when any is set; pull mode (slots above the workers): the count
        only (the campaign itself checks prices and capacities before asking the policy)."""
        assert self.config is not None
        if not self._push:
            return WorkerSpec(slots)
        prices = None
        if self.config.worker_prices:
            listed = np.array([self.price_of(w) for w in self.worker_ids], dtype=float)
            if np.any(listed != listed[0]):
                prices = listed
        capacities = None
        if self.config.worker_capacities:
            capacities = np.array(
                [self.config.worker_capacities.get(w, _UNLIMITED) for w in self.worker_ids],
                dtype=np.int64,
            )
        return WorkerSpec(slots, prices=prices, capacities=capacities)

    def _capacity_left(self, worker: int | None, worker_id: str) -> bool:
        """Whether ``worker_id`` may take one more assignment (labels given and pending count
        against their capacity)."""
        assert self.config is not None
        capacity = self.config.worker_capacities.get(worker_id)
        if capacity is None:
            return True
        if worker is None:
            return capacity > 0
        given = self._labels_by_worker.get(worker, 0)
        return given + len(self._worker_pending.get(worker, ())) < capacity

    def _available_pairs(self, n_items: int, n_workers: int) -> PairAvailability:
        """Push mode: the (item, worker) pairs, each usable once, minus those labeled."""
        assert self.config is not None
        # taken pairs: every label so far and every pending assignment
        pending = [r for r in getattr(self, "_records", {}).values() if r.status == "pending"]
        log_items = np.asarray(self._log_items + [r.item for r in pending], dtype=np.int64)
        log_workers = np.asarray(self._log_workers + [r.worker for r in pending], dtype=np.int64)
        if self.config.pairs is None:
            # every item with every worker, item-major: pair index = item · n_workers + worker
            items = np.repeat(np.arange(n_items, dtype=np.int64), n_workers)
            workers = np.tile(np.arange(n_workers, dtype=np.int64), n_items)
            used = np.bincount(log_items * n_workers + log_workers, minlength=items.shape[0])
            self._pair_lookup = {}
        else:
            # a campaign with listed pairs has exactly its creation items (add_items refuses)
            index = {item_id: k for k, item_id in enumerate(self.config.items)}
            items = np.array([index[i] for i, _ in self.config.pairs], dtype=np.int64)
            workers = np.array(
                [self._worker_index[w] for _, w in self.config.pairs], dtype=np.int64
            )
            self._pair_lookup = {
                (int(i), int(w)): k for k, (i, w) in enumerate(zip(items, workers, strict=True))
            }
            used = np.zeros(items.shape[0], dtype=np.int64)
            for i, w in zip(log_items.tolist(), log_workers.tolist(), strict=True):
                k = self._pair_lookup.get((i, w))
                if k is not None:
                    used[k] += 1
        remaining = np.maximum(1 - used[: items.shape[0]], 0).astype(np.int64)
        return PairAvailability(items=items, workers=workers, remaining=remaining)

    def _use_pair(self, item: int, worker: int, n: int) -> None:
        """Push mode: take (n = 1) or give back (n = −1) the pair (item, worker). A pair is
        taken when assigned, so no batch gives it twice, and given back when the assignment
        is released. (Worker-aware KG does not rescore a pair while it is taken; one given
        back keeps its score until the next label of its item or worker rescores it.)"""
        pairs = self.state.pairs
        if pairs is None:
            return
        k = self._pair(item, worker)
        if k is not None:
            pairs.remaining[k] = max(0, int(pairs.remaining[k]) - n)

    def _pair(self, item: int, worker: int) -> int | None:
        """The index of pair (item, worker) in ``state.pairs`` (None: not a listed pair)."""
        if self.config is not None and self.config.pairs is None:
            n_workers = self.problem.n_workers or 0
            return item * n_workers + worker if worker < n_workers else None
        return self._pair_lookup.get((item, worker))

    def _install(
        self, new_items: Sequence[str], rebuild: _Rebuild, attributes: dict[str, Any] | None = None
    ) -> None:
        attributes = attributes or {}
        if self._item_contexts is not None:
            self._item_contexts.extend(attributes.get("contexts", []))
        if self._item_features is not None:
            self._item_features.extend(attributes.get("features", []))
        for item_id in new_items:
            self._item_index[item_id] = len(self.item_ids)
            self.item_ids.append(item_id)
        self.problem, self.state, self.policy = rebuild.problem, rebuild.state, rebuild.policy
        self._worker_slots = rebuild.problem.n_workers or 0

    def _start_policy_stream(self) -> None:
        assert self.config is not None
        self.policy.rng_ = np.random.default_rng([self.config.seed, self._policy_seq])

    # ------------------------------------------------------------------ the public operations
    @property
    def campaign_id(self) -> str:
        assert self.config is not None
        return self.config.campaign_id

    @property
    def event_count(self) -> int:
        """Events applied so far (stored and staged): every change of the campaign's state is
        an event, so an answer computed from the state stays right while this is unchanged
        (answers that depend on the clock, such as expiries, must expire first)."""
        return self._seq

    def price_of(self, worker_id: str) -> float:
        assert self.config is not None
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
        assert self.config is not None
        for name, given, has in (
            ("contexts", contexts, self._item_contexts is not None),
            ("features", features, self._item_features is not None),
        ):
            if has and given is None:
                raise InvalidParameterError(f"this campaign's items have {name}: give theirs")
            if not has and given is not None:
                raise InvalidParameterError(f"this campaign's items have no {name}")
        n_features = None
        if self._item_features:
            n_features = len(self._item_features[0])
        attributes = _check_item_attributes(len(new), contexts, features, n_features=n_features)
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
        changes: dict[str, Any] = {}
        if ttl is not None:
            if isinstance(ttl, bool) or not (np.isfinite(ttl) and ttl > 0):
                raise InvalidParameterError(f"ttl must be a number of seconds > 0, got {ttl!r}")
            changes["ttl"] = float(ttl)
        if max_pending_per_worker is not None:
            if (
                isinstance(max_pending_per_worker, bool)
                or not isinstance(max_pending_per_worker, int | np.integer)
                or max_pending_per_worker < 1
            ):
                raise InvalidParameterError(
                    "max_pending_per_worker must be an integer >= 1, got "
                    f"{_short(max_pending_per_worker)}"
                )
            changes["max_pending_per_worker"] = int(max_pending_per_worker)
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
        if not self._ledger.can_afford(price):
            self._note_no_work(worker, "budget")
            return None
        if worker is None and self._models_workers:
            # the policy answers for this worker: they join first (an event), so that the
            # policy has a slot for them
            self._commit("workers_added", {"workers": [worker_id]})
            worker = self._worker_index[worker_id]
        held = self._held(worker)
        if held is not None:
            return self.assignment(held)  # at the limit: the oldest pending one, again
        if not self._capacity_left(worker, worker_id):
            self._note_no_work(worker, "capacity")
            return None  # the worker has given (or holds) as many labels as allowed
        excluded = self._worker_items.get(worker, set()) if worker is not None else set()
        if self._saturated:
            excluded = excluded | self._saturated
        # items with work pending come last: the policy's scores do not move until a label
        # comes back, so without this every arriving worker would get the same top item
        # pull mode: the policy is told who asks (a worker it knows from earlier events; a
        # newcomer has no index yet), so e.g. Requallo refuses a worker it blocked as a spammer
        if self.policy.searches_past_excluded:
            choice = self._ask(excluded | self._busy, worker)
            if choice is None and self._busy:  # only items with pending work are left
                choice = self._ask(excluded, worker)
        else:
            # one question only: this policy's select moves its own state (a plan, counters,
            # a generator), so asking twice would skip a decision
            choice = self._ask(excluded, worker)
        if choice is None:
            # say why: the policy offered an item the worker has (a new worker could take
            # it), every open item is the worker's, or the policy itself had nothing
            # — a policy that models workers may decline one worker and not the next
            if self._named_excluded or not self._open_to(excluded):
                self._note_no_work(worker, "done")
            else:
                self._note_no_work(worker, "declined" if self._models_workers else "policy")
            return None
        return self._assign(choice.item, worker_id, price)

    def _open_to(self, excluded: set[int]) -> bool:
        """Whether an item is still open (eligible) outside ``excluded``: the eligible count
        against the excluded eligible ones — one O(n_items) NumPy count plus O(|excluded|),
        run only when a request gets no work, never on the way to an assignment."""
        n_open = int(np.count_nonzero(self.state.eligible))
        closed = sum(1 for item in excluded if self.state.eligible[item])
        return n_open > closed

    def _note_no_work(self, worker: int | None, cause: str) -> None:
        """Remember why a request got no work (:meth:`_stop_reason`): ``budget``,
        ``capacity`` (the worker's), ``done`` (every open item, or the one the policy
        offers, is the worker's already),
        ``pairs`` (push: no (item, worker) pair left), ``policy`` (the policy has no further
        assignment although items are open), ``declined`` (so, but the policy models workers:
        its answer may differ for another worker)."""
        if worker is not None or self._push:
            self._no_work[worker] = cause

    def _ask(self, excluded: set[int], worker: int | None) -> Assignment | None:
        """The policy's answer with ``excluded`` closed for this one question
        (``state.excluded``); a policy that does not search past excluded items may name one,
        which is no answer ("no work for this worker now"; ``_named_excluded`` says so)."""
        with self.state.excluding(excluded):
            choice = self.policy.select(self.state, worker=worker)
        self._named_excluded = choice is not None and choice.item in excluded
        if self._named_excluded:
            return None
        return choice

    def _assign(self, item: int, worker_id: str, price: float) -> PendingAssignment:
        """Commit an ``assigned`` event (checked by the caller) and return it."""
        assignment_id = uuid.uuid4().hex
        assert self.config is not None
        expires = None if self.config.ttl is None else self.clock() + self.config.ttl
        self._commit(
            "assigned",
            {
                "id": assignment_id,
                "item": item,
                "worker": worker_id,
                "price": price,
                "expires_at": expires,
            },
        )
        return self.assignment(assignment_id)

    def _held(self, worker: int | None) -> str | None:
        """The worker's oldest pending assignment if they hold ``max_pending_per_worker``
        already, else None."""
        assert self.config is not None
        cap = self.config.max_pending_per_worker
        if cap is None or worker is None:
            return None
        pending = self._worker_pending.get(worker)
        if not pending or len(pending) < cap:
            return None
        return next(iter(pending))

    def next_assignments(self, worker_ids: Sequence[str]) -> list[PendingAssignment]:
        """Push mode for a managed team: one assignment per worker in turn, while any is
        available (a worker with nothing left, or holding ``max_pending_per_worker``
        assignments already, is skipped)."""
        out = []
        for worker_id in worker_ids:
            if self._held(self._worker_index.get(str(worker_id))) is not None:
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
        never given again."""
        assert self.config is not None
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
            if self.policy.searches_past_excluded:
                choice = self._ask(self._busy, None)
                if choice is None and self._busy:
                    choice = self.policy.select(self.state)
            else:  # asked once (see next_assignment); B-KUBE puts several workers on a task
                choice = self.policy.select(self.state)
            if choice is None or choice.worker is None:
                if not out:
                    self._note_no_work(None, self._push_cause())
                break
            worker_id = self.worker_ids[choice.worker]
            price = self.price_of(worker_id)
            if (
                not self._ledger.can_afford(price)
                or choice.item in self._worker_items.get(choice.worker, ())
                or self._held(choice.worker) is not None
                or not self._capacity_left(choice.worker, worker_id)
                or (self.config.max_labels_per_item is not None and choice.item in self._saturated)
            ):
                break  # the policy's choice cannot be given now: stop this batch
            out.append(self._assign(choice.item, worker_id, price))
        return out

    def _push_cause(self) -> str:
        """Why the policy chose no (item, worker) pair (see :meth:`_note_no_work`)."""
        if not self._ledger.can_afford(self._cheapest_price()):
            return "budget"
        pairs = self.state.pairs
        if pairs is not None and not np.any(
            (pairs.remaining > 0) & self.state.eligible[pairs.items]
        ):
            return "pairs"
        return "policy"

    def _stop_reason(
        self, policy_status: Mapping[str, Any], pending: int
    ) -> tuple[str | None, bool]:
        """``(reason, final)``: why no further assignment is possible now, or ``(None,
        False)`` while one is (or work is pending: its labels may open more).

        Final reasons (``stopped``): the budget left pays for no label at the cheapest
        price; the policy stopped by its own rule (``stopped_early``, Requallo); no item is
        open; in push mode the last request found no pair (every pair used, or the policy's
        plan is complete); in pull mode every known worker's last request got none from the
        policy itself (one that does not model workers). Not final: the policy, which
        models workers, declined each of them; or every known worker has every open item
        already (or is at their capacity, or the policy offers only items they have) — a new
        worker would get work. The pull and push reasons are
        learned from requests for work since the last change (a freshly loaded copy knows
        them once the workers ask again)."""
        assert self.config is not None
        if pending:
            return None, False
        if not self._ledger.can_afford(self._cheapest_price()):
            return _STOP_REASONS["budget"]
        if policy_status.get("stopped_early", False):
            return "the policy stopped by its own rule (every item meets its requirement)", True
        if not np.any(self.state.eligible):
            return _STOP_REASONS["items"]
        if self._push:
            cause = self._no_work.get(None)
            return (None, False) if cause is None else _STOP_REASONS[cause]
        known = range(len(self.worker_ids))
        if not known or any(w not in self._no_work for w in known):
            return None, False
        causes = {self._no_work[w] for w in known}
        if causes <= {"policy", "budget"}:
            return _STOP_REASONS["policy"]
        return _STOP_REASONS["declined" if "declined" in causes else "done"]

    def _record(self, assignment_id: str) -> _Record:
        record = self._records.get(assignment_id)
        if record is None:
            raise UnknownAssignmentError(f"no assignment {_short(assignment_id)} in this campaign")
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

    def pending_assignments(self, worker_id: str | None = None) -> list[PendingAssignment]:
        """The unanswered assignments (of ``worker_id``, or all), oldest first per worker,
        after releasing the overdue ones; a requester cancels any of them with
        :meth:`cancel_assignment` and its budget returns at once."""
        self.expire_overdue()
        if worker_id is not None:
            worker = self._worker_index.get(worker_id)
            ids = list(self._worker_pending.get(worker, {})) if worker is not None else []
        else:
            ids = [a for pending in self._worker_pending.values() for a in pending]
        return [self.assignment(a) for a in ids]

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
                f"label {_short(label)} is not a class; classes: "
                + _clip(", ".join(self.config.classes), 200)
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
            # refused without writing: the expiry itself is recorded by the next
            # housekeeping (expire_overdue), not by a refused request
            raise AssignmentError(f"assignment {assignment_id!r} is expired; it takes no label")
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
                raise DataFormatError(f"imported label for unknown item {_short(task)}")
            code = self._class_index.get(label)
            if code is None:
                raise DataFormatError(
                    f"imported label {_short(label)} is not a class; classes: "
                    + _clip(", ".join(self.config.classes), 200)
                )
            if worker == "":
                raise DataFormatError(f"imported label for item {_short(task)} has no worker")
            rows.append([item, worker, code])
        if rows:
            self._commit("imported", {"rows": rows})
        return len(rows)

    # ------------------------------------------------------------------ gold (evaluation)
    def set_gold(self, gold: Mapping[str, str] | Iterable[Sequence[str]]) -> int:
        """Store the requester's gold labels for a sample of the items (replacing any earlier
        gold): ``{item id: class}`` or ``(item id, class)`` pairs. Returns how many.

        Gold only measures the verdict (:meth:`calibration`); the policy and the verdict
        never read it, so it changes no allocation and no result. Refused (nothing stored):
        no rows, more rows than the campaign has items, an unknown item or class, an item
        given twice. The same gold again stores nothing."""
        assert self.config is not None
        rows = list(gold.items()) if isinstance(gold, Mapping) else list(gold)
        if not rows:
            raise InvalidParameterError(
                "the gold is empty: give at least one (item, label) pair (remove_gold / "
                "DELETE removes the gold)"
            )
        n_items = len(self.item_ids)
        if len(rows) > n_items:
            raise InvalidParameterError(
                f"{len(rows)} gold rows for a campaign of {n_items} items: at most one per item"
            )
        codes: dict[int, int] = {}
        for row in rows:
            if isinstance(row, str | bytes) or not isinstance(row, Sequence) or len(row) != 2:
                raise DataFormatError(f"a gold row is (item id, label), got {_short(row)}")
            item_id, label = row
            item = self._item_index.get(str(item_id))
            if item is None:
                raise DataFormatError(f"gold for unknown item {_short(item_id)}")
            code = self._class_index.get(str(label))
            if code is None:
                raise DataFormatError(
                    f"gold label {_short(label)} of item {_short(item_id)} is not a class; "
                    "classes: " + _clip(", ".join(self.config.classes), 200)
                )
            if item in codes:
                raise DataFormatError(f"item {_short(item_id)} appears more than once in the gold")
            codes[item] = code
        if codes == self._gold:
            return len(codes)  # a retry of the same upload
        self._commit("gold_set", {"rows": [[i, codes[i]] for i in sorted(codes)]})
        return len(codes)

    def remove_gold(self) -> bool:
        """Remove the gold labels; returns whether there were any (none: nothing stored)."""
        if not self._gold:
            return False
        self._commit("gold_removed", {})
        return True

    def gold(self) -> dict[str, str]:
        """The gold labels, ``{item id: class}`` in item order (empty: no gold)."""
        assert self.config is not None
        classes = self.config.classes
        return {self.item_ids[i]: classes[self._gold[i]] for i in sorted(self._gold)}

    def calibration(
        self,
        verdict: str | None = None,
        *,
        n_bins: int = DEFAULT_BINS,
        fitted: VerdictFit | None = None,
    ) -> dict[str, Any] | None:
        """Accuracy and calibration of the verdict on the gold sample, None without gold.

        The probabilities are those :meth:`results` reports (the campaign's verdict, or
        ``verdict``); the metrics are :func:`~crowdbudget.aggregation.calibration.
        calibration_metrics` on the gold items with at least one label (``n_scored`` of
        ``n_gold``: an item without labels shows only the prior, which says nothing about
        the verdict). Metrics are None while no gold item has a label. ``fitted``: as in
        :meth:`results`."""
        if not self._gold:
            return None
        labels, probabilities = self._checked_fitted(fitted, verdict)
        return self._calibration(labels, probabilities, verdict, n_bins)

    def _scored_gold(self, *, required: bool = True) -> IntArray:
        """Gold class per item, shape (n_items,), −1 where there is none or the item has no
        label (an unlabelled item shows only the prior: it says nothing about the verdict).
        ``required``: InvalidParameterError when no item is left."""
        gold = np.full(len(self.item_ids), -1, dtype=np.int64)
        items = np.fromiter(self._gold, dtype=np.int64, count=len(self._gold))
        gold[items] = np.fromiter(self._gold.values(), dtype=np.int64, count=len(self._gold))
        gold[self.state.label_counts.sum(axis=1) == 0] = -1
        if required and not np.any(gold >= 0):
            raise InvalidParameterError(
                "floor needs gold labels (PUT …/gold) on items that have labels; "
                f"this campaign has {len(self._gold)} gold items, none labelled yet"
            )
        return gold

    def _calibration(
        self,
        labels: IntArray,
        probabilities: FloatArray,
        verdict: str | None = None,
        n_bins: int = DEFAULT_BINS,
    ) -> dict[str, Any]:
        """:meth:`calibration` on a verdict already computed (the dashboard's)."""
        assert self.config is not None
        gold = self._scored_gold(required=False)
        metrics = calibration_metrics(probabilities, gold, labels=labels, n_bins=n_bins)
        # the probability floor the gold sample supports, scored on gold it was not fitted on
        # (folds drawn from the campaign's seed, outside the policy's stream)
        floor = floor_calibration(
            probabilities,
            gold,
            labels=labels,
            n_bins=n_bins,
            rng=np.random.default_rng(self.config.seed),
        )
        fitted = floor["cross_fitted"]
        return {
            "verdict": check_verdict(verdict or self.config.verdict, len(self.config.classes)),
            "n_gold": len(self._gold),
            "n_scored": int(np.count_nonzero(gold >= 0)),
            **{k: (None if np.isnan(v) else v) for k, v in metrics.items()},
            "bins": reliability_bins(probabilities, gold, labels=labels, n_bins=n_bins),
            "floor": {
                "epsilon": floor["floor"],
                "n_folds": floor["n_folds"],
                "cross_fitted": None
                if fitted is None
                else {k: (None if np.isnan(v) else v) for k, v in fitted.items()},
            },
        }

    # ------------------------------------------------------------------ reading
    def class_probabilities(self) -> np.ndarray:
        """Posterior class probabilities per item from the prior and the votes,
        shape (n_items, n_classes): ``[1 − I, I]`` (binary) or P(class is the largest)."""
        alpha = self.problem.prior_array + self.state.label_counts
        if alpha.shape[1] == 2:
            p = positive_probability(alpha[:, 1], alpha[:, 0])
            return np.column_stack([1.0 - p, p])
        return largest_class_probabilities(alpha)

    def verdict_probabilities(self, verdict: str | None = None) -> tuple[IntArray, FloatArray]:
        """Final labels, shape (n_items,), and class probabilities, shape (n_items,
        n_classes), from one model: the campaign's verdict, or ``verdict`` if given.

        ``"posterior"`` / ``"paper"``: the policy's :meth:`~AllocationPolicy.final_labels` and
        :meth:`~AllocationPolicy.final_probabilities` (its posterior, or the aggregator of an
        aggregating policy), ties broken as :class:`~crowdbudget.policies.verdict.PosteriorVerdict`
        says. An aggregator id: that aggregator fitted on every label received
        (answered and imported; :meth:`verdict_fit_input`, :func:`fit_verdict`); an item
        without labels gets uniform probabilities.
        """
        fit_input = self.verdict_fit_input(verdict)
        if fit_input is not None:
            return self._kept_choice(fit_verdict(*fit_input), verdict)
        assert self.config is not None
        # the policy's own model, ties broken as the verdict says (policies/verdict.py),
        # its random draws seeded by the campaign's seed
        model = make_verdict(
            check_verdict(verdict or self.config.verdict, len(self.config.classes))
        )
        model.reset(self.state.problem, np.random.default_rng(self.config.seed))
        return model.labels(self.state, self.policy), model.probabilities(self.state, self.policy)

    def verdict_fit_input(self, verdict: str | None = None) -> tuple[str, LabelData, int] | None:
        """What an aggregator verdict is fitted on — ``(aggregator id, labels, seed)``, the
        arguments of :func:`fit_verdict`, picklable so the fit may run in another process —
        or None for the policy's own model (``posterior`` / ``paper``: computed in place).
        ``verdict`` overrides the campaign's, as in :meth:`verdict_probabilities`."""
        assert self.config is not None
        # ``verdict-workers=per-context`` named with the policy applies to the campaign's verdict
        per_context = (
            verdict is None
            and split_verdict(self.config.policy, POSTERIOR)[1].workers == "per-context"
        )
        verdict = check_verdict(verdict or self.config.verdict, len(self.config.classes))
        if verdict in ("posterior", "paper"):
            return None
        workers = np.asarray(self._log_workers, dtype=np.int64)
        worker_ids = np.asarray(self.worker_ids, dtype=object)
        if per_context and self._item_contexts is not None:
            # one virtual worker per (context, worker): s·K + j (policies/verdict.py)
            n_workers = len(self.worker_ids)
            contexts = np.asarray(self._item_contexts, dtype=np.int64)
            workers = contexts[np.asarray(self._log_items, dtype=np.int64)] * n_workers + workers
            n_contexts = int(contexts.max(initial=0)) + 1
            worker_ids = np.array(
                [f"{w}@{s}" for s in range(n_contexts) for w in self.worker_ids], dtype=object
            )
        data = LabelData(
            items=np.asarray(self._log_items, dtype=np.int64),
            workers=workers,
            labels=np.asarray(self._log_labels, dtype=np.int64),
            item_ids=np.asarray(self.item_ids, dtype=object),
            worker_ids=worker_ids,
            classes=tuple(self.config.classes),
        )
        return verdict, data, self.config.seed

    def _kept_choice(self, fit: VerdictFit, verdict: str | None) -> tuple[IntArray, FloatArray]:
        """The labels and probabilities of ``fit``; a model choice of the campaign's own
        verdict (``verdict`` None or the same id) is kept for :meth:`status` with the label
        count it was made at — a read model only: no event, no accepted label changes."""
        labels, probabilities, choice = fit
        assert self.config is not None
        if choice is not None and verdict in (None, self.config.verdict):
            self._verdict_choice = {**choice, "at_labels": len(self._log_items)}
        return labels, probabilities

    def _checked_fitted(
        self, fitted: VerdictFit | None, verdict: str | None
    ) -> tuple[IntArray, FloatArray]:
        """``fitted`` (:func:`fit_verdict`'s answer computed elsewhere) if it covers this
        campaign's items and classes, else the verdict computed here; ValueError on a
        mismatch."""
        if fitted is None:
            return self.verdict_probabilities(verdict)
        assert self.config is not None
        labels, probabilities = self._kept_choice(fitted, verdict)
        shape = (len(self.item_ids), len(self.config.classes))
        if labels.shape != shape[:1] or probabilities.shape != shape:
            raise ValueError(
                f"a verdict fitted on {probabilities.shape} for a campaign of shape {shape}"
            )
        return labels, probabilities

    def results(
        self,
        verdict: str | None = None,
        *,
        floor: bool = False,
        fitted: VerdictFit | None = None,
    ) -> pd.DataFrame:
        """Final label, confidence (the verdict's probability of that label) and number of
        labels per item (``task``-indexed); ``verdict`` overrides the campaign's.

        ``floor=True``: the confidences under the probability floor fitted on the campaign's
        gold sample (:func:`~crowdbudget.aggregation.calibration.fit_probability_floor` on the
        gold items with labels — the ``floor.epsilon`` that :meth:`calibration` reports), the
        labels unchanged: what a requester who checked a sample by hand may quote.
        InvalidParameterError while no gold item has a label.

        ``fitted``: the verdict's labels and probabilities already computed on this
        campaign's current items (:meth:`verdict_fit_input` and :func:`fit_verdict` in another
        process); ValueError if their shapes do not match it."""
        assert self.config is not None
        labels, probabilities = self._checked_fitted(fitted, verdict)
        if floor:
            probabilities = apply_probability_floor(
                probabilities, fit_probability_floor(probabilities, self._scored_gold())
            )
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
        >= 0.95).

        ``stopped`` is true as soon as no further assignment is possible, with nothing
        pending, and ``stop_reason`` says why (the budget is spent; the policy stopped by
        itself — no item gains from another label, Li et al. Algorithm 1; every item is
        finished; no (item, worker) pair is left; the policy's plan is complete — the
        ε-first family and ``kos`` plan once); ``saved`` is then the budget left unspent.
        ``stop_reason`` without ``stopped``: every worker so far has every open item (a new
        worker can take work). Both None/false while work can be handed out (see
        :meth:`_stop_reason`).
        """
        assert self.config is not None
        self.expire_overdue()
        confidence = self.class_probabilities().max(axis=1)
        counts = self.state.label_counts.sum(axis=1)
        report = getattr(self.policy, "status", None)
        policy_status: dict[str, Any] = report() if callable(report) else {}
        pending = int(self.state.pending.sum())
        stop_reason, stopped = self._stop_reason(policy_status, pending)
        confident = int(np.count_nonzero(confidence >= 0.95))
        return {
            "campaign_id": self.config.campaign_id,
            "name": self.config.name,
            "policy": self.config.policy,
            "budget": self.config.budget,
            "spent": float(self._ledger.spent),
            "committed": float(self._ledger.committed),
            "remaining": float(self._ledger.remaining),
            "pending": pending,
            "n_items": len(self.item_ids),
            "n_workers": len(self.worker_ids),
            "n_labels": len(self._log_items),
            "items_labeled": int(np.count_nonzero(counts)),
            "items_confident": confident,
            "items_complete": int(policy_status.get("complete", confident)),
            "estimated_accuracy": float(confidence.mean()) if confidence.size else None,
            "stopped": stopped,
            "stop_reason": stop_reason,
            "saved": float(self._ledger.remaining) if stopped else 0.0,
            "policy_status": policy_status,
            "verdict_choice": self._verdict_choice,
            "events": self._seq,
        }

    def worker_reliability(self) -> pd.DataFrame:
        """Per worker: labels given and agreement with the current final labels (a quick
        reliability estimate, the one majority-vote aggregators report as ``skills_``)."""
        if not self._log_items:
            return self._worker_agreement(None)
        return self._worker_agreement(self.verdict_probabilities()[0])

    def _worker_agreement(self, labels: IntArray | None) -> pd.DataFrame:
        """:meth:`worker_reliability` against the verdict's ``labels`` (None: no labels yet)."""
        n_workers = len(self.worker_ids)
        if labels is None or not self._log_items:
            return pd.DataFrame({"worker": [], "n_labels": [], "agreement": []})
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
        the histogram of labels per item, the most active workers' reliability, and with
        gold the verdict's ``calibration`` on it (:meth:`calibration`; one verdict fit
        serves both)."""
        status = self.status()
        verdict = self.verdict_probabilities() if self._log_items or self._gold else None
        timeline = self._timeline
        if len(timeline) > max_points:
            keep = np.linspace(0, len(timeline) - 1, max_points).round().astype(int)
            timeline = [timeline[k] for k in keep]
        counts = self.state.label_counts.sum(axis=1)
        histogram = np.bincount(counts) if counts.size else np.zeros(1, dtype=np.int64)
        workers = self._worker_agreement(None if verdict is None else verdict[0])
        workers = workers.sort_values("n_labels", ascending=False).head(max_workers)
        extra = {}
        if verdict is not None and self._gold:
            extra["calibration"] = self._calibration(*verdict)
        return {
            "status": status,
            "spend": [{"time": t, "spent": s, "labels": n} for t, s, n in timeline],
            "labels_per_item": [int(v) for v in histogram],
            "workers": [
                {"worker": str(w), "n_labels": int(n), "agreement": float(a)}
                for w, n, a in workers.itertuples(index=False)
            ],
            **extra,
        }


def fit_verdict(verdict: str, data: LabelData, seed: int) -> VerdictFit:
    """An aggregator verdict fitted on ``data`` (:meth:`Campaign.verdict_fit_input`): final
    labels, shape (n_items,), class probabilities, shape (n_items, n_classes), and, for a
    verdict that chooses among models (``auto``: ``choice()`` of the fitted aggregator), what
    it chose and why as a JSON-ready dict (None for any other verdict)."""
    fitted = make_aggregator(f"{verdict}:seed={seed}").fit(data)
    report = getattr(fitted, "choice", None)
    return (
        np.asarray(fitted.labels_, dtype=np.int64),
        np.asarray(fitted.probas_, dtype=float),
        report() if callable(report) else None,
    )
