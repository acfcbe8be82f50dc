"""The continuous-time experiment driver (Hu & Frazier §6): policies × budgets × replications
of :func:`~crowdbudget.simulation.continuous_time.run_continuous_campaign`, seeded as
:func:`~crowdbudget.experiments.runner.run_experiment` seeds its campaigns.

It lived in ``simulation.continuous_time`` (which then imported the experiment runner from
below); the campaign and the world stay there.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from crowdbudget._validation import check_positive_int
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import ExperimentResult, MetricsHook, summarize
from crowdbudget.registry import make_policy
from crowdbudget.simulation.continuous_time import (
    ContinuousTimeEnvironment,
    run_continuous_campaign,
)


def _continuous_task(
    policy_id: str,
    env: ContinuousTimeEnvironment,
    budget: int,
    replications: list[int],
    world_seeds: list[np.random.SeedSequence],
    policy_seeds: list[np.random.SeedSequence],
    metrics: MetricsHook | None,
) -> list[dict[str, Any]]:
    rows = []
    for r, world_seed, policy_seed in zip(replications, world_seeds, policy_seeds, strict=True):
        policy = make_policy(policy_id)
        row = run_continuous_campaign(
            policy,
            env,
            budget,
            world_seed=world_seed,
            policy_rng=np.random.default_rng(policy_seed),
            metrics=metrics,
        )
        rows.append({"policy": policy_id, "replication": r, **row})
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
) -> ExperimentResult:
    """Every policy × budget × replication in continuous time (common random numbers).

    Seeds follow :func:`crowdbudget.experiments.runner.run_experiment`: replication r uses
    the r-th child of the first child of ``SeedSequence(seed)`` as its world for every policy
    and budget, and the r-th child of the second as the policy's generator; the results do not
    depend on ``n_jobs`` or the order. Replications are sent to the process pool in chunks
    (``chunk_size``, default about 4 chunks per process and policy).

    Returns:
        :class:`~crowdbudget.experiments.runner.ExperimentResult`; ``summary`` has, per
        (policy, budget), mean/std/95% t-interval of every metric of
        :func:`run_continuous_campaign`.
    """
    policies = list(policies)
    if not policies:
        raise InvalidParameterError("at least one policy is needed")
    for pid in policies:
        make_policy(pid)  # fail fast on unknown ids
    budget_list = sorted({check_positive_int(int(b), "budget") for b in budgets})
    if not budget_list:
        raise InvalidParameterError("at least one budget is needed")
    env.check_budget(budget_list[-1])
    n_reps = check_positive_int(n_reps, "reps")
    root = np.random.SeedSequence(seed)
    world_root, policy_root = root.spawn(2)
    world_seeds = world_root.spawn(n_reps)
    policy_seeds = policy_root.spawn(n_reps)
    n_jobs = (os.cpu_count() or 1) if n_jobs is None else max(1, n_jobs)
    size = chunk_size or max(1, math.ceil(n_reps / (4 * n_jobs)))
    tasks = []
    for pid in policies:
        for budget in budget_list:
            for lo in range(0, n_reps, size):
                reps = list(range(lo, min(n_reps, lo + size)))
                tasks.append(
                    (
                        pid,
                        env,
                        budget,
                        reps,
                        [world_seeds[r] for r in reps],
                        [policy_seeds[r] for r in reps],
                        metrics,
                    )
                )
    bar = tqdm(
        total=len(policies) * len(budget_list) * n_reps,
        desc="campaigns",
        unit="run",
        delay=2.0,
        disable=not progress,
        file=sys.stderr,
    )
    rows: list[dict[str, Any]] = []
    try:
        if n_jobs == 1 or len(tasks) == 1:
            for task in tasks:
                rows.extend(_continuous_task(*task))
                bar.update(len(task[3]))
        else:
            with ProcessPoolExecutor(max_workers=min(n_jobs, len(tasks))) as pool:
                futures = {pool.submit(_continuous_task, *task): len(task[3]) for task in tasks}
                for future in as_completed(futures):
                    rows.extend(future.result())
                    bar.update(futures[future])
    finally:
        bar.close()
    runs = pd.DataFrame(rows)
    order = {pid: k for k, pid in enumerate(policies)}
    runs = runs.sort_values(
        ["policy", "budget", "replication"],
        key=lambda s: s.map(order) if s.name == "policy" else s,
    ).reset_index(drop=True)
    runs = runs[RUN_COLUMNS + [c for c in runs.columns if c not in RUN_COLUMNS]]
    return ExperimentResult(runs=runs, summary=summarize(runs, policies))
