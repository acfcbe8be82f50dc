"""Control tasks in simulation and replay (:mod:`crowdbudget.engine.control`): the subset is
seeded, control labels are paid, accuracy leaves control items out, blocking takes out a
spammer and keeps an accurate worker, and every pull policy runs with control tasks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from crowdbudget.engine.control import ControlLedger, ControlTasks, control_seed
from crowdbudget.engine.live import LiveRules
from crowdbudget.engine.loop import Clock, StopAtSpend, drive
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import run_campaign, run_experiment
from crowdbudget.registry import POLICIES, make_policy, policies_for
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.simulation.workers import WorkerPool
from crowdbudget.types import Assignment, CampaignState

N_ITEMS = 40
#: push under the live rules in a world without listed pairs: opt-kg-per-context may name a
#: pair whose worker labeled the item already (it may ask a pair again offline, and nothing
#: closes a pair to a push question), which the live step refuses; ``drive`` stops it (below)
PUSH_REPEATS_PAIRS = {"opt-kg-per-context"}


def _crowd(accuracies: list[float]) -> WorkerPool:
    """One-coin workers with the given accuracies."""
    conf = np.array([[[a, 1 - a], [1 - a, a]] for a in accuracies])
    return WorkerPool(conf)


def _world(accuracies: list[float], n_items: int = N_ITEMS) -> SyntheticBernoulliEnvironment:
    # prior Beta(0.1, 0.1): θ near 0 or 1, so a worker's accuracy is close to its coin
    return SyntheticBernoulliEnvironment(n_items, prior=(0.1, 0.1), workers=_crowd(accuracies))


def _drive_with_control(
    policy_id: str, env: Any, tasks: ControlTasks, budget: float, seed: int, mode: str = "pull"
) -> tuple[CampaignState, ControlLedger, np.ndarray]:
    env.reset(seed=seed)
    problem = env.problem(budget)
    state = CampaignState.initial(problem)
    control_items = tasks.choose(np.ones(problem.n_items, dtype=bool), control_seed(seed))
    ledger = ControlLedger.start(tasks, control_items, env.true_labels, problem.n_workers)
    policy = make_policy(policy_id)
    policy.reset(problem, np.random.default_rng(seed))
    drive(policy, env, state, Clock(mode), StopAtSpend(budget), live=LiveRules(control=ledger))
    return state, ledger, control_items


def test_control_subset_is_deterministic_for_a_seed_and_drawn_from_gold() -> None:
    tasks = ControlTasks(fraction=0.25)
    gold = np.arange(N_ITEMS) % 2 == 0
    first = tasks.choose(gold, control_seed(3))
    assert np.array_equal(first, tasks.choose(gold, control_seed(3)))
    assert first.sum() == 5 and not first[~gold].any()
    others = [tasks.choose(gold, control_seed(s)) for s in range(4, 9)]
    assert any(not np.array_equal(first, other) for other in others)


def test_bad_control_options_are_refused() -> None:
    with pytest.raises(InvalidParameterError):
        ControlTasks()
    with pytest.raises(InvalidParameterError):
        ControlTasks(fraction=0.1, n_items=3)
    with pytest.raises(InvalidParameterError):
        ControlTasks(n_items=N_ITEMS).choose(np.ones(N_ITEMS, dtype=bool), 0)


@pytest.mark.parametrize("mode", ["pull", "push"])
def test_control_labels_are_paid_and_served_by_the_rule(mode: str) -> None:
    env = _world([0.9] * 6)
    tasks = ControlTasks(n_items=6, first_k=2, rate=0.2)
    state, ledger, control_items = _drive_with_control("opt-kg", env, tasks, 90.0, 0, mode)
    on_control = int(state.label_counts[control_items].sum())
    assert on_control == ledger.control_labels > 0
    # every label is paid, control ones included: the spend is the label count
    assert state.spent == pytest.approx(float(state.label_counts.sum())) == pytest.approx(90.0)
    if mode == "pull":
        # the rule: the first 2 tasks and every 5th after are control (while items last)
        for worker, served in ledger.served.items():
            assert worker is not None
            expected = min(2, served) + max(0, served - 2) // 5
            assert ledger.answered.get(worker, 0) == min(expected, 6)
    else:
        served = ledger.handed_total
        assert ledger.control_labels == min(2, served) + max(0, served - 2) // 5


def test_accuracy_leaves_control_items_out() -> None:
    env = _world([0.9] * 5)
    tasks = ControlTasks(n_items=8)
    seen: list[np.ndarray] = []

    def hook(state: Any, labels: Any, truth: Any, mask: Any) -> dict[str, float]:
        seen.append(np.array(mask))
        # the accuracy the row reports must be this one: on the mask given
        return {"check": float(np.mean(labels[mask] == truth[mask]))}

    rows = run_campaign(
        make_policy("opt-kg"),
        env,
        [60.0],
        world_seed=1,
        policy_rng=np.random.default_rng(1),
        mode="pull",
        metrics=hook,
        control=tasks,
        control_items_seed=control_seed(5),
    )
    control_items = tasks.choose(np.ones(N_ITEMS, dtype=bool), control_seed(5))
    assert seen and all(not mask[control_items].any() for mask in seen)
    assert all(mask.sum() == N_ITEMS - 8 for mask in seen)
    assert rows[-1]["accuracy"] == rows[-1]["check"]
    assert rows[-1]["control_labels"] > 0


def test_a_spammer_is_blocked_and_an_accurate_worker_is_not() -> None:
    accuracies = [0.5, 0.5, 0.5, 0.97, 0.97, 0.97, 0.97, 0.97]
    env = _world(accuracies, n_items=60)
    tasks = ControlTasks(n_items=20, first_k=12, rate=0.2, block_below=0.75, block_confidence=0.9)
    _, ledger, _ = _drive_with_control("opt-kg", env, tasks, 300.0, 2)
    spammers = {0, 1, 2}
    assert set(ledger.blocked) & spammers, ledger.answered
    assert set(ledger.blocked) <= spammers, ledger.blocked
    for worker, evidence in ledger.blocked.items():
        assert evidence.p_below >= 0.9 and evidence.answered == ledger.answered[worker]
    # a blocked worker gave no label after the block: their control answers stop there
    for worker, evidence in ledger.blocked.items():
        assert ledger.answered[worker] == evidence.answered


def test_run_experiment_with_control_reports_blocked_workers() -> None:
    env = _world([0.5, 0.5, 0.95, 0.95, 0.95, 0.95])
    tasks = ControlTasks(n_items=10, first_k=6, block_below=0.75, block_confidence=0.8)
    result = run_experiment(
        ["opt-kg"], env, [120], 2, seed=0, n_jobs=1, progress=False, mode="pull", control=tasks
    )
    assert {"control_labels", "blocked_workers"} <= set(result.runs.columns)
    assert (result.runs["control_labels"] > 0).all()
    with pytest.raises(InvalidParameterError):
        run_experiment(
            ["uniform"], env, [60], 1, n_jobs=1, progress=False, engine="fast", control=tasks
        )


def _pull_policies() -> list[str]:
    env = _world([0.8] * 4)
    env.reset(seed=0)
    problem = env.problem(30.0)
    return [
        pid
        for pid in policies_for(problem)
        # the exact DP is refused at this size (its state count), with or without control
        if POLICIES.capabilities(POLICIES.spec(pid)).supports_pull
        and not POLICIES.capabilities(POLICIES.spec(pid)).budget_aware
    ]


@pytest.mark.parametrize("policy_id", _pull_policies())
def test_every_pull_policy_runs_with_control_tasks(policy_id: str) -> None:
    env = _world([0.5, 0.9, 0.9, 0.9], n_items=16)
    tasks = ControlTasks(n_items=4, first_k=2, rate=0.25, block_below=0.6)
    state, ledger, control_items = _drive_with_control(policy_id, env, tasks, 40.0, 1)
    assert state.spent <= 40.0 + 1e-9
    assert int(state.label_counts[control_items].sum()) == ledger.control_labels > 0
    # the policy never chose a control item: each one was served by the rule, once a worker
    control_set = {int(i) for i in np.flatnonzero(control_items)}
    assert all(items <= control_set for items in ledger.offered.values())
    assert ledger.control_labels == sum(ledger.answered.values())


def test_cli_simulate_with_control_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    from crowdbudget.cli import main

    argv = ["simulate", "--items", "30", "--env", "one-coin-workers-v0:n-workers=6"]
    argv += ["--policies", "opt-kg", "--budget", "60", "--reps", "1", "--mode", "pull"]
    argv += ["--jobs", "1", "--no-progress"]
    assert main([*argv, "--control-items", "5", "--block-below", "0.7"]) == 0
    assert "not control tasks" in capsys.readouterr().out
    # blocking without control tasks, or both ways of sizing them: one-line error, exit 2
    for bad in (["--block-below", "0.7"], ["--control-items", "5", "--control-fraction", "0.1"]):
        assert main([*argv, *bad]) == 2
        assert capsys.readouterr().err.count("\n") == 1


def _push_policies() -> list[str]:
    env = _world([0.8] * 4)
    env.reset(seed=0)
    problem = env.problem(30.0)
    return [
        pid
        for pid in policies_for(problem)
        if not POLICIES.capabilities(POLICIES.spec(pid)).budget_aware
        and pid not in PUSH_REPEATS_PAIRS
    ]


@pytest.mark.parametrize("policy_id", _push_policies())
def test_every_policy_runs_with_control_tasks_in_push_mode(policy_id: str) -> None:
    env = _world([0.5, 0.9, 0.9, 0.9], n_items=16)
    tasks = ControlTasks(n_items=4, first_k=2, rate=0.25, block_below=0.6, min_answers=2)
    state, ledger, control_items = _drive_with_control(policy_id, env, tasks, 40.0, 1, "push")
    assert state.spent <= 40.0 + 1e-9
    # the rule on the campaign's count: the first 2 tasks, then every 4th
    served = ledger.handed_total
    assert ledger.control_labels == min(2, served) + max(0, served - 2) // 4
    assert int(state.label_counts[control_items].sum()) == ledger.control_labels
    # every block carries its evidence (the world picks who answers an unnamed task, so a
    # blocked worker may still answer one in push mode)
    assert all(e.p_below >= 0.95 and e.answered >= 2 for e in ledger.blocked.values())


def _drive_live(policy: Any, mode: str, seed: int = 1) -> CampaignState:
    """``policy`` (an id or a policy) under ``LiveRules()`` without control tasks."""
    env = _world([0.5, 0.9, 0.9, 0.9], n_items=16)
    env.reset(seed=seed)
    problem = env.problem(40.0)
    state = CampaignState.initial(problem)
    policy = make_policy(policy) if isinstance(policy, str) else policy
    policy.reset(problem, np.random.default_rng(seed))
    drive(policy, env, state, Clock(mode), StopAtSpend(40.0), live=LiveRules())
    return state


@pytest.mark.parametrize(
    ("policy_id", "mode"), [("opt-kg-per-context", "pull"), ("iethresh", "push")]
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_worker_choosing_policies_end_under_the_live_rules(
    policy_id: str, mode: str, seed: int
) -> None:
    # they once named a closed item (per-context, pull) or idled (iethresh, push) for ever
    state = _drive_live(policy_id, mode, seed)
    assert 0 < state.spent <= 40.0 + 1e-9
    assert int(state.pending.sum()) == 0


def test_an_item_only_policy_is_refused_in_push_mode_under_the_live_rules() -> None:
    with pytest.raises(InvalidParameterError, match="picks items only") as caught:
        _drive_live("uniform", "push")
    assert "\n" not in str(caught.value)


def test_a_policy_naming_a_closed_item_for_ever_is_stopped() -> None:
    class NamesItsOwnItem:
        """Serves each worker item 0 for ever, also once it is theirs (closed to them)."""

        policy_name = "names-its-own-item"

        def reset(self, problem: Any, rng: np.random.Generator) -> None:
            pass

        def select(self, state: CampaignState, *, worker: int | None = None) -> Any:
            return Assignment(0, worker, 1.0)

        def observe(self, event: Any) -> None:
            pass

    with pytest.raises(
        InvalidParameterError, match="names-its-own-item made no progress"
    ) as caught:
        _drive_live(NamesItsOwnItem(), "pull")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("policy_id", sorted(PUSH_REPEATS_PAIRS))
def test_a_push_policy_repeating_a_refused_pair_is_stopped(policy_id: str) -> None:
    with pytest.raises(InvalidParameterError, match=r"made no progress .*last: refused"):
        _drive_live(policy_id, "push")
