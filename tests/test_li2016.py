"""Li et al. 2016 reproductions (requallo-fig1/fig2/table3): the Game preprocessing counts, the
completion walk behind Table 3 (equal to running Requallo to completion), a tiny Fig. 1
replay, the Fisher r-table, and a live campaign that stops by itself."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from crowdbudget.datasets.loaders import LabelData
from crowdbudget.experiments.papers.li2016 import (
    completion_walk,
    real_vote_variant,
)
from crowdbudget.policies.requallo import RequalloPolicy
from crowdbudget.requirements import FisherTest
from crowdbudget.types import CampaignState, LabelEvent, Problem


def _binary_data(n_items: int, seed: int) -> LabelData:
    """Items of varied difficulty with 10..40 binary labels each, in a fixed order."""
    rng = np.random.default_rng(seed)
    theta = rng.uniform(0.05, 0.95, n_items)
    sizes = rng.integers(10, 41, n_items)
    items = np.repeat(np.arange(n_items), sizes)
    rng.shuffle(items)  # interleaved rows: the per-item order is the row order
    labels = (rng.random(items.shape[0]) < theta[items]).astype(np.int64)
    return LabelData(
        items=items,
        workers=np.arange(items.shape[0], dtype=np.int64),
        labels=labels,
        item_ids=np.array([str(i) for i in range(n_items)], dtype=object),
        worker_ids=np.array([str(w) for w in range(items.shape[0])], dtype=object),
        classes=("0", "1"),
        gold=(theta > 0.5).astype(np.int64),
        name="toy",
    )


def _run_requallo_in_row_order(data: LabelData, requirement: str) -> tuple[float, int, int]:
    """Requallo with every label as budget; item i's k-th label is its k-th row."""
    queues = [list(data.labels[data.items == i]) for i in range(data.n_items)]
    problem = Problem(n_items=data.n_items, budget=float(data.n_labels))
    policy = RequalloPolicy(requirement=requirement)
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState.initial(problem)
    while True:
        state.eligible[:] = [len(q) > 0 for q in queues]
        assignment = policy.select(state)
        if assignment is None:
            break
        state.record_assignment(assignment)
        event = LabelEvent(
            item=assignment.item, worker=0, label=int(queues[assignment.item].pop(0))
        )
        state.record_label(event, assignment)
        policy.observe(event)
    return float(state.spent), int(policy.requirement_met().sum()), int(policy.complete_.sum())


@pytest.mark.parametrize(
    "requirement",
    [
        "fisher=0.2:max-labels=14",
        "fisher=0.05:max-labels=6",
        "ratio=4:max-labels=14",
        "min-labels=3",
    ],
)
def test_completion_walk_equals_requallo_run_to_completion(requirement: str) -> None:
    # Table 3's numbers are those of the walk: the allocation rule only interleaves items
    data = _binary_data(60, seed=3)
    walk = completion_walk(data, requirement)
    spent, met, complete = _run_requallo_in_row_order(data, requirement)
    assert walk["spent"] == spent
    assert walk["met"] == met
    assert walk["complete"] == complete
    assert 0 < walk["met"] <= data.n_items


def test_completion_walk_by_hand_and_random_order() -> None:
    # one item, rows 1,1,0,1,1,1; with pseudo-votes (1, 1) the prefixes are (2,1) (3,1)
    # (3,2) (4,2) (5,2) (6,2): fisher 0.2 needs r(2) = 8 votes, so all six labels
    data = LabelData(
        items=np.zeros(6, dtype=np.int64),
        workers=np.arange(6, dtype=np.int64),
        labels=np.array([1, 1, 0, 1, 1, 1]),
        item_ids=np.array(["a"], dtype=object),
        worker_ids=np.array([str(k) for k in range(6)], dtype=object),
        classes=("0", "1"),
        gold=np.array([1]),
    )
    assert completion_walk(data, "fisher=0.2")["spent"] == 6
    # on real votes only, r(1) = 5: complete at (4, 1), five labels
    assert completion_walk(data, real_vote_variant("fisher=0.2"), pseudo=0.0)["spent"] == 5
    assert real_vote_variant("min-labels=3") == "min-labels=3"
    out = completion_walk(data, "min-labels=3", rng=np.random.default_rng(0))
    assert out["spent"] == 3 and out["met"] == 1
    # random order keeps the counts: the walk only permutes each item's own labels
    toy = _binary_data(40, seed=1)
    spent = [
        completion_walk(toy, "ratio=4", rng=np.random.default_rng(s))["spent"] for s in range(3)
    ]
    assert all(10 <= s <= toy.n_labels for s in spent) and len(set(spent)) > 1


