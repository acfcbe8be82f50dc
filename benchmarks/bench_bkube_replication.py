"""CPU time of one replication of ``bkube-fig1`` / ``bkube-fig2`` (Rangi & Franceschetti 2018),
and whether two versions of the code give the same rows.

The full runs are ``100 × grid + 30 × regret`` replications (``bkube-fig1``: the T = 50 grid —
13 policies × sets A, B × 5 budgets — and the regret curve, both feedbacks, 7 budgets) and
``100 × grid`` (``bkube-fig2``, T = 100), so CPU per replication × replications is the id's
CPU on one core. Run it once per version (``PYTHONPATH`` at that version's ``src``) and
compare the saved rows with ``--compare``:

    PYTHONPATH=OLD/src python benchmarks/bench_bkube_replication.py --save before.pkl
    PYTHONPATH=src python benchmarks/bench_bkube_replication.py --save after.pkl
    python benchmarks/bench_bkube_replication.py --compare before.pkl after.pkl
"""

from __future__ import annotations

import argparse
import pickle
import time


def measure(reps: int, regret_reps: int, seed: int) -> tuple[dict, dict, dict[str, float]]:
    """Rows of ``reps`` grid replications (T = 50 and 100) and ``regret_reps`` regret
    replications (both feedbacks), and CPU seconds of each part (after one warm-up
    replication, so imports and first calls are not counted)."""
    from crowdbudget.experiments.papers import rangi2018 as r

    r._replication_rows(50, r.BUDGETS[:1], reps, seed)  # warm-up, not measured
    rows, cpu = {}, {}
    for n_tasks in (50, 100):
        start = time.process_time()
        for rep in range(reps):
            rows[(n_tasks, rep)] = r._replication_rows(n_tasks, r.BUDGETS, rep, seed)
        cpu[f"grid T={n_tasks}, per replication"] = (time.process_time() - start) / reps
    start = time.process_time()
    curves = {
        feedback: r.regret_curve(r.REGRET_BUDGETS, regret_reps, seed, feedback=feedback)
        for feedback in ("truth", "estimate")
    }
    cpu["regret (both feedbacks), per replication"] = (time.process_time() - start) / regret_reps
    return rows, curves, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--regret-reps", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", default=None, help="pickle the rows and curves here")
    parser.add_argument("--compare", nargs=2, default=None, metavar=("A", "B"))
    args = parser.parse_args()
    if args.compare:
        loaded = []
        for path in args.compare:
            with open(path, "rb") as handle:
                loaded.append(pickle.load(handle)[:2])
        (rows_a, curves_a), (rows_b, curves_b) = loaded
        same = rows_a == rows_b and all(curves_a[k].equals(curves_b[k]) for k in curves_a)
        print("identical rows and curves" if same else "DIFFERENT")
        return
    rows, curves, cpu = measure(args.reps, args.regret_reps, args.seed)
    for name, seconds in cpu.items():
        print(f"{name}: {seconds:.3f} s CPU")
    if args.save:
        with open(args.save, "wb") as handle:
            pickle.dump((rows, curves, cpu), handle)


if __name__ == "__main__":
    main()
