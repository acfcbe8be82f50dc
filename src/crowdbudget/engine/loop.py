"""One campaign loop: ``drive(policy, env, state, clock, recorder)`` (DESIGN §11).

Events happen in time order. At a worker's arrival the recorder sees the state (and may end
the campaign, e.g. once the last budget checkpoint is recorded); in pull mode the world names
the arriving worker (push mode: the policy picks); the policy returns an assignment or None;
the state reserves its price and the clock says how long the work takes. When the work is
done the world answers, the state settles the label and the policy observes it; items the
world can no longer answer leave the eligible set. Pending work completes in order of its
completion time, so several assignments may be out at once and come back out of order. The
recorder sees the final state once at the end.

The clock (:class:`Timing`) supplies the arrivals and the work times:

- discrete time (Chen, Lin, Zhou 2013 §2), :class:`Clock`: one arrival per step and zero
  work time — every assignment is answered before the next arrival, so the loop is the
  plain select → answer → observe sequence;
- continuous time (Hu & Frazier §6), :class:`ArrivalClock`: Poisson arrivals and Exp(μ)
  work times drawn by the world
  (:class:`~crowdbudget.simulation.continuous_time.ContinuousTimeEnvironment`), at most U
  workers hired, outstanding work cancelled at the horizon; labels and ``state.time`` carry
  the event times (:func:`crowdbudget.experiments.continuous.run_continuous_campaign`);
- a work time of ``math.inf`` holds the work until the policy has nothing to hand out
  (``select`` returns None); held work is then answered at once, newest first. The
  conformance kit's adversary (:mod:`crowdbudget.testing.checks`) uses it.

Under :class:`~crowdbudget.engine.live.LiveRules` (``drive(..., live=rules)``) the loop asks
through the live step (:class:`~crowdbudget.engine.live.LiveStep`) as a live
:class:`~crowdbudget.campaign.Campaign` does: the worker's price and capacity, a pending limit,
the label cap, the worker's own items closed and busy items last; work not answered within the
rules' ``ttl`` expires (released at hand-out time + ttl, the world not asked). An arrival that
gets no work then ends the campaign only when nothing is pending and the budget or the items
are exhausted, or (push mode) when the policy chose no pair and nothing is pending, or (pull
mode) when the policy has no assignment although items are open (the live campaign's stop
reason ``policy``; for a policy that models workers, once every worker got none) and nothing
is pending; otherwise the next arrival is served (the clock's arrivals must end). Push mode
under the live rules without control tasks needs a policy that chooses workers
(``chooses_workers``; refused at the start, as a push :class:`~crowdbudget.campaign.Campaign`
refuses it). A policy whose answers are refused :func:`no_progress_limit` times with no work
handed out and nothing pending (it keeps naming a closed item, say) would loop for ever: the
loop stops it with an :class:`~crowdbudget.exceptions.InvalidParameterError` naming it.

A world may define ``claim(assignment)``: it is told when work is handed out, before the
answer (a replay in continuous time reserves one unused record of the item there, so the
label exists when the worker finishes; the item leaves when none is left).

Every campaign in the package runs here: discrete-time experiments
(:func:`crowdbudget.experiments.runner.run_campaign`, the priced-worker experiments of
:mod:`crowdbudget.experiments.papers.rangi2018`), continuous-time ones and the conformance
kit. A live :class:`~crowdbudget.campaign.Campaign` applies the same state transitions from
events as they arrive; the compiled engine (:mod:`crowdbudget.engine.fast`) reproduces
this loop bit for bit where it applies.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from crowdbudget.aggregation.calibration import verdict_calibration
from crowdbudget.engine.live import Decision, LiveRules, LiveStep
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.base import AllocationPolicy, check_push_capable
from crowdbudget.policies.verdict import PosteriorVerdict, Verdict
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.types import Assignment, BoolArray, CampaignState, IntArray, LabelEvent

#: the policy's own model, the verdict when none is given
_POSTERIOR = PosteriorVerdict()

#: ``metrics(state, final_labels, true_labels, evaluation_mask) -> {name: value}``
MetricsHook = Callable[[CampaignState, IntArray, IntArray, BoolArray], dict[str, float]]


@dataclass(frozen=True)
class Clock:
    """When workers arrive and how long they work: discrete time, one arrival per step and
    zero work time. ``mode``: ``"push"`` (the policy picks the item, and the worker if it
    chooses workers) or ``"pull"`` (a worker arrives first and the policy serves them)."""

    mode: str = "push"

    def __post_init__(self) -> None:
        if self.mode not in ("push", "pull"):
            raise InvalidParameterError(f"mode must be 'push' or 'pull', got {self.mode!r}")

    @property
    def pull(self) -> bool:
        return self.mode == "pull"

    @property
    def timed(self) -> bool:
        """Events are counted, not timed: ``state.time`` stays the number of labels."""
        return False

    @property
    def horizon(self) -> float:
        return math.inf

    @property
    def max_assignments(self) -> int | None:
        return None

    def next_arrival(self, after: float) -> float:
        # step numbers as floats: exact up to 2^53 steps
        return after + 1.0

    def next_duration(self, state: CampaignState) -> float:
        return 0.0


class Timing(Protocol):
    """What :func:`drive` asks of a clock.

    ``pull``: the world names the arriving worker. ``timed``: labels and ``state.time`` carry
    the event times (else ``state.time`` is the number of labels). ``horizon``: outstanding
    work is cancelled there (``math.inf``: never). ``max_assignments``: arrivals after this
    many assignments are ignored (None: no limit). ``next_arrival(after)``: the time of the
    arrival after the one at ``after`` (``math.inf``: none). ``next_duration(state)``: the work
    time of the assignment just handed out (``state`` already counts it as pending;
    ``math.inf``: held until the policy idles, then answered newest first)."""

    @property
    def pull(self) -> bool: ...

    @property
    def timed(self) -> bool: ...

    @property
    def horizon(self) -> float: ...

    @property
    def max_assignments(self) -> int | None: ...

    def next_arrival(self, after: float) -> float: ...

    def next_duration(self, state: CampaignState) -> float: ...


class ArrivalStream(Protocol):
    """Arrival and work times drawn by a continuous-time world
    (:class:`~crowdbudget.simulation.continuous_time.ContinuousTimeEnvironment`)."""

    @property
    def horizon(self) -> float: ...

    def next_arrival(self) -> float: ...

    def next_duration(self) -> float: ...


@dataclass(frozen=True)
class ArrivalClock:
    """Continuous time (Hu & Frazier §6): workers arrive at the times of ``stream``'s arrival
    process and each is served in pull mode; the j-th hired worker works the j-th duration
    of the stream (common random numbers: every policy of a replication faces the same
    arrival and work times); at most ``max_assignments`` (U) workers are hired; pending work
    at the stream's horizon is cancelled (§4: "all outstanding tasks ... are canceled")."""

    stream: ArrivalStream
    max_assignments: int | None = None

    @property
    def pull(self) -> bool:
        return True

    @property
    def timed(self) -> bool:
        return True

    @property
    def horizon(self) -> float:
        return self.stream.horizon

    def next_arrival(self, after: float) -> float:
        # the stream keeps its own time, which is ``after`` (the last arrival it gave)
        return self.stream.next_arrival()

    def next_duration(self, state: CampaignState) -> float:
        return self.stream.next_duration()


