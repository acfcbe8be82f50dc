"""B-KUBE and the ε-first family as registered policies (issues 16 and 17): the same decisions
as the per-task simulation, the registry's ids, and a live push campaign with prices and
capacities."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from crowdbudget.campaign import Campaign
from crowdbudget.engine.loop import Clock, StopAtSpend, drive
from crowdbudget.exceptions import CrowdBudgetError
from crowdbudget.policies.bandits.kube import BKubePolicy
from crowdbudget.registry import make_policy, parse_policy
from crowdbudget.simulation.priced_workers import PricedWorkerWorld, rangi_worker_sets
from crowdbudget.types import Assignment, CampaignState
from reference.priced import (
    run_bkube,
    run_bounded_epsilon_first,
    run_epsilon_first,
    run_trailsourcing,
)


def _through_the_engine(policy: Any, pool: Any, budget: float, n_tasks: int, seed: int):
    """The registered policy driven by the engine; world and policy share one generator,
    as the per-task simulation does."""
    rng = np.random.default_rng(seed)
    world = PricedWorkerWorld(pool, n_tasks, rng)
    problem = world.problem(budget)
    policy.reset(problem, rng)
    state = CampaignState.initial(problem)
    chosen: list[int] = []
    select = policy.select

    def recording(state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        assignment = select(state, worker=worker)
        if assignment is not None:
            assert assignment.worker is not None
            chosen.append(assignment.worker)
        return assignment

    policy.select = recording  # type: ignore[method-assign]
    drive(policy, world, state, Clock("push"), StopAtSpend())
    return chosen, state


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("n_tasks", "budget"), [(50, 50), (100, 100), (50, 20), (100, 300)])
@pytest.mark.parametrize("stop_constant", [1.0, 0.5])
def test_registered_b_kube_makes_the_simulations_decisions(
    seed: int, n_tasks: int, budget: float, stop_constant: float
) -> None:
    for pool in rangi_worker_sets(n_tasks, np.random.default_rng(1000 + seed)):
        expected = run_bkube(
            pool, budget, n_tasks, np.random.default_rng(seed), stop_constant=stop_constant
        )
        policy = BKubePolicy(stop_constant=stop_constant)
        chosen, state = _through_the_engine(policy, pool, budget, n_tasks, seed)
        np.testing.assert_array_equal(chosen, expected.selections)
        np.testing.assert_array_equal(policy.predicted_, expected.predicted)
        np.testing.assert_array_equal(policy.labels_per_task_, expected.labels_per_task)
        assert state.spent == pytest.approx(expected.spent)
        np.testing.assert_array_equal(state.remaining_capacity, expected.remaining_capacity)


def test_b_kube_in_the_registry() -> None:
    policy = make_policy("b-kube:stop-constant=0.5:max-labels=5")
    assert isinstance(policy, BKubePolicy)
    assert (policy.stop_constant, policy.max_labels) == (0.5, 5)
    capabilities = parse_policy("b-kube").capabilities
    assert capabilities.chooses_workers and not capabilities.supports_pull
    with pytest.raises(CrowdBudgetError, match="stop-constant"):
        make_policy("b-kube:stop-constant=-1")


def test_b_kube_live_in_push_mode_with_prices_and_capacities() -> None:
    rng = np.random.default_rng(0)
    items = [f"t{k}" for k in range(20)]
    truth = {item: int(rng.integers(2)) for item in items}
    accuracy = {"cheap": 0.6, "good": 0.95, "pricey": 0.9, "spam": 0.5}
    prices = {"cheap": 0.5, "good": 1.0, "pricey": 2.0, "spam": 0.5}
    capacities = {"good": 8}
    campaign = Campaign.create(
        items,
        budget=30,
        policy="b-kube",
        mode="push",
        workers=list(accuracy),
        worker_prices=prices,
        worker_capacities=capacities,
        max_pending_per_worker=1,
    )
    assert campaign.problem.workers is not None
    np.testing.assert_array_equal(campaign.problem.workers.prices, [0.5, 1.0, 2.0, 0.5])
    given: dict[str, int] = {}
    while batch := campaign.push_assignments(3):
        for assignment in batch:
            worker = assignment.worker_id
            given[worker] = given.get(worker, 0) + 1
            item = assignment.item_id
            label = truth[item] if rng.random() < accuracy[worker] else 1 - truth[item]
            campaign.record_label(assignment.assignment_id, str(label))
    status = campaign.status()
    assert status["spent"] <= 30
    assert status["spent"] > 30 - 2.0  # stops only when no worker is affordable
    assert given.get("good", 0) <= 8  # the capacity holds
    assert campaign.state.remaining_capacity is not None
    assert campaign.state.remaining_capacity[1] == 8 - given.get("good", 0)
    # B-KUBE picks the worker: a pull campaign (workers ask) is refused at creation
    with pytest.raises(CrowdBudgetError, match="mode='push'"):
        Campaign.create(items, budget=5, policy="b-kube", workers=["a"])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("n_tasks", "budget"), [(50, 50), (100, 300), (12, 60)])
@pytest.mark.parametrize("layout", ["spread", "queue"])
@pytest.mark.parametrize(
    ("policy_id", "simulate"),
    [
        ("bounded-eps-first", run_bounded_epsilon_first),
        ("eps-first", run_epsilon_first),
        ("trailsourcing", run_trailsourcing),
    ],
)
def test_registered_epsilon_first_family_makes_the_simulations_decisions(
    policy_id: str, simulate: Any, layout: str, seed: int, n_tasks: int, budget: float
) -> None:
    for pool in rangi_worker_sets(n_tasks, np.random.default_rng(1000 + seed)):
        expected = simulate(pool, budget, n_tasks, np.random.default_rng(seed), layout=layout)
        policy = make_policy(f"{policy_id}:layout={layout}")
        chosen, state = _through_the_engine(policy, pool, budget, n_tasks, seed)
        policy.final_labels(state)
        np.testing.assert_array_equal(chosen, expected.selections)
        np.testing.assert_array_equal(policy.predicted_, expected.predicted)
        np.testing.assert_array_equal(policy.labels_per_task_, expected.labels_per_task)
        np.testing.assert_array_equal(state.remaining_capacity, expected.remaining_capacity)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("n_tasks", "budget"), [(50, 50), (100, 300), (12, 60), (50, 150)])
@pytest.mark.parametrize(
    ("policy_id", "options"),
    [
        ("b-kube:pace=budget", {"pace": True}),
        ("b-kube:feedback=leave-one-out", {"feedback": "leave-one-out"}),
        ("b-kube:pace=budget:feedback=leave-one-out", {"pace": True, "feedback": "leave-one-out"}),
    ],
)
def test_registered_b_kube_variants_make_the_simulations_decisions(
    policy_id: str, options: dict[str, Any], seed: int, n_tasks: int, budget: float
) -> None:
    for pool in rangi_worker_sets(n_tasks, np.random.default_rng(1000 + seed)):
        expected = run_bkube(pool, budget, n_tasks, np.random.default_rng(seed), **options)
        policy = make_policy(policy_id)
        chosen, _state = _through_the_engine(policy, pool, budget, n_tasks, seed)
        np.testing.assert_array_equal(chosen, expected.selections)
        np.testing.assert_array_equal(policy.predicted_, expected.predicted)
        np.testing.assert_array_equal(policy.labels_per_task_, expected.labels_per_task)


def test_run_case_gives_the_same_rows_on_any_executor() -> None:
    """rangi2018.run_case runs its replications on the experiment driver's executor; each
    replication carries §6's own seeds, so serial and process-pool runs are the same rows."""
    from crowdbudget.experiments.papers import rangi2018

    serial = rangi2018.run_case(20, (60.0,), 3, 0, n_jobs=1)
    pooled = rangi2018.run_case(20, (60.0,), 3, 0, n_jobs=2, executor="processes")
    assert serial.equals(pooled)
    assert sorted(serial["replication"].unique()) == [0, 1, 2]
