"""One campaign loop: ``drive(policy, env, state, clock, recorder)`` (DESIGN §11).

A step: the clock says whether a worker arrives (pull mode: the world names the arriving
worker; push mode: the policy picks); the policy returns an assignment or None (stop); the
state reserves its price; the world answers; the state settles the label and the policy
observes it; items the world can no longer answer leave the eligible set. The recorder sees
the state before every decision (and may end the campaign, e.g. once the last budget
checkpoint is recorded) and once at the end.

Discrete time (Chen, Lin, Zhou 2013 §2) is one arrival per step with zero work time:
:class:`Clock`. The continuous-time campaign (Hu & Frazier §6,
:func:`crowdbudget.simulation.continuous_time.run_continuous_campaign`), the conformance
driver and the priced-worker loop still have loops of their own (issue #16, later steps).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from crowdbudget.aggregation.calibration import verdict_calibration
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.policies.verdict import PosteriorVerdict, Verdict
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.types import BoolArray, CampaignState, IntArray

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
    own model)."""

    policy: AllocationPolicy
    checkpoints: Sequence[float]
    true_labels: IntArray
    evaluation_mask: BoolArray
    metrics: MetricsHook | None = None
    verdict: Verdict | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    start: float = field(default_factory=time.perf_counter)
    _next: int = 0

    def _record(self, state: CampaignState, upto: float) -> None:
        verdict = self.verdict if self.verdict is not None else _POSTERIOR
        labels = verdict.labels(state, self.policy)
        mask, truth = self.evaluation_mask, self.true_labels
        accuracy = float(np.mean(labels[mask] == truth[mask]))
        # the verdict's calibration (ece, nll, brier; issue 19), then the hook's metrics;
        probas = verdict.probabilities(state, self.policy)
        extra = verdict_calibration(probas, labels, truth, mask)
        extra.update(self.metrics(state, labels, truth, mask) if self.metrics is not None else {})
        elapsed = time.perf_counter() - self.start
        while self._next < len(self.checkpoints) and self.checkpoints[self._next] <= upto:
            self.rows.append(
                {
                    "budget": self.checkpoints[self._next],
                    "accuracy": accuracy,
                    "labels_used": state.spent,
                    "seconds": elapsed,
                    **extra,
                }
            )
            self._next += 1

    def before_decision(self, state: CampaignState) -> bool:
        # 1e-9: spends are float sums of prices
        if state.spent + 1e-9 >= self.checkpoints[self._next]:
            self._record(state, state.spent + 1e-9)
            return self._next == len(self.checkpoints)
        return False

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


def drive(
    policy: AllocationPolicy,
    env: LabelingEnvironment,
    state: CampaignState,
    clock: Clock,
    recorder: Recorder,
) -> None:
    """Run one campaign of ``policy`` (reset) in ``env`` (reset) from ``state`` until the
    policy stops, the world has nothing more to give or the recorder ends it."""
    while not recorder.before_decision(state):
        worker = env.arriving_worker() if clock.pull else None
        assignment = policy.select(state, worker=worker)
        if assignment is None:
            break
        state.record_assignment(assignment)
        result = env.step(assignment)
        if result.event is None:
            state.release_assignment(assignment)
        else:
            state.record_label(result.event, assignment)
            policy.observe(result.event)
        if env.eligible is not None and not env.eligible[assignment.item]:
            state.eligible[assignment.item] = False
        if result.terminated or result.truncated:
            break
    recorder.finish(state)
