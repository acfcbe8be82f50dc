"""The value-based control rule and the blocked workers' labels in the verdict
(:mod:`crowdbudget.engine.control`, :mod:`crowdbudget.engine.blocked`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import integrate, stats

from crowdbudget.engine.blocked import BlockedLabelsVerdict, without_workers
from crowdbudget.engine.control import ControlLedger, ControlTasks, positive_information
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.verdict import make_verdict
from crowdbudget.registry import make_policy
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.simulation.workers import WorkerPool
from crowdbudget.types import CampaignState, LabelEvent

VALUE = ControlTasks(
    n_items=20, first_k=0, rule="value", block_below=0.7, block_confidence=0.9, min_answers=4
)


def _world(accuracies: list[float], n_items: int) -> SyntheticBernoulliEnvironment:
    conf = np.array([[[a, 1 - a], [1 - a, a]] for a in accuracies])
    return SyntheticBernoulliEnvironment(n_items, prior=(0.1, 0.1), workers=WorkerPool(conf))


@pytest.mark.parametrize(("alpha", "beta"), [(1, 1), (2, 5), (8, 2), (30, 3), (0.5, 0.5)])
def test_positive_information_is_the_integral(alpha: float, beta: float) -> None:
    exact, _ = integrate.quad(
        lambda a: max(0.0, 2 * a - 1) ** 2 * stats.beta.pdf(a, alpha, beta), 0, 1
    )
    assert float(positive_information(alpha, beta)) == pytest.approx(exact, abs=1e-9)


def _ledger(n_workers: int = 10, budget: float = 1000.0) -> ControlLedger:
    control = np.zeros(100, dtype=bool)
    control[:20] = True
    return ControlLedger.start(
        VALUE, control, np.zeros(100, dtype=np.int64), n_workers, budget=budget
    )


def _answers(ledger: ControlLedger, worker: int, right: int, wrong: int) -> None:
    for k in range(right + wrong):
        ledger.handed(worker, k)
        ledger.answer(worker, k, 0 if k < right else 1, spent=float(ledger.labels_total + 1))


def test_the_value_rule_asks_the_doubtful_and_spares_the_confirmed() -> None:
    ledger = _ledger()
    # a new worker with many labels ahead: their first answers are worth buying
    assert ledger.control_value(0) > 0 and ledger.due(0)
    _answers(ledger, 1, right=12, wrong=0)  # confirmed accurate: nothing left to decide
    assert ledger.control_value(1) == 0.0 and not ledger.due(1)
    _answers(ledger, 2, right=3, wrong=3)  # at chance so far: the block decision is open
    assert ledger.control_value(2) > 0 and ledger.due(2)
    # the same doubt with almost no labels left is not worth a label
    spent = _ledger(budget=8.0)
    _answers(spent, 2, right=3, wrong=3)
    assert spent.control_value(2) == 0.0 and not spent.due(2)


def test_the_value_rule_needs_a_block_level_and_a_budget() -> None:
    with pytest.raises(InvalidParameterError, match="block level"):
        ControlTasks(n_items=3, rule="value")
    with pytest.raises(InvalidParameterError, match="rule"):
        ControlTasks(n_items=3, rule="sometimes")
    with pytest.raises(InvalidParameterError, match="blocked labels"):
        ControlTasks(n_items=3, blocked_labels="forget")
    with pytest.raises(InvalidParameterError, match="budget"):
        ControlLedger.start(VALUE, np.ones(3, dtype=bool), np.zeros(3, dtype=np.int64))


def _run(tasks: ControlTasks, verdict: str | None = None, seed: int = 4) -> dict[str, Any]:
    env = _world([0.5, 0.5, 0.5] + [0.9] * 7, n_items=120)
    return run_campaign(
        make_policy("opt-kg"),
        env,
        [360.0],
        world_seed=seed,
        policy_rng=np.random.default_rng(seed),
        mode="pull",
        verdict=make_verdict(verdict),
        control=tasks,
        control_items_seed=seed,
    )[-1]


def test_the_value_rule_is_deterministic_and_buys_less_than_it_could() -> None:
    first, again = _run(VALUE), _run(VALUE)
    assert first == {**again, "seconds": first["seconds"]}
    assert 0 < first["control_labels"] < 360 * 0.5
    assert first["blocked_workers"] >= 1


def test_the_value_rule_in_push_mode() -> None:
    env = _world([0.5, 0.5, 0.5] + [0.9] * 7, n_items=60)
    row = run_campaign(
        make_policy("opt-kg"),
        env,
        [180.0],
        world_seed=1,
        policy_rng=np.random.default_rng(1),
        mode="push",
        control=VALUE,
        control_items_seed=1,
    )[-1]
    assert 0 < row["control_labels"] < 180 and row["labels_used"] == pytest.approx(180.0)


def test_without_workers_drops_their_labels_and_recounts() -> None:
    env = _world([0.9, 0.9, 0.9], n_items=4)
    env.reset(seed=0)
    state = CampaignState.initial(env.problem(10.0))
    for item, worker, label in [(0, 0, 1), (0, 1, 0), (1, 1, 1), (2, 2, 1), (0, 2, 1)]:
        event = LabelEvent(item=item, worker=worker, label=label, cost=1.0)
        state.label_log.append(event)
        state.label_counts[item, label] += 1
        state.n_events += 1
    view = without_workers(state, {1})
    assert list(view.label_log.workers) == [0, 2, 2]
    assert view.label_counts.tolist() == [[0, 2], [0, 0], [0, 1], [0, 0]]
    assert view.n_events == 3 and view.spent == state.spent
    # the campaign itself is untouched
    assert len(state.label_log) == 5 and int(state.label_counts.sum()) == 5


@pytest.mark.parametrize("verdict", [None, "one-coin-em"])
def test_dropping_blocked_labels_changes_only_what_blocked_workers_gave(
    verdict: str | None,
) -> None:
    keep = ControlTasks(
        n_items=20, first_k=6, rate=0.2, block_below=0.7, block_confidence=0.9, min_answers=4
    )
    drop = ControlTasks(**{**keep.__dict__, "blocked_labels": "drop"})
    kept, dropped = _run(keep, verdict), _run(drop, verdict)
    # the same campaign (the verdict draws nothing), read two ways
    assert kept["blocked_workers"] == dropped["blocked_workers"] >= 1
    assert kept["control_labels"] == dropped["control_labels"]
    assert kept["labels_used"] == dropped["labels_used"]


def test_the_drop_verdict_is_the_verdict_on_the_kept_labels() -> None:
    env = _world([0.5, 0.9, 0.9], n_items=6)
    env.reset(seed=0)
    problem = env.problem(20.0)
    state = CampaignState.initial(problem)
    rng = np.random.default_rng(0)
    for k in range(18):
        item, worker = k % 6, k % 3
        label = int(rng.integers(2)) if worker == 0 else int(env.true_labels[item])
        state.label_log.append(LabelEvent(item=item, worker=worker, label=label, cost=1.0))
        state.label_counts[item, label] += 1
        state.n_events += 1
    ledger = _ledger()
    wrapped = BlockedLabelsVerdict(make_verdict("one-coin-em"), ledger)
    wrapped.reset(problem, np.random.default_rng(1))
    plain = make_verdict("one-coin-em").reset(problem, np.random.default_rng(1))
    # no block yet: the campaign as it is
    assert np.array_equal(wrapped.probabilities(state, None), plain.probabilities(state, None))
    _answers(ledger, 0, right=0, wrong=6)
    assert 0 in ledger.blocked
    fresh = make_verdict("one-coin-em").reset(problem, np.random.default_rng(1))
    view = without_workers(state, {0})
    assert np.array_equal(wrapped.probabilities(state, None), fresh.probabilities(view, None))
    assert np.array_equal(wrapped.labels(state, None), fresh.labels(view, None))


def test_cli_value_rule_and_blocked_labels(capsys: pytest.CaptureFixture[str]) -> None:
    from crowdbudget.cli import main

    argv = ["simulate", "--items", "30", "--env", "one-coin-workers-v0:n-workers=6"]
    argv += ["--policies", "opt-kg", "--budget", "60", "--reps", "1", "--mode", "pull"]
    argv += ["--jobs", "1", "--no-progress", "--control-items", "5"]
    good = ["--block-below", "0.7", "--control-rule", "value", "--blocked-labels", "drop"]
    assert main([*argv, *good]) == 0
    assert "not control tasks" in capsys.readouterr().out
    # the value rule without a block level: one line, exit 2
    assert main([*argv, "--control-rule", "value"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
