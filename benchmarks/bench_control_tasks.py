"""Control tasks + blocking against no control, on synthetic crowds with bad workers; the
value-based control rule against fixed rates; blocked workers' labels kept or dropped.

Two crowds of ``--workers`` one-coin workers (good ones: accuracy uniform on [0.7, 0.95]):
30 % spammers (uniform answers) or 30 % always-one-class workers (each answers one class,
drawn per worker). Items: θ ~ Beta(0.1, 0.1) (mostly clear items), truth 1{θ >= 0.5}.
Pull mode (a uniformly drawn worker arrives and is served), budget 3 labels per item, two
policies: ``opt-kg`` with its own verdict (the Beta posterior of the votes) and the default
``opt-kg:posterior=one-coin`` with its default verdict ``bds-oc``. Conditions: no control
(the control items closed to the policy and never served: the same items to label, the same
live rules, the same budget); the runner without control tasks at all (every item labeled,
no live rules: a worker may label an item twice — a different campaign, for reference);
control tasks at a fixed rate r in {1, 5, 10 %} (every round(1/r)-th task of a worker,
first_k = 0), with blocking (level 0.7, posterior probability 0.9, Beta(1, 1) prior, at
least 4 control answers); the same rates after ``--first-k`` control tasks per new worker;
the value rule (``rule="value"``, first_k = 0, the same blocking); and ``drop``: the value
rule and first k + 5 % with the blocked workers' labels dropped from the verdict (the others
keep them). Accuracy on the non-control items (the same items in every condition of a
replication: the control items of the largest pool are left out of every condition's
score), mean and standard error over replications; the crowd, the truth and the answers of
replication r are the same in every condition.

The summary lines per crowd and policy: the best control condition's gain over no control,
and the value rule (keep) minus the best fixed rate (keep, by mean), paired per replication.

The controlled conditions run once per setting of the block evidence (``--fits``, marked
``[name]`` after the condition; none: the fixed Beta(1, 1) prior on control answers, as
before): ``crowd`` (the crowd's accuracy distribution as the prior,
:mod:`crowdbudget.engine.crowd_prior`), ``agree`` (the verdict's soft counts of each worker's
other labels join the control answers, ``ControlTasks.agreement``), ``vote`` (the value rule's
vote label worth), ``share`` (the value rule weighs the posterior of the crowd's share of bad
workers, ``prior_fit="share"``; ``share.2`` / ``share0``: with the prior probability 0.2 / 0
of no bad worker instead of 0.5) and their combinations (:data:`FITS`; every name without
``agree`` runs without agreement, ``ControlTasks``' default since 2026-12-07). A third crowd,
``good``, has no bad worker (every block there is a false one); ``spammer-10`` has 10 %
spammers. ``--only`` runs the named conditions (and no control).

    python benchmarks/bench_control_tasks.py [--reps 20] [--items 300] [--workers 20]
        [--crowds spammer,one-class,good,spammer-10] [--fits fixed,crowd] [--no-reference]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from crowdbudget.engine.control import ControlTasks
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.registry import make_policy, split_verdict
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.simulation.workers import WorkerPool

BAD_SHARE = 0.3
N_CONTROL_ITEMS = 30


def crowd(kind: str, n_workers: int, rng: np.random.Generator) -> WorkerPool:
    """``n_workers`` workers, the first 30 % bad (``spammer`` or ``one-class``; ``good``:
    none bad, the crowd where every block is a false one; ``spammer-10``: 10 % spammers)."""
    share = {"good": 0.0, "spammer-10": 0.1}.get(kind, BAD_SHARE)
    n_bad = round(share * n_workers)
    accuracy = rng.uniform(0.7, 0.95, n_workers)
    conf = np.array([[[a, 1 - a], [1 - a, a]] for a in accuracy])
    for j in range(n_bad):
        if kind.startswith("spammer"):
            conf[j] = 0.5
        else:
            favourite = int(rng.integers(2))
            conf[j] = np.eye(2)[[favourite, favourite]]
    return WorkerPool(conf)


def _blocking(**rule: object) -> ControlTasks:
    """Control tasks with the benchmark's blocking (module docstring) and ``rule``; the
    blocked workers' labels kept unless ``rule`` says ``drop``."""
    return ControlTasks(
        n_items=N_CONTROL_ITEMS,
        block_below=0.7,
        block_confidence=0.9,
        min_answers=4,
        **{"blocked_labels": "keep", **rule},  # type: ignore[arg-type]
    )


