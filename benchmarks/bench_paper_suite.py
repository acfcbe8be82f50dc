"""CPU time of the slow paper reproductions and of every ``reproduce ID --quick``.

Two measurements, each in CPU seconds (user + sys, this process and its finished children),
since wall times on a shared machine are only upper bounds:

- ``--slow``: the reproductions that dominate ``reproduce --all`` (``bbta-fig2``, ``bbta-fig3``,
  ``bbta-rte``, ``chen2013-features`` by default), each in this process on one core
  (``n_jobs=1``) with ``--reps`` replications instead of the paper's, and the CPU time
  extrapolated linearly to the paper's replications: ``fixed + (cpu − fixed) · paper reps /
  reps``, where ``fixed`` is the part that does not grow with the replications, measured on its
  own — building the nine worlds of the BBTA figures (k-means contexts per UCI set and worker
  model, run once per case whatever the replications); the compile and the data loading are left
  in the per-replication part, so the extrapolation slightly overstates;
- ``--quick``: ``crowdbudget reproduce ID --quick`` in a child process, each id twice: first
  with an empty Numba cache (``NUMBA_CACHE_DIR`` a new folder: a first-ever run, every kernel it
  uses compiled), then with the cache that run wrote.

    python benchmarks/bench_paper_suite.py --slow [--ids bbta-fig2,bbta-fig3] [--reps 1]
    python benchmarks/bench_paper_suite.py --quick [--ids ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

#: the reproductions that make most of ``reproduce --all``'s time, with the paper's replications
SLOW = {"bbta-fig2": 30, "bbta-fig3": 30, "bbta-rte": 30, "chen2013-features": 3}


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def fixed_part(reproduction_id: str) -> float:
    """CPU seconds of the part of a run that does not grow with its replications: the k-means
    contexts of the three UCI sets of ``bbta-fig2`` / ``bbta-fig3`` (once per set and process,
    shared by the worker models and the two figures); 0 for the others. The memo is cleared
    first, so the run measured next computes them again."""
    if not reproduction_id.startswith("bbta-fig"):
        return 0.0
    from crowdbudget.experiments.papers import zhang2015
    from crowdbudget.simulation.contextual import UCI_SETTINGS

    zhang2015._uci_labels_and_contexts.cache_clear()
    cpu = _cpu()
    for dataset in UCI_SETTINGS:
        zhang2015._uci_labels_and_contexts(dataset, None)
    zhang2015._uci_labels_and_contexts.cache_clear()
    return _cpu() - cpu


def slow(ids: list[str], reps: int) -> list[dict[str, float | str]]:
    """CPU seconds of each id at ``reps`` replications, and extrapolated to the paper's."""
    from crowdbudget.experiments.papers import REPRODUCTIONS

    rows: list[dict[str, float | str]] = []
    for rid in ids:
        run = REPRODUCTIONS[rid].run
        fixed = fixed_part(rid)
        cpu, wall = _cpu(), time.perf_counter()
        run(seed=0, quick=False, n_jobs=1, progress=False, reps=reps)
        cpu, wall = _cpu() - cpu, time.perf_counter() - wall
        full = fixed + (cpu - fixed) * SLOW[rid] / reps
        rows.append(
            {
                "id": rid,
                "reps": reps,
                "cpu_s": cpu,
                "fixed_cpu_s": fixed,
                "wall_s": wall,
                "full_core_min": full / 60,
            }
        )
        print(
            f"{rid:18s} reps {reps:>2}: CPU {cpu:7.1f} s (fixed {fixed:5.1f} s, wall "
            f"{wall:7.1f} s) -> {SLOW[rid]} reps ≈ {full / 60:5.1f} core-min",
            flush=True,
        )
    return rows


def quick(ids: list[str]) -> list[dict[str, float | str]]:
    """CPU and wall seconds of ``reproduce ID --quick``, cold (empty Numba cache) and warm."""
    rows: list[dict[str, float | str]] = []
    for rid in ids:
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
            env = {**os.environ, "NUMBA_CACHE_DIR": cache}
            row: dict[str, float | str] = {"id": rid}
            for when in ("cold", "warm"):
                before, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
                command = [sys.executable, "-m", "crowdbudget", "reproduce", rid, "--quick"]
                command += ["--out", out, "--no-progress"]
                subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                row[f"{when}_cpu_s"] = (after.ru_utime + after.ru_stime) - (
                    before.ru_utime + before.ru_stime
                )
                row[f"{when}_wall_s"] = time.perf_counter() - wall
            rows.append(row)
            print(
                f"{rid:18s} cold CPU {row['cold_cpu_s']:5.1f} s (wall {row['cold_wall_s']:5.1f})"
                f"  warm CPU {row['warm_cpu_s']:5.1f} s (wall {row['warm_wall_s']:5.1f})",
                flush=True,
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow", action="store_true", help="the slow ids at --reps")
    parser.add_argument("--quick", action="store_true", help="every id's --quick, cold and warm")
    parser.add_argument("--ids", default=None, help="comma-separated ids (default: all)")
    parser.add_argument("--reps", type=int, default=1, help="replications for --slow (1)")
    parser.add_argument("--json", default=None, help="write the rows to this file")
    args = parser.parse_args()
    from crowdbudget.experiments.papers import REPRODUCTIONS

    ids = args.ids.split(",") if args.ids else None
    result: dict[str, object] = {"load_average": os.getloadavg()}
    if args.slow:
        result["slow"] = slow(ids or list(SLOW), args.reps)
    if args.quick:
        result["quick"] = quick(ids or list(REPRODUCTIONS))
    result["load_average_after"] = os.getloadavg()
    print(f"load average before {result['load_average']}, after {result['load_average_after']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
