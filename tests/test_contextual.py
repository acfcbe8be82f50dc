"""Contextual worlds: worker models, common random numbers, pair rules, contexts from data."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.exceptions import BudgetError, IneligibleAssignmentError, InvalidParameterError
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.registry import make_policy
from crowdbudget.simulation.contextual import (
    ContextualReplayEnvironment,
    ContextualWorkerEnvironment,
    ContextualWorkers,
    task_contexts,
    uci_contexts,
)
from crowdbudget.testing import check_environment
from crowdbudget.types import Assignment, Problem


@pytest.mark.parametrize(
    "model, levels",
    [
        ("spammer-hammer", {1.0: 1, 0.5: 3}),
        ("one-coin", {0.9: 1, 0.6: 3}),
        ("malicious", {0.9: 1, 0.3: 1, 0.6: 2}),
    ],
)
def test_worker_models(model: str, levels: dict[float, int]) -> None:
    pool = ContextualWorkers.draw(model, 50, 4, np.random.default_rng(0))
    for row in pool.accuracy:
        values, counts = np.unique(row, return_counts=True)
        assert dict(zip(values.tolist(), counts.tolist(), strict=True)) == levels


def test_answers_follow_accuracy_and_are_common_random_numbers() -> None:
    n = 4000
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, n)
    contexts = np.arange(n) % 2
    acc = np.array([[0.9, 0.6], [0.3, 0.9]])
    env = ContextualWorkerEnvironment(truth, contexts, ContextualWorkers(acc))
    env.reset(seed=5)
    correct = env.answers == truth[:, None]
    for j in range(2):
        for s in range(2):
            p = acc[j, s]
            observed = correct[contexts == s, j].mean()
            assert abs(observed - p) < 4 * np.sqrt(p * (1 - p) / (n / 2))
    first = env.answers.copy()
    env.step(Assignment(item=3, worker=1))
    env.reset(seed=5)
    assert np.array_equal(first, env.answers)
    check_environment(env)


def test_pairs_once_items_leave_budget_cap() -> None:
    env = ContextualWorkerEnvironment([0, 1], [0, 1], "one-coin", n_workers=2)
    env.reset(seed=0)
    env.step(Assignment(item=0, worker=1))
    with pytest.raises(IneligibleAssignmentError):
        env.step(Assignment(item=0, worker=1))
    result = env.step(Assignment(item=0))  # item-only: the worker left is 0
    assert result.event is not None and result.event.worker == 0
    assert env.eligible is not None and not env.eligible[0]
    with pytest.raises(BudgetError, match="maximum is 4"):
        env.check_budget(5)
    with pytest.raises(InvalidParameterError, match="allowed"):
        ContextualWorkerEnvironment([0], [0], "experts", n_workers=2)


def test_problem_contexts() -> None:
    problem = Problem(n_items=3, budget=3, contexts=[0, 2, 1])
    ctx, s = task_contexts(problem)
    assert s == 3 and ctx.tolist() == [0, 2, 1]
    assert task_contexts(problem.with_budget(5))[1] == 3
    assert task_contexts(Problem(n_items=2, budget=1)) == (pytest.approx([0, 0]), 1)
    with pytest.raises(InvalidParameterError):
        Problem(n_items=2, budget=1, contexts=[0, -1])


def test_uci_contexts_and_rte_replay() -> None:
    labels, contexts = uci_contexts("ionosphere", 3)
    assert labels.shape == (351,) and set(np.unique(contexts)) == {0, 1, 2}
    assert labels.sum() in (126, 225)
    from crowdbudget.datasets import load_dataset

    env = ContextualReplayEnvironment.from_label_data(load_dataset("rte"))
    assert env.n_contexts == 7 and np.bincount(env.contexts).tolist() == [
        150,
        120,
        90,
        120,
        50,
        130,
        140,
    ]
    rows = run_campaign(
        make_policy("bbta"), env, [800, 1600], world_seed=0, policy_rng=np.random.default_rng(0)
    )
    assert rows[-1]["labels_used"] == 1600 and rows[-1]["accuracy"] > 0.8
