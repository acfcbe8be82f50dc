"""Dawid–Skene and majority vote: time and peak memory on synthetic label sets.

Synthetic world: ``n_labels / 10`` items with 10 labels each, 1000 one-coin workers
(accuracy uniform in [0.55, 0.95]; the i-th label of an item comes from a uniformly random
worker), binary by default (``--classes`` for more). Timed: ``fit`` on an integer-coded
:class:`~crowdbudget.datasets.LabelData` (data generation excluded), best of ``--repeat``.
Peak memory: ``tracemalloc`` peak of the fit (NumPy and SciPy allocations are traced), i.e.
memory on top of the input arrays.

Run from the repository root::

    python benchmarks/bench_aggregation.py            # 1e5, 1e6, 1e7 labels
    python benchmarks/bench_aggregation.py --sizes 100000,1000000 --classes 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import tracemalloc

import numpy as np

from crowdbudget.aggregation import DawidSkene, MajorityVote
from crowdbudget.aggregation.base import Aggregator
from crowdbudget.datasets.loaders import LabelData


def synthetic_labels(n_labels: int, n_workers: int, n_classes: int, seed: int) -> LabelData:
    rng = np.random.default_rng(seed)
    n_items = n_labels // 10
    items = np.repeat(np.arange(n_items, dtype=np.int64), 10)
    workers = rng.integers(n_workers, size=items.size, dtype=np.int64)
    truth = rng.integers(n_classes, size=n_items)
    accuracy = rng.uniform(0.55, 0.95, size=n_workers)
    correct = rng.random(items.size) < accuracy[workers]
    wrong = (truth[items] + rng.integers(1, n_classes, size=items.size)) % n_classes
    labels = np.where(correct, truth[items], wrong).astype(np.int64)
    return LabelData(
        items=items,
        workers=workers,
        labels=labels,
        item_ids=np.arange(n_items).astype(str).astype(object),
        worker_ids=np.arange(n_workers).astype(str).astype(object),
        classes=tuple(str(c) for c in range(n_classes)),
        gold=truth.astype(np.int64),
    )


def measure(make: type[Aggregator], data: LabelData, repeat: int) -> dict[str, float]:
    best = float("inf")
    for _ in range(repeat):
        agg = make()
        start = time.perf_counter()
        agg.fit(data)
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    agg = make()
    agg.fit(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    row = {"seconds": best, "peak_mb": peak / 2**20, "accuracy": data.accuracy(agg.labels_)}
    if isinstance(agg, DawidSkene):
        row["iterations"] = agg.n_iter_
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000,10000000")
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--classes", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    print(
        f"{'method':<12} {'labels':>12} {'classes':>7} {'iters':>5} {'seconds':>9} "
        f"{'labels/s':>12} {'peak MB':>9} {'accuracy':>8}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        data = synthetic_labels(size, args.workers, args.classes, args.seed)
        repeat = args.repeat if size < 5_000_000 else 1
        for name, make in (("mv", MajorityVote), ("dawid-skene", DawidSkene)):
            row = measure(make, data, repeat)
            row.update(method=name, labels=size, classes=args.classes, workers=args.workers)
            rows.append(row)
            print(
                f"{name:<12} {size:>12,} {args.classes:>7} {row.get('iterations', ''):>5} "
                f"{row['seconds']:>9.3f} {size / row['seconds']:>12,.0f} "
                f"{row['peak_mb']:>9.1f} {row['accuracy']:>8.4f}",
                flush=True,
            )
        del data
    if args.json:
        machine = {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "machine": platform.machine(),
        }
        with open(args.json, "w") as fh:
            json.dump({"machine": machine, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
