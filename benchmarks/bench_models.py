"""Decision cost of the richer models of Chen, Lin, Zhou (2013): workers (§4) and features (§5).

Measures milliseconds per label (select + observe, environment excluded as far as possible:
the campaign loop of ``run_campaign`` is timed whole, which includes the environment's step)
for:

- worker-aware Opt-KG on the RTE replay (800 items × 164 workers, 8,000 recorded pairs) up to
  3,200 labels, with and without ``refit``;
- feature-based Opt-KG / KG on a UCI feature set (``--features``, default ionosphere:
  351 items, 34 features) up to 1 label per item, global and local rewards, with and without
  ``refit``.

Usage: ``python benchmarks/bench_models.py [--reps 3] [--features ionosphere] [--workers-only]
[--json out]``. Numbers are the best of ``--reps`` runs (different seeds), to discount a shared
machine; each run is timed in wall time and in CPU time (``time.process_time``, what a loaded
machine distorts least). To compare with another version of the code, run the same command with
``PYTHONPATH`` at that version's ``src`` (e.g. an unpacked ``git archive``), alternating.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

from crowdbudget.datasets import load_dataset, load_feature_set
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.registry import make_policy
from crowdbudget.simulation import FeatureEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment

WORKER_POLICIES = [
    "opt-kg",
    "opt-kg:posterior=one-coin:refit=0",
    "opt-kg:posterior=one-coin",
    "kg:posterior=one-coin:refit=0",
    "opt-kg:posterior=two-coin",
    "kg:posterior=two-coin:tie-break=random",
]
FEATURE_POLICIES = [
    "opt-kg:features=logistic",
    "opt-kg:features=logistic:reward=local",
    "kg:features=logistic:refit=10",
    "opt-kg:features=logistic:reward=local:refit=10",
]


def _time(policy_id: str, env: object, budget: int, reps: int) -> tuple[float, float]:
    """Best wall and best CPU milliseconds per label over ``reps`` seeds."""
    wall = cpu = float("inf")
    for rep in range(reps):
        start, start_cpu = time.perf_counter(), time.process_time()
        run_campaign(
            make_policy(policy_id),
            env,  # type: ignore[arg-type]
            [budget],
            world_seed=rep,
            policy_rng=np.random.default_rng(rep),
        )
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return 1e3 * wall / budget, 1e3 * cpu / budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--features", default="ionosphere")
    parser.add_argument("--json", default=None)
    parser.add_argument("--workers-only", action="store_true", help="skip the feature models")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    rte = ReplayEnvironment.from_label_data(load_dataset("rte"))
    for policy_id in WORKER_POLICIES:
        ms, cpu = _time(policy_id, rte, 3200, args.reps)
        rows.append(
            {
                "case": "rte replay, 3,200 labels",
                "policy": policy_id,
                "ms_per_label": ms,
                "cpu_ms_per_label": cpu,
            }
        )
        print(
            f"rte         {policy_id:48s} {1e3 * ms:8.1f} µs/label  CPU {1e3 * cpu:8.1f} µs/label",
            flush=True,
        )
    if args.workers_only:
        _dump(args.json, rows)
        return
    data = load_feature_set(args.features)
    env = FeatureEnvironment(data.features, world="logistic")
    for policy_id in FEATURE_POLICIES:
        ms, _ = _time(policy_id, env, data.n_items, args.reps)
        rows.append(
            {
                "case": f"{args.features} logistic world, {data.n_items} labels",
                "policy": policy_id,
                "ms_per_label": ms,
            }
        )
        print(f"{args.features:11s} {policy_id:48s} {ms:8.3f} ms/label", flush=True)
    _dump(args.json, rows)


def _dump(path: str | None, rows: list[dict[str, object]]) -> None:
    if path:
        with open(path, "w") as fh:
            json.dump(
                {
                    "machine": platform.platform(),
                    "cpus": os.cpu_count(),
                    "load": os.getloadavg(),
                    "rows": rows,
                },
                fh,
                indent=2,
            )


if __name__ == "__main__":
    main()
