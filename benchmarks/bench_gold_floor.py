"""A probability floor fitted on a gold sample, scored on the other gold items (issue 19).

For each bundled crowd set and verdict: the verdict is fitted on all labels; then, for each
sample size n and each of ``--reps`` draws (generator ``default_rng(r)``, r = 0, 1, ...), a
uniformly random n of the gold items fit the floor ε
(:func:`crowdbudget.aggregation.calibration.fit_probability_floor`) and the *other* gold
items score the raw and the floored probabilities: NLL and ECE (10 equal-width bins), means
over the draws. Sample sizes above half the gold items are skipped. The table of
docs/calibration.md ("With a gold sample: a fitted probability floor") comes from::

    python benchmarks/bench_gold_floor.py --sets rte,temp,wsd,trec,adult,fact_eval,millionaire \\
        --verdicts ds,mace --sizes 20,50,100 --reps 20
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from crowdbudget.aggregation.calibration import (
    apply_probability_floor,
    expected_calibration_error,
    fit_probability_floor,
    negative_log_likelihood,
)
from crowdbudget.aggregation.registry import make_aggregator
from crowdbudget.datasets import load_dataset


def held_out_rows(
    name: str, verdict: str, sizes: list[int], reps: int
) -> list[dict[str, float | int | str]]:
    """One row per sample size: ε (mean, std) and held-out NLL/ECE, raw and floored."""
    data = load_dataset(name)
    assert data.gold is not None
    gold = data.gold
    scored = np.flatnonzero(gold >= 0)
    aggregator = make_aggregator(f"{verdict}:seed=0")
    aggregator.fit(data)
    probas, labels = aggregator.probas_, aggregator.labels_
    rows: list[dict[str, float | int | str]] = []
    for n in sizes:
        if n > scored.shape[0] // 2:
            continue
        draws = []
        for r in range(reps):
            sample = np.random.default_rng(r).choice(scored, n, replace=False)
            fitting = np.full_like(gold, -1)
            fitting[sample] = gold[sample]
            held = gold.copy()
            held[sample] = -1
            eps = fit_probability_floor(probas, fitting)
            floored = apply_probability_floor(probas, eps)
            draws.append(
                (
                    eps,
                    negative_log_likelihood(probas, held),
                    negative_log_likelihood(floored, held),
                    expected_calibration_error(probas, held, labels=labels),
                    expected_calibration_error(floored, held, labels=labels),
                )
            )
        d = np.array(draws)
        rows.append(
            {
                "set": name,
                "verdict": verdict,
                "n_sample": n,
                "n_gold": int(scored.shape[0]),
                "epsilon": float(d[:, 0].mean()),
                "epsilon_std": float(d[:, 0].std()),
                "nll_raw": float(d[:, 1].mean()),
                "nll_floor": float(d[:, 2].mean()),
                "nll_ratio": float(d[:, 2].mean() / d[:, 1].mean()),
                "ece_raw": float(d[:, 3].mean()),
                "ece_floor": float(d[:, 4].mean()),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="rte,temp,wsd,trec,adult,fact_eval,millionaire")
    parser.add_argument("--verdicts", default="ds,mace")
    parser.add_argument("--sizes", default="20,50,100")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out", default=None, help="also write the rows to this CSV")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = [
        row
        for name in args.sets.split(",")
        for verdict in args.verdicts.split(",")
        for row in held_out_rows(name, verdict, sizes, args.reps)
    ]
    frame = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(frame.round(4).to_string(index=False))
    if args.out:
        frame.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