class Decider(Protocol):
    """What the loop asks of a policy: ``select`` (None: nothing to hand out) and
    ``observe``. An :class:`~crowdbudget.policies.base.AllocationPolicy` is one; so is a
    wrapper that checks or restricts its choices (the conformance kit, the live rule)."""

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None: ...

    def observe(self, event: LabelEvent) -> None: ...


@dataclass(frozen=True)
class Outcome:
    """How a campaign run by :func:`drive` ended: ``assignments`` handed out, ``cancelled``
    (pending at the end, released: the horizon, the recorder or the world ended it),
    ``end_time`` (the clock's time of the last event, or the horizon)."""

    assignments: int
    cancelled: int
    end_time: float


class Recorder(Protocol):
    """What the loop reports to: ``before_decision`` (True ends the campaign) and
    ``finish``."""

    def before_decision(self, state: CampaignState) -> bool: ...

    def finish(self, state: CampaignState) -> None: ...


@dataclass
class CheckpointRecorder:
    """One row per budget checkpoint (ascending): when the spend reaches a checkpoint, the
    verdict's final labels are scored on the evaluated items; the campaign ends once the last
    checkpoint is recorded. Rows: ``budget``, ``accuracy``, ``labels_used``, ``seconds``,
    ``ece``, ``nll``, ``brier`` (:func:`crowdbudget.experiments.metrics.verdict_calibration`
    on the verdict's class probabilities) and the hook's metrics; a campaign that stops early
    records its final state at every checkpoint left. ``verdict``: the
    :class:`~crowdbudget.policies.verdict.Verdict` (reset by the caller; None: the policy's
    own model).

    ``readers``: more verdicts reading the same campaign, ``(label, verdict)`` each (reset
    by the caller): at every checkpoint each adds its own row, with ``"policy": label``
    (``reader_rows``) — one allocation read several ways. ``seconds`` of a row is the
    campaign's time so far without any verdict's, plus that row's verdict's own time so far:
    what a campaign read by that verdict alone would have taken, whatever else reads it."""

    policy: AllocationPolicy
    checkpoints: Sequence[float]
    true_labels: IntArray
    evaluation_mask: BoolArray
    metrics: MetricsHook | None = None
    verdict: Verdict | None = None
    readers: Sequence[tuple[str, Verdict]] = ()
    rows: list[dict[str, Any]] = field(default_factory=list)
    reader_rows: list[dict[str, Any]] = field(default_factory=list)
    start: float = field(default_factory=time.perf_counter)
    _next: int = 0
    # seconds spent in each verdict so far: the main one first, then the readers'
    _verdict_seconds: list[float] = field(default_factory=list)

    def _read(self, verdict: Verdict, state: CampaignState) -> dict[str, Any]:
        """``accuracy`` and the calibration and hook metrics of ``verdict``'s reading."""
        labels = verdict.labels(state, self.policy)
        mask, truth = self.evaluation_mask, self.true_labels
        accuracy = float(np.mean(labels[mask] == truth[mask]))
        # the verdict's calibration (ece, nll, brier), then the hook's metrics;
        probas = verdict.probabilities(state, self.policy)
        extra = verdict_calibration(probas, labels, truth, mask)
        extra.update(self.metrics(state, labels, truth, mask) if self.metrics is not None else {})
        return {"accuracy": accuracy, **extra}

    def _record(self, state: CampaignState, upto: float) -> None:
        verdicts = [self.verdict if self.verdict is not None else _POSTERIOR]
        verdicts += [verdict for _, verdict in self.readers]
        if not self._verdict_seconds:
            self._verdict_seconds = [0.0] * len(verdicts)
        readings = []
        for k, verdict in enumerate(verdicts):
            began = time.perf_counter()
            readings.append(self._read(verdict, state))
            self._verdict_seconds[k] += time.perf_counter() - began
        # the campaign's own time: the wall time without any verdict's
        campaign = time.perf_counter() - self.start - sum(self._verdict_seconds)
        labels = [None, *(label for label, _ in self.readers)]
        while self._next < len(self.checkpoints) and self.checkpoints[self._next] <= upto:
            for k, (label, reading) in enumerate(zip(labels, readings, strict=True)):
                row = {
                    "budget": self.checkpoints[self._next],
                    "accuracy": reading["accuracy"],
                    "labels_used": state.spent,
                    "seconds": campaign + self._verdict_seconds[k],
                    **{key: value for key, value in reading.items() if key != "accuracy"},
                }
                if label is None:
                    self.rows.append(row)
                else:
                    self.reader_rows.append({"policy": label, **row})
            self._next += 1

    def before_decision(self, state: CampaignState) -> bool:
        # 1e-9: spends are float sums of prices
        if state.spent + 1e-9 >= self.checkpoints[self._next]:
            self._record(state, state.spent + 1e-9)
            return self._next == len(self.checkpoints)
        return False

    def next_checkpoint(self) -> float:
        """The spend at which :meth:`before_decision` records next (after it said go on)."""
        return float(self.checkpoints[self._next])

    def finish(self, state: CampaignState) -> None:
        self._record(state, float("inf"))


