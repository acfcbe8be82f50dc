"""A blocked worker's labels in the verdict: kept (weighed by its worker model) or dropped.

Blocking (:mod:`crowdbudget.engine.control`) stops a worker's *future* work; the labels they
gave before the block are in the campaign. The requester chooses what the verdict does with
them (``ControlTasks.blocked_labels``):

- ``"keep"``: the verdict reads every label, as without blocking; a verdict with a worker
  model (Dawid–Skene, one-coin EM, BDS) weighs a spammer's labels near zero by itself,
  the control answers among its evidence.
- ``"drop"``: the verdict reads the campaign without the labels of the workers blocked by
  the time it reads — the label log and the vote counts of the other workers only
  (:func:`without_workers`; shape and order of everything else unchanged). An aggregator
  verdict is fitted on that log. The ``posterior`` verdict (the policy's own model) was
  updated by every label and cannot forget one, so under ``drop`` it reads the homogeneous
  Beta (Dirichlet) model of the kept votes, its tie rule unchanged (Chen, Lin & Zhou 2013
  Prop. 2.1: the Bayes rule on the problem's prior and the vote counts — the model of the
  count-based policies such as ``opt-kg``).

A block changes the labels a verdict reads, so the wrapped verdict is reset (from the same
generator as at the start: the same tie seed) whenever the blocked set grows; between two
blocks the kept log only grows, so the verdict's own caches (keyed by the number of labels)
stay right.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from crowdbudget.engine.control import ControlLedger
from crowdbudget.policies.base import vote_posterior_labels, vote_posterior_probabilities
from crowdbudget.policies.verdict import PosteriorVerdict, Verdict
from crowdbudget.types import CampaignState, FloatArray, IntArray, LabelLog, Problem

__all__ = ["BlockedLabelsVerdict", "without_workers"]


def without_workers(state: CampaignState, workers: set[int]) -> CampaignState:
    """A read-only view of ``state`` without the labels of ``workers``: its label log and
    vote counts (shape (n_items, n_classes)) rebuilt from the other labels, ``n_events`` their
    number; the problem, pending, eligible items, spend and pairs as they are. O(labels)."""
    log = state.label_log
    keep = ~np.isin(log.workers, np.fromiter(workers, dtype=np.int64, count=len(workers)))
    kept = LabelLog(max(1, int(keep.sum())))
    kept.extend(log.items[keep], log.workers[keep], log.labels[keep], log.costs[keep])
    counts = np.zeros_like(state.label_counts)
    # unbuffered add: an item labelled twice in the same class counts twice
    np.add.at(counts, (kept.items, kept.labels), 1)
    return CampaignState(
        problem=state.problem,
        label_counts=counts,
        pending=state.pending,
        eligible=state.eligible,
        spent=state.spent,
        committed=state.committed,
        n_events=len(kept),
        time=state.time,
        pairs=state.pairs,
        extra=state.extra,
        remaining_capacity=state.remaining_capacity,
        label_log=kept,
    )


class _KeptVotesModel:
    """The policy stand-in the ``posterior`` verdict reads under ``drop``: the Bayes rule on
    the prior and the kept votes (module docstring)."""

    @staticmethod
    def final_labels(state: CampaignState) -> IntArray:
        return vote_posterior_labels(state)

    @staticmethod
    def final_probabilities(state: CampaignState) -> FloatArray:
        return vote_posterior_probabilities(state)


class BlockedLabelsVerdict(Verdict):
    """``inner`` reading the campaign without the blocked workers' labels (``drop``, module
    docstring); before any block it reads the campaign as it is (the same numbers as
    ``keep``)."""

    def __init__(self, inner: Verdict, ledger: ControlLedger) -> None:
        self.inner = inner
        self.ledger = ledger
        self._problem: Problem | None = None
        self._rng: np.random.Generator | None = None
        self._dropped: frozenset[int] = frozenset()

    @property
    def name(self) -> str:
        return self.inner.name

    def reset(self, problem: Problem, rng: np.random.Generator) -> BlockedLabelsVerdict:
        # a copy: a later reset derives the same seed, whatever the policy draws meanwhile
        self._problem, self._rng = problem, copy.deepcopy(rng)
        self._dropped = frozenset()
        self.inner.reset(problem, rng)
        return self

    def _view(self, state: CampaignState, policy: Any) -> tuple[CampaignState, Any]:
        blocked = frozenset(self.ledger.blocked)
        if not blocked:
            return state, policy
        if blocked != self._dropped and self._problem is not None and self._rng is not None:
            self._dropped = blocked
            self.inner.reset(self._problem, copy.deepcopy(self._rng))
        model = _KeptVotesModel() if isinstance(self.inner, PosteriorVerdict) else policy
        return without_workers(state, set(blocked)), model

    def labels(self, state: CampaignState, policy: Any) -> IntArray:
        view, model = self._view(state, policy)
        return self.inner.labels(view, model)

    def probabilities(self, state: CampaignState, policy: Any) -> FloatArray:
        view, model = self._view(state, policy)
        return self.inner.probabilities(view, model)
