"""The default policy with its default verdict against uniform sampling, on every bed cell and
bundled set (docs/stress-bed.md, "The default policy with the default verdict").

For every crowd it replays ``uniform`` and the default policy (``opt-kg:posterior=one-coin``,
read by its default verdict) at 1 / 2 / 3 / 5 labels per item, ``--reps`` replications
(seed ``--seed``), every campaign also read by ``--verdicts``, and prints one row per (crowd,
labels per item): the default policy + its default verdict, uniform + the best verdict
(which), uniform + ``mv``, and whether the target holds (default ≥ uniform + best − 0.005;
default ≥ uniform + mv).

A bed cell is replayed from the crowd ``make_crowd(pool_cell(cell), 0)``: the cell with at
least ``--pool`` labels per item (capped at its workers; the other axes unchanged), so that
every budget up to 5 per item is a choice of the policy, not the whole crowd. The same crowd
written to CSV (``--write-crowds DIR``: ``DIR/NAME/labels.csv`` and ``gold.csv``) replays with
``crowdbudget replay --data-dir DIR --dataset NAME ...``. Run from the repository root:

    python benchmarks/bench_default_policy.py [--cells all|NAME,...] [--sets rte,temp,...]
        [--per-item 1,2,3,5] [--reps 5] [--seed 0] [--jobs 1] [--out rows.csv]
        [--policy opt-kg:posterior=one-coin] [--write-crowds DIR]

Progress (one line per crowd, with its CPU seconds) goes to stderr; ``--out`` appends every
(crowd, policy, verdict, budget) mean and std as CSV rows, so a long run can be split into
several commands with the same ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from crowdbudget.datasets import load_dataset
from crowdbudget.experiments.runner import run_experiment
from crowdbudget.experiments.stress import DEFAULT_BED, StressCell, make_crowd
from crowdbudget.labels import LabelData
from crowdbudget.registry import split_verdict
from crowdbudget.simulation.replay import ReplayEnvironment

DEFAULT_POLICY = "opt-kg:posterior=one-coin"
VERDICTS = ("mv", "ds", "bds", "bds-oc", "mace-eb-cp")
MARGIN = 0.005


def pool_cell(cell: StressCell, pool: int) -> StressCell:
    """``cell`` with at least ``pool`` labels per item (at most its workers)."""
    k = min(max(cell.labels_per_item, pool), cell.n_workers)
    if k == cell.labels_per_item:
        return cell
    return dataclasses.replace(cell, name=f"{cell.name}-pool{k}", labels_per_item=k)


def write_crowd(data: LabelData, root: Path) -> None:
    """``root/NAME/labels.csv`` (task,worker,label) and ``gold.csv`` (task,label)."""
    folder = root / str(data.name)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "labels.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["task", "worker", "label"])
        for i, j, c in zip(data.items, data.workers, data.labels, strict=True):
            w.writerow([data.item_ids[i], data.worker_ids[j], data.classes[c]])
    with open(folder / "gold.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["task", "label"])
        for i, g in enumerate(data.gold):
            w.writerow([data.item_ids[i], data.classes[g]])


def gold_items_only(data: LabelData) -> LabelData:
    """``data`` restricted to its gold items and their labels (fact_eval's 576 of 42,624
    items, as its earlier replays: docs/reproductions.md), workers renumbered."""
    keep_items = np.flatnonzero(data.gold_mask)
    new_item = np.full(data.n_items, -1, dtype=np.int64)
    new_item[keep_items] = np.arange(keep_items.size)
    keep = new_item[data.items] >= 0
    used, workers = np.unique(data.workers[keep], return_inverse=True)
    assert data.gold is not None  # gold_mask is all False without gold
    return LabelData(
        items=new_item[data.items[keep]],
        workers=workers.astype(np.int64),
        labels=data.labels[keep],
        item_ids=data.item_ids[keep_items],
        worker_ids=data.worker_ids[used],
        classes=data.classes,
        gold=data.gold[keep_items],
        name=f"{data.name}-gold",
    )


def crowds(args: argparse.Namespace) -> list[LabelData]:
    """The crowds of the run: the chosen bed cells (as pools; written to ``--write-crowds``),
    then the bundled sets."""
    out: list[LabelData] = []
    names = [c.strip() for c in args.cells.split(",") if c.strip()]
    known = {c.name: c for c in DEFAULT_BED}
    unknown = [n for n in names if n != "all" and n not in known]
    if unknown:
        raise SystemExit(f"unknown cell(s): {', '.join(unknown)}")
    cells = list(DEFAULT_BED) if "all" in names else [known[n] for n in names]
    for cell in cells:
        out.append(make_crowd(pool_cell(cell, args.pool), 0))
        if args.write_crowds:
            write_crowd(out[-1], Path(args.write_crowds))
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        data = load_dataset(name.removesuffix("-gold"))
        out.append(gold_items_only(data) if name.endswith("-gold") else data)
    return out


def measure(data: LabelData, args: argparse.Namespace) -> pd.DataFrame:
    """Replay uniform and the default policy on ``data``: the summary rows (policy label,
    budget, accuracy mean and std) of :func:`run_experiment`."""
    env = ReplayEnvironment.from_label_data(data)
    per_item = [float(p) for p in args.per_item.split(",")]
    cap = data.n_labels / data.n_items
    budgets = [round(p * data.n_items) for p in per_item if p <= cap + 1e-9]
    result = run_experiment(
        ["uniform", args.policy],
        env,
        budgets,
        args.reps,
        seed=args.seed,
        n_jobs=args.jobs,
        progress=False,
        verdicts=list(args.verdicts.split(",")),
    )
    summary = result.summary.copy()
    summary["per_item"] = summary["budget"] / data.n_items
    return summary


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (``--jobs`` > 1)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def verdict_of(policy: str) -> str:
    """The verdict that reads ``policy``'s campaigns by default."""
    return split_verdict(policy)[1].name


