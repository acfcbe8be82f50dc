"""``opt-kg:posterior=one-coin:refit-growth=g``: after a refit at n labels the next refit is at
``n + max(refit, ceil(g · n))`` labels (issue 15: the refits' total cost no longer quadratic)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from crowdbudget.datasets import load_dataset
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.worker_aware import OneCoinKnowledgeGradient
from crowdbudget.registry import make_policy
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.testing import check_policy


def test_schedule_points() -> None:
    fixed = OneCoinKnowledgeGradient(refit=10)
    assert fixed.refit_schedule(55) == [10, 20, 30, 40, 50]
    growing = OneCoinKnowledgeGradient(refit=10, refit_growth=0.05)
    # ceil(0.05 n) <= 10 up to n = 200; 0.05 * 200 is 10.000000000000002 in floats, still 10
    points = growing.refit_schedule(300)
    assert points[:21] == list(range(10, 211, 10))
    assert points[21:] == [221, 233, 245, 258, 271, 285, 300]
    steep = OneCoinKnowledgeGradient(refit=4, refit_growth=1.0)
    assert steep.refit_schedule(100) == [4, 8, 16, 32, 64]
    assert OneCoinKnowledgeGradient(refit=0).refit_schedule(100) == []


def test_the_refits_happen_at_the_schedule_points() -> None:
    data = ReplayEnvironment.from_label_data(load_dataset("rte"))
    policy = make_policy("opt-kg:posterior=one-coin:refit-growth=0.5")
    seen: list[int] = []
    refit = policy._refit_beliefs  # type: ignore[attr-defined]

    def spy(*args: int) -> None:
        seen.append(policy._n_log)  # type: ignore[attr-defined]
        refit(*args)

    policy._refit_beliefs = spy  # type: ignore[attr-defined]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_campaign(policy, data, [400], world_seed=0, policy_rng=np.random.default_rng(0))
    assert seen == policy.refit_schedule(400)  # type: ignore[attr-defined]
    assert seen == [10, 20, 30, 45, 68, 102, 153, 230, 345]


@pytest.mark.parametrize("growth", [-0.1, float("nan"), float("inf"), "0.1", True])
def test_bad_growth_is_refused_in_one_line(growth: object) -> None:
    policy = OneCoinKnowledgeGradient(refit=10, refit_growth=growth)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="refit_growth must be a finite number >= 0"):
        policy.validate_params()


def test_growth_is_refused_where_refit_is_and_without_refit() -> None:
    for policy_id in (
        "opt-kg:refit-growth=0.1",
        "opt-kg:posterior=two-coin:refit-growth=0.1",
        "opt-kg:features=logistic:refit-growth=0.1",
    ):
        with pytest.raises(InvalidParameterError, match="refit-growth needs posterior=one-coin or"):
            make_policy(policy_id)
    with pytest.raises(InvalidParameterError, match="refit_growth needs refit >= 1"):
        make_policy("opt-kg:posterior=one-coin:refit=0:refit-growth=0.1")
    with pytest.raises(InvalidParameterError, match="refit-growth"):
        make_policy("opt-kg:posterior=one-coin:refit-growth=-1")
    check_policy("opt-kg:posterior=one-coin:refit=3:refit-growth=0.2", n_items=5, budget=14)
    confusion = make_policy("opt-kg:posterior=confusion:refit=5:refit-growth=0.2")
    assert confusion.refit_growth == 0.2  # type: ignore[attr-defined]


def _decisions(policy_id: str, budget: int) -> tuple[list[tuple[int, int]], list[float]]:
    data = ReplayEnvironment.from_label_data(load_dataset("rte"))
    policy = make_policy(policy_id)
    chosen: list[tuple[int, int]] = []
    observe = policy.observe

    def record(event):  # type: ignore[no-untyped-def]
        chosen.append((event.item, event.worker))
        observe(event)

    policy.observe = record  # type: ignore[method-assign]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = run_campaign(
            policy, data, [budget], world_seed=3, policy_rng=np.random.default_rng(3)
        )
    return chosen, [row["accuracy"] for row in rows]


def test_growth_zero_decides_as_the_fixed_interval() -> None:
    default = _decisions("opt-kg:posterior=one-coin", 600)
    assert _decisions("opt-kg:posterior=one-coin:refit-growth=0", 600) == default
    assert _decisions("opt-kg:posterior=one-coin:refit=10:refit-growth=0.0", 600) == default
    # a growing schedule is a different policy after its first stretched interval (n > 200)
    assert _decisions("opt-kg:posterior=one-coin:refit-growth=0.05", 600) != default