#: the prior fits (and label worths) compared: name -> ControlTasks settings
FITS: dict[str, dict[str, object]] = {
    "fixed": {"agreement": False},
    "crowd": {"prior_fit": "crowd", "agreement": False},
    "crowd-vote": {"prior_fit": "crowd", "label_worth": "vote", "agreement": False},
    "fixed-vote": {"label_worth": "vote", "agreement": False},
    "agree": {"agreement": True},
    "crowd-agree": {"prior_fit": "crowd", "agreement": True},
    "crowd-vote-agree": {"prior_fit": "crowd", "label_worth": "vote", "agreement": True},
    "share": {"prior_fit": "share", "agreement": False},
    "share-agree": {"prior_fit": "share", "agreement": True},
    "share-vote-agree": {"prior_fit": "share", "label_worth": "vote", "agreement": True},
    "share0-agree": {"prior_fit": "share", "no_bad_prior": 0.0, "agreement": True},
    "share.2-agree": {"prior_fit": "share", "no_bad_prior": 0.2, "agreement": True},
}


def _suffix(fit: str) -> str:
    """The condition names' mark of a prior fit (none for the fixed prior: the names of
    the earlier runs)."""
    return "" if fit == "fixed" else f" [{fit}]"


def conditions(
    first_k: int,
    fits: tuple[str, ...] = ("fixed",),
    reference: bool = True,
    drop: bool = True,
) -> list[tuple[str, ControlTasks | None]]:
    """Every condition (module docstring), the controlled ones once per prior fit."""
    # the baseline: the same items to label (the control items closed, none served) under
    # the same live rules (a worker labels an item once) and the same budget
    baseline = ControlTasks(n_items=N_CONTROL_ITEMS, first_k=0, rate=0.0)
    out: list[tuple[str, ControlTasks | None]] = [("no control", baseline)]
    if reference:
        out.append(("runner, all items", None))
    for fit in fits:
        mark = _suffix(fit)
        for k in (0, first_k):
            for rate in (0.01, 0.05, 0.10):
                tasks = _blocking(first_k=k, rate=rate, **FITS[fit])
                out.append((f"first {k} + {rate:.0%}{mark}", tasks))
        out.append((f"value{mark}", _blocking(first_k=0, rule="value", **FITS[fit])))
        if not drop:
            continue
        dropped = _blocking(first_k=0, rule="value", blocked_labels="drop", **FITS[fit])
        out.append((f"value, drop{mark}", dropped))
        dropping = _blocking(first_k=first_k, rate=0.05, blocked_labels="drop", **FITS[fit])
        out.append((f"first {first_k} + 5%, drop{mark}", dropping))
    return out


def _replication(
    kind: str, policy_id: str, r: int, args: argparse.Namespace
) -> dict[str, tuple[float, float, float]]:
    """Every condition's (scored accuracy, control share, blocked workers) in replication r."""
    budget = 3.0 * args.items
    seed = np.random.SeedSequence([args.seed, r])
    pool_seed, world_seed, policy_seed, items_seed = seed.spawn(4)
    env = SyntheticBernoulliEnvironment(
        args.items,
        prior=(0.1, 0.1),
        workers=crowd(kind, args.workers, np.random.default_rng(pool_seed)),
    )
    # the items scored in every condition: those outside the control items
    outside = ~ControlTasks(n_items=N_CONTROL_ITEMS).choose(
        np.ones(args.items, dtype=bool), items_seed
    )

    def scored(state, labels, truth, mask, outside=outside):  # type: ignore[no-untyped-def]
        keep = mask & outside
        return {"scored": float(np.mean(labels[keep] == truth[keep]))}

    policy_spec, verdict_spec = split_verdict(policy_id)
    out = {}
    fits = tuple(args.fits.split(","))
    chosen = conditions(args.first_k, fits, not args.no_reference, not args.no_drop)
    if args.only:
        keep = {"no control", *args.only.split(",")}
        chosen = [(name, tasks) for name, tasks in chosen if name in keep]
    for name, tasks in chosen:
        row = run_campaign(
            make_policy(policy_spec),
            env,
            [budget],
            world_seed=world_seed,
            policy_rng=np.random.default_rng(policy_seed),
            mode="pull",
            metrics=scored,
            verdict=verdict_spec.build(),
            control=tasks,
            control_items_seed=items_seed,
        )[-1]
        out[name] = (
            row["scored"],
            row.get("control_labels", 0.0) / row["labels_used"],
            row.get("blocked_workers", 0.0),
        )
    return out


