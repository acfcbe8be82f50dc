"""Which task to open when the next annotator is unknown: the worker-aware posterior's expected
score over the annotators who are active.

A platform that lets any annotator take an open task (Label Studio's ``/next``) opens a task
before it knows who will annotate it. A worker-aware policy (``opt-kg:posterior=one-coin``,
Chen, Lin, Zhou 2013 §4) scores a pair (item i, worker u): with the item's Beta(a_i, b_i) and
the worker's reliability ρ_u ~ Beta(c_u, d_u), one label z from u moves the item to the
moment-matched Beta(a'_z, b'_z) (which depends on u only through E[ρ_u]), and the stage reward
of that label is ``R_z(i, u) = err(a_i, b_i) − err(a'_z, b'_z)`` (``err``: the probability that
the Bayes label is wrong). Opt-KG scores the pair ``max_z R_z(i, u)``; KG
``Σ_z P(z | i, u) R_z(i, u)``.

Here the annotator U who will take the task is a random variable. Its distribution is
estimated by the annotators' **recent shares**: among the last ``window`` annotations
recorded, annotator u gave a share ``w_u`` (the annotators who are active now, in proportion
to how fast they work; a blocked annotator, who gets no more work, has weight 0). The task's
score is the expected pair score

    S(i) = Σ_u w_u · score(i, u),   arrays: (n_items, n_active) scores, (n_active,) weights,

and the open slots go to the tasks of largest S (ties broken at random, by a generator seeded
with the campaign's seed and event count, so a run is reproducible). This is an exact
expectation of the policy's own pair scores under the share estimate — not the score under an
averaged reliability, which would differ because the score is not linear in E[ρ_u]. A careless
annotator (E[ρ_u] ≈ 1/2) adds about 0 to every task: the ranking is that of the reliable
annotators, weighted by how much work each is likely to take.

Cost: one vectorised look-ahead over n_items × n_active pairs per ranking (200 × 8 = 1,600
pairs; the connector ranks once per round of slot openings, not once per slot). Before any
annotation is recorded there are no shares: the policy's own choice for the slot's holder is
used (a worker with the prior reliability).

Only the binary one-coin posterior is read here (``posterior_`` with item ``a, b`` and worker
``c, d`` arrays: :class:`~crowdbudget.posteriors.one_coin.OneCoinPosterior`); any other policy
keeps its own choice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from crowdbudget.policies._index import canonical_scores
from crowdbudget.posteriors.base import kg_rewards
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.posteriors.one_coin import OneCoinPosterior
from crowdbudget.types import Assignment, CampaignState, FloatArray, IntArray

__all__ = [
    "RankedChoice",
    "active_shares",
    "crowd_posterior",
    "expected_scores",
    "ranking",
    "steered",
]


def active_shares(recent_workers: Sequence[str], exclude: Collection[str] = ()) -> dict[str, float]:
    """Each worker's share of ``recent_workers`` (the workers of the last labels), those in
    ``exclude`` left out; empty when nobody is left."""
    counts = Counter(w for w in recent_workers if w not in exclude)
    total = sum(counts.values())
    return {w: n / total for w, n in sorted(counts.items())} if total else {}


def crowd_posterior(policy: Any) -> OneCoinPosterior | None:
    """The binary one-coin posterior of a worker-aware policy (None: the policy has none)."""
    posterior = getattr(policy, "posterior_", None)
    return posterior if isinstance(posterior, OneCoinPosterior) else None


def expected_scores(
    posterior: OneCoinPosterior,
    workers: IntArray,
    weights: FloatArray,
    *,
    optimistic: bool = True,
) -> FloatArray:
    """``S(i) = Σ_u weights[u] · score(i, workers[u])`` for every item (module docstring).

    Args:
        posterior: item Betas (n_items,) and worker Betas (n_workers,).
        workers: the active workers' indices, shape (n_active,).
        weights: their shares, shape (n_active,), summing to 1.
        optimistic: Opt-KG's max of the two rewards (True) or KG's expectation.

    Returns:
        shape (n_items,).
    """
    n_items, n_active = posterior.n_items, workers.shape[0]
    items = np.repeat(np.arange(n_items, dtype=np.int64), n_active)
    pair_workers = np.tile(workers, n_items)
    look = posterior.lookahead(pair_workers, items=items)
    now = error_probability(posterior.a, posterior.b, posterior.thresholds)
    rewards = kg_rewards(look, now[items])  # (n_items · n_active, 2): a label 0, a label 1
    expected = (look.label_probabilities * rewards).sum(axis=1)
    pair = rewards.max(axis=1) if optimistic else expected
    return np.asarray(pair.reshape(n_items, n_active) @ weights, dtype=float)


def ranking(scores: FloatArray, rng: np.random.Generator) -> IntArray:
    """Item indices, largest score first; equal scores (to 40 bits) in random order."""
    tie = rng.permutation(scores.shape[0])
    return np.lexsort((tie, -canonical_scores(scores))).astype(np.int64)


class RankedChoice:
    """A policy stand-in for one round of slot openings: the first open item of ``order``
    (None: the policy's own choice), never one of ``excluded`` (tasks no active annotator
    can take any more); the live step's tiers hold (the holder's own and saturated items
    closed, items with work pending last)."""

    def __init__(self, policy: Any, order: IntArray | None, excluded: Collection[int] = ()) -> None:
        self.policy = policy
        self.order = order
        self.excluded = excluded

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        availability = state.availability
        order = self.order

        def first_open() -> Assignment | None:
            closed = availability.closed
            for item in order if order is not None else ():
                if state.eligible[item] and int(item) not in closed:
                    return Assignment(int(item), worker, state.problem.default_price)
            return None

        closed = set(availability.closed).union(self.excluded)
        with availability.question(closed, availability.last):
            if order is None:
                choice: Assignment | None = self.policy.select(state, worker=worker)
                return choice
            return availability.search(first_open)


@contextmanager
def steered(
    campaign: Any, order: IntArray | None, excluded: Collection[int] = ()
) -> Iterator[None]:
    """Let the campaign's next pull decisions take ``order``'s first open item instead of
    asking its policy (None: the policy decides), never an item of ``excluded`` (nor a
    control item the control rule would pick there). The
    decision is stored as the campaign's ``assigned`` event like any other, so a reload
    replays it; the policy itself is untouched (a rebuild inside the block, a worker
    joining, installs a new policy, which stays)."""
    if order is None and not excluded:
        yield
        return
    policy = campaign.policy
    stand_in = RankedChoice(policy, order, excluded)
    campaign.policy = stand_in
    # the control tasks' rule picks its item before the policy is asked: it must not pick an
    # excluded one either (a slot there could never be filled)
    ledger = campaign.control_ledger if excluded else None
    if ledger is not None:
        pick = ledger.pick
        ledger.pick = lambda state, worker, closed: pick(state, worker, set(closed).union(excluded))
    try:
        yield
    finally:
        if campaign.policy is stand_in:
            campaign.policy = policy
        if ledger is not None:
            del ledger.pick  # the class's method again


def worker_weights(
    shares: Mapping[str, float], worker_index: Mapping[str, int], n_workers: int
) -> tuple[IntArray, FloatArray]:
    """The shares as (worker indices, weights) for the posterior's workers (a worker the
    posterior does not hold yet is left out; the weights renormalised)."""
    pairs = [
        (worker_index[w], s)
        for w, s in shares.items()
        if worker_index.get(w, n_workers) < n_workers
    ]
    if not pairs:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    workers = np.array([j for j, _ in pairs], dtype=np.int64)
    weights = np.array([s for _, s in pairs], dtype=float)
    return workers, weights / weights.sum()
