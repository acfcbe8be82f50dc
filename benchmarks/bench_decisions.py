"""Decision speed of Opt-KG for one campaign, by engine and number of items.

Engines:

- ``fast``: the compiled engine, :func:`crowdbudget.engine.fast.run_campaign_fast`
  (compile / cache-load time excluded: one warm-up call first);
- ``reference``: :func:`crowdbudget.experiments.runner.run_campaign` — the Python loop of
  ``policy.select`` / ``env.step`` / ``policy.observe`` with the ``ScoreBuckets`` index;
- ``naive``: recomputes every item's score with ``optimistic_reward`` (scipy ``betainc``) and
  takes the argmax at each step — O(n_items) per decision.

For each (engine, n_items) the campaign is timed end to end and, separately, its O(n_items)
set-up (world and policy reset, final labels: the same campaign with a budget of one label);
``loop decisions/s`` = decisions / (campaign − set-up) is the cost of the decisions alone.
The best of ``--repeat`` runs is kept (the machine may be shared). The three engines choose
the same items: the script checks the naive and reference sequences against the fast one.

Usage::

    python benchmarks/bench_decisions.py [--quick] [--repeat N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numba
import numpy as np
import scipy

from crowdbudget.engine.fast import run_campaign_fast
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies._index import canonical_scores
from crowdbudget.policies.knowledge_gradient import OptimisticKnowledgeGradient
from crowdbudget.posteriors.beta_bernoulli import optimistic_reward
from crowdbudget.simulation import SyntheticBernoulliEnvironment
from crowdbudget.types import Assignment

SIZES = (1_000, 100_000, 1_000_000)
WORLD_SEED = 2013
POLICY_SEED = 0

# decisions per campaign: (fast, reference, naive), full and --quick
DECISIONS = {
    1_000: ((20_000, 20_000, 2_000), (20_000, 10_000, 500)),
    100_000: ((500_000, 200_000, 150), (200_000, 50_000, 30)),
    1_000_000: ((2_000_000, 50_000, 15), (1_000_000, 20_000, 5)),
}


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def _fast(env: SyntheticBernoulliEnvironment, budget: int) -> np.ndarray:
    _, items = run_campaign_fast(
        OptimisticKnowledgeGradient(),
        env,
        [budget],
        world_seed=WORLD_SEED,
        policy_rng=np.random.default_rng(POLICY_SEED),
        record_items=True,
        sync_policy=False,
    )
    return items


def _reference(env: SyntheticBernoulliEnvironment, budget: int) -> np.ndarray:
    policy = OptimisticKnowledgeGradient()
    items: list[int] = []
    observe = policy.observe

    def spy(event: Any) -> None:
        items.append(event.item)
        observe(event)

    policy.observe = spy  # type: ignore[method-assign]
    run_campaign(
        policy, env, [budget], world_seed=WORLD_SEED, policy_rng=np.random.default_rng(POLICY_SEED)
    )
    return np.array(items, dtype=np.int64)


def _naive(env: SyntheticBernoulliEnvironment, budget: int) -> np.ndarray:
    """Opt-KG recomputing every item's score at every step (O(n_items) betainc calls)."""
    env.reset(seed=WORLD_SEED)
    prior = env.prior
    a, b = prior[:, 1].copy(), prior[:, 0].copy()
    d = env.thresholds
    items = np.empty(budget, dtype=np.int64)
    for t in range(budget):
        item = int(np.argmax(canonical_scores(optimistic_reward(a, b, d))))
        event = env.step(Assignment(item=item)).event
        assert event is not None
        if event.label == 1:
            a[item] += 1.0
        else:
            b[item] += 1.0
        items[t] = item
    return items


ENGINES: dict[str, Callable[[SyntheticBernoulliEnvironment, int], np.ndarray]] = {
    "fast": _fast,
    "reference": _reference,
    "naive": _naive,
}


