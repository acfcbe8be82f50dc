"""Every registered policy passes the conformance checks; broken policies do not."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.registry import registered_policies
from crowdbudget.simulation import SyntheticBernoulliEnvironment
from crowdbudget.simulation.workers import WorkerPool, WorkerPrior
from crowdbudget.testing import check_environment, check_policy
from crowdbudget.types import Assignment, CampaignState

POLICY_IDS = sorted(registered_policies())


@pytest.mark.parametrize("policy_id", POLICY_IDS)
def test_registered_policy_conforms(policy_id: str) -> None:
    check_policy(policy_id, n_items=3, budget=6)
    if policy_id != "dp":  # exact DP only takes tiny problems
        check_policy(policy_id, n_items=7, budget=25, seed=3)


@pytest.mark.parametrize(
    "env",
    [
        SyntheticBernoulliEnvironment(6),
        SyntheticBernoulliEnvironment(6, theta=np.linspace(0.05, 0.95, 6), thresholds=0.4),
        SyntheticBernoulliEnvironment(6, workers=WorkerPrior(4)),
        SyntheticBernoulliEnvironment(6, workers=WorkerPool.two_coin([0.9, 0.6], [0.7, 0.8])),
    ],
    ids=["noiseless", "fixed-theta", "one-coin-prior", "two-coin"],
)
def test_environments_conform(env: SyntheticBernoulliEnvironment) -> None:
    check_environment(env)


class _PicksIneligible(AllocationPolicy):
    def __init__(self) -> None:
        pass

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        if not state.can_afford(1.0):
            return None
        return Assignment(item=int(np.argmin(state.eligible)), worker=worker)


class _Overspends(AllocationPolicy):
    def __init__(self) -> None:
        pass

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        return Assignment(item=int(np.argmax(state.eligible)), worker=worker)


class _IgnoresArrivingWorker(AllocationPolicy):
    def __init__(self) -> None:
        pass

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        if not state.can_afford(1.0):
            return None
        return Assignment(item=int(np.argmax(state.eligible)), worker=None)


class _Unseeded(AllocationPolicy):
    binary_only = False

    def __init__(self) -> None:
        pass

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        if not state.can_afford(1.0):
            return None
        items = np.flatnonzero(state.eligible)
        return Assignment(item=int(np.random.default_rng().choice(items)), worker=worker)


@pytest.mark.parametrize(
    "broken, message",
    [
        (_PicksIneligible, "not eligible"),
        (_Overspends, "overspends"),
        (_IgnoresArrivingWorker, "arriving worker"),
        (_Unseeded, "same seed"),
    ],
)
def test_checker_catches_broken_policies(broken: type[AllocationPolicy], message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        check_policy(broken, n_items=6, budget=15)
