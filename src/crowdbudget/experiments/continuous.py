"""Continuous-time campaigns and experiments (Hu & Frazier §6).

:func:`run_continuous_campaign` runs one campaign on the one campaign loop
(:func:`crowdbudget.engine.loop.drive`) with an :class:`~crowdbudget.engine.loop.ArrivalClock`
over a :class:`~crowdbudget.simulation.continuous_time.ContinuousTimeEnvironment` (which stays
in ``simulation``: the world only), as :func:`crowdbudget.experiments.runner.run_campaign` runs
a discrete-time one. :func:`run_continuous_experiment` runs policies × budgets × replications
of it, seeded as :func:`~crowdbudget.experiments.runner.run_experiment` seeds its campaigns.

One experiment driver: the seeds (:func:`~crowdbudget.experiments.runner.replication_seeds`),
the executor (:func:`~crowdbudget.experiments.runner.execute`: serial, a process pool or Dask,
one progress bar) and the ordering of the runs are ``run_experiment``'s; only the task — one
continuous-time campaign per (policy, budget, replication), its row in
:func:`run_continuous_campaign`'s column order — is this module's.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from crowdbudget._validation import check_positive_int
from crowdbudget.engine.loop import ArrivalClock, StopAtSpend, drive
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import (
    ENGINES,
    ExperimentResult,
    MetricsHook,
    execute,
    replication_seeds,
    sort_runs,
    summarize,
)
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.policies.lagrangian_index import LagrangianIndexPolicy
from crowdbudget.policies.verdict import Verdict, make_verdict
from crowdbudget.registry import Spec, VerdictSpec, make_policy, pin_paper_ties, split_verdict
from crowdbudget.simulation.continuous_time import ContinuousTimeEnvironment, posterior_reward
from crowdbudget.types import CampaignState


def _prepare_policy(policy: AllocationPolicy, env: ContinuousTimeEnvironment) -> AllocationPolicy:
    """Policies that model the arrival and completion rates (``for_rates``) get the world's."""
    for_rates = getattr(policy, "for_rates", None)
    if callable(for_rates):
        prepared = for_rates(env.arrival_rate, env.completion_rate)
        assert isinstance(prepared, AllocationPolicy)
        return prepared
    return policy


