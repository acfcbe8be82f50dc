"""Trailsourcing (Rangi, Franceschetti 2018 §6; Tran-Thanh et al. 2014): bounded ε-first with a
single round of exploration — every worker is selected exactly once (in order, through the
per-task loop, skipping a worker whose price does not fit) — then the same greedy-BKP
single-step exploitation as :func:`~crowdbudget.policies.bandits.epsilon_first.
run_bounded_epsilon_first`. Registered as ``trailsourcing``
(:class:`~crowdbudget.policies.bandits.epsilon_first.EpsilonFirstPolicy`, the same decisions).
"""

from __future__ import annotations

import numpy as np

from crowdbudget.policies.bandits.epsilon_first import exploit_bounded, explore
from crowdbudget.policies.bandits.value import OnlineValueEstimator
from crowdbudget.simulation.priced_workers import LabelingOutcome, PricedWorkerPool, _LoopState


def run_trailsourcing(
    pool: PricedWorkerPool,
    budget: float,
    n_tasks: int,
    rng: np.random.Generator,
    *,
    stop_constant: float = 1.0,
    layout: str = "spread",
    feedback: str = "estimate",
) -> LabelingOutcome:
    """One evaluation per worker, then greedy-BKP exploitation in one step."""
    state = _LoopState(pool, budget, n_tasks, rng)
    estimator = OnlineValueEstimator(pool.n_workers, pool.n_classes)
    explore(
        state,
        estimator,
        rng,
        budget_limit=None,
        max_evaluations=pool.n_workers,
        stop_constant=stop_constant,
        feedback=feedback,
    )
    exploit_bounded(state, estimator, rng, layout=layout)
    return state.outcome()
