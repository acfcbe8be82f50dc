"""Core value types: the problem, assignments, label events and the campaign state.

Items, workers and classes are integers inside crowdbudget (string ids are mapped once at the
edge: CSV loaders, the live campaign). Everything per item is a NumPy array of length
``n_items`` — never one Python object per item.

The data flow (DESIGN §3): a :class:`Problem` describes what is to be labeled; a policy reads
the :class:`CampaignState` and returns an :class:`Assignment` (or None to stop); the
environment (or a live worker) answers with a :class:`LabelEvent`; the state and the policy's
posterior are updated from the event in O(1).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from crowdbudget._validation import (
    check_budget,
    check_positive_int,
    check_prior,
    check_thresholds,
)
from crowdbudget.exceptions import BudgetError, IneligibleAssignmentError, InvalidParameterError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Assignment:
    """One unit of work handed out: label ``item`` (by ``worker``, if the policy chose one).

    ``worker`` is None when the policy does not choose workers (push mode with homogeneous
    workers: the environment picks one). ``price`` is what the label costs when it arrives.
    """

    item: int
    worker: int | None = None
    price: float = 1.0


@dataclass(frozen=True, slots=True)
class LabelEvent:
    """A label that came back: ``worker`` said ``label`` about ``item``, costing ``cost``."""

    item: int
    worker: int
    label: int
    cost: float = 1.0
    time: float | None = None


@dataclass(frozen=True)
class WorkerSpec:
    """The workers a policy may choose among (DESIGN §11).

    Attributes:
        n_workers: how many (integer ids 0..n_workers−1).
        prices: price of one label per worker, shape (n_workers,), > 0 (None: every label
            costs the problem's ``default_price``).
        capacities: labels each worker may still give, shape (n_workers,), >= 0 (None:
            unlimited). Rangi & Franceschetti (2018) §2: ``M_k``.
        ids: the workers' external ids (None: the integers).
    """

    n_workers: int
    prices: FloatArray | None = None
    capacities: IntArray | None = None
    ids: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        n = check_positive_int(self.n_workers, "n_workers")
        object.__setattr__(self, "n_workers", n)
        if self.prices is not None:
            prices = np.asarray(self.prices, dtype=float)
            if prices.shape != (n,) or np.any(prices <= 0):
                raise InvalidParameterError(
                    f"worker_prices must be {n} numbers > 0, got shape {prices.shape}"
                )
            object.__setattr__(self, "prices", prices)
        if self.capacities is not None:
            capacities = np.asarray(self.capacities)
            if capacities.shape != (n,) or np.any(capacities < 0) or np.any(capacities % 1):
                raise InvalidParameterError(
                    f"worker capacities must be {n} integers >= 0, got {self.capacities!r}"
                )
            object.__setattr__(self, "capacities", capacities.astype(np.int64))
        if self.ids is not None:
            ids = tuple(str(i) for i in self.ids)
            if len(ids) != n or len(set(ids)) != n:
                raise InvalidParameterError(f"worker ids must be {n} distinct names")
            object.__setattr__(self, "ids", ids)


@dataclass(frozen=True)
class Problem:
    """What is to be labeled, with what prior knowledge, under what budget.

    Attributes:
        n_items: number of items K.
        budget: total spend allowed T (label units, or money when workers have prices).
        n_classes: number of classes (2 = binary; label 1 is the positive class).
        prior: pseudo-counts, shape (n_items, n_classes); column c is class c. For binary
            problems column 1 is the Beta ``a`` and column 0 the Beta ``b`` of the paper
            (Chen, Lin, Zhou 2013, §2.2). Any positive real values. Default 1 (uniform prior).
        thresholds: per-item threshold d, shape (n_items,): the item is positive iff θ >= d
            (default 0.5; Hu & Frazier §3 use others).
        n_workers: number of workers (None: anonymous homogeneous workers).
        worker_prices: price of one label per worker, shape (n_workers,) (None: 1 each).
        features: instance features x_i, shape (n_items, n_features) (None: no features).
            Only feature-based policies read them (Chen, Lin, Zhou 2013, §5:
            ``opt-kg:features=logistic``).
        contexts: the context (task type) of every item, int64, shape (n_items,), values
            0..n_contexts−1 (None: no contexts; :func:`task_contexts` then answers one
            context for all). Zhang, Ma, Sugiyama (2015) §3.
        n_contexts: S (default ``contexts.max() + 1``; None without contexts).
        workers: the workers a policy may choose among (:class:`WorkerSpec`: count, prices,
            capacities). Either ``workers`` or, as before, ``n_workers`` and
            ``worker_prices`` may be given: each spelling fills in the other.
        default_price: the price of one label when the worker is not known or has no price
            in ``worker_prices`` (default 1: budgets in label units). A live campaign whose
            workers are paid 0.1 a label sets it, so that a policy deciding affordability
            (``state.can_afford(problem.price_of(worker))``) uses the real price.
    """

    n_items: int
    budget: float
    n_classes: int = 2
    prior: FloatArray | None = None
    thresholds: FloatArray | None = None
    n_workers: int | None = None
    worker_prices: FloatArray | None = None
    features: FloatArray | None = None
    default_price: float = 1.0
    contexts: IntArray | None = None
    n_contexts: int | None = None
    workers: WorkerSpec | None = None

    def __post_init__(self) -> None:
        if self.workers is not None:
            self._take_workers(self.workers)
        n_items = check_positive_int(self.n_items, "n_items")
        n_classes = check_positive_int(self.n_classes, "n_classes", minimum=2)
        object.__setattr__(self, "n_items", n_items)
        object.__setattr__(self, "n_classes", n_classes)
        object.__setattr__(self, "budget", check_budget(self.budget))
        object.__setattr__(self, "default_price", check_budget(self.default_price, "default_price"))
        prior = np.ones(n_classes) if self.prior is None else self.prior
        object.__setattr__(self, "prior", check_prior(prior, n_items, n_classes))
        object.__setattr__(self, "thresholds", check_thresholds(self.thresholds, n_items))
        if self.n_workers is not None:
            object.__setattr__(self, "n_workers", check_positive_int(self.n_workers, "n_workers"))
        if self.worker_prices is not None:
            if self.n_workers is None:
                raise InvalidParameterError("worker_prices needs n_workers")
            prices = np.asarray(self.worker_prices, dtype=float)
            if prices.shape != (self.n_workers,) or np.any(prices <= 0):
                raise InvalidParameterError(
                    f"worker_prices must be {self.n_workers} numbers > 0, got shape {prices.shape}"
                )
            object.__setattr__(self, "worker_prices", prices)
        if self.features is not None:
            features = np.asarray(self.features, dtype=float)
            if features.ndim != 2 or features.shape[0] != n_items:
                raise InvalidParameterError(
                    f"features must have shape (n_items={n_items}, n_features), got "
                    f"{features.shape}"
                )
            if not np.all(np.isfinite(features)):
                raise InvalidParameterError("features must be finite numbers (no NaN or inf)")
            object.__setattr__(self, "features", features)
        if self.workers is None and self.n_workers is not None:
            # the old spelling (n_workers, worker_prices) fills in the spec
            object.__setattr__(
                self, "workers", WorkerSpec(self.n_workers, prices=self.worker_prices)
            )
        self._set_contexts(n_items)

    def _take_workers(self, spec: WorkerSpec) -> None:
        """``n_workers`` and ``worker_prices`` from ``spec`` (they must agree if given too)."""
        if not isinstance(spec, WorkerSpec):
            raise InvalidParameterError(f"workers must be a WorkerSpec, got {type(spec).__name__}")
        if self.n_workers is not None and self.n_workers != spec.n_workers:
            raise InvalidParameterError(
                f"n_workers={self.n_workers} disagrees with workers ({spec.n_workers} workers)"
            )
        if self.worker_prices is not None and (
            spec.prices is None
            or not np.array_equal(np.asarray(self.worker_prices, dtype=float), spec.prices)
        ):
            raise InvalidParameterError("worker_prices disagrees with workers.prices")
        object.__setattr__(self, "n_workers", spec.n_workers)
        object.__setattr__(self, "worker_prices", spec.prices)

    def _set_contexts(self, n_items: int) -> None:
        if self.contexts is None:
            if self.n_contexts is not None:
                raise InvalidParameterError("n_contexts needs contexts")
            return
        ctx = np.asarray(self.contexts, dtype=np.int64)
        if ctx.shape != (n_items,) or (ctx.size and ctx.min() < 0):
            raise InvalidParameterError(
                f"contexts must be {n_items} integers >= 0, got shape {ctx.shape}"
            )
        n_ctx = int(ctx.max()) + 1 if self.n_contexts is None else int(self.n_contexts)
        if n_ctx < int(ctx.max()) + 1:
            raise InvalidParameterError(
                f"n_contexts={n_ctx} but contexts go up to {int(ctx.max())}"
            )
        object.__setattr__(self, "contexts", ctx)
        object.__setattr__(self, "n_contexts", n_ctx)

    @property
    def prior_array(self) -> FloatArray:
        """The validated prior, shape (n_items, n_classes)."""
        assert self.prior is not None  # set in __post_init__
        return self.prior

    @property
    def threshold_array(self) -> FloatArray:
        """The validated thresholds, shape (n_items,)."""
        assert self.thresholds is not None  # set in __post_init__
        return self.thresholds

    def price_of(self, worker: int | None) -> float:
        """The price of one label from ``worker`` (``default_price`` without prices)."""
        if self.worker_prices is None or worker is None:
            return self.default_price
        return float(self.worker_prices[worker])

    def with_budget(self, budget: float) -> Problem:
        """The same problem with another budget."""
        return Problem(
            n_items=self.n_items,
            budget=budget,
            n_classes=self.n_classes,
            prior=self.prior,
            thresholds=self.thresholds,
            features=self.features,
            default_price=self.default_price,
            contexts=self.contexts,
            n_contexts=self.n_contexts,
            workers=self.workers,
        )


@dataclass(frozen=True)
class PairAvailability:
    """Which (item, worker) pairs can still be asked (replay of a fixed data set, or a live
    push campaign's pairs): the *recorded* kind of a state's availability (see
    :class:`Availability`).

    Attributes:
        items, workers: the distinct pairs, shape (n_pairs,) each.
        remaining: unused recorded labels per pair, shape (n_pairs,) (updated in place by the
            environment; a pair is available while ``remaining > 0``).
    """

    items: IntArray
    workers: IntArray
    remaining: IntArray


class LabelLog:
    """Every label received, in arrival order, as columns (DESIGN §11): the one log that
    policies, aggregators and verdicts read (``state.label_log``).

    Append-only: ``append`` is O(1) amortised (the arrays double when full, so n labels cost
    O(n) copies in all). The columns are views of the first ``len(log)`` entries — read them,
    do not keep them across appends (a doubling replaces the arrays).

    Columns: ``items``, ``workers`` (−1: anonymous), ``labels`` (class indices), shape (n,)
    int64 each, and ``costs``, shape (n,) float64.
    """

    __slots__ = ("_costs", "_items", "_labels", "_n", "_workers")

    def __init__(self, capacity: int = 64) -> None:
        capacity = max(int(capacity), 1)
        self._items = np.empty(capacity, dtype=np.int64)
        self._workers = np.empty(capacity, dtype=np.int64)
        self._labels = np.empty(capacity, dtype=np.int64)
        self._costs = np.empty(capacity, dtype=np.float64)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def append(self, event: LabelEvent) -> None:
        """Add ``event`` at the end."""
        n = self._n
        if n == self._items.shape[0]:
            for name in ("_items", "_workers", "_labels", "_costs"):
                old = getattr(self, name)
                grown = np.empty(2 * old.shape[0], dtype=old.dtype)
                grown[:n] = old
                setattr(self, name, grown)
        self._items[n] = event.item
        self._workers[n] = event.worker
        self._labels[n] = event.label
        self._costs[n] = event.cost
        self._n = n + 1

    def extend(
        self, items: IntArray, workers: IntArray, labels: IntArray, costs: FloatArray
    ) -> None:
        """Add many labels at the end, in order: what ``append`` of each would do (the
        columns' arrays, shape (m,) each)."""
        m = int(np.shape(items)[0])
        n = self._n
        if n + m > self._items.shape[0]:
            capacity = max(2 * self._items.shape[0], n + m)
            for name in ("_items", "_workers", "_labels", "_costs"):
                old = getattr(self, name)
                grown = np.empty(capacity, dtype=old.dtype)
                grown[:n] = old[:n]
                setattr(self, name, grown)
        self._items[n : n + m] = items
        self._workers[n : n + m] = workers
        self._labels[n : n + m] = labels
        self._costs[n : n + m] = costs
        self._n = n + m

    @property
    def items(self) -> IntArray:
        return self._items[: self._n]

    @property
    def workers(self) -> IntArray:
        return self._workers[: self._n]

    @property
    def labels(self) -> IntArray:
        return self._labels[: self._n]

    @property
    def costs(self) -> FloatArray:
        return self._costs[: self._n]


class Availability:
    """Which items — or (item, worker) pairs — the question being asked may name: the one
    answer to "what can this worker be given now" (DESIGN §11), held by every
    :class:`CampaignState` (``state.availability``).

    Its kinds, one object:

    - *synthetic world*: every eligible item (``eligible``; items only ever leave it);
    - *replay*: the recorded pairs with an unused label (``pairs``;
      :meth:`items_for_worker`);
    - *live* (a :class:`~crowdbudget.campaign.Campaign`, or a simulated campaign under the
      live rules of :mod:`crowdbudget.engine.live`): for one question, ``closed`` items (the
      asking worker's own items, the items whose pending work fills their label cap) and
      ``last`` items (items with work pending: offered only when nothing else is open). The
      live step sets them around ``select`` (:meth:`question`); offline both are empty.

    A policy reads candidates here and scores them; it does not handle the tiers. A policy
    that searches its own structure (a score heap, a cycle) runs that search through
    :meth:`offer` (the money check at the worker's price, then :meth:`search`), which tries
    the open items outside ``last`` first and then the rest; the search reads ``closed`` (the
    current try's) or :meth:`open_mask` / :meth:`open_items` / :meth:`items_for_worker`. A
    policy that names an item without searching (a fixed plan) is asked once all the same:
    the live step refuses an answer that is not open (:meth:`is_open`), as "no work for this
    worker now". The budget and capacities stay the state's (:meth:`CampaignState.can_afford`,
    :meth:`CampaignState.has_capacity`); the live step checks the asking worker's real price
    and capacity before asking.
    """

    __slots__ = (
        "_grouped",
        "_state",
        "_worker_order",
        "_worker_ptr",
        "blocked",
        "closed",
        "last",
        "worker_items",
    )

    def __init__(self, state: CampaignState) -> None:
        self._state = state
        #: items the current try may not name (empty: none); a set, small (one worker's)
        self.closed: Collection[int] = ()
        #: items offered only when nothing outside them is open (empty offline)
        self.last: Collection[int] = ()
        #: under the live rules: workers who may not be named (push mode: blocked), and
        #: each worker's items (held or labeled: a pair of those is refused); empty offline
        self.blocked: Collection[int] = ()
        self.worker_items: Mapping[int, Collection[int]] = {}
        self._grouped: IntArray | None = None
        self._worker_ptr = np.zeros(1, dtype=np.int64)
        self._worker_order = np.zeros(0, dtype=np.int64)

    @property
    def eligible(self) -> BoolArray:
        """Items that may still be assigned, shape (n_items,) (the state's ``eligible``)."""
        return self._state.eligible

    @property
    def pairs(self) -> PairAvailability | None:
        """The recorded pairs with their unused labels (None: every pair can be asked)."""
        return self._state.pairs

    @contextmanager
    def question(
        self,
        closed: Collection[int] = (),
        last: Collection[int] = (),
        *,
        blocked: Collection[int] = (),
        worker_items: Mapping[int, Collection[int]] | None = None,
    ) -> Iterator[Availability]:
        """``closed``, ``last`` (and, push mode, ``blocked`` and ``worker_items``) for the
        block (one question: ``select``), and what they were before after it."""
        before = self.closed, self.last, self.blocked, self.worker_items
        self.closed, self.last, self.blocked = closed, last, blocked
        self.worker_items = {} if worker_items is None else worker_items
        try:
            yield self
        finally:
            self.closed, self.last, self.blocked, self.worker_items = before

    def pairs_shut(self, pair_items: IntArray, pair_workers: IntArray) -> BoolArray | None:
        """Push mode under the live rules: which of the pairs (``pair_items[k]``,
        ``pair_workers[k]``), shape (n_pairs,), may not be named — the worker blocked, or
        holding the item already; None when no pair is (offline, a live campaign's listed
        pairs). O(n_pairs + the workers' items): for a policy that scans its pairs anyway."""
        if not self.blocked and not self.worker_items:
            return None
        shut = np.zeros(pair_items.shape[0], dtype=bool)
        if self.blocked:
            blocked = np.fromiter(self.blocked, dtype=np.int64, count=len(self.blocked))
            shut |= np.isin(pair_workers, blocked)
        held = [(item, w) for w, items in self.worker_items.items() for item in items]
        if held:
            # one integer key per pair: item · span + worker (span > every worker index)
            span = int(max(pair_workers.max(initial=-1), max(w for _, w in held))) + 1
            keys = np.array([item * span + w for item, w in held], dtype=np.int64)
            shut |= np.isin(pair_items * span + pair_workers, keys)
        return shut

    def pair_open(self, item: int, worker: int) -> bool:
        """Push mode: whether (``item``, ``worker``) may be named now — the item open
        (:meth:`is_open`), the worker not blocked and not holding the item already (on a
        replay the recorded pairs say more: ``pairs``)."""
        return (
            self.is_open(item)
            and worker not in self.blocked
            and item not in self.worker_items.get(worker, ())
        )

    def search(self, find: Callable[[], _T | None]) -> _T | None:
        """``find()`` with the items in ``last`` closed too, and, when that finds nothing,
        ``find()`` again without (busy items last). ``find`` reads ``closed`` (or the open
        items) anew on each try; what a try that found nothing did (a generator's draws,
        ineligible items dropped for good) is part of the decision, the same on every run."""
        closed, last = self.closed, self.last
        if not last:
            return find()
        self.closed = set(closed).union(last)
        try:
            found = find()
        finally:
            self.closed = closed
        return find() if found is None else found

    def offer(self, worker: int | None, find: Callable[[float], _T | None]) -> _T | None:
        """``find(price)`` through :meth:`search`, at ``worker``'s price
        (``problem.price_of``), or None when the budget left cannot pay it: the money check of
        every policy that searches."""
        price = self._state.problem.price_of(worker)
        if not self._state.can_afford(price):
            return None
        return self.search(lambda: find(price))

    def is_open(self, item: int) -> bool:
        """Whether ``item`` may be named now: eligible and not closed (on a replay, the pairs
        of the asking worker are :meth:`items_for_worker`)."""
        return bool(self._state.eligible[item]) and item not in self.closed

    def open_mask(self) -> BoolArray:
        """The items that may be named now, shape (n_items,): eligible and not closed (the
        state's own array when nothing is closed — read it, do not write it)."""
        if not self.closed:
            return self._state.eligible
        mask = self._state.eligible.copy()
        mask[np.fromiter(self.closed, dtype=np.int64, count=len(self.closed))] = False
        return mask

    def open_items(self) -> IntArray:
        """The items that may be named now, ascending, shape (n_open,)."""
        return np.flatnonzero(self.open_mask())

    def any_open(self) -> bool:
        """Whether an item outside ``closed`` is still eligible: the eligible count against
        the closed eligible ones (one O(n_items) count plus O(|closed|))."""
        eligible = self._state.eligible
        n_closed = sum(1 for item in self.closed if eligible[item])
        return int(np.count_nonzero(eligible)) > n_closed

    def items_for_worker(self, worker: int | None) -> IntArray | None:
        """Pull mode on a replay: the open items ``worker`` still has an unused recorded
        label for, ascending (None when any item will do: push mode or no ``pairs``).

        Cost O(labels recorded for the worker), not O(n_items): the pairs are grouped by
        worker once (CSR over ``pairs.workers``)."""
        pairs = self._state.pairs
        if worker is None or pairs is None:
            return None
        if self._grouped is not pairs.workers:
            counts = np.bincount(pairs.workers, minlength=int(pairs.workers.max(initial=-1)) + 1)
            self._worker_ptr = np.concatenate([[0], np.cumsum(counts)])
            self._worker_order = np.argsort(pairs.workers, kind="stable")
            self._grouped = pairs.workers
        if not 0 <= worker < self._worker_ptr.shape[0] - 1:
            return np.empty(0, dtype=np.int64)
        mine = self._worker_order[self._worker_ptr[worker] : self._worker_ptr[worker + 1]]
        items = pairs.items[mine[pairs.remaining[mine] > 0]]
        items = np.unique(items[self._state.eligible[items]])
        if self.closed:
            closed = np.fromiter(self.closed, dtype=np.int64, count=len(self.closed))
            items = items[~np.isin(items, closed)]
        return items

    def any_pair_left(self) -> bool:
        """Whether a recorded pair with an unused label has an eligible item (True without
        ``pairs``: every pair can be asked)."""
        pairs = self._state.pairs
        return pairs is None or bool(
            np.any((pairs.remaining > 0) & self._state.eligible[pairs.items])
        )


@dataclass
class CampaignState:
    """What has happened so far, as arrays (what policies may look at).

    Which items (or pairs) a question may name is ``availability`` (:class:`Availability`):
    ``eligible`` and ``pairs`` are its permanent parts, kept here as arrays.

    Attributes:
        problem: the problem being solved.
        label_counts: votes per item and class, shape (n_items, n_classes).
        pending: assignments handed out and not yet answered, per item, shape (n_items,).
        eligible: items that may still be assigned, shape (n_items,). Items only ever leave
            (replay: no unused recorded label; requirement met); a policy may rely on that.
        spent: budget spent on labels that came back.
        committed: price of the pending assignments (reserved so the budget is never
            overspent).
        n_events: number of labels received.
        time: the current time (continuous-time environments), else the number of events.
        pairs: the (item, worker) pairs that can still be asked, or None when every pair can
            (synthetic worlds, live pull campaigns).
        remaining_capacity: labels each worker may still give, shape (n_workers,), or None
            when the problem's workers have no capacities: ``workers.capacities`` minus the
            labels received from each worker and the assignments pending with it.
        label_log: every label received, in order (:class:`LabelLog`): what a verdict
            fitted on the labels (an aggregator) and an aggregating policy read.
    """

    problem: Problem
    label_counts: IntArray
    pending: IntArray
    eligible: BoolArray
    spent: float = 0.0
    committed: float = 0.0
    n_events: int = 0
    time: float = 0.0
    pairs: PairAvailability | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    remaining_capacity: IntArray | None = None
    label_log: LabelLog = field(default_factory=LabelLog)
    availability: Availability = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.availability = Availability(self)

    @classmethod
    def initial(cls, problem: Problem) -> CampaignState:
        """The state before any label: nothing spent, every item eligible."""
        capacities = None if problem.workers is None else problem.workers.capacities
        return cls(
            problem=problem,
            label_counts=np.zeros((problem.n_items, problem.n_classes), dtype=np.int64),
            pending=np.zeros(problem.n_items, dtype=np.int64),
            eligible=np.ones(problem.n_items, dtype=bool),
            remaining_capacity=None if capacities is None else capacities.copy(),
        )

    @property
    def n_items(self) -> int:
        return self.problem.n_items

    @property
    def budget(self) -> float:
        return self.problem.budget

    @property
    def remaining(self) -> float:
        """Budget neither spent nor reserved by pending assignments."""
        return self.problem.budget - self.spent - self.committed

    def can_afford(self, price: float = 1.0) -> bool:
        """Whether one more assignment of ``price`` fits in the budget (1e-9 slack for
        float sums of prices)."""
        return price <= self.remaining + 1e-9

    def n_labels(self, item: int) -> int:
        """Labels received for ``item``."""
        return int(self.label_counts[item].sum())

    def has_capacity(self, worker: int | None) -> bool:
        """Whether ``worker`` may take one more label (always, without capacities)."""
        capacity = self.remaining_capacity
        return capacity is None or worker is None or worker < 0 or bool(capacity[worker] > 0)

    def record_assignment(self, assignment: Assignment) -> None:
        """Reserve budget (and the worker's capacity) for ``assignment`` (raises if it would
        overspend, is ineligible or goes to a worker with no capacity left)."""
        if not 0 <= assignment.item < self.n_items or not self.eligible[assignment.item]:
            raise IneligibleAssignmentError(f"item {assignment.item} cannot be assigned now")
        if not self.can_afford(assignment.price):
            raise BudgetError(
                f"assignment of price {assignment.price} exceeds the remaining budget "
                f"{self.remaining:g}"
            )
        if not self.has_capacity(assignment.worker):
            raise IneligibleAssignmentError(f"worker {assignment.worker} has no capacity left")
        self.pending[assignment.item] += 1
        self.committed += assignment.price
        self._use_capacity(assignment.worker, 1)

    def release_assignment(self, assignment: Assignment) -> None:
        """Give back the budget (and capacity) of a cancelled or expired assignment."""
        self.pending[assignment.item] -= 1
        self.committed -= assignment.price
        self._use_capacity(assignment.worker, -1)

    def _use_capacity(self, worker: int | None, n: int) -> None:
        if self.remaining_capacity is not None and worker is not None and worker >= 0:
            self.remaining_capacity[worker] -= n

    def record_label(self, event: LabelEvent, assignment: Assignment | None = None) -> None:
        """Count ``event``; settles ``assignment`` (its reservation becomes spending, and the
        worker's reserved capacity a used one)."""
        if assignment is not None:
            self.release_assignment(assignment)
        self._use_capacity(event.worker, 1)
        self.label_counts[event.item, event.label] += 1
        self.label_log.append(event)
        self.spent += event.cost
        self.n_events += 1
        self.time = event.time if event.time is not None else float(self.n_events)


@dataclass(frozen=True, slots=True)
class StepResult:
    """What an environment returns for one assignment (Gymnasium-like).

    ``terminated``: the world has nothing more to give (e.g. replay: every recorded label used).
    ``truncated``: stopped from outside (time horizon reached). ``event`` is None when the
    assignment produced no label (cancelled at the horizon, worker never answered).
    """

    event: LabelEvent | None
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)


def as_int_array(values: ArrayLike) -> IntArray:
    """``values`` as a 1-D int64 array."""
    return np.asarray(values, dtype=np.int64).reshape(-1)


def task_contexts(problem: Problem) -> tuple[IntArray, int]:
    """The contexts of ``problem``'s tasks, shape (n_items,), and their number S; a problem
    without contexts has one (every task 0)."""
    ctx = problem.contexts
    if ctx is None:
        return np.zeros(problem.n_items, dtype=np.int64), 1
    n_ctx = problem.n_contexts
    return np.asarray(ctx, dtype=np.int64), int(n_ctx if n_ctx is not None else ctx.max() + 1)