@dataclass(frozen=True)
class StopAtSpend:
    """A recorder that ends the campaign once ``budget`` is spent (None: only when the
    policy stops or the world has nothing left); it records nothing."""

    budget: float | None = None

    def before_decision(self, state: CampaignState) -> bool:
        return self.budget is not None and state.spent >= self.budget

    def finish(self, state: CampaignState) -> None:
        pass


#: the live step's causes of "the answer (or the worker) was refused": the stuck guard counts
#: them (``done``: the policy named a closed item, or every open item is the worker's)
_REFUSALS = frozenset({"done", "refused", "blocked"})


def no_progress_limit(n_workers: int | None) -> int:
    """How many answers may be refused (live step causes ``done``, ``refused``, ``blocked``)
    with no work handed out and nothing pending before :func:`drive` under the live rules
    calls the policy stuck: 10 per worker plus 100, generous enough that random arrivals
    reach a worker who can still be served (for K workers, one arrival in K on average;
    missing it 10K + 100 times running has probability below e^-10)."""
    return 10 * (n_workers or 0) + 100


@dataclass
class _LiveQuestions:
    """The arrivals of one run under the live rules asked through the live step, and the
    answers refused since work was last handed out or pending: an error once they pass
    ``patience`` (:func:`no_progress_limit`)."""

    policy_name: str
    patience: int
    pull: bool
    #: pull mode: the policy's answer depends on the worker (``needs_workers``; a wrapper
    #: without the flag counts as one), and how many workers there are (None: unknown)
    models_workers: bool = True
    n_workers: int | None = None
    refused: int = 0
    #: pull mode: the workers the policy gave nothing (cause ``policy``) since work was
    #: last handed out or pending
    declined: set[int | None] = field(default_factory=set)

    @classmethod
    def start(
        cls, policy: Decider, state: CampaignState, clock: Timing, live: LiveRules
    ) -> _LiveQuestions:
        """The guard of one run; refuses push mode without control tasks for a policy that
        picks items only (a wrapper without the flag passes: its inner policy is unknown)."""
        name = str(getattr(policy, "policy_name", type(policy).__name__))
        if live.control is None and not clock.pull:
            check_push_capable(
                bool(getattr(policy, "chooses_workers", True)),
                name,
                "drive it in pull mode (Clock('pull')) or give control tasks",
            )
        n_workers = state.problem.n_workers
        models_workers = bool(getattr(policy, "needs_workers", True))
        return cls(name, no_progress_limit(n_workers), clock.pull, models_workers, n_workers)

    def decide(
        self,
        step: LiveStep,
        live: LiveRules,
        policy: Decider,
        state: CampaignState,
        worker: int | None,
        *,
        pending: bool,
    ) -> tuple[Assignment | None, bool]:
        """The work for one arrival (``pending``: work is out), and whether no work ends the
        campaign: the live step's exhaustion, in push mode the policy choosing no pair
        (cause None), or in pull mode the policy having nothing although items are open
        (cause ``policy``, the live campaign's stop reason ``policy``) — for a policy that
        models workers once every worker got nothing since work was last out (with nothing
        pending nothing changes; :meth:`policy_done`)."""
        decision = step.under(live, policy, state, worker, pull=self.pull)
        assignment = decision.assignment
        final = (
            (not self.pull and assignment is None and decision.cause is None)
            or step.exhausted(state, live)
            or (decision.cause == "policy" and not pending and self.policy_done(worker))
        )
        self.count(decision, progressing=assignment is not None or pending or final)
        return assignment, final

    def policy_done(self, worker: int | None) -> bool:
        """Pull mode, the policy gave ``worker`` nothing with items open and nothing
        pending: whether it has no assignment for anyone (its answer does not depend on the
        worker, or every worker of a known pool got nothing since work was last out)."""
        if not self.models_workers:
            return True
        self.declined.add(worker)
        return self.n_workers is not None and len(self.declined) >= self.n_workers

    def count(self, decision: Decision, *, progressing: bool) -> None:
        """Count one arrival's decision; ``progressing``: work was handed out, is pending, or
        the campaign ends. A policy idling (``policy``) is left alone: finite arrivals end it,
        as offline."""
        if progressing:
            self.refused = 0
            if decision.assignment is not None:
                self.declined.clear()
        elif decision.cause in _REFUSALS:
            self.refused += 1
            if self.refused > self.patience:
                raise InvalidParameterError(
                    f"policy {self.policy_name} made no progress under the live rules: "
                    f"{self.refused} answers refused with no work handed out and nothing "
                    f"pending (last: {decision.cause})"
                )


