"""B-KUBE family (Rangi, Franceschetti 2018): priced workers, value estimation, the per-task
loop, feasibility/budget/capacity invariants, reproducibility and `reproduce bkube-fig1`."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pytest

from crowdbudget.cli import main
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.bandits.value import OnlineValueEstimator, confident
from crowdbudget.policies.bandits.value import rescore_leave_one_out as _rescore_leave_one_out
from crowdbudget.simulation.priced_workers import (
    PricedWorkerPool,
    rangi_worker_sets,
    value_from_accuracy,
)
from reference.priced import (
    run_bkube,
    run_bounded_epsilon_first,
    run_epsilon_first,
    run_trailsourcing,
)

LOO = "leave-one-out"
RUNS = [
    run_bkube,
    run_bounded_epsilon_first,
    run_epsilon_first,
    run_trailsourcing,
    partial(run_bkube, pace=True),
    partial(run_bkube, pace=True, feedback=LOO),
    partial(run_bounded_epsilon_first, feedback=LOO),
]


def pool_a(n_tasks: int = 50, seed: int = 0) -> PricedWorkerPool:
    return rangi_worker_sets(n_tasks, np.random.default_rng(seed))[0]


def test_worker_sets_follow_section_6() -> None:
    set_a, set_b = rangi_worker_sets(50, np.random.default_rng(1))
    assert set_a.n_workers == 20 and np.all(set_a.capacity == 30)
    assert np.all((set_a.accuracy >= 0.5) & (set_a.accuracy <= 1))
    v = 2 * set_a.accuracy - 1
    assert np.all((set_a.price >= v - 1e-9) & (set_a.price <= 1 + v))
    assert np.sum(set_b.accuracy == 0.5) == 5
    np.testing.assert_array_equal(set_a.accuracy[:15], set_b.accuracy[:15])
    np.testing.assert_allclose(value_from_accuracy(np.array([0.9, 0.5])), [0.8, 0.0])
    np.testing.assert_allclose(value_from_accuracy(np.array([0.7]), 3), [0.55])


def test_online_estimate_counts_agreements() -> None:
    estimator = OnlineValueEstimator(3)
    for agreed in (True, True, False, True):
        estimator.update(0, agreed)
    np.testing.assert_allclose(estimator.accuracy_, [0.75, 0.5, 0.5])
    np.testing.assert_allclose(estimator.value_, [0.5, 0.0, 0.0])


def test_answers_are_unbiased() -> None:
    pool = PricedWorkerPool(np.array([0.8]), np.array([1.0]), np.array([10]), 3)
    rng = np.random.default_rng(0)
    answers = np.array([pool.answer(0, 2, rng) for _ in range(4000)])
    assert abs(np.mean(answers == 2) - 0.8) < 0.03
    assert abs(np.mean(answers == 0) - 0.1) < 0.02


def test_stopping_rule() -> None:
    stops = {
        (a, b): confident(np.array([a, b], float), a + b, 1.0)
        for a, b in [(1, 0), (2, 0), (2, 1), (3, 1), (4, 1), (4, 2), (5, 2)]
    }
    assert stops == {
        (1, 0): False, (2, 0): True, (2, 1): False, (3, 1): False,
        (4, 1): True, (4, 2): False, (5, 2): False,
    }  # fmt: skip
    assert not confident(np.array([2.0, 0.0]), 2, 2.0)  # a larger constant waits longer


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("worker_set", [0, 1])
def test_budget_capacity_and_feasibility_hold(run, worker_set: int) -> None:  # type: ignore[no-untyped-def]
    for seed in range(4):
        pool = rangi_worker_sets(50, np.random.default_rng(seed))[worker_set]
        for budget in (3.0, 100.0, 300.0):
            outcome = run(pool, budget, 50, np.random.default_rng(seed + 10))
            counts = np.bincount(outcome.selections, minlength=pool.n_workers)
            assert np.all(counts <= pool.capacity)
            np.testing.assert_array_equal(outcome.remaining_capacity, pool.capacity - counts)
            assert pool.price[outcome.selections].sum() <= budget + 1e-9
            assert outcome.spent == pytest.approx(pool.price[outcome.selections].sum())
            assert outcome.labels_per_task.sum() == outcome.selections.size
            assert 0 <= outcome.tasks_completed <= 50 and 0 <= outcome.error <= 1


def test_bkube_spends_until_infeasible_and_explores_everyone_first() -> None:
    pool = pool_a()
    outcome = run_bkube(pool, 150.0, 50, np.random.default_rng(3))
    # initialisation phase: the first K selections are the K workers in order
    np.testing.assert_array_equal(outcome.selections[:20], np.arange(20))
    if outcome.tasks_completed < 50 or outcome.labels_per_task[-1] == 0:
        left = 150.0 - outcome.spent
        assert not np.any((pool.price <= left) & (outcome.remaining_capacity > 0))


def test_tiny_budget_is_feasibility_checked() -> None:
    pool = PricedWorkerPool(np.array([0.9, 0.8]), np.array([2.0, 5.0]), np.array([3, 3]))
    assert run_bkube(pool, 1.0, 5, np.random.default_rng(0)).selections.size == 0
    outcome = run_bkube(pool, 4.5, 5, np.random.default_rng(0))
    np.testing.assert_array_equal(outcome.selections, [0, 0])  # worker 1 never fits


@pytest.mark.parametrize("run", RUNS)
def test_same_seed_same_run(run) -> None:  # type: ignore[no-untyped-def]
    pool = pool_a(seed=5)
    first = run(pool, 200.0, 50, np.random.default_rng(11))
    second = run(pool, 200.0, 50, np.random.default_rng(11))
    np.testing.assert_array_equal(first.selections, second.selections)
    np.testing.assert_array_equal(first.predicted, second.predicted)
    other = run(pool, 200.0, 50, np.random.default_rng(12))
    assert not np.array_equal(first.selections, other.selections) or not np.array_equal(
        first.predicted, other.predicted
    )


def test_bkube_prefers_efficient_workers() -> None:
    # worker 0 is far more efficient (v/c) than the rest: after initialisation B-KUBE should
    # pick it most often, and the exploitation of bounded eps-first should pick it too
    accuracy = np.array([0.95, 0.6, 0.6, 0.6])
    pool = PricedWorkerPool(accuracy, np.array([1.0, 1.0, 1.0, 1.0]), np.array([200] * 4))
    outcome = run_bkube(pool, 200.0, 1000, np.random.default_rng(0))
    counts = np.bincount(outcome.selections, minlength=4)
    assert counts[0] > counts[1:].max()


def test_single_step_layouts() -> None:
    """§6: spread puts each worker on distinct, least-labeled tasks, so bounded eps-F (many
    workers) performs more tasks than eps-F (one worker); queue piles workers on the first
    tasks, so both perform max_k x_k tasks."""
    from reference.priced import _LoopState, assign_single_step

    pool = PricedWorkerPool(np.full(3, 0.8), np.ones(3), np.full(3, 6))
    counts = np.array([4, 3, 2])
    done = {}
    for layout in ("spread", "queue"):
        state = _LoopState(pool, 100.0, 10, np.random.default_rng(0))
        assign_single_step(
            state, counts, OnlineValueEstimator(3), np.random.default_rng(1), layout=layout
        )
        done[layout] = state.labels_per_task.copy()
        assert state.labels_per_task.sum() == counts.sum()
        np.testing.assert_array_equal(np.bincount(state.selections, minlength=3), counts)
        assert np.all(state.predicted[state.labels_per_task > 0] >= 0)
    assert np.count_nonzero(done["spread"]) == 9 and done["spread"].max() == 1
    assert np.count_nonzero(done["queue"]) == 4
    with pytest.raises(InvalidParameterError, match="layout"):
        assign_single_step(
            _LoopState(pool, 1.0, 2, np.random.default_rng(0)),
            counts,
            OnlineValueEstimator(3),
            np.random.default_rng(0),
            layout="diagonal",
        )
    # on the paper's setting eps-F (one worker, <= M_k tasks) performs fewer tasks
    fewer = 0
    for seed in range(6):
        set_a = pool_a(seed=seed)
        single = run_epsilon_first(set_a, 200.0, 50, np.random.default_rng(seed))
        many = run_bounded_epsilon_first(set_a, 200.0, 50, np.random.default_rng(seed))
        fewer += single.tasks_completed < many.tasks_completed
    assert fewer == 6


def test_bad_input_is_one_line_error() -> None:
    with pytest.raises(InvalidParameterError, match="price"):
        PricedWorkerPool(np.array([0.9]), np.array([0.0]), np.array([1]))
    with pytest.raises(InvalidParameterError, match="epsilon"):
        run_bounded_epsilon_first(pool_a(), 10.0, 5, np.random.default_rng(0), epsilon=2.0)
    with pytest.raises(InvalidParameterError, match="budget"):
        run_bkube(pool_a(), -1.0, 5, np.random.default_rng(0))


def test_reproduce_bkube_fig1_quick_json(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    code = main(
        ["reproduce", "bkube-fig1", "--quick", "--json", "--out", str(tmp_path), "--no-progress"]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    doc = json.loads(out)
    rows = doc["results"]
    ids = {r["policy"] for r in rows}
    assert {"b-kube", "bounded-eps-first", "eps-first", "trailsourcing"} <= ids
    assert {"b-kube:stop-constant=0.5", "bounded-eps-first:layout=queue"} <= ids
    assert {r["worker_set"] for r in rows} == {"A", "B"}
    assert {r["n_tasks"] for r in rows} == {50}
    for row in rows:
        assert 0 <= row["error_mean"] <= 1 and 0 < row["tasks_completed_mean"] <= 50
        assert row["spent_mean"] <= row["budget"] + 1e-6
        assert row["case"] == f"{row['policy']} @{row['worker_set']}/T=50"
    # the claims table travels in the JSON document, one row per comparison and metric
    claims = doc["claims"]
    faithful = [c for c in claims if c["policy"] == "b-kube" and ":" not in c["baseline"]]
    assert {(c["baseline"], c["worker_set"], c["metric"]) for c in faithful} == {
        (b, s, m)
        for b in ("bounded-eps-first", "eps-first", "trailsourcing")
        for s in "AB"
        for m in ("error", "tasks_completed")
    }
    for claim in claims:
        assert 0 <= claim["budgets_met"] <= claim["n_budgets"] == 5
        assert claim["holds"] == (claim["budgets_met"] == claim["n_budgets"])
    [regret_plot] = doc["extra_plots"]
    assert regret_plot.endswith("bkube-fig1-quick-regret.png")
    assert (tmp_path / "bkube-fig1-quick-regret.png").stat().st_size > 0
    regret = doc["settings"]["regret"]["truth"]["curve"]
    assert all(point["regret_mean"] >= -1e-6 for point in regret)


def test_claims_count_budgets_and_significant_differences() -> None:
    import pandas as pd

    from crowdbudget.experiments.papers.rangi2018 import claims

    rows = []
    # b-kube: lower error at both budgets (significantly at 100 only), fewer tasks at 100
    values = {
        "b-kube": [(0.10, 10.0), (0.19, 30.0)],
        "bounded-eps-first": [(0.20, 20.0), (0.20, 30.0)],
        "eps-first": [(0.30, 5.0), (0.30, 5.0)],
        "trailsourcing": [(0.10, 10.0), (0.10, 10.0)],
    }
    for policy, cells in values.items():
        for budget, (error, tasks) in zip((100.0, 200.0), cells, strict=True):
            rows.append(
                {
                    "policy_id": policy,
                    "worker_set": "A",
                    "n_tasks": 50,
                    "budget": budget,
                    "reps": 100,
                    "error_mean": error,
                    "error_std": 0.1,
                    "tasks_completed_mean": tasks,
                    "tasks_completed_std": 1.0,
                }
            )
    text = claims(pd.DataFrame(rows))
    assert "bounded-eps-first error 2/2 (sig +1 -0), tasks 1/2 (sig +0 -1)" in text
    assert "eps-first error 2/2 (sig +2 -0), tasks 2/2 (sig +2 -0)" in text
    assert "trailsourcing error 0/2 (sig +0 -1), tasks 2/2 (sig +1 -0)" in text


def test_looser_stop_constant_stops_at_the_documented_states() -> None:
    """C = 0.5: 2-0, 3-1 and 4-2 stop, 2-1 and 5-3 do not (priced_workers.confident)."""
    stops = {
        (a, b): confident(np.array([a, b], float), a + b, 0.5)
        for a, b in [(2, 0), (2, 1), (3, 1), (4, 2), (5, 3)]
    }
    assert stops == {(2, 0): True, (2, 1): False, (3, 1): True, (4, 2): True, (5, 3): False}


def test_paced_bkube_reaches_every_task_then_revisits_the_undecided() -> None:
    """pace=True: every task is reached when the budget allows it, the faithful loop reaches
    only the first ones; money left after the first pass goes to tasks not yet confident."""
    for seed in range(3):
        pool = pool_a(seed=seed)
        faithful = run_bkube(pool, 100.0, 50, np.random.default_rng(seed))
        paced = run_bkube(pool, 100.0, 50, np.random.default_rng(seed), pace=True)
        assert faithful.tasks_completed < 50
        assert paced.tasks_completed == 50
        assert paced.labels_per_task.max() < faithful.labels_per_task.max()
    # a large budget: the second pass runs until every task is confident (or nothing is
    # feasible), so each task ends in a state where the stop rule holds
    pool = PricedWorkerPool(np.full(4, 0.8), np.ones(4), np.full(4, 10**4))
    outcome = run_bkube(pool, 2000.0, 20, np.random.default_rng(0), pace=True)
    assert outcome.tasks_completed == 20 and outcome.spent < 2000.0
    assert outcome.labels_per_task.min() >= 2


def test_leave_one_out_scores_each_label_against_the_others() -> None:
    estimator = OnlineValueEstimator(3)
    weights = np.ones(3)
    votes = np.zeros(2)
    labels: list[tuple[int, int]] = []
    scores: list[float | None] = []
    for worker, answer in ((0, 1), (1, 1), (2, 0)):
        votes[answer] += 1.0
        labels.append((worker, answer))
        scores.append(None)
        _rescore_leave_one_out(estimator, votes, weights, labels, scores)
        if len(labels) == 1:  # a label alone on its task is not scored
            assert scores == [None] and estimator.evaluations_.sum() == 0
        if len(labels) == 2:  # each agrees with the other
            assert scores == [1.0, 1.0]
    # after (1, 1, 0): workers 0 and 1 face a 1-1 tie (1/2 each), worker 2 faces 2-0 against
    assert scores == [0.5, 0.5, 0.0]
    np.testing.assert_allclose(estimator.agreements_, [0.5, 0.5, 0.0])
    np.testing.assert_array_equal(estimator.evaluations_, [1, 1, 1])


def test_leave_one_out_unmasks_spammers_the_paper_estimate_overrates() -> None:
    """With 2 labels per task the paper's estimate (a label judged by a vote that includes it)
    rates a spammer near 3/4; leave-one-out puts it near 1/2."""
    from crowdbudget.policies.bandits.epsilon_first import RoundRobinSelector
    from reference.priced import _LoopState, run_per_task

    pool = PricedWorkerPool(np.array([0.5, 0.95]), np.ones(2), np.full(2, 4000))
    estimates = {}
    for feedback in ("estimate", LOO):
        rng = np.random.default_rng(1)
        state = _LoopState(pool, 4000.0, 2000, rng)
        estimator = OnlineValueEstimator(2)
        run_per_task(
            state,
            RoundRobinSelector(pool.price),
            estimator,
            rng,
            stop_constant=100.0,  # never confident: every task gets exactly 2 labels
            max_labels_per_task=2,
            feedback=feedback,
        )
        estimates[feedback] = estimator.accuracy_
    assert estimates["estimate"][0] > 0.6
    assert abs(estimates[LOO][0] - 0.5) < 0.05


def test_draw_proportional_is_rng_choice() -> None:
    """B-KUBE's draw of i(n) is ``rng.choice(K, p=p)``'s: the same index, the same stream."""
    from crowdbudget.policies.bandits.kube import draw_proportional

    gen = np.random.default_rng(3)
    for _ in range(500):
        counts = gen.integers(0, 4, size=int(gen.integers(1, 25)))
        counts[gen.integers(counts.size)] += 1  # at least one positive count
        p = counts / counts.sum()
        seed = int(gen.integers(2**31))
        ours, numpy = np.random.default_rng(seed), np.random.default_rng(seed)
        assert [draw_proportional(p, ours) for _ in range(3)] == [
            int(numpy.choice(p.size, p=p)) for _ in range(3)
        ]
        assert ours.random() == numpy.random()


def test_greedy_counts_match_the_checked_knapsack() -> None:
    from crowdbudget.policies.bandits.knapsack import greedy_bounded_knapsack, greedy_counts

    gen = np.random.default_rng(5)
    for _ in range(300):
        k = int(gen.integers(1, 12))
        values = gen.normal(size=k)
        values[gen.random(k) < 0.2] = np.inf
        costs = gen.uniform(0.05, 2.0, size=k)
        caps = gen.integers(0, 6, size=k)
        budget = float(gen.uniform(0, 10))
        counts = greedy_counts(values, costs, caps, budget)
        assert counts @ costs <= budget + 1e-9 and np.all(counts <= caps)
        np.testing.assert_array_equal(counts, greedy_bounded_knapsack(values, costs, caps, budget))


def test_regret_world_keeps_the_unlimited_run() -> None:
    """The regret runs keep only the tasks a run can reach (``sum(M_k) + 1``): the same
    selections as on the world of a million tasks."""
    from crowdbudget.experiments.papers.rangi2018 import (
        REGRET_TASKS,
        _regret_world,
        run_on_world,
    )
    from crowdbudget.registry import make_policy
    from crowdbudget.simulation.priced_workers import PricedWorkerWorld

    small = PricedWorkerPool(
        np.array([0.9, 0.6, 0.8]), np.array([0.3, 0.2, 0.5]), np.array([4, 5, 3]), 2
    )
    for budget in (2.0, 50.0):  # the capacities bind at 50: every reachable task is used
        outcomes = []
        for world_of in (_regret_world, lambda p, g: PricedWorkerWorld(p, REGRET_TASKS, g)):
            rng = np.random.default_rng([4, int(budget)])
            world = world_of(small, rng)
            outcomes.append(run_on_world(make_policy("b-kube"), world, budget, rng))
        assert outcomes[0].selections.size > 0
        np.testing.assert_array_equal(outcomes[0].selections, outcomes[1].selections)
        assert outcomes[0].spent == outcomes[1].spent
        assert outcomes[0].labels_per_task.size == int(small.capacity.sum()) + 1


def test_value_estimate_kept_entry_by_entry_is_the_recomputed_one() -> None:
    """``v_hat`` updated for the one worker whose sums move equals the whole array
    recomputed from the sums, bit for bit (updates and leave-one-out adjustments)."""
    gen = np.random.default_rng(0)
    for n_classes in (2, 3):
        estimator = OnlineValueEstimator(6, n_classes, weights=gen.uniform(0.0, 2.0, 6))
        _ = estimator.value_
        for _ in range(400):
            worker = int(gen.integers(6))
            if gen.random() < 0.7 or estimator.evaluations_[worker] == 0:
                estimator.update(worker, bool(gen.random() < 0.6))
            else:
                estimator.adjust(worker, float(gen.uniform(-1, 1)), int(gen.integers(-1, 2)))
            fresh = OnlineValueEstimator(6, n_classes, weights=estimator.weights)
            fresh.agreements_ = estimator.agreements_.copy()
            fresh.evaluations_ = estimator.evaluations_.copy()
            np.testing.assert_array_equal(estimator.value_, fresh.value_)
        assert not estimator.value_.flags.writeable