def run(quick: bool, repeat: int) -> list[dict[str, Any]]:
    # warm-up: compile the kernels or load them from Numba's cache
    start = time.perf_counter()
    _fast(SyntheticBernoulliEnvironment(10), 50)
    print(f"fast engine first call (compile or cache load): {time.perf_counter() - start:.2f} s")
    results: list[dict[str, Any]] = []
    for n_items in SIZES:
        env = SyntheticBernoulliEnvironment(n_items)
        budgets = DECISIONS[n_items][1 if quick else 0]
        fast_items: np.ndarray | None = None
        for (engine, fn), decisions in zip(ENGINES.items(), budgets, strict=True):
            runs = 1 if engine == "naive" else repeat
            seconds, items = _best(partial(fn, env, decisions), runs)
            if engine == "naive":
                setup = 0.0  # nothing but the world reset (included: negligible)
            else:
                setup, _ = _best(partial(fn, env, 1), runs)
            if engine == "fast":
                fast_items = items
            else:
                assert fast_items is not None
                common = min(len(items), len(fast_items))
                assert np.array_equal(items[:common], fast_items[:common]), f"{engine} differs"
            row = {
                "engine": engine,
                "n_items": n_items,
                "decisions": decisions,
                "labels_per_item": decisions / n_items,
                "seconds": seconds,
                "setup_seconds": setup,
                "decisions_per_s": decisions / seconds,
                "loop_decisions_per_s": decisions / max(seconds - setup, 1e-12),
            }
            results.append(row)
            print(
                f"{engine:>9} n={n_items:>9,} decisions={decisions:>9,} "
                f"campaign {seconds:8.3f} s (set-up {setup:6.3f} s)  "
                f"{row['decisions_per_s']:>12,.0f}/s end to end  "
                f"{row['loop_decisions_per_s']:>12,.0f}/s loop",
                flush=True,
            )
    return results


def run_flat(repeat: int, labels_per_item: int = 3) -> list[dict[str, Any]]:
    """The fast engine at the same labels per item for every size: cost per decision vs n."""
    results = []
    for n_items in (1_000, 10_000, 100_000, 1_000_000):
        env = SyntheticBernoulliEnvironment(n_items)
        decisions = labels_per_item * n_items
        seconds, _ = _best(partial(_fast, env, decisions), repeat)
        setup, _ = _best(partial(_fast, env, 1), repeat)
        loop = decisions / max(seconds - setup, 1e-12)
        results.append(
            {
                "n_items": n_items,
                "decisions": decisions,
                "seconds": seconds,
                "setup_seconds": setup,
                "loop_decisions_per_s": loop,
            }
        )
        print(
            f"fast, {labels_per_item} labels/item, n={n_items:>9,}: campaign {seconds:.3f} s "
            f"(set-up {setup:.3f} s), {1e6 / loop:.3f} µs per decision",
            flush=True,
        )
    return results


def _table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| engine | n_items | decisions | campaign s | set-up s | decisions/s (end to end) "
        "| decisions/s (loop) | µs / decision (loop) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['engine']} | {r['n_items']:,} | {r['decisions']:,} | {r['seconds']:.3f} "
            f"| {r['setup_seconds']:.3f} | {r['decisions_per_s']:,.0f} "
            f"| {r['loop_decisions_per_s']:,.0f} | {1e6 / r['loop_decisions_per_s']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller campaigns (about 30 s)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per case (best kept)")
    parser.add_argument("--json", default=None, help="write the results to this file")
    args = parser.parse_args(argv)
    repeat = args.repeat or (1 if args.quick else 3)
    machine = {
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    print(json.dumps(machine))
    results = run(args.quick, repeat)
    print()
    flat = run_flat(repeat)
    print()
    print(_table(results))
    for engine in ("fast", "reference"):
        us = [1e6 / r["loop_decisions_per_s"] for r in results if r["engine"] == engine]
        print(
            f"{engine}: µs per decision at 10^3 / 10^5 / 10^6 items: "
            + " / ".join(f"{u:.2f}" for u in us)
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine, "results": results, "flat": flat}, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