def run_continuous_campaign(
    policy: AllocationPolicy,
    env: ContinuousTimeEnvironment,
    budget: int,
    *,
    world_seed: int | np.random.SeedSequence | None,
    policy_rng: np.random.Generator,
    metrics: MetricsHook | None = None,
    verdict: Verdict | None = None,
    engine: str = "auto",
) -> dict[str, Any]:
    """Run one continuous-time campaign with at most ``budget`` = U workers (Hu & Frazier
    §6): :func:`~crowdbudget.engine.loop.drive` with an
    :class:`~crowdbudget.engine.loop.ArrivalClock` hiring at most U workers; the campaign
    ends when U workers have been hired and have all finished, at the horizon (pending work
    cancelled), or when the policy stops with nothing pending.

    Returns:
        A dict: ``budget``, ``reward`` (eq. 2, total: the posterior expected number of
        correctly classified tasks, :func:`posterior_reward`), ``reward_per_item``,
        ``accuracy`` (final labels vs truth on ``env.base.evaluation_mask``), ``correct``,
        ``workers_hired``, ``labels_used``, ``cancelled`` (pending at the horizon),
        ``max_labels_per_item``, ``end_time``, ``seconds`` and the hook's metrics. The
        final labels are ``verdict``'s (reset after the policy from ``policy_rng``, which it
        does not advance; None: ``make_verdict()``, the policy's own model).

    ``engine``: ``"auto"`` runs the Hu–Frazier index policy on a synthetic world compiled
    (:mod:`crowdbudget.engine.index_loop`: the same run, event for event, where
    ``supports`` says so) and everything else on ``drive``; ``"reference"`` always ``drive``;
    ``"fast"`` insists on the compiled loop.
    """
    budget = check_positive_int(budget, "budget")
    compiled = _use_compiled(policy, env, engine)
    env.check_budget(budget)
    env.reset(seed=world_seed)
    problem = env.problem(float(budget))
    state = CampaignState.initial(problem)
    state.pairs = None
    if env.eligible is not None:
        state.eligible &= env.eligible
    state.extra["arrival_rate"] = env.arrival_rate
    state.extra["completion_rate"] = env.completion_rate
    start = time.perf_counter()
    policy = _prepare_policy(policy, env)
    policy.reset(problem, policy_rng)
    verdict = verdict if verdict is not None else make_verdict()
    verdict.reset(problem, policy_rng)
    # the money budget is U labels at price 1; ArrivalClock stops hiring at U, so the
    # recorder never ends the campaign
    if compiled:
        from crowdbudget.engine.index_loop import run_compiled  # imports Numba

        assert isinstance(policy, LagrangianIndexPolicy)
        outcome = run_compiled(policy, env, state, budget)
    else:
        clock = ArrivalClock(env, max_assignments=budget)
        outcome = drive(policy, env, state, clock, StopAtSpend())
    labels = verdict.labels(state, policy)
    truth = env.true_labels
    mask = (
        np.ones(problem.n_items, dtype=bool)
        if env.evaluation_mask is None
        else np.asarray(env.evaluation_mask, dtype=bool)
    )
    correct = int(np.sum(labels[mask] == truth[mask]))
    reward = posterior_reward(problem, state.label_counts)
    row: dict[str, Any] = {
        "budget": float(budget),
        "reward": reward,
        "reward_per_item": reward / problem.n_items,
        # max(·, 1): a world with no evaluated task scores 0, not 0/0
        "accuracy": correct / max(int(mask.sum()), 1),
        "correct": float(correct),
        "workers_hired": outcome.assignments,
        "labels_used": state.spent,
        "cancelled": outcome.cancelled,
        "max_labels_per_item": int(state.label_counts.sum(axis=1).max()),
        "end_time": outcome.end_time,
        "seconds": time.perf_counter() - start,
    }
    if metrics is not None:
        row.update(metrics(state, labels, truth, mask))
    return row


def _use_compiled(policy: AllocationPolicy, env: ContinuousTimeEnvironment, engine: str) -> bool:
    """Whether to run the campaign compiled (``engine.index_loop``)."""
    if engine not in ENGINES:
        raise InvalidParameterError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "reference" or (engine == "auto" and type(policy) is not LagrangianIndexPolicy):
        return False
    from crowdbudget.engine.index_loop import supports  # imports Numba

    supported = supports(policy, env)
    if engine == "fast" and not supported:
        raise InvalidParameterError(
            f"engine='fast' does not support {policy!r} on {type(env).__name__} in continuous "
            "time (it needs lagrangian-index, a synthetic world without workers or a rate "
            "function, and one prior and threshold for all tasks)"
        )
    return supported


def _continuous_task(
    entry: tuple[Spec, VerdictSpec, str],
    env: ContinuousTimeEnvironment,
    budget: int,
    replications: list[int],
    world_seeds: list[np.random.SeedSequence],
    policy_seeds: list[np.random.SeedSequence],
    metrics: MetricsHook | None,
    engine: str = "auto",
) -> list[dict[str, Any]]:
    policy_spec, verdict_spec, label = entry
    rows = []
    for r, world_seed, policy_seed in zip(replications, world_seeds, policy_seeds, strict=True):
        row = run_continuous_campaign(
            make_policy(policy_spec),
            env,
            budget,
            world_seed=world_seed,
            policy_rng=np.random.default_rng(policy_seed),
            metrics=metrics,
            verdict=verdict_spec.build(),
            engine=engine,
        )
        rows.append({"policy": label, "replication": r, **row})
    return rows


