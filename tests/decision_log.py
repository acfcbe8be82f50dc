"""A campaign that also records its decisions, for the tests that hold a fast path to its
reference decision by decision: every label's ``(item, worker, label)`` in the order the
policy observed it, and the accuracy at each budget; and the push-mode suites' shared set-ups
(the worker-aware default's variants, a world with adversarial workers)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.simulation.replay import ReplayEnvironment

Decisions = list[tuple[int, int, int]]

# the worker-aware Opt-KG default and the variants whose push replay takes another path
# (tie rule, no refits, a growing refit schedule, refits by tolerance)
PUSH_POLICIES = (
    "opt-kg:posterior=one-coin",
    "opt-kg:posterior=one-coin:tie-break=first",
    "opt-kg:posterior=one-coin:refit=0",
    "opt-kg:posterior=one-coin:refit=25:refit-growth=0.2",
    "opt-kg:posterior=one-coin:refit-tol=0.01",
)


def adversarial_world(
    n_items: int, n_workers: int, n_adversaries: int, repeated: int = 0
) -> ReplayEnvironment:
    """A binary replay world (seed 3) of ``n_items`` items with 6 labels each from distinct
    workers: ``n_workers − n_adversaries`` workers of accuracy in [0.6, 0.95], the last
    ``n_adversaries`` in [0.05, 0.3] (reliability below 1/2); the first ``repeated`` records'
    (item, worker) pairs recorded a second time."""
    rng = np.random.default_rng(3)
    truth = rng.integers(2, size=n_items)
    n_honest = n_workers - n_adversaries
    accuracy = np.concatenate(
        [rng.uniform(0.6, 0.95, n_honest), rng.uniform(0.05, 0.3, n_adversaries)]
    )
    items = np.repeat(np.arange(n_items), 6)
    workers = np.concatenate([rng.choice(n_workers, 6, replace=False) for _ in range(n_items)])
    items = np.concatenate([items, items[:repeated]])
    workers = np.concatenate([workers, workers[:repeated]])
    right = rng.random(items.shape[0]) < accuracy[workers]
    labels = np.where(right, truth[items], 1 - truth[items])
    return ReplayEnvironment(items, workers, labels, truth, n_workers=n_workers)


def run_recorded(
    policy: AllocationPolicy,
    env: object,
    budgets: Sequence[float],
    seed: int,
    mode: str = "push",
) -> tuple[Decisions, list[float]]:
    """Run ``policy`` on ``env`` (world and policy seeded by ``seed``) and return its decision
    log and its accuracy at each of ``budgets``. The policy's ``observe`` is wrapped, so the
    log is what the policy saw, including any reference path it was switched to."""
    log: Decisions = []
    observe = policy.observe

    def record(event):  # type: ignore[no-untyped-def]
        log.append((event.item, event.worker, event.label))
        observe(event)

    policy.observe = record  # type: ignore[method-assign]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = run_campaign(
            policy,
            env,  # type: ignore[arg-type]
            list(budgets),
            world_seed=seed,
            policy_rng=np.random.default_rng(seed),
            mode=mode,
        )
    return log, [row["accuracy"] for row in rows]
