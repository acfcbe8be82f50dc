"""Accuracy and calibration of every registered aggregator on every crowd data set (issue 19).

For each data set and aggregator: accuracy, mean confidence, ECE (10 equal-width bins and 10
equal-mass bins), NLL (p clipped at 1e-12) and Brier score on the gold items
(:func:`crowdbudget.experiments.metrics.calibration_metrics`), and the fit time in seconds.
With ``--per-item k1,k2,..`` also at partial budgets: each item keeps a uniformly random
``min(k, n_i)`` of its ``n_i`` labels (``--reps`` replications, generator ``default_rng(seed)``
spawned per replication), metrics averaged over replications.

The large sets (millionaire, trec, adult, fact_eval) are read from ``CROWDBUDGET_DATA_DIR``
until they are bundled; fact_eval is fitted on all its labels and scored on its 576 gold
items. Run from the repository root::

    CROWDBUDGET_DATA_DIR=<data> python benchmarks/bench_calibration.py --out docs/calibration.csv
    python benchmarks/bench_calibration.py --sets rte,temp,wsd --per-item 2,3,5 --reps 10

It ends with the default-verdict rule of issue 19 applied to the full-data rows
(:func:`choose_verdict`) and, with ``--per-item``, to every (set, budget) row.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from crowdbudget.aggregation.registry import make_aggregator, registered_aggregators
from crowdbudget.datasets import load_dataset
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import CrowdBudgetError
from crowdbudget.experiments.metrics import calibration_metrics

SETS = ("rte", "temp", "wsd", "millionaire", "trec", "adult", "fact_eval")


def subsample(data: LabelData, per_item: int, rng: np.random.Generator) -> LabelData:
    """Keep a uniformly random ``min(per_item, n_i)`` of each item's labels."""
    order = np.lexsort((rng.random(data.n_labels), data.items))  # items, random within item
    items_sorted = data.items[order]
    starts = np.searchsorted(items_sorted, items_sorted, side="left")
    rank = np.arange(data.n_labels) - starts
    keep = np.sort(order[rank < per_item])
    return LabelData(
        items=data.items[keep],
        workers=data.workers[keep],
        labels=data.labels[keep],
        item_ids=data.item_ids,
        worker_ids=data.worker_ids,
        classes=data.classes,
        gold=data.gold,
    )


def evaluate(method: str, data: LabelData) -> dict[str, float] | None:
    aggregator = make_aggregator(method)
    start = time.perf_counter()
    try:
        aggregator.fit(data)
    except CrowdBudgetError:  # e.g. KOS on more than two classes
        return None
    seconds = time.perf_counter() - start
    assert data.gold is not None
    row = calibration_metrics(aggregator.probas_, data.gold, labels=aggregator.labels_)
    row["seconds"] = seconds
    return row


def choose_verdict(
    table: pd.DataFrame, margin: float = 0.005, *, budgets: str = "full"
) -> tuple[str, pd.DataFrame]:
    """The default-verdict rule of issue 19: among the methods whose accuracy is within
    ``margin`` of the most accurate method on every set, the one with the lowest mean ECE
    (then the lowest mean NLL). When no method is within the margin everywhere, the smallest
    worst shortfall decides first — up to the same ``margin`` (since stop 32: a worst
    shortfall 0.0005 smaller is not a better method; strictly, ``bds`` would win the
    every-budget rule over ``mace-eb`` by 0.0486 against 0.0491, both on fact_eval's gold
    items, with 2.6 times ``mace-eb``'s mean NLL).

    ``budgets="full"`` (issue 19's rule): the full-data rows, one per set. ``"every"`` (since
    issue 15's stop 32): every (set, labels per item) row of ``table`` — a verdict reads
    campaigns at every budget, and one that is best on all labels can lose where each item
    has two (``mace:prior-fit=all``: adult at 2 per item, docs/calibration.md).

    Returns the chosen id and one row per method: ``rows`` (how many rows it has),
    ``worst_shortfall``, ``mean_ece``, ``mean_nll``, ``eligible``."""
    rows = table if budgets == "every" else table[table["per_item"].astype(str) == "all"]
    key = rows["set"].astype(str) + "@" + rows["per_item"].astype(str)
    best = rows.groupby(key)["accuracy"].transform("max")
    rows = rows.assign(key=key, shortfall=best - rows["accuracy"])
    n_rows = rows["key"].nunique()
    per_method = rows.groupby("method").agg(
        rows=("key", "nunique"),
        worst_shortfall=("shortfall", "max"),
        mean_ece=("ece", "mean"),
        mean_nll=("nll", "mean"),
    )
    per_method = per_method[per_method["rows"] == n_rows]  # e.g. binary-only methods drop out
    per_method["eligible"] = per_method["worst_shortfall"] <= margin + 1e-12
    pool = per_method[per_method["eligible"]]
    if pool.empty:
        smallest = per_method["worst_shortfall"].min()
        pool = per_method[per_method["worst_shortfall"] <= smallest + margin + 1e-12]
    chosen = pool.sort_values(["mean_ece", "mean_nll"]).index[0]
    return str(chosen), per_method.sort_values(["eligible", "mean_ece"], ascending=[False, True])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--methods", default=",".join(sorted(registered_aggregators())))
    parser.add_argument("--per-item", default="", help="partial budgets, e.g. 2,3,5")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="CSV of all rows")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    budgets = [int(k) for k in args.per_item.split(",") if k]
    rows = []
    for name in args.sets.split(","):
        data = load_dataset(name)
        for method in methods:
            row = evaluate(method, data)
            if row is None:
                continue
            rows.append({"set": name, "per_item": "all", "method": method, "reps": 1, **row})
            print(
                pd.DataFrame([rows[-1]]).to_string(header=len(rows) == 1, index=False), flush=True
            )
        for k in budgets:
            streams = np.random.default_rng(args.seed).spawn(args.reps)
            samples = [subsample(data, k, stream) for stream in streams]
            for method in methods:
                found = [evaluate(method, sample) for sample in samples]
                if any(r is None for r in found):
                    continue
                mean = pd.DataFrame(found).mean().to_dict()
                rows.append(
                    {"set": name, "per_item": k, "method": method, "reps": args.reps, **mean}
                )
                print(pd.DataFrame([rows[-1]]).to_string(header=False, index=False), flush=True)
    table = pd.DataFrame(rows)
    if args.out:
        table.to_csv(args.out, index=False, float_format="%.6g")
    for budgets in ("full", "every") if args.per_item else ("full",):
        chosen, ranking = choose_verdict(table, budgets=budgets)
        rows = "full-data row" if budgets == "full" else "(set, labels per item) row"
        print(f"\nDefault-verdict rule on every {rows} (accuracy within 0.005 of the best,")
        print("then the lowest mean ECE, then NLL):")
        print(ranking.to_string(float_format="%.4f"))
        print(f"chosen: {chosen}")


if __name__ == "__main__":
    main()
