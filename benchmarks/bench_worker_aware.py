"""Worker-aware KG on the RTE replay: microseconds per label, and where they go (issue 21).

Times whole campaigns (``run_campaign``: select, the replay's step, observe) of worker-aware
KG policies on the RTE replay (800 items, 164 workers, 8,000 recorded pairs) up to
``--budget`` labels, ``--reps`` times each (different seeds), and prints the best and the
median microseconds per label — repeated short runs, to discount a machine shared with other
jobs. ``--profile`` adds the cProfile hot spots of one run per policy. Run from the repository
root:

    python benchmarks/bench_worker_aware.py [--policy opt-kg:posterior=one-coin ...]
        [--budget 3200] [--reps 5] [--mode push|pull] [--profile] [--json out.json]

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


def _run(policy_id: str, env: ReplayEnvironment, budget: int, seed: int, mode: str) -> None:
    run_campaign(
        make_policy(policy_id),
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
    args = parser.parse_args()
    warnings.simplefilter("ignore", FutureWarning)  # the old spellings, on purpose
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    rows = []
    for policy_id in args.policy or DEFAULT_POLICIES:
        _run(policy_id, env, 50, 0, args.mode)  # imports, first-use compilation
        times = []
        for rep in range(args.reps):
            start = time.perf_counter()
            _run(policy_id, env, args.budget, rep, args.mode)
            times.append(1e6 * (time.perf_counter() - start) / args.budget)
        best, median = min(times), float(np.median(times))
        rows.append({"policy": policy_id, "us_per_label_best": best, "us_per_label_median": median})
        print(f"{policy_id:45s} {args.mode}  best {best:7.1f}  median {median:7.1f} µs/label")
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(_run, policy_id, env, args.budget, 0, args.mode)
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(8)
            print(out.getvalue())
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cpus, {platform.platform()}")
    if args.json:
        with open(args.json, "w") as fh:
            meta = {"machine": platform.platform(), "load": os.getloadavg(), "mode": args.mode}
            json.dump({**meta, "budget": args.budget, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
