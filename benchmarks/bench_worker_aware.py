"""Worker-aware KG on the RTE replay: microseconds per label, and where they go (issue 21).

Times whole campaigns (``run_campaign``: select, the replay's step, observe) of worker-aware
KG policies on the RTE replay (800 items, 164 workers, 8,000 recorded pairs) up to
``--budget`` labels, ``--reps`` times each (different seeds), and prints the best and the
median microseconds per label — repeated short runs, to discount a machine shared with other
jobs. ``--profile`` adds the cProfile hot spots of one run per policy. Run from the repository
root:

    python benchmarks/bench_worker_aware.py [--policy opt-kg:posterior=one-coin ...]
        [--budget 3200] [--reps 5] [--mode push|pull] [--profile] [--json out.json]
        [--dataset trec] [--budget-per-item 4] [--no-bounded-push]

Each row also gives the CPU seconds of a campaign (``time.process_time``: best and median),
and its ratio to the first policy's best (the homogeneous ``opt-kg`` by default) — the
figure to compare on a shared machine. ``--dataset`` replays another bundled set (or one
under ``CROWDBUDGET_DATA_DIR``), ``--budget-per-item`` sets the budget as a multiple of its
items, ``--no-bounded-push`` runs worker-aware Opt-KG's push choice from the per-worker bests
instead of the per-item bounds (``bounded_push=False``: the code before them, same choices).

To compare with another version of the code, run the same command with ``PYTHONPATH``
pointing at that version's ``src`` (e.g. an unpacked ``git archive``), alternating the two.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import time
import warnings

import numpy as np

from crowdbudget.datasets import load_dataset
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.registry import make_policy
from crowdbudget.simulation.replay import ReplayEnvironment

#: the old spellings (``workers=``) run on every version of the code
DEFAULT_POLICIES = [
    "opt-kg",
    "opt-kg:posterior=one-coin",
    "kg:posterior=one-coin",
    "opt-kg:posterior=two-coin",
    "kg:posterior=two-coin:tie-break=random",
    "opt-kg:posterior=one-coin:refit=25",
]


def _run(
    policy_id: str, env: ReplayEnvironment, budget: int, seed: int, mode: str, bounded: bool = True
) -> None:
    policy = make_policy(policy_id)
    if not bounded:
        policy.bounded_push = False  # type: ignore[attr-defined]
    run_campaign(
        policy,
        env,
        [float(budget)],
        world_seed=seed,
        policy_rng=np.random.default_rng(seed),
        mode=mode,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", action="append", default=None)
    parser.add_argument("--budget", type=int, default=3200)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--mode", choices=("push", "pull"), default="push")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--dataset", default="rte")
    parser.add_argument("--budget-per-item", type=float, default=None)
    parser.add_argument("--no-bounded-push", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore", FutureWarning)  # the old spellings, on purpose
    env = ReplayEnvironment.from_label_data(load_dataset(args.dataset))
    budget = args.budget
    if args.budget_per_item is not None:
        budget = round(args.budget_per_item * env.n_items)
    bounded = not args.no_bounded_push
    rows = []
    first_cpu = None
    for policy_id in args.policy or DEFAULT_POLICIES:
        _run(policy_id, env, 50, 0, args.mode, bounded)  # imports, first-use compilation
        times, cpu = [], []
        for rep in range(args.reps):
            start, start_cpu = time.perf_counter(), time.process_time()
            _run(policy_id, env, budget, rep, args.mode, bounded)
            cpu.append(time.process_time() - start_cpu)
            times.append(1e6 * (time.perf_counter() - start) / budget)
        best, median = min(times), float(np.median(times))
        first_cpu = min(cpu) if first_cpu is None else first_cpu
        rows.append(
            {
                "policy": policy_id,
                "us_per_label_best": best,
                "us_per_label_median": median,
                "cpu_s_best": min(cpu),
                "cpu_s_median": float(np.median(cpu)),
            }
        )
        print(
            f"{policy_id:45s} {args.mode}  best {best:7.1f}  median {median:7.1f} µs/label"
            f"  CPU best {min(cpu):7.3f} s median {float(np.median(cpu)):7.3f} s"
            f"  ({min(cpu) / first_cpu:.2f}× the first)"
        )
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(_run, policy_id, env, budget, 0, args.mode, bounded)
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(8)
            print(out.getvalue())
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cpus, {platform.platform()}")
    if args.json:
        with open(args.json, "w") as fh:
            meta = {"machine": platform.platform(), "load": os.getloadavg(), "mode": args.mode}
            meta["dataset"] = args.dataset
            json.dump({**meta, "budget": budget, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