def _mean_se(values: np.ndarray) -> tuple[float, float]:
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(len(values)))


def report(kind: str, policy_id: str, results: dict[str, list[tuple[float, float, float]]]) -> None:
    """One line per condition, then the targets' two comparisons (module docstring)."""
    base = np.array([a for a, _, _ in results["no control"]])
    for name, values in results.items():
        arr = np.array(values)
        mean, se = _mean_se(arr[:, 0])
        gain, gain_se = _mean_se(arr[:, 0] - base)
        print(
            f"{kind:<10} {policy_id:<26} {name:<18} {mean:9.4f} {se:7.4f} {gain:+7.4f} "
            f"{gain_se:7.4f} {100 * arr[:, 1].mean():9.1f} {arr[:, 2].mean():7.2f}"
        )
    accuracy = {name: np.array([a for a, _, _ in v]) for name, v in results.items()}
    fits = dict.fromkeys(_fit_of(n) for n in accuracy if n.startswith(("first", "value")))
    for fit in fits:
        mark = _suffix(fit)
        controlled = [n for n in accuracy if n.startswith(("first", "value")) and _fit_of(n) == fit]
        best = max(controlled, key=lambda n: accuracy[n].mean())
        gain, gain_se = _mean_se(accuracy[best] - base)
        fixed = [n for n in controlled if n.startswith("first") and "drop" not in n]
        if not fixed or f"value{mark}" not in accuracy:
            continue
        best_fixed = max(fixed, key=lambda n: accuracy[n].mean())
        value = accuracy[f"value{mark}"]
        edge, edge_se = _mean_se(value - accuracy[best_fixed])
        value_gain, value_gain_se = _mean_se(value - base)
        print(
            f"  -> prior {fit}: best control ({best}) over no control: {gain:+.4f} ± "
            f"{gain_se:.4f}; value over no control: {value_gain:+.4f} ± {value_gain_se:.4f}; "
            f"value − best fixed ({best_fixed}): {edge:+.4f} ± {edge_se:.4f}"
        )


def _fit_of(name: str) -> str:
    """The prior fit a condition's name marks (:func:`_suffix`)."""
    return name.rsplit(" [", 1)[1].rstrip("]") if name.endswith("]") else "fixed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--first-k", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policies", default="opt-kg,opt-kg:posterior=one-coin")
    parser.add_argument("--crowds", default="spammer,one-class,good")
    parser.add_argument("--fits", default="fixed,crowd", help=f"of {', '.join(FITS)}")
    parser.add_argument(
        "--no-reference", action="store_true", help="leave out the runner without control"
    )
    parser.add_argument("--no-drop", action="store_true", help="leave out the drop conditions")
    parser.add_argument("--only", default="", help="run only these conditions (and no control)")
    args = parser.parse_args()
    print(
        f"{args.items} items, {args.workers} workers (30 % bad), budget {3 * args.items:g}, "
        f"{args.reps} replications, pull"
    )
    print(
        f"{'crowd':<10} {'policy':<26} {'condition':<18} {'accuracy':>9} {'± se':>7} "
        f"{'gain':>7} {'± se':>7} {'control %':>9} {'blocked':>7}"
    )
    for kind in args.crowds.split(","):
        for policy_id in args.policies.split(","):
            began = time.process_time()
            results: dict[str, list[tuple[float, float, float]]] = {}
            for r in range(args.reps):
                for name, value in _replication(kind, policy_id, r, args).items():
                    results.setdefault(name, []).append(value)
            report(kind, policy_id, results)
            print(f"  CPU seconds: {time.process_time() - began:.1f}")


if __name__ == "__main__":
    main()
