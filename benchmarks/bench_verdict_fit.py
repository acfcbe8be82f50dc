"""Verdict fit time on the bundled crowd sets: CPU seconds (``time.process_time``) of
``make_aggregator(id).fit(data)`` on every label of each set, the median of ``--rounds``
interleaved rounds (every method once per round, in the order given) after one warm fit of
each, with the ratio to the first method (the reference, e.g. the default verdict).

For an item-difficulty id (``bds-hard…``) the row also says what its evidence chose
(``difficulty_``), the gate's ``G`` and the gain over BIC's charge, and how many updates the
mixture took. Run from the repository root, ``nice -n 5`` on a shared machine::

    python benchmarks/bench_verdict_fit.py --methods bds-ev-blind-recheck,bds-hard-blind-recheck
    python benchmarks/bench_verdict_fit.py --sets fact_eval,rte --rounds 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from crowdbudget.aggregation import make_aggregator
from crowdbudget.datasets import load_dataset

#: the bundled sets of the verdict table (docs/stress-bed.md)
SETS = ("rte", "temp", "wsd", "trec", "fact_eval", "adult", "millionaire")


def fit_seconds(method: str, data: Any) -> tuple[float, Any]:
    """CPU seconds of one fit of a fresh ``method`` on ``data``, and the fitted model."""
    model = make_aggregator(method)
    start = time.process_time()
    model.fit(data)
    return time.process_time() - start, model


def describe(model: Any) -> str:
    """What an item-difficulty fit chose ('' for any other aggregator)."""
    if not hasattr(model, "difficulty_"):
        return ""
    return (
        f"{model.difficulty_} G={model.gate_gain_:.1f} gain-charge={model.evidence_gain_:.1f} "
        f"iterations={model.n_iter_}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", default="bds-ev-blind-recheck,bds-hard-blind-recheck")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    rows = []
    for name in (s for s in args.sets.split(",") if s):
        data = load_dataset(name)
        notes = {m: describe(fit_seconds(m, data)[1]) for m in methods}  # warm fits
        seconds: dict[str, list[float]] = {m: [] for m in methods}
        for _ in range(args.rounds):
            for method in methods:
                seconds[method].append(fit_seconds(method, data)[0])
        reference = statistics.median(seconds[methods[0]])
        for method in methods:
            median = statistics.median(seconds[method])
            row = {
                "set": name,
                "labels": data.n_labels,
                "method": method,
                "median_seconds": median,
                "ratio": median / reference if reference > 0 else float("nan"),
                "seconds": seconds[method],
                "chose": notes[method],
            }
            rows.append(row)
            print(
                f"{name:12s} {data.n_labels:7d} {method:36s} {median:8.4f} s "
                f"{row['ratio']:5.2f}x  {notes[method]}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