@pytest.mark.parametrize("alpha", [0.2, 0.1, 0.05, 0.01, 0.37, 0.9])
def test_fisher_table_equals_brute_force_in_any_extension_order(alpha: float) -> None:
    level = Fraction(repr(alpha))

    def brute(x: int) -> int:
        n = 2 * x + 1
        while Fraction(sum(math.comb(n, k) for k in range(x + 1)), 2**n) >= level:
            n += 1
        return n

    expected = [brute(x) for x in range(61)]
    for steps in ([60], [0, 3, 2, 17, 60], [5, 59, 60]):
        fisher = FisherTest(alpha)
        for upto in steps:
            fisher.min_total([upto])
        assert fisher.min_total(np.arange(61)).astype(int).tolist() == expected
    assert all(b > a for a, b in itertools.pairwise(expected))


def test_tiny_fig1_replay_on_rte() -> None:
    from crowdbudget.datasets import load_dataset
    from crowdbudget.experiments.papers import li2016

    result = li2016._replay_figure(
        "requallo-fig1",
        load_dataset("rte"),
        [400.0],
        1,
        seed=0,
        n_jobs=1,
        progress=False,
        notes=[],
    )
    rows = result.summary.set_index("policy")

    def cell(policy: str, metric: str) -> float:
        return float(rows.at[policy, metric])  # type: ignore[arg-type]

    assert cell("round-robin", "quantity_mean") == 0  # nothing has 3 labels below 2N
    assert cell("opt-kg", "quantity_mean") == 0  # one label each first
    assert cell("label-uncertainty", "quantity_mean") == 0
    assert cell(li2016.P02, "quantity_mean") >= 80  # §4.2: many items even below N
    assert cell(li2016.P02, "accuracy_labeled_mean") > 0.75


def test_live_campaign_with_a_requirement_stops_and_keeps_the_rest() -> None:
    from crowdbudget.campaign import Campaign

    c = Campaign.create([f"i{k}" for k in range(5)], budget=200, policy="requallo:fisher=0.2")
    k = 0
    while (a := c.next_assignment(f"w{k}")) is not None:
        c.record_label(a.assignment_id, "1")
        k += 1
    assert k == 15  # three unanimous labels complete each item (pseudo-votes (1, 1))
    status = c.status()
    assert status["spent"] == 15 and status["remaining"] == 185
    assert c.policy.status()["stopped_early"]  # type: ignore[attr-defined]
    # the campaign says so itself: stopped, the budget it saved, every item complete
    assert status["stopped"] and status["saved"] == 185
    assert status["items_complete"] == 5
    assert status["policy_status"]["requirement_met"] == 5


def test_a_campaign_still_running_reports_nothing_saved() -> None:
    from crowdbudget.campaign import Campaign

    c = Campaign.create([f"i{k}" for k in range(5)], budget=200, policy="requallo:fisher=0.2")
    a = c.next_assignment("w0")
    assert a is not None
    status = c.status()
    assert not status["stopped"] and status["saved"] == 0 and status["pending"] == 1
    plain = Campaign.create(["a", "b"], budget=4, policy="opt-kg").status()
    assert plain["policy_status"] == {} and not plain["stopped"]


def test_game_preprocessing_counts_and_m3() -> None:
    from crowdbudget.experiments.papers.li2016 import game_label_data

    data = game_label_data()
    assert (data.n_items, data.n_labels, data.n_classes) == (1682, 157878, 2)
    assert data.gold is not None
    counts = np.zeros((data.n_items, 2), dtype=np.int64)
    np.add.at(counts, (data.items, data.labels), 1)
    # every kept question: majority vote right (ties only where the gold is the smaller
    # option), both codings used, at least 20 answers before the top-two conversion
    assert np.all(counts[np.arange(data.n_items), data.gold] >= counts.max(axis=1))
    assert 0.4 < data.gold.mean() < 0.6
    assert counts.sum(axis=1).min() >= 1
    m3 = completion_walk(data, "min-labels=3")
    assert m3["spent"] == 3 * 1682 and m3["met"] == 1682
