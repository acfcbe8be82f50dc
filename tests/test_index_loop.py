"""The compiled continuous-time campaign of the index policy (``engine.index_loop``)
gives the reference run (``drive`` + ``ArrivalClock`` + ``LagrangianIndexPolicy``) exactly:
every state array, the label log, the outcome, the generators and the world's streams."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from crowdbudget.engine import index_loop
from crowdbudget.engine.loop import ArrivalClock, StopAtSpend, drive
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.continuous import run_continuous_campaign, run_continuous_experiment
from crowdbudget.experiments.runner import run_experiment
from crowdbudget.policies.lagrangian_index import LagrangianIndexPolicy
from crowdbudget.registry import make_policy
from crowdbudget.simulation.continuous_time import ContinuousTimeEnvironment
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.simulation.workers import WorkerPrior
from crowdbudget.types import CampaignState


def test_the_set_table_iterates_as_python_sets_do() -> None:
    assert index_loop.set_order_matches()
    rng = np.random.default_rng(5)
    for n in (1, 4, 5, 6, 19, 20, 21, 80, 300):  # around the resizes at 5, 20, 80 members
        keys = rng.integers(0, 10**6, n)
        python_set: set[int] = set()
        for key in keys.tolist():
            python_set.add(key)
        assert index_loop._set_iteration_order(keys).tolist() == list(python_set)
    # colliding keys (equal modulo the table size) and repeats
    keys = np.array([8, 0, 16, 8, 24, 3, 11, 0, 32, 40], dtype=np.int64)
    colliding: set[int] = set()
    for key in keys.tolist():
        colliding.add(key)
    assert index_loop._set_iteration_order(keys).tolist() == list(colliding)


def _run(engine: str, env: ContinuousTimeEnvironment, params: dict, n_hired: int, seed: int):
    env.reset(seed=seed)
    problem = env.problem(float(n_hired))
    state = CampaignState.initial(problem)
    policy = LagrangianIndexPolicy(**params).for_rates(env.arrival_rate, env.completion_rate)
    policy.reset(problem, np.random.default_rng(100 + seed))
    if engine == "fast":
        outcome = index_loop.run_compiled(policy, env, state, n_hired)
    else:
        outcome = drive(policy, env, state, ArrivalClock(env, n_hired), StopAtSpend())
    return {
        "outcome": outcome,
        "label_counts": state.label_counts.tolist(),
        "pending": state.pending.tolist(),
        "spent": state.spent,
        "committed": state.committed,
        "n_events": state.n_events,
        "time": state.time,
        "log": [
            getattr(state.label_log, c).tolist() for c in ("items", "workers", "labels", "costs")
        ],
        "policy_rng": pickle.dumps(policy.rng_.bit_generator.state),
        "n_capped": policy.n_capped_,
        "asked": env.base.answers_given.tolist(),
        "streams": (env._clock, env._gap_next, env._duration_next, env._gaps.tolist()),
        "durations": env._durations.tolist(),
        "world": [pickle.dumps(g.bit_generator.state) for g in (env._arrival_rng, env._work_rng)],
    }


WORLDS = [
    # (n_tasks, hired U, r, μ, horizon, prior, policy parameters)
    (10, 12, 0.1, 0.4, math.inf, (1.0, 1.0), {}),
    (200, 240, 0.1, 0.4, math.inf, (1.0, 1.0), {}),
    (40, 160, 1.0, 0.2, math.inf, (2.0, 3.0), {}),  # many workers in flight
    (30, 90, 0.5, 0.05, 150.0, (1.0, 1.0), {}),  # the horizon cancels pending work
    (3, 30, 2.0, 0.1, math.inf, (1.0, 1.0), {"label_cap": 2}),  # every task at the cap
    (60, 300, 0.3, 0.4, math.inf, (1.0, 1.0), {"max_lookahead": 5}),
    (25, 100, 0.1, 3.0, math.inf, (0.5, 0.5), {"label_cap": 6, "arrival_rate": 0.2}),
]


@pytest.mark.parametrize("world", range(len(WORLDS)))
def test_compiled_campaign_is_the_reference_run(world: int) -> None:
    n, hired, r, mu, horizon, prior, params = WORLDS[world]
    env = ContinuousTimeEnvironment(
        SyntheticBernoulliEnvironment(n, prior=prior),
        arrival_rate=r,
        completion_rate=mu,
        horizon=horizon,
    )
    cancelled = capped = 0
    for seed in range(6):
        reference = _run("reference", env, params, hired, seed)
        fast = _run("fast", env, params, hired, seed)
        assert fast == reference, (world, seed)
        cancelled += reference["outcome"].cancelled
        capped += reference["outcome"].assignments < hired
    if horizon < math.inf:
        assert cancelled > 0  # the horizon case did cancel work
    if params.get("label_cap") == 2:
        assert capped > 0  # the policy ran out of tasks below the cap


def test_the_runner_picks_the_compiled_loop_and_gives_the_same_rows() -> None:
    env = ContinuousTimeEnvironment(
        SyntheticBernoulliEnvironment(50), arrival_rate=0.1, completion_rate=0.4
    )
    kwargs = {"n_jobs": 1, "progress": False, "seed": 3}
    fast = run_continuous_experiment(["lagrangian-index", "uniform"], env, [60], 4, **kwargs)
    reference = run_continuous_experiment(
        ["lagrangian-index", "uniform"], env, [60], 4, engine="reference", **kwargs
    )
    columns = [c for c in reference.runs.columns if c != "seconds"]
    assert fast.runs[columns].equals(reference.runs[columns])


def test_where_the_compiled_loop_does_not_apply() -> None:
    def env(**kwargs) -> ContinuousTimeEnvironment:
        return ContinuousTimeEnvironment(
            SyntheticBernoulliEnvironment(20, **kwargs.pop("base", {})),
            arrival_rate=0.1,
            completion_rate=0.4,
            **kwargs,
        )

    index = LagrangianIndexPolicy()
    assert index_loop.supports(index, env())
    assert not index_loop.supports(make_policy("opt-kg"), env())
    assert not index_loop.supports(index, env(rate_function=_half_rate))
    assert not index_loop.supports(index, env(base={"workers": WorkerPrior(3)}))
    mixed = np.tile([1.0, 1.0], (20, 1))
    mixed[0] = (2.0, 1.0)
    assert not index_loop.supports(index, env(base={"prior": mixed}))
    with pytest.raises(InvalidParameterError, match="engine='fast' does not support"):
        run_continuous_campaign(
            make_policy("opt-kg"),
            env(),
            24,
            world_seed=0,
            policy_rng=np.random.default_rng(0),
            engine="fast",
        )
    with pytest.raises(InvalidParameterError, match="engine must be one of"):
        run_continuous_campaign(
            index, env(), 24, world_seed=0, policy_rng=np.random.default_rng(0), engine="numba"
        )


def _half_rate(t: float) -> float:
    return 0.05


def test_label_log_extend_is_append_of_each() -> None:
    from crowdbudget.types import LabelEvent, LabelLog

    rng = np.random.default_rng(2)
    one_by_one, in_bulk = LabelLog(capacity=3), LabelLog(capacity=3)
    for size in (2, 0, 5, 40):  # grows past the capacity twice
        items, workers = rng.integers(0, 9, size), rng.integers(-1, 4, size)
        labels, costs = rng.integers(0, 3, size), rng.random(size)
        for k in range(size):
            one_by_one.append(LabelEvent(int(items[k]), int(workers[k]), int(labels[k]), costs[k]))
        in_bulk.extend(items, workers, labels, costs)
        assert len(in_bulk) == len(one_by_one)
        for column in ("items", "workers", "labels", "costs"):
            assert np.array_equal(getattr(in_bulk, column), getattr(one_by_one, column))


def _run_instant_state(engine: str, env, params: dict, budget: int, seed: int, mode: str = "push"):
    from crowdbudget.engine.loop import Clock

    env.reset(seed=seed)
    problem = env.problem(float(budget))
    state = CampaignState.initial(problem)
    policy = LagrangianIndexPolicy(**params)
    policy.reset(problem, np.random.default_rng(seed))
    if engine == "fast":
        index_loop._run(policy, env, state, budget, None)
    else:
        drive(policy, env, state, Clock(mode), StopAtSpend(float(budget)))
    return (
        state.label_counts.tolist(),
        state.pending.tolist(),
        (state.spent, state.committed, state.n_events, state.time),
        [getattr(state.label_log, c).tolist() for c in ("items", "workers", "labels", "costs")],
        pickle.dumps(policy.rng_.bit_generator.state),
        policy.n_capped_,
        env.answers_given.tolist(),
    )


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_instant_campaign_is_the_reference_run(mode: str) -> None:
    for n, budget, prior, params in [
        (40, 48, (1.0, 1.0), {}),
        (200, 600, (2.0, 1.0), {"arrival_rate": 0.3}),
        (5, 40, (1.0, 1.0), {"label_cap": 3}),  # the policy stops: every task at the cap
        (30, 90, (1.0, 1.0), {"max_lookahead": 4}),
    ]:
        env = SyntheticBernoulliEnvironment(n, prior=prior)
        for seed in range(4):
            fast = _run_instant_state("fast", env, params, budget, seed)
            reference = _run_instant_state("reference", env, params, budget, seed, mode)
            assert fast == reference, (n, budget, seed)


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_the_runner_runs_lagrangian_index_compiled_with_the_same_rows(mode: str) -> None:
    env = SyntheticBernoulliEnvironment(60, prior=(1.0, 2.0))
    policies = ["lagrangian-index", "lagrangian-index:label-cap=4:max-lookahead=6"]
    kwargs = {"n_reps": 3, "seed": 2, "n_jobs": 1, "progress": False, "mode": mode}
    budgets = [0.5, 30, 59.5, 120, 400]  # 400: the policy stops at the cap first
    fast = run_experiment(policies, env, budgets, engine="fast", **kwargs)
    reference = run_experiment(policies, env, budgets, engine="reference", **kwargs)
    columns = [c for c in reference.runs.columns if c != "seconds"]
    assert fast.runs[columns].equals(reference.runs[columns])
    with pytest.raises(InvalidParameterError, match="one budget per campaign"):
        index_loop.run_instant(
            LagrangianIndexPolicy(),
            env,
            [10, 20],
            world_seed=0,
            policy_rng=np.random.default_rng(0),
        )
