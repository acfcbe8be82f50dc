"""Aggregators (majority vote, Dawid–Skene, and with ``--methods`` any registered id): time and
peak memory on synthetic label sets.

Synthetic world: ``n_labels / 10`` items with 10 labels each, 1000 one-coin workers
(accuracy uniform in [0.55, 0.95]; the i-th label of an item comes from a uniformly random
worker), binary by default (``--classes`` for more). Timed: ``fit`` on an integer-coded
:class:`~crowdbudget.datasets.LabelData` (data generation excluded), best of ``--repeat``.
Peak memory: ``tracemalloc`` peak of the fit (NumPy and SciPy allocations are traced), i.e.
memory on top of the input arrays.

With ``--crowdkit`` (needs crowd-kit, a benchmark-only extra: ``pip install --no-deps crowd-kit
attrs nltk``; its declared ``transformers``/``pyarrow`` are not used by its aggregators) the
same data go, as crowd-kit's ``task, worker, label`` DataFrame, to crowd-kit's ``DawidSkene``
and ``MajorityVote`` with the same settings (``n_iter=100``, ``tol=1e-5``); building the
DataFrame is not timed, and crowd-kit is skipped for sizes above ``--crowdkit-max``.

``--methods glad,mace,mmsr,wawa,zbs`` times those registered aggregators too (defaults), and
with ``--crowdkit`` crowd-kit's ``GLAD``, ``MACE``, ``MMSR``, ``Wawa``, ``ZeroBasedSkill``
(defaults) on the same frame; each crowd-kit fit runs in a child process killed after
``--crowdkit-timeout`` seconds (reported as a lower bound ``>T``), since several of them take
hours at 10^6 labels.

Run from the repository root::

    python benchmarks/bench_aggregation.py            # 1e5, 1e6, 1e7 labels
    python benchmarks/bench_aggregation.py --sizes 100000,1000000 --classes 5 --json out.json
    python benchmarks/bench_aggregation.py --sizes 1000000 --classes 5 --crowdkit
    python benchmarks/bench_aggregation.py --sizes 1000000 --methods glad,mace,mmsr,wawa,zbs \
        --crowdkit --crowdkit-timeout 900 --repeat 1
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


def crowdkit_frame(data: LabelData) -> object:
    import pandas as pd

    return pd.DataFrame({"task": data.items, "worker": data.workers, "label": data.labels})


def measure_crowdkit(name: str, data: LabelData, repeat: int) -> dict[str, float]:
    """crowd-kit's aggregator on the same labels (integer ids, as its docs allow)."""
    from crowdkit.aggregation import DawidSkene as CKDawidSkene
    from crowdkit.aggregation import MajorityVote as CKMajorityVote

    def make() -> object:
        return CKDawidSkene(n_iter=100, tol=1e-5) if name == "dawid-skene" else CKMajorityVote()

    frame = crowdkit_frame(data)
    best = float("inf")
    for _ in range(repeat):
        agg = make()
        start = time.perf_counter()
        agg.fit(frame)  # type: ignore[attr-defined]
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    agg = make()
    agg.fit(frame)  # type: ignore[attr-defined]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    predicted = agg.labels_.reindex(np.arange(data.n_items)).to_numpy()  # type: ignore[attr-defined]
    assert data.gold is not None
    row = {
        "seconds": best,
        "peak_mb": peak / 2**20,
        "accuracy": float(np.mean(predicted == data.gold)),
    }
    if name == "dawid-skene":
        row["iterations"] = len(getattr(agg, "loss_history_", [])) or ""  # type: ignore[assignment]
    return row


#: our registered id → crowd-kit class name
CROWDKIT_NAMES = {
    "glad": "GLAD",
    "mace": "MACE",
    "mmsr": "MMSR",
    "wawa": "Wawa",
    "zbs": "ZeroBasedSkill",
}


def _crowdkit_child(name: str, frame: object, queue: object) -> None:
    import warnings

    import crowdkit.aggregation as ck

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        method = getattr(ck, name)()
        start = time.perf_counter()
        method.fit(frame)
        seconds = time.perf_counter() - start
    queue.put(seconds)  # type: ignore[attr-defined]


def time_crowdkit(name: str, data: LabelData, timeout: float) -> float | None:
    """Seconds of crowd-kit's ``name().fit`` in a child process; None past ``timeout``."""
    import multiprocessing as mp

    context = mp.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_crowdkit_child, args=(name, crowdkit_frame(data), queue))
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.terminate()
        child.join()
        return None
    return float(queue.get())


def measure_registered(method: str, data: LabelData, repeat: int) -> dict[str, float]:
    from crowdbudget.aggregation import make_aggregator

    best = float("inf")
    for _ in range(repeat):
        agg = make_aggregator(method)
        start = time.perf_counter()
        agg.fit(data)
        best = min(best, time.perf_counter() - start)
    return {"seconds": best, "peak_mb": float("nan"), "accuracy": data.accuracy(agg.labels_)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000,10000000")
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--classes", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    parser.add_argument("--crowdkit", action="store_true", help="also time crowd-kit")
    parser.add_argument("--crowdkit-max", type=int, default=10_000_000)
    parser.add_argument("--methods", default="", help="registered ids to time as well")
    parser.add_argument("--crowdkit-timeout", type=float, default=900.0)
    args = parser.parse_args()
    rows = []
    print(
        f"{'method':<12} {'labels':>12} {'classes':>7} {'iters':>5} {'seconds':>9} "
        f"{'labels/s':>12} {'peak MB':>9} {'accuracy':>8}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        data = synthetic_labels(size, args.workers, args.classes, args.seed)
        repeat = args.repeat if size < 5_000_000 else 1
        cases: list[tuple[str, str, type[Aggregator] | None]] = [
            ("mv", "mv", MajorityVote),
            ("dawid-skene", "dawid-skene", DawidSkene),
        ]
        if args.crowdkit and size <= args.crowdkit_max:
            cases += [("crowdkit-mv", "mv", None), ("crowdkit-ds", "dawid-skene", None)]
        extra = [m for m in args.methods.split(",") if m]
        for method in extra:
            row = measure_registered(method, data, repeat)
            row.update(method=method, labels=size, classes=args.classes, workers=args.workers)
            rows.append(row)
            print(
                f"{method:<12} {size:>12,} {args.classes:>7} {'':>5} {row['seconds']:>9.3f} "
                f"{size / row['seconds']:>12,.0f} {'':>9} {row['accuracy']:>8.4f}",
                flush=True,
            )
            if args.crowdkit and method in CROWDKIT_NAMES and size <= args.crowdkit_max:
                seconds = time_crowdkit(CROWDKIT_NAMES[method], data, args.crowdkit_timeout)
                shown = f">{args.crowdkit_timeout:.0f}" if seconds is None else f"{seconds:.3f}"
                rows.append(
                    {
                        "method": f"crowdkit-{method}",
                        "labels": size,
                        "seconds": seconds,
                        "timeout": args.crowdkit_timeout,
                        "classes": args.classes,
                    }
                )
                ratio = "" if seconds is None else f" ({seconds / row['seconds']:.1f}x ours)"
                print(
                    f"{'crowdkit-' + method:<12} {size:>12,} {args.classes:>7} {'':>5} "
                    f"{shown:>9}{ratio}",
                    flush=True,
                )
        if extra:
            cases = cases[2:] if args.crowdkit else []
        for name, method, make in cases:
            if make is None:
                row = measure_crowdkit(method, data, repeat)
            else:
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
