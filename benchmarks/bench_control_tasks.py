"""Control tasks + blocking against no control, on synthetic crowds with bad workers.

Two crowds of ``--workers`` one-coin workers (good ones: accuracy uniform on [0.7, 0.95]):
30 % spammers (uniform answers) or 30 % always-one-class workers (each answers one class,
drawn per worker). Items: θ ~ Beta(0.1, 0.1) (mostly clear items), truth 1{θ >= 0.5}.
Pull mode (a uniformly drawn worker arrives and is served), ``opt-kg`` with its own verdict,
budget 3 labels per item. Conditions: no control (the control items closed to the policy
and never served: the same items to label, the same live rules, the same budget); the runner
without control tasks at all (every item labeled, no live rules: a worker may label an item
twice — a different campaign, for reference); control tasks at a fixed rate r in
{1, 5, 10 %} (every round(1/r)-th task of a worker, first_k = 0), with blocking (level 0.7,
posterior probability 0.9, Beta(1, 1) prior, at least 4 control answers); and the same rates
after ``--first-k`` control tasks per new worker. Accuracy on the non-control items (the same
items in every condition of a replication: the control items of the largest pool are left
out of every condition's score), mean and standard error over replications; the crowd, the
truth and the answers of replication r are the same in every condition.

    python benchmarks/bench_control_tasks.py [--reps 20] [--items 300] [--workers 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from crowdbudget.engine.control import ControlTasks
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.verdict import make_verdict
from crowdbudget.registry import make_policy
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.simulation.workers import WorkerPool

BAD_SHARE = 0.3
N_CONTROL_ITEMS = 30


def crowd(kind: str, n_workers: int, rng: np.random.Generator) -> WorkerPool:
    """``n_workers`` workers, the first 30 % bad (``spammer`` or ``one-class``)."""
    n_bad = round(BAD_SHARE * n_workers)
    accuracy = rng.uniform(0.7, 0.95, n_workers)
    conf = np.array([[[a, 1 - a], [1 - a, a]] for a in accuracy])
    for j in range(n_bad):
        if kind == "spammer":
            conf[j] = 0.5
        else:
            favourite = int(rng.integers(2))
            conf[j] = np.eye(2)[[favourite, favourite]]
    return WorkerPool(conf)


def conditions(first_k: int) -> list[tuple[str, ControlTasks | None]]:
    # the baseline: the same items to label (the control items closed, none served) under
    # the same live rules (a worker labels an item once) and the same budget
    baseline = ControlTasks(n_items=N_CONTROL_ITEMS, first_k=0, rate=0.0)
    out: list[tuple[str, ControlTasks | None]] = [
        ("no control", baseline),
        ("runner, all items", None),
    ]
    for k in (0, first_k):
        for rate in (0.01, 0.05, 0.10):
            out.append(
                (
                    f"first {k} + {rate:.0%}",
                    ControlTasks(
                        n_items=N_CONTROL_ITEMS,
                        first_k=k,
                        rate=rate,
                        block_below=0.7,
                        block_confidence=0.9,
                        min_answers=4,
                    ),
                )
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--first-k", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    budget = 3.0 * args.items
    began = time.process_time()
    print(
        f"{args.items} items, {args.workers} workers (30 % bad), budget {budget:g}, "
        f"{args.reps} replications, opt-kg pull"
    )
    print(
        f"{'crowd':<10} {'condition':<16} {'accuracy':>9} {'± se':>7} {'gain':>7} "
        f"{'control %':>9} {'blocked':>7}"
    )
    for kind in ("spammer", "one-class"):
        results: dict[str, list[tuple[float, float, float]]] = {}
        for r in range(args.reps):
            seed = np.random.SeedSequence([args.seed, r])
            pool_seed, world_seed, policy_seed, items_seed = seed.spawn(4)
            env = SyntheticBernoulliEnvironment(
                args.items,
                prior=(0.1, 0.1),
                workers=crowd(kind, args.workers, np.random.default_rng(pool_seed)),
            )
            # the items scored in every condition: those outside the control items
            control_items = ControlTasks(n_items=N_CONTROL_ITEMS).choose(
                np.ones(args.items, dtype=bool), items_seed
            )
            outside = ~control_items

            def scored(state, labels, truth, mask, outside=outside):  # type: ignore[no-untyped-def]
                keep = mask & outside
                return {"scored": float(np.mean(labels[keep] == truth[keep]))}

            for name, tasks in conditions(args.first_k):
                rows = run_campaign(
                    make_policy("opt-kg"),
                    env,
                    [budget],
                    world_seed=world_seed,
                    policy_rng=np.random.default_rng(policy_seed),
                    mode="pull",
                    metrics=scored,
                    verdict=make_verdict(),
                    control=tasks,
                    control_items_seed=items_seed,
                )
                row = rows[-1]
                results.setdefault(name, []).append(
                    (
                        row["scored"],
                        row.get("control_labels", 0.0) / row["labels_used"],
                        row.get("blocked_workers", 0.0),
                    )
                )
        base = np.array([a for a, _, _ in results["no control"]])
        for name, values in results.items():
            arr = np.array(values)
            acc = arr[:, 0]
            se = acc.std(ddof=1) / np.sqrt(len(acc))
            gain = acc - base
            print(
                f"{kind:<10} {name:<16} {acc.mean():9.4f} {se:7.4f} "
                f"{gain.mean():+7.4f} {100 * arr[:, 1].mean():9.1f} {arr[:, 2].mean():7.2f}"
                f"   (gain se {gain.std(ddof=1) / np.sqrt(len(gain)):.4f})"
            )
    print(f"CPU seconds: {time.process_time() - began:.1f}")


if __name__ == "__main__":
    main()
