"""Any allocation policy with its final labels from an aggregator: ``<policy id>:final=ds``.

The papers pair each allocation rule with one inference rule: Chen, Lin, Zhou (2013) label by
the Bayes rule on the homogeneous Beta posterior (Prop. 2.1 / Cor. 2.2), which ignores who gave
each label and, with the symmetric Beta(1, 1) prior, sends every tie to the positive class (on
RTE at the full 8,000 labels: 0.875, below majority vote's 0.897 and Dawid–Skene's 0.9275).
Allocation and inference are separable (BoTorch-style: the decision uses the posterior, the
verdict may use a richer model), so ``opt-kg:final=ds`` allocates exactly as ``opt-kg`` —
same items, same order, same random draws — and labels the items at the end (and at every
checkpoint of an experiment) with Dawid–Skene on the labels received, worker identities
included. Any id of :func:`crowdbudget.aggregation.registry.make_aggregator` without
parameters works (``mv``, ``wmv``, ``ds``, ``one-coin-em``, ``bp``, ``kos-mean``, ...).

``final-workers=per-context`` (with ``final=``) hands the aggregator the virtual worker
``s·K + j`` for worker j's label on a task of context s (Zhang, Ma, Sugiyama 2015 §2.1: a
worker's reliability depends on the task's context), so a Dawid–Skene or one-coin EM verdict
estimates one reliability per (context, worker) — what a worker who is a hammer on one context
and a spammer or malicious on the others needs; a context-blind model averages them into one
mediocre worker (measured on breast_cancer malicious, docs/reproductions.md). On a problem
without contexts it is the same as ``as-given``.

Decisions are unchanged because the wrapper never draws from the policy's generator: the
aggregator's tie-breaking seed comes from a child of it (``Generator.spawn``, which does not
advance the parent's stream).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

import numpy as np

from crowdbudget.aggregation.base import Aggregator
from crowdbudget.aggregation.registry import make_aggregator
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.aggregating import AggregatingPolicy
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.types import (
    Assignment,
    CampaignState,
    IntArray,
    LabelEvent,
    Problem,
    task_contexts,
)

FINAL_WORKERS = ("as-given", "per-context")


class FinalAggregation(AggregatingPolicy):
    """Allocate with ``policy``; final labels by the aggregator ``aggregator`` (module doc).

    Args:
        policy: the allocation policy (an unfitted instance).
        aggregator: an aggregator id without parameters (``"ds"``, ``"mv"``, ...).
        workers: ``"as-given"`` or ``"per-context"`` (one virtual worker per (context,
            worker) for the aggregator; module doc).

    Attributes other than these (``posterior_``, ...) are the wrapped policy's.
    """

    def __init__(
        self, policy: AllocationPolicy, aggregator: str = "ds", workers: str = "as-given"
    ) -> None:
        self.policy = policy
        self.aggregator = aggregator
        self.workers = workers

    def __getattr__(self, name: str) -> Any:
        # only reached for attributes the wrapper lacks; guard against recursion while
        # unpickling (``policy`` not yet set)
        if name == "policy" or "policy" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.policy, name)

    @property
    def chooses_workers(self) -> bool:  # type: ignore[override]
        return self.policy.chooses_workers

    @property
    def budget_aware(self) -> bool:  # type: ignore[override]
        return self.policy.budget_aware

    @property
    def binary_only(self) -> bool:  # type: ignore[override]
        return self.policy.binary_only

    @property
    def replay_pull(self) -> bool:  # type: ignore[override]
        return self.policy.replay_pull

    def validate_params(self) -> None:
        self.policy.validate_params()
        make_aggregator(self.aggregator)  # an unknown id fails here, with the allowed ones
        if self.workers not in FINAL_WORKERS:
            raise InvalidParameterError(
                f"final-workers must be one of {', '.join(FINAL_WORKERS)}, got {self.workers!r}"
            )

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        self.policy.reset(problem, rng)
        self._start_log(problem, int(rng.spawn(1)[0].integers(2**62)))
        self._worker_offset: IntArray | None = None
        if self.workers == "per-context" and problem.n_workers is not None:
            contexts, _ = task_contexts(problem)
            self._worker_offset = contexts * problem.n_workers

    def make_aggregator(self, seed: int) -> Aggregator:
        return make_aggregator(f"{self.aggregator}:seed={seed}")

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        return self.policy.select(state, worker=worker)

    def select_excluding(
        self, state: CampaignState, excluded: Collection[int], *, worker: int | None = None
    ) -> Assignment | None:
        return self.policy.select_excluding(state, excluded, worker=worker)

    @property
    def searches_past_excluded(self) -> bool:
        return self.policy.searches_past_excluded

    def observe(self, event: LabelEvent) -> None:
        logged = event
        if self._worker_offset is not None and event.worker >= 0:
            logged = replace(event, worker=int(self._worker_offset[event.item]) + event.worker)
        super().observe(logged)
        self.policy.observe(event)

    def final_labels(self, state: CampaignState) -> IntArray:
        return super().final_labels(state)