RUN_COLUMNS = ["policy", "budget", "replication"]


def run_continuous_experiment(
    policies: Sequence[str],
    env: ContinuousTimeEnvironment,
    budgets: Sequence[int],
    n_reps: int,
    *,
    seed: int = 0,
    n_jobs: int | None = None,
    progress: bool = True,
    metrics: MetricsHook | None = None,
    chunk_size: int | None = None,
    executor: str | None = None,
    verdict: str | None = None,
    ties: str = "default",
    engine: str = "auto",
) -> ExperimentResult:
    """Every policy × budget × replication in continuous time (common random numbers).

    Seeds follow :func:`crowdbudget.experiments.runner.run_experiment`: replication r uses
    the r-th child of the first child of ``SeedSequence(seed)`` as its world for every policy
    and budget, and the r-th child of the second as the policy's generator; the results do not
    depend on ``n_jobs`` or the order. Replications are sent to the process pool in chunks
    (``chunk_size``, default about 4 chunks per process and policy) through the discrete-time
    driver's one executor (:func:`~crowdbudget.experiments.runner.execute`: ``executor``
    serial, processes or Dask, one progress bar).

    ``verdict`` is the verdict of every id that names none (``posterior``, the default: the
    policy's own model with ties by the estimated class prior; ``paper``: the papers' rule;
    or an aggregator id), as in :func:`~crowdbudget.experiments.runner.run_experiment`;
    ``ties="paper"`` pins the papers' rule among tied items as there. ``engine``: as in
    :func:`run_continuous_campaign` (the compiled loop gives the same rows).

    Returns:
        :class:`~crowdbudget.experiments.runner.ExperimentResult`; ``summary`` has, per
        (policy, budget), mean/std/95% t-interval of every metric of
        :func:`run_continuous_campaign`.
    """
    policies = list(policies)
    if not policies:
        raise InvalidParameterError("at least one policy is needed")
    # parsed once (unknown ids fail here): the policy's spec, its verdict's, the row label
    entries = {pid: (*split_verdict(pid, verdict), str(pid)) for pid in policies}
    if ties == "paper":
        entries = {pid: (pin_paper_ties(p), v, label) for pid, (p, v, label) in entries.items()}
    elif ties != "default":
        raise InvalidParameterError(f"ties must be 'default' or 'paper', got {ties!r}")
    for policy_spec, _, _ in entries.values():
        make_policy(policy_spec)
    if engine not in ENGINES:
        raise InvalidParameterError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    budget_list = sorted({check_positive_int(int(b), "budget") for b in budgets})
    if not budget_list:
        raise InvalidParameterError("at least one budget is needed")
    env.check_budget(budget_list[-1])
    n_reps = check_positive_int(n_reps, "reps")
    world_seeds, policy_seeds = replication_seeds(seed, n_reps)
    n_jobs = (os.cpu_count() or 1) if n_jobs is None else max(1, n_jobs)
    size = chunk_size or max(1, math.ceil(n_reps / (4 * n_jobs)))
    tasks = []
    for pid in policies:
        for budget in budget_list:
            for lo in range(0, n_reps, size):
                reps = list(range(lo, min(n_reps, lo + size)))
                tasks.append(
                    (
                        entries[pid],
                        env,
                        budget,
                        reps,
                        [world_seeds[r] for r in reps],
                        [policy_seeds[r] for r in reps],
                        metrics,
                        engine,
                    )
                )
    rows = execute(
        _continuous_task,
        tasks,
        [float(len(task[3])) for task in tasks],
        n_jobs=n_jobs,
        executor=executor,
        progress=progress,
        desc="campaigns",
        unit="run",
    )
    runs = sort_runs(pd.DataFrame(rows), policies)
    runs = runs[RUN_COLUMNS + [c for c in runs.columns if c not in RUN_COLUMNS]]
    return ExperimentResult(runs=runs, summary=summarize(runs, policies))
