"""The §7 baselines kos (random regular graph + KOS) and random-bp (random items + BP)."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.aggregation import BeliefPropagation, make_aggregator
from crowdbudget.datasets import load_dataset
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.aggregating import KOSAllocation, RandomBP
from crowdbudget.policies.verdict import log_label_data, make_verdict
from crowdbudget.registry import make_policy
from crowdbudget.simulation import SyntheticBernoulliEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.simulation.workers import WorkerPrior
from crowdbudget.types import CampaignState, LabelEvent, Problem


def _plan(problem: Problem, seed: int = 0) -> KOSAllocation:
    policy = KOSAllocation()
    policy.reset(problem, np.random.default_rng(seed))
    policy.select(CampaignState.initial(problem))
    return policy


@pytest.mark.parametrize(
    ("n_items", "budget", "n_workers"), [(50, 130, 10), (40, 400, 7), (30, 20, 4)]
)
def test_kos_graph_is_regular_for_a_finite_pool(n_items: int, budget: int, n_workers: int) -> None:
    policy = _plan(Problem(n_items=n_items, budget=budget, n_workers=n_workers))
    items, workers = policy.plan_items_, policy.plan_workers_
    assert items.shape == (budget,)
    item_deg = np.bincount(items, minlength=n_items)
    worker_deg = np.bincount(workers, minlength=n_workers)
    assert set(item_deg) <= {budget // n_items, -(-budget // n_items)}
    assert set(worker_deg) <= {budget // n_workers, -(-budget // n_workers)}
    # an (item, worker) pair repeats only when an item needs more labels than there are workers
    pair_count = np.bincount(items * n_workers + workers)
    assert pair_count.max() <= max(1, -(-item_deg.max() // n_workers))


def test_kos_graph_with_anonymous_workers_uses_virtual_workers_of_degree_r() -> None:
    policy = KOSAllocation(labels_per_worker=4)
    problem = Problem(n_items=30, budget=90)
    policy.reset(problem, np.random.default_rng(1))
    policy.select(CampaignState.initial(problem))
    assert np.all(np.bincount(policy.plan_items_) == 3)
    worker_deg = np.bincount(policy.plan_workers_)
    assert worker_deg.shape == (23,) and set(worker_deg[:-1]) == {4} and worker_deg[-1] == 2


def test_kos_on_replay_uses_recorded_pairs_only_and_water_fills_items() -> None:
    data = load_dataset("rte")
    env = ReplayEnvironment.from_label_data(data)
    env.reset(seed=0)
    problem = env.problem(2500)  # 3.125 labels per item
    state = CampaignState.initial(problem)
    state.pairs = env.pairs
    policy = make_policy("kos")
    assert isinstance(policy, KOSAllocation)
    policy.reset(problem, np.random.default_rng(0))
    policy.select(state)
    recorded = set(zip(data.items.tolist(), data.workers.tolist(), strict=True))
    planned = list(zip(policy.plan_items_.tolist(), policy.plan_workers_.tolist(), strict=True))
    assert set(planned) <= recorded and len(set(planned)) == len(planned) == 2500
    assert set(np.bincount(policy.plan_items_, minlength=800)) == {3, 4}


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_kos_full_replay_spends_every_record_and_matches_the_aggregator(mode: str) -> None:
    data = load_dataset("rte")
    env = ReplayEnvironment.from_label_data(data)
    [row] = run_campaign(
        make_policy("kos:inference=mean"),
        env,
        [8000],
        world_seed=0,
        policy_rng=np.random.default_rng(0),
        mode=mode,
    )
    assert row["labels_used"] == 8000
    full = data.accuracy(make_aggregator("kos-mean").fit(data).labels_)
    assert row["accuracy"] == pytest.approx(full, abs=0.003)


@pytest.mark.parametrize("policy_id", ["kos", "random-bp"])
@pytest.mark.parametrize("mode", ["push", "pull"])
def test_policies_run_with_synthetic_worker_prior(policy_id: str, mode: str) -> None:
    env = SyntheticBernoulliEnvironment(40, workers=WorkerPrior(10))
    rows = run_campaign(
        make_policy(policy_id),
        env,
        [200] if policy_id == "kos" else [80, 200],
        world_seed=3,
        policy_rng=np.random.default_rng(3),
        mode=mode,
    )
    assert rows[-1]["labels_used"] == 200
    assert rows[-1]["accuracy"] > 0.55  # 5 labels per item, ρ ~ Beta(4, 1): well above chance


def test_kos_pull_mode_keeps_items_regular_in_a_synthetic_world() -> None:
    env = SyntheticBernoulliEnvironment(30, workers=WorkerPrior(6))
    policy = make_policy("kos")
    states: list[CampaignState] = []
    run_campaign(
        policy,
        env,
        [120],
        world_seed=1,
        policy_rng=np.random.default_rng(1),
        mode="pull",
        metrics=lambda state, *_: states.append(state) or {},
    )
    assert isinstance(policy, KOSAllocation)
    counts = np.bincount(states[-1].label_log.items, minlength=30)
    assert np.all(counts == 4)


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_random_bp_on_replay_labels_with_bp_of_its_log(mode: str) -> None:
    data = load_dataset("rte")
    env = ReplayEnvironment.from_label_data(data)
    policy = make_policy("random-bp")
    assert isinstance(policy, RandomBP)
    states: list[CampaignState] = []
    [row] = run_campaign(
        policy,
        env,
        [3000],
        world_seed=2,
        policy_rng=np.random.default_rng(2),
        mode=mode,
        metrics=lambda state, *_: states.append(state) or {},
        verdict=make_verdict("paper"),  # BP's own labels, its own tie-breaking
    )
    assert row["labels_used"] == 3000 and len(states[-1].label_log) == 3000
    log = log_label_data(states[-1])
    bp = BeliefPropagation(rng=policy._aggregator_seed).fit(log)
    assert row["accuracy"] == pytest.approx(data.accuracy(bp.labels_))
    # uniform items: label counts per item are Binomial-like, not all equal
    assert np.bincount(log.items, minlength=800).std() > 0.5
    if mode == "push":
        assert row["accuracy"] > 0.75
    # pull mode: replay arrivals are proportional to a worker's records, so RTE's busiest
    # workers (chance-level) give most labels and BP can lock onto them (seed 2: 0.515)


def test_random_bp_handles_multi_class_replay() -> None:
    env = ReplayEnvironment.from_label_data(load_dataset("wsd"))
    rows = run_campaign(
        make_policy("random-bp"),
        env,
        [500, 1770],
        world_seed=0,
        policy_rng=np.random.default_rng(0),
    )
    assert rows[-1]["labels_used"] == 1770 and rows[-1]["accuracy"] > 0.97


def test_kos_refuses_multi_class_and_bad_parameters() -> None:
    from crowdbudget.exceptions import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="binary"):
        make_policy("kos").reset(Problem(n_items=3, budget=5, n_classes=3), np.random.default_rng())
    with pytest.raises(InvalidParameterError, match="inference must be"):
        make_policy("kos:inference=max")
    with pytest.raises(InvalidParameterError, match="n-nodes must be"):
        make_policy("random-bp:n-nodes=0")


def test_final_labels_are_the_aggregator_on_the_state_s_label_log() -> None:
    policy = RandomBP()
    problem = Problem(n_items=4, budget=200, n_workers=3)
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState.initial(problem)
    rng = np.random.default_rng(1)
    events = [
        LabelEvent(int(rng.integers(4)), int(rng.integers(3)), int(rng.integers(2)))
        for _ in range(100)
    ]
    for event in events:
        state.record_label(event)
        policy.observe(event)
    data = log_label_data(state)
    assert data.n_labels == 100
    assert data.items.tolist() == [e.item for e in events]
    assert data.labels.tolist() == [e.label for e in events]
    labels = policy.final_labels(state)
    expected = BeliefPropagation(rng=policy._aggregator_seed).fit(data).labels_
    assert np.array_equal(labels, expected)
