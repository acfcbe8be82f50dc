"""The crowd prior (empirical Bayes) of the control rule, the vote label worth and the
verdict's agreement as block evidence (:mod:`crowdbudget.engine.crowd_prior`,
:mod:`crowdbudget.engine.control`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

from crowdbudget.engine.control import (
    ControlLedger,
    ControlTasks,
    _net_values,
    expected_right,
)
from crowdbudget.engine.crowd_prior import POINTS, CrowdPrior, grid_net_values
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.registry import make_policy
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.simulation.workers import WorkerPool


def test_without_evidence_the_crowd_prior_is_the_fixed_beta() -> None:
    prior = CrowdPrior((2.0, 1.0), strength=10.0).fit({})
    for c, n in [(0, 0), (2, 2), (3, 8), (7, 10)]:
        exact = stats.beta.cdf(0.7, 2 + c, 1 + n - c)
        assert prior.below(prior.posterior(None, c, n), 0.7) == pytest.approx(exact, abs=0.01)


def test_the_crowd_fit_finds_the_spammers_share_and_leaves_a_worker_out_exactly() -> None:
    rng = np.random.default_rng(0)
    accuracy = np.r_[np.full(30, 0.5), rng.uniform(0.8, 0.95, 70)]
    answered = np.full(100, 40)
    right = rng.binomial(answered, accuracy)
    evidence = {j: (float(right[j]), float(answered[j])) for j in range(100)}
    prior = CrowdPrior((1.0, 1.0), strength=2.0).fit(evidence)
    near_chance = prior.weights[(POINTS > 0.35) & (POINTS < 0.65)].sum()
    assert near_chance == pytest.approx(0.3, abs=0.06)
    # leaving worker 0 out: the prior, the other workers' posteriors and nothing of worker 0
    others = sum(post for w, post in prior.posteriors.items() if w != 0)
    expected = (2.0 * prior.base + others) / (2.0 + 99)
    np.testing.assert_allclose(prior.without(0), expected / expected.sum(), atol=1e-12)
    np.testing.assert_allclose(prior.without(None), prior.weights)


def _ledger(tasks: ControlTasks, n_workers: int = 20) -> ControlLedger:
    control = np.zeros(200, dtype=bool)
    control[:60] = True
    return ControlLedger.start(
        tasks, control, np.zeros(200, dtype=np.int64), n_workers, budget=2000.0
    )


def _answers(ledger: ControlLedger, worker: int, right: int, wrong: int) -> None:
    for k in range(right + wrong):
        ledger.handed(worker, k)
        ledger.answer(worker, k, 0 if k < right else 1, spent=float(ledger.labels_total + 1))


def test_the_crowd_reads_an_unlucky_worker_of_a_good_crowd_as_good() -> None:
    rule: dict[str, Any] = {
        "n_items": 60,
        "block_below": 0.7,
        "block_confidence": 0.85,
        "min_answers": 4,
    }
    fixed, crowd = (_ledger(ControlTasks(**rule, prior_fit=fit)) for fit in ("fixed", "crowd"))
    for ledger in (fixed, crowd):
        for worker in range(19):
            _answers(ledger, worker, right=18, wrong=2)  # a crowd at 0.9
        _answers(ledger, 19, right=3, wrong=3)
    # the fixed prior blocks 3 of 6 (P = 0.87); against a crowd at 0.9 it is likelier bad luck
    assert 19 in fixed.blocked
    assert 19 not in crowd.blocked
    assert crowd.p_below(3, 6, 19) < fixed.p_below(3, 6, 19) - 0.15


def test_the_crowd_blocks_a_worker_at_chance_in_a_crowd_with_spammers() -> None:
    tasks = ControlTasks(n_items=60, block_below=0.7, block_confidence=0.9, prior_fit="crowd")
    ledger = _ledger(tasks)
    for worker in range(14):
        _answers(ledger, worker, right=18, wrong=2)
    for worker in range(14, 19):
        _answers(ledger, worker, right=10, wrong=10)
    assert set(ledger.blocked) == set(range(14, 19))
    # a newcomer with 2 of 2 right is still doubtful against this crowd: worth testing
    _answers(ledger, 19, right=2, wrong=0)
    assert 0.05 < ledger.p_below(2, 2, 19) < 0.5


@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 1.0), (3.0, 2.0), (6.0, 6.0)])
def test_the_grid_value_is_the_beta_value(alpha: float, beta: float) -> None:
    grid = CrowdPrior((alpha, beta), strength=1.0)
    exact = _net_values(alpha, beta, 60.0, 0.3, 15, 0.7, 0.9, 2)
    on_grid = grid_net_values(grid.weights, 60.0, 0.3, 15, 0.7, 0.9, 2)
    np.testing.assert_allclose(on_grid, exact, atol=0.02 * np.abs(exact).max())


def test_the_vote_worth_asks_a_doubtful_worker_again() -> None:
    rule: dict[str, Any] = {"n_items": 60, "first_k": 0, "rule": "value", "block_below": 0.7}
    for worth in ("exponent", "vote"):
        ledger = _ledger(ControlTasks(**rule, label_worth=worth))
        _answers(ledger, 0, right=18, wrong=2)  # confirmed good: no more control
        assert ledger.control_value(0) == 0.0
        _answers(ledger, 1, right=4, wrong=4)  # at chance so far: open
        assert ledger.control_value(1) > 0.0


def test_new_settings_are_checked() -> None:
    with pytest.raises(InvalidParameterError, match="prior fit"):
        ControlTasks(n_items=3, prior_fit="guess")
    with pytest.raises(InvalidParameterError, match="label worth"):
        ControlTasks(n_items=3, label_worth="gold")
    with pytest.raises(InvalidParameterError, match="prior strength"):
        ControlTasks(n_items=3, prior_strength=0.0)
    default = ControlTasks(n_items=3)
    assert (default.prior_fit, default.label_worth, default.agreement) == (
        "fixed",
        "exponent",
        True,
    )


def test_expected_right_soft_counts_each_workers_labels() -> None:
    probabilities = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    items = np.array([0, 1, 2, 0, 1])
    labels = np.array([0, 0, 1, 1, 1])
    workers = np.array([0, 0, 0, 1, -1])  # -1: no named worker, left out
    right, counts = expected_right(probabilities, items, labels, workers, 3)
    np.testing.assert_allclose(right, [0.9 + 0.2 + 0.5, 0.1, 0.0])
    np.testing.assert_allclose(counts, [3, 1, 0])


@pytest.mark.parametrize("fit", ["fixed", "crowd"])
def test_agreement_blocks_spammers_without_control_answers(fit: str) -> None:
    conf = np.array([[[a, 1 - a], [1 - a, a]] for a in [0.5] * 3 + [0.9] * 7])
    env = SyntheticBernoulliEnvironment(300, prior=(0.1, 0.1), workers=WorkerPool(conf))
    blocked = {}
    for agreement in (False, True):
        tasks = ControlTasks(
            n_items=10,
            first_k=0,
            rate=0.0,  # no control task is ever served: agreement is the only evidence
            block_below=0.7,
            block_confidence=0.9,
            prior_fit=fit,
            agreement=agreement,
        )
        row = run_campaign(
            make_policy("opt-kg:posterior=one-coin"),
            env,
            [900.0],
            world_seed=1,
            policy_rng=np.random.default_rng(1),
            mode="pull",
            control=tasks,
            control_items_seed=1,
        )[-1]
        assert row["control_labels"] == 0
        blocked[agreement] = row["blocked_workers"]
    assert blocked[False] == 0
    assert blocked[True] >= 1


def test_the_command_line_reaches_agreement_and_the_crowd_prior() -> None:
    import argparse

    from crowdbudget.cli.control import add_control_arguments, control_tasks

    parser = argparse.ArgumentParser()
    add_control_arguments(parser)
    options = "--control-items 5 --block-below 0.7 --block-agreement --control-prior crowd"
    args = parser.parse_args(options.split())
    tasks = control_tasks(args)
    assert (tasks.agreement, tasks.prior_fit) == (True, "crowd")
    assert control_tasks(parser.parse_args(["--control-items", "5"])).agreement is True
    off = parser.parse_args(["--control-items", "5", "--no-block-agreement"])
    assert control_tasks(off).agreement is False
    options = "--control-items 5 --block-below 0.7 --control-prior share"
    share = parser.parse_args(options.split())
    assert control_tasks(share).prior_fit == "share"
    with pytest.raises(InvalidParameterError, match="block-agreement"):
        control_tasks(parser.parse_args(["--block-agreement"]))
