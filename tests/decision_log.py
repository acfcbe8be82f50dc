"""A campaign that also records its decisions, for the tests that hold a fast path to its
reference decision by decision: every label's ``(item, worker, label)`` in the order the
policy observed it, and the accuracy at each budget."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.base import AllocationPolicy

Decisions = list[tuple[int, int, int]]


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