def _sync(env: LabelingEnvironment, state: CampaignState, item: int) -> None:
    """The item leaves the eligible set once the world can no longer answer it."""
    if env.eligible is not None and not env.eligible[item]:
        state.eligible[item] = False


def _observe(policy: Decider, step: LiveStep | None, event: LabelEvent) -> None:
    """``policy`` learns ``event``; a control answer (live rules with control tasks) as a
    label of known truth (``observe_known``, when the policy has it)."""
    control = None if step is None else step.control
    known = getattr(policy, "observe_known", None)
    if control is not None and known is not None and event.item in control.item_set:
        known(event, int(control.truth[event.item]))
    else:
        policy.observe(event)


def drive(
    policy: Decider,
    env: LabelingEnvironment,
    state: CampaignState,
    clock: Timing,
    recorder: Recorder,
    live: LiveRules | None = None,
) -> Outcome:
    """Run one campaign of ``policy`` (reset) in ``env`` (reset) from ``state`` until the
    policy stops with nothing pending, the world has nothing more to give, the recorder ends
    it, the clock's arrivals end with nothing pending or its horizon comes.

    Order of events: the earliest of the next arrival (while fewer than
    ``clock.max_assignments`` are handed out) and the earliest completion; an arrival goes
    first on a tie (with zero work time the assignment of step k completes at k, before the
    arrival at k + 1: the discrete loop exactly). Completions at the same time come back in
    the order they were handed out. Work still pending at the end is released (its price
    and capacity given back) and counted in :attr:`Outcome.cancelled`.

    ``live``: the live rules (module docstring; None: the policy is asked directly).

    Raises:
        InvalidParameterError: under ``live``: an item-only policy in push mode without control
            tasks; answers refused :func:`no_progress_limit` times, nothing handed or pending.
    """
    guard = None if live is None else _LiveQuestions.start(policy, state, clock, live)
    # pending work by (completion time, order handed out); held work (infinite work time)
    # apart, answered newest first when the policy idles
    due: list[tuple[float, int, Assignment]] = []
    held: list[tuple[int, Assignment]] = []
    step = None if live is None else LiveStep(live.max_labels_per_item, pair_of=live.pair_of)
    expiring: set[int] = set()  # keys of pending work that expires instead of completing
    claim = getattr(env, "claim", None)
    timed, horizon, cap = clock.timed, clock.horizon, clock.max_assignments
    handed = 0
    now = 0.0

    def complete(key: int, assignment: Assignment) -> bool:
        """The world answers ``assignment`` at ``now``; True when it has nothing more."""
        if key in expiring:  # the time-to-live ran out first
            expiring.discard(key)
            state.release_assignment(assignment)
            if step is not None:
                step.released(state, key, assignment)
            return False
        result = env.step(assignment)
        if result.event is None:
            state.release_assignment(assignment)
            if step is not None:
                step.released(state, key, assignment)
        else:
            event = result.event
            if timed:
                event = LabelEvent(event.item, event.worker, event.label, event.cost, time=now)
            state.record_label(event, assignment)
            _observe(policy, step, event)
            if step is not None:
                step.labeled(state, event, key)
        _sync(env, state, assignment.item)
        return result.terminated or result.truncated

    def decide(worker: int | None) -> tuple[Assignment | None, bool]:
        """The work for the arrival, and whether no work ends the campaign."""
        if step is None or live is None or guard is None:
            return policy.select(state, worker=worker), True
        return guard.decide(step, live, policy, state, worker, pending=bool(due or held))

    t_arrival = clock.next_arrival(now)
    while True:
        t_done = due[0][0] if due else math.inf
        arrivals_open = cap is None or handed < cap
        t_next = min(t_arrival if arrivals_open else math.inf, t_done)
        if t_next == math.inf:
            break
        if t_next >= horizon:
            now = horizon
            break
        if arrivals_open and t_arrival <= t_done:
            now = t_arrival
            if recorder.before_decision(state):
                break
            if timed:
                state.time = now
            worker = env.arriving_worker() if clock.pull else None
            assignment, final = decide(worker)
            if assignment is None:
                if not due and not held and final:
                    break
                ended = False
                while held and not ended:
                    ended = complete(*held.pop())
                if ended:
                    break
            else:
                state.record_assignment(assignment)
                handed += 1
                if step is not None:
                    step.assigned(state, handed, assignment)
                duration = clock.next_duration(state)
                if claim is not None:
                    claim(assignment)
                    _sync(env, state, assignment.item)
                if live is not None and live.ttl is not None and duration >= live.ttl:
                    expiring.add(handed)
                    duration = live.ttl
                if duration == math.inf:
                    held.append((handed, assignment))
                else:
                    heapq.heappush(due, (now + duration, handed, assignment))
            t_arrival = clock.next_arrival(now)
        else:
            now, key, assignment = heapq.heappop(due)
            if complete(key, assignment):
                break
    outstanding = [assignment for _, _, assignment in due] + [a for _, a in held]
    for assignment in outstanding:
        state.release_assignment(assignment)
    recorder.finish(state)
    return Outcome(handed, len(outstanding), now)
