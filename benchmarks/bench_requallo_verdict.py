"""Requallo (Li et al. WSDM 2016) with a calibrated verdict: quantity and accuracy on RTE.

The ``requallo-fig1`` setting (RTE replay, budgets 400, 800, …, 4000, 20 replications, seed
0, the §4.1 metrics of :func:`crowdbudget.experiments.metrics.quality_metrics`) for
Requallo-c4 and Requallo-p0.2 as published (majority vote of the counted votes) and with
their final labels from an aggregator (``<id>:verdict=<aggregator>``, default the default
verdict): allocation is unchanged (``policies/final_aggregation.py``), so ``quantity`` — items
with 3+ labels — is the same by construction and only the accuracy can move. Run::

    python benchmarks/bench_requallo_verdict.py --reps 20
"""

from __future__ import annotations

import argparse

from crowdbudget.aggregation.registry import DEFAULT_VERDICT
from crowdbudget.datasets import load_dataset
from crowdbudget.experiments.metrics import quality_metrics
from crowdbudget.experiments.papers.li2016 import C4, P02
from crowdbudget.experiments.runner import run_experiment
from crowdbudget.simulation.replay import ReplayEnvironment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verdict", default=DEFAULT_VERDICT)
    parser.add_argument("--budgets", default=",".join(str(400 * k) for k in range(1, 11)))
    args = parser.parse_args()
    data = load_dataset("rte")
    env = ReplayEnvironment.from_label_data(data)
    policies = [C4, f"{C4}:verdict={args.verdict}", P02, f"{P02}:verdict={args.verdict}"]
    budgets = [float(b) for b in args.budgets.split(",")]
    result = run_experiment(
        policies, env, budgets, args.reps, seed=args.seed, progress=False, metrics=quality_metrics
    )
    columns = ["policy", "budget", "quantity_mean", "accuracy_labeled_mean", "accuracy_mean"]
    columns += [c for c in ("ece_mean", "nll_mean") if c in result.summary.columns]
    print(result.summary[columns].to_string(index=False, float_format="%.4f"))


if __name__ == "__main__":
    main()
