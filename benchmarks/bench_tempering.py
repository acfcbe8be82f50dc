"""The tempered posterior's τ search (``temperature="auto"``): its cost per fit, and the shape
of its criterion on the verdict table's crowds (docs/stress-bed.md, the 2026-12-07 section on
the tempered default verdict).

``--time`` (the default): ``time.process_time`` of ``make_aggregator(id).fit(load_dataset(set))``,
all labels, for the default verdict untempered, with the 40-point grid and with the search
(:mod:`crowdbudget.aggregation._tempering`), interleaved round by round; the median of
``--repeat`` rounds per set. The search's own cost (the per-label terms gathered once, then the
scan and bounded search) is timed alone on each fit's numbers too, as is the grid's. Run on an
older tree (``PYTHONPATH=<tree>/src``) it times that tree's ``auto`` as "grid"::

    python benchmarks/bench_tempering.py --sets adult,trec,fact_eval,millionaire,rte --repeat 3

``--shape``: every crowd of the verdict table (``crowdbudget stress``'s draws: the default bed
at all / 1 / 2 / 3 / 5 labels per item, ``--reps`` replications, seed 0, and ``--sets``, each
set drawn as its own run), the default verdict tempered; for every fit the criterion on a fine
grid (step 0.0025): how many local maxima it has (steps within rounding read as level), the
grid's τ, the search's τ, the criterion's value at each (the search's minus the grid's) and how
many evaluations the search made (the slope at τ = 1 counted as one)::

    python benchmarks/bench_tempering.py --shape --sets "" --reps 3        # the 17 cells
    python benchmarks/bench_tempering.py --shape --cells "" --sets fact_eval --reps 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

from crowdbudget.aggregation import BayesianDawidSkene
from crowdbudget.aggregation.defaults import DEFAULT_VERDICT
from crowdbudget.aggregation.registry import make_aggregator
from crowdbudget.datasets import load_dataset

SETS = ("adult", "trec", "fact_eval", "millionaire", "rte")


def _fit_seconds(spec: str, data: Any, search: str) -> float:
    """CPU seconds of one fit of ``spec`` on ``data`` with ``auto``'s τ found by ``search``."""
    if hasattr(BayesianDawidSkene, "_temperature_search"):
        BayesianDawidSkene._temperature_search = search  # type: ignore[attr-defined]
    start = time.process_time()
    make_aggregator(spec).fit(data)
    return time.process_time() - start


def _search_seconds(spec: str, data: Any) -> dict[str, float]:
    """The τ search alone on one fit's numbers: CPU seconds of the grid and of the search
    (each including the per-label terms' gathering), and the τ each finds. A fit may choose
    τ more than once (``bds-hard`` tempers the workers' model and, when fitted, the mixture,
    whose terms :func:`~crowdbudget.aggregation._tempering.mixture_held_out_labels` gathers):
    the seconds are summed over its choices, the τ are the last one's."""
    from crowdbudget.aggregation import _tempering

    calls: list[tuple[Any, tuple[Any, ...]]] = []
    builders = {
        "held_out_labels": _tempering.held_out_labels,
        "mixture_held_out_labels": _tempering.mixture_held_out_labels,
    }

    def capturing(builder: Any) -> Any:
        def capture(*arrays: Any) -> Any:
            calls.append((builder, arrays))
            return builder(*arrays)

        return capture

    for name, builder in builders.items():
        setattr(_tempering, name, capturing(builder))
    try:
        BayesianDawidSkene._temperature_search = "search"  # type: ignore[attr-defined]
        make_aggregator(spec).fit(data)
    finally:
        for name, builder in builders.items():
            setattr(_tempering, name, builder)
    found: dict[str, float] = {"grid_s": 0.0, "search_s": 0.0, "terms_s": 0.0}
    for builder, arrays in calls:
        for name, search in (
            ("grid", _tempering.grid_temperature),
            ("search", _tempering.searched_temperature),
        ):
            start = time.process_time()
            found[f"tau_{name}"] = search(builder(*arrays))
            found[f"{name}_s"] += time.process_time() - start
        start = time.process_time()
        builder(*arrays)
        found["terms_s"] += time.process_time() - start
    return found


