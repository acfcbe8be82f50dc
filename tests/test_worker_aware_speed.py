"""Issue 21: the incremental path of worker-aware KG (per-worker bests, scores shared by equal
(item state, worker) keys, vectorised refit) decides exactly as the reference path (every
changed pair rescored, the argmax a scan over every pair): same pairs, same draws."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.datasets import load_dataset
from crowdbudget.policies._pair_scores import WorkerBest, representatives
from crowdbudget.registry import make_policy
from crowdbudget.simulation import SyntheticBernoulliEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.simulation.workers import WorkerPool, WorkerPrior
from decision_log import run_recorded

IDS = [
    "opt-kg:posterior=one-coin",
    "opt-kg:posterior=one-coin:refit=0",
    "opt-kg:posterior=one-coin:refit=0:tie-break=first",
    "kg:posterior=one-coin:refit=3",
    "cvar-kg:posterior=one-coin:alpha=0.3",
    "opt-kg:posterior=two-coin",
    "kg:posterior=two-coin:tie-break=random",
]


def _run(policy_id: str, env: object, budget: float, seed: int, mode: str, reference: bool):
    policy = make_policy(policy_id)
    policy.reference = reference  # type: ignore[attr-defined]
    return (*run_recorded(policy, env, [budget], seed, mode), policy)


@pytest.fixture(scope="module")
def rte() -> ReplayEnvironment:
    return ReplayEnvironment.from_label_data(load_dataset("rte"))


@pytest.mark.parametrize("policy_id", IDS)
@pytest.mark.parametrize("mode", ["push", "pull"])
def test_rte_replay_same_decisions(rte: ReplayEnvironment, policy_id: str, mode: str) -> None:
    for seed in (0, 3):
        fast_log, fast_acc, fast = _run(policy_id, rte, 500.0, seed, mode, False)
        ref_log, ref_acc, ref = _run(policy_id, rte, 500.0, seed, mode, True)
        assert fast_log == ref_log
        assert fast_acc == ref_acc
        assert fast._fast == (fast.worker_model == "one-coin") and not ref._fast
        live = ref._remaining > 0
        if getattr(fast, "_lazy", False):
            fast._flush(None)  # the stale workers' scores, as the next choice would read them
        np.testing.assert_array_equal(fast._scores[live], ref._scores[live])


@pytest.mark.parametrize("policy_id", IDS)
@pytest.mark.parametrize(
    "world",
    [
        lambda: SyntheticBernoulliEnvironment(25, workers=WorkerPrior(4)),
        lambda: SyntheticBernoulliEnvironment(
            20, workers=WorkerPool.two_coin([0.9, 0.6, 0.8, 0.7], [0.7, 0.8, 0.9, 0.6])
        ),
    ],
)
def test_synthetic_worlds_same_decisions(policy_id: str, world) -> None:  # type: ignore[no-untyped-def]
    for seed in (0, 1):
        for mode in ("push", "pull"):
            fast = _run(policy_id, world(), 90.0, seed, mode, False)
            ref = _run(policy_id, world(), 90.0, seed, mode, True)
            assert fast[:2] == ref[:2]


@pytest.mark.parametrize("policy_id", IDS[:4])
@pytest.mark.parametrize("thresholds", [0.3, [0.5, 0.3] * 10])
def test_other_thresholds_same_decisions(policy_id: str, thresholds: object) -> None:
    # one threshold != 1/2: the fused path with error_probability's general formula; mixed
    # thresholds: the reference path (the formula depends on the whole call)
    def world() -> SyntheticBernoulliEnvironment:
        return SyntheticBernoulliEnvironment(20, workers=WorkerPrior(4), thresholds=thresholds)

    for seed in (0, 1):
        fast = _run(policy_id, world(), 80.0, seed, "push", False)
        ref = _run(policy_id, world(), 80.0, seed, "push", True)
        assert fast[:2] == ref[:2]
        assert fast[2]._fast == (not isinstance(thresholds, list))


def test_representatives() -> None:
    keys = np.array([5, 1, 5, 3, 1, 5, 0])
    for n_keys in (8, 1 << 24):  # the table, then np.unique
        reps, inverse = representatives(keys, n_keys)
        assert sorted(keys[reps].tolist()) == [0, 1, 3, 5]
        np.testing.assert_array_equal(keys[reps][inverse], keys)


def test_worker_best_ties_in_pair_order() -> None:
    scores = np.array([0.5, 0.2, 0.5, 0.5, -np.inf, 0.1])
    workers = np.array([1, 0, 0, 2, 1, 2])
    order = np.argsort(workers, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(workers, minlength=3))])
    best = WorkerBest(scores, ptr, order)
    assert best.best.tolist() == [0.5, 0.5, 0.5]
    top, tied = best.tied()
    assert top == 0.5 and tied.tolist() == [0, 2, 3]
    scores[[0, 2]] = 0.0
    best.refresh_one(0)
    best.refresh_one(1)
    assert best.tied()[1].tolist() == [3]


def _live_campaign_log(lazy: bool, monkeypatch: pytest.MonkeyPatch, policy: str) -> list:
    """A seeded live campaign (pull mode: each asking worker excluded from their own items and
    from items with work pending), as the service runs it: the assignments and final labels."""
    from crowdbudget.campaign import Campaign, EventStore
    from crowdbudget.policies.worker_aware import OneCoinKnowledgeGradient

    monkeypatch.setattr(OneCoinKnowledgeGradient, "lazy_workers", lazy)
    rng = np.random.default_rng(5)
    n_items, n_workers = 150, 9
    truth = rng.integers(0, 2, n_items)
    accuracy = rng.uniform(0.55, 0.95, n_workers)
    workers = [f"w{j}" for j in range(n_workers)]
    campaign = Campaign.create(
        [f"i{k}" for k in range(n_items)],
        budget=400,
        policy=policy,
        seed=11,
        store=EventStore("sqlite://"),
    )
    campaign.add_workers(workers)
    log: list = []
    pending: list = []
    for _ in range(420):
        j = int(rng.integers(n_workers))
        assignment = campaign.next_assignment(workers[j])
        if assignment is not None:
            log.append((assignment.item_id, workers[j]))
            pending.append((assignment, j))
        # answers arrive out of order, some assignments stay open a while
        if pending and rng.random() < 0.8:
            done, who = pending.pop(int(rng.integers(len(pending))))
            item = int(done.item_id[1:])
            label = truth[item] if rng.random() < accuracy[who] else 1 - truth[item]
            campaign.record_label(done.assignment_id, str(label))
    log.append(campaign.results().to_dict("list"))
    return log


@pytest.mark.parametrize(
    "policy",
    [
        "opt-kg:posterior=one-coin",
        "opt-kg:posterior=one-coin:refit=0",
        "kg:posterior=one-coin:refit=7",
    ],
)
def test_lazy_worker_rescoring_decides_as_eager(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A label marks its worker's pairs stale instead of rescoring them; the next choice that
    reads them rescores them first: a live campaign makes the same assignments either way."""
    lazy = _live_campaign_log(True, monkeypatch, policy)
    eager = _live_campaign_log(False, monkeypatch, policy)
    assert len(lazy) > 300
    assert lazy[:-1] == eager[:-1]
    assert lazy[-1] == eager[-1]
