"""Worker-aware KG on the RTE replay: microseconds per label, and where they go (issue 21).

Times whole campaigns (``run_campaign``: select, the replay's step, observe) of worker-aware
KG policies on the RTE replay (800 items, 164 workers, 8,000 recorded pairs) up to
``--budget`` labels, ``--reps`` times each (different seeds), and prints the best and the
median microseconds per label — repeated short runs, to discount a machine shared with other
jobs. ``--profile`` adds the cProfile hot spots of one run per policy. Run from the repository
root:

    python benchmarks/bench_worker_aware.py [--policy opt-kg:posterior=one-coin ...]
        [--budget 3200] [--reps 5] [--mode push|pull] [--profile] [--json out.json]
        [--dataset trec] [--budget-per-item 4] [--no-bounded-push] [--breakdown]

Each row also gives the CPU seconds of a campaign (``time.process_time``: best and median),
and its ratio to the first policy's best (the homogeneous ``opt-kg`` by default) — the
figure to compare on a shared machine. ``--dataset`` replays another bundled set (or one
under ``CROWDBUDGET_DATA_DIR``), ``--budget-per-item`` sets the budget as a multiple of its
items, ``--no-bounded-push`` runs worker-aware Opt-KG's push choice from the per-worker bests
instead of the per-item bounds (``bounded_push=False``: the code before them, same choices).
``--breakdown`` adds, per policy, the thread CPU of a campaign's parts (the median over the
``--reps`` campaigns, ms): the refit and its pieces (class prior, ``reestimate``,
``refresh_items``, the rest of the refit's Python), the compiled runs (``push_replay_labels``)
and the Python around them (``take_labels`` without its compiled call), each call timed by
``time.thread_time`` around it (a wrapper per call, about a microsecond each, is included).

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


#: (module, attribute, part): the calls --breakdown times; a part's time excludes the
#: parts nested in it (a stack of open timers)
_PARTS = [
    ("crowdbudget.policies.worker_aware", "OneCoinKnowledgeGradient._refit_now", "refit"),
    ("crowdbudget.policies._class_prior", "ClassPriorSteps._update_class_prior", "class prior"),
    ("crowdbudget.policies._one_coin_kernel", "reestimate", "reestimate"),
    ("crowdbudget.policies._worker_aware_fast", "refresh_items", "refresh_items"),
    ("crowdbudget.policies._push_replay", "take_labels", "take_labels (Python)"),
    ("crowdbudget.policies._push_replay", "push_replay_labels", "compiled runs"),
    ("crowdbudget.engine.replay_push", "take_labels", "take_labels (Python)"),
]


class _Breakdown:
    """Thread CPU per part (:data:`_PARTS`), exclusive of the nested parts."""

    def __init__(self) -> None:
        import importlib

        self.totals: dict[str, float] = {}
        self._stack: list[float] = []  # per open timer: the time of its nested parts
        self._undo: list[tuple[object, str, object]] = []
        for module_name, attr, part in _PARTS:
            owner: object = importlib.import_module(module_name)
            *path, name = attr.split(".")
            for step in path:
                owner = getattr(owner, step)
            original = getattr(owner, name)
            self._undo.append((owner, name, original))
            setattr(owner, name, self._timed(original, part))

    def _timed(self, fn: object, part: str) -> object:
        def wrapper(*args: object, **kwargs: object) -> object:
            self._stack.append(0.0)
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)  # type: ignore[operator]
            finally:
                spent = time.thread_time() - start
                nested = self._stack.pop()
                self.totals[part] = self.totals.get(part, 0.0) + spent - nested
                if self._stack:
                    self._stack[-1] += spent

        return wrapper

    def close(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)


def _breakdown(
    policy_id: str, env: ReplayEnvironment, budget: int, args: argparse.Namespace
) -> None:
    """Print the median thread CPU (ms) of each part of a campaign over ``--reps`` runs."""
    reps = int(args.reps)
    runs: list[dict[str, float]] = []
    for rep in range(reps):
        timer = _Breakdown()
        start = time.thread_time()
        try:
            _run(policy_id, env, budget, rep, args.mode)
        finally:
            timer.close()
        timer.totals["campaign"] = time.thread_time() - start
        runs.append(timer.totals)
    parts = list(dict.fromkeys(key for run in runs for key in run))
    cells = [f"{p} {1e3 * float(np.median([r.get(p, 0.0) for r in runs])):.1f}" for p in parts]
    print(f"  breakdown, ms (median of {reps}): " + ", ".join(cells))


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
    parser.add_argument("--breakdown", action="store_true")
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
        if args.breakdown:
            _breakdown(policy_id, env, budget, args)
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