def run_time(sets: list[str], repeat: int, verdict: str) -> None:
    plain, tempered = verdict, f"{verdict}:temperature=auto"
    in_tree = hasattr(BayesianDawidSkene, "_temperature_search")
    for spec in (plain, tempered):  # imports and compiled kernels loaded before any timing
        make_aggregator(spec).fit(load_dataset("rte"))
    print(f"{plain} (CPU seconds per fit, all labels, median of {repeat} interleaved rounds)")
    print("| set | labels | untempered | grid | search | grid − untempered | search − untempered |")
    for name in sets:
        data = load_dataset(name)
        rounds: dict[str, list[float]] = {"plain": [], "grid": [], "search": []}
        parts: dict[str, list[float]] = {}
        for _ in range(repeat):
            rounds["plain"].append(_fit_seconds(plain, data, "search"))
            rounds["grid"].append(_fit_seconds(tempered, data, "grid"))
            if in_tree:
                rounds["search"].append(_fit_seconds(tempered, data, "search"))
                for key, value in _search_seconds(tempered, data).items():
                    parts.setdefault(key, []).append(value)
        med = {k: statistics.median(v) if v else float("nan") for k, v in rounds.items()}
        print(
            f"| {name} | {data.n_labels:,} | {med['plain']:.3f} | {med['grid']:.3f} | "
            f"{med['search']:.3f} | {med['grid'] - med['plain']:+.3f} | "
            f"{med['search'] - med['plain']:+.3f} |",
            flush=True,
        )
        if parts:
            alone = {k: statistics.median(v) for k, v in parts.items()}
            print(
                f"    alone: terms {alone['terms_s']:.4f} s, grid {alone['grid_s']:.4f} s "
                f"(τ {alone['tau_grid']:.3f}), search {alone['search_s']:.4f} s "
                f"(τ {alone['tau_search']:.4f})",
                flush=True,
            )
    if in_tree:
        BayesianDawidSkene._temperature_search = "search"  # type: ignore[attr-defined]


def run_shape(cells: str | None, sets: list[str], reps: int, per_item: list[int]) -> None:
    from crowdbudget.aggregation import _tempering
    from crowdbudget.experiments.stress import DEFAULT_BED, run_bed

    fine = np.arange(0.025, 1.0 + 1e-9, 0.0025)
    records: list[dict[str, Any]] = []
    original = _tempering.searched_temperature
    calls = {"n": 0}
    original_value = _tempering.held_out_log_likelihood

    original_slope = _tempering.held_out_slope

    def counting(held: Any, tau: float) -> float:
        calls["n"] += 1
        return original_value(held, tau)

    def counting_slope(held: Any, tau: float) -> tuple[float, float]:
        calls["n"] += 1
        return original_slope(held, tau)

    def recording(held: Any) -> float:
        values = np.array([original_value(held, float(t)) for t in fine])
        # local maxima of the fine grid, steps within rounding (FLAT) read as level
        steps = np.diff(values)
        steps[np.abs(steps) <= _tempering.FLAT * np.abs(values).max()] = 0.0
        signs = np.sign(steps[steps != 0.0])
        maxima = int(np.sum((signs[:-1] > 0) & (signs[1:] < 0)))
        maxima += int(signs.size == 0 or signs[0] < 0) + int(signs.size > 0 and signs[-1] > 0)
        grid = _tempering.grid_temperature(held)
        calls["n"] = 0
        _tempering.held_out_log_likelihood = counting  # type: ignore[assignment]
        _tempering.held_out_slope = counting_slope  # type: ignore[assignment]
        try:
            tau = original(held)
        finally:
            _tempering.held_out_log_likelihood = original_value  # type: ignore[assignment]
            _tempering.held_out_slope = original_slope  # type: ignore[assignment]
        records.append(
            {
                "labels": held.top.size,
                "maxima": maxima,
                "tau_fine": float(fine[int(np.argmax(values))]),
                "tau_grid": grid,
                "tau_search": tau,
                "gain": original_value(held, tau) - original_value(held, grid),
                "evaluations": calls["n"],
            }
        )
        return tau

    _tempering.searched_temperature = recording  # type: ignore[assignment]
    bed = DEFAULT_BED if cells is None else ()
    done = {"n": 0}

    def progress(message: str) -> None:
        new = records[done["n"] :]
        done["n"] = len(records)
        for r in new:
            print(
                f"{message.split(':')[0]:<48} labels {r['labels']:>7,} maxima {r['maxima']} "
                f"τ fine {r['tau_fine']:.4f} grid {r['tau_grid']:.3f} "
                f"search {r['tau_search']:.4f} L(search) − L(grid) {r['gain']:+.4f} "
                f"evaluations {r['evaluations']}",
                flush=True,
            )

    spec = f"{DEFAULT_VERDICT}:temperature=auto"
    run_bed(bed, sets, [spec], per_item=per_item, reps=reps, seed=0, progress=progress)
    gains = np.array([r["gain"] for r in records])
    print(
        f"fits {len(records)}; more than one local maximum: "
        f"{sum(r['maxima'] > 1 for r in records)}; L(search) − L(grid) min {gains.min():+.5f} "
        f"max {gains.max():+.5f}; evaluations "
        f"{min(r['evaluations'] for r in records)}–{max(r['evaluations'] for r in records)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--cells", default=None, help='"" for no bed cells (--shape)')
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shape", action="store_true")
    parser.add_argument("--verdict", default=DEFAULT_VERDICT, help="the id timed (--time)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--per-item", default="1,2,3,5")
    args = parser.parse_args()
    sets = [s for s in args.sets.split(",") if s]
    if args.shape:
        per_item = [int(k) for k in args.per_item.split(",") if k]
        run_shape(args.cells, sets, args.reps, per_item)
    else:
        run_time(sets, args.repeat, args.verdict)


if __name__ == "__main__":
    main()
