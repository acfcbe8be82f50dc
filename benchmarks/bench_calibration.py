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

It ends with the default-verdict rule (:func:`crowdbudget.experiments.stress.choose_verdict`:
the smallest worst accuracy shortfall, then NLL) applied to the full-data rows and, with
``--per-item``, to every (set, budget) row. The rule's own measurement — the stress bed and
every bundled set — is ``crowdbudget stress`` (docs/stress-bed.md).
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from crowdbudget.aggregation.registry import registered_aggregators
from crowdbudget.datasets import load_dataset
from crowdbudget.experiments.stress import (
    choose_verdict,
    evaluate_mean,
    evaluate_method,
    subsample_per_item,
)

SETS = ("rte", "temp", "wsd", "millionaire", "trec", "adult", "fact_eval")


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
            row = evaluate_method(method, data)
            if row is None:
                continue
            rows.append({"set": name, "per_item": "all", "method": method, "reps": 1, **row})
            print(
                pd.DataFrame([rows[-1]]).to_string(header=len(rows) == 1, index=False), flush=True
            )
        for k in budgets:
            streams = np.random.default_rng(args.seed).spawn(args.reps)
            samples = [subsample_per_item(data, k, stream) for stream in streams]
            for method in methods:
                mean = evaluate_mean(method, samples)
                if mean is None:
                    continue
                rows.append(
                    {"set": name, "per_item": k, "method": method, "reps": args.reps, **mean}
                )
                print(pd.DataFrame([rows[-1]]).to_string(header=False, index=False), flush=True)
    table = pd.DataFrame(rows)
    if args.out:
        table.to_csv(args.out, index=False, float_format="%.6g")
    for budgets in ("full", "every") if args.per_item else ("full",):
        scope = table if budgets == "every" else table[table["per_item"].astype(str) == "all"]
        chosen, ranking = choose_verdict(scope)
        rows = "full-data row" if budgets == "full" else "(set, labels per item) row"
        print(f"\nDefault-verdict rule on every {rows} (the smallest worst accuracy shortfall")
        print("to the best method, then the lowest mean NLL):")
        print(ranking.to_string(float_format="%.4f"))
        print(f"chosen: {chosen}")


if __name__ == "__main__":
    main()