def compare(summary: pd.DataFrame, policy: str) -> list[dict[str, object]]:
    """One row per budget: default, uniform + best verdict (which), uniform + mv, met?"""
    rows: list[dict[str, object]] = []
    acc = summary.set_index(["policy", "per_item"])["accuracy_mean"]
    std = summary.set_index(["policy", "per_item"])["accuracy_std"]
    uniform_labels = [p for p in dict.fromkeys(summary["policy"]) if str(p).startswith("uniform")]
    for k in sorted(set(summary["per_item"])):
        default = float(acc[(policy, k)])
        readings = {u: float(acc[(u, k)]) for u in uniform_labels if (u, k) in acc.index}
        best_label = max(readings, key=lambda u: readings[u])
        best = readings[best_label]
        which = best_label.split("verdict=", 1)[1] if "verdict=" in best_label else "posterior"
        mv = readings.get("uniform:verdict=mv", float("nan"))
        rows.append(
            {
                "per_item": k,
                "default": default,
                "default_std": float(std[(policy, k)]),
                "uniform_best": best,
                "uniform_best_verdict": which,
                "uniform_mv": mv,
                "met": default >= best - MARGIN - 1e-12,
                "above_mv": default >= mv - 1e-12,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", default="all", help="bed cells (all, or names; '' none)")
    p.add_argument(
        "--sets",
        default="",
        help="bundled sets, comma-separated (NAME-gold: only its gold items, e.g. fact_eval-gold)",
    )
    p.add_argument("--per-item", default="1,2,3,5")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--pool", type=int, default=10, help="labels per item of a cell's crowd")
    p.add_argument("--policy", default=DEFAULT_POLICY)
    p.add_argument("--verdicts", default=",".join(VERDICTS))
    p.add_argument("--out", default=None, help="append the summary rows to this CSV")
    p.add_argument("--write-crowds", default=None, help="also write each cell's crowd here")
    args = p.parse_args(argv)
    print(
        f"policy {args.policy} read by {verdict_of(args.policy)}; reps {args.reps}, "
        f"seed {args.seed}",
        file=sys.stderr,
    )
    lines = [
        "| crowd | labels / item | default + verdict | uniform + best (which) | uniform + mv "
        "| met | ≥ mv |",
        "|---|---|---|---|---|---|---|",
    ]
    for data in crowds(args):
        start, wall = cpu_seconds(), time.perf_counter()
        summary = measure(data, args)
        summary.insert(0, "crowd", data.name)
        summary.insert(1, "n_items", data.n_items)
        if args.out:
            new = not os.path.exists(args.out)
            summary.to_csv(args.out, mode="a", header=new, index=False)
        for r in compare(summary, args.policy):
            lines.append(
                f"| {data.name} | {r['per_item']:g} | {r['default']:.4f} ± "
                f"{r['default_std']:.4f} | {r['uniform_best']:.4f} ({r['uniform_best_verdict']}) "
                f"| {r['uniform_mv']:.4f} | {'yes' if r['met'] else '**no**'} "
                f"| {'yes' if r['above_mv'] else '**no**'} |"
            )
            print(lines[-1], file=sys.stderr)
        print(
            f"{data.name}: {data.n_items} items, {data.n_labels} labels; "
            f"{cpu_seconds() - start:.0f} s CPU, {time.perf_counter() - wall:.0f} s wall",
            file=sys.stderr,
            flush=True,
        )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
