"""``crowdbudget simulate``: policies on synthetic worlds (θ ~ Beta prior, noiseless
workers), every policy facing the same worlds."""

from __future__ import annotations

import argparse
from typing import Any

from crowdbudget.cli.common import (
    add_common_arguments,
    add_verdict_argument,
    emit,
    float_list,
    label_budgets,
    policy_list,
    positive_int,
    run_policies,
)
from crowdbudget.cli.io import prepare_output_file
from crowdbudget.exceptions import InvalidParameterError


def cmd_simulate(args: argparse.Namespace) -> int:
    from crowdbudget.experiments.report import (
        accuracy_table,
        json_document,
        plot_accuracy,
        results_records,
    )
    from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment

    if args.plot:
        prepare_output_file(args.plot, "--plot")
    if args.prior is None:
        a, b = 1.0, 1.0
    else:
        if len(args.prior) != 2 or min(args.prior) <= 0:
            raise InvalidParameterError(
                f"--prior takes two numbers a,b > 0 (Beta(a, b)), got {args.prior}"
            )
        a, b = args.prior
    env = SyntheticBernoulliEnvironment(
        args.items, prior=(b, a), thresholds=args.threshold
    )  # columns: class 0 (b), class 1 (a)
    budgets = label_budgets(args, args.items)
    result = run_policies(args, env, budgets)
    settings = {
        "n_items": args.items,
        "n_classes": args.classes,
        "prior": [a, b],
        "threshold": args.threshold,
        "workers": "noiseless",
        "mode": args.mode,
        "policies": args.policies,
        "budgets": sorted(set(budgets)),
        "reps": args.reps,
    }
    if args.plot:
        plot_accuracy(
            result.summary,
            args.plot,
            n_items=args.items,
            title=f"simulate: K={args.items}, Beta({a:g},{b:g}), {args.reps} reps",
        )
    table = accuracy_table(result.summary, args.items)
    document = json_document(
        "simulate", args.seed, settings, results_records(result.summary, args.items)
    )
    text = f"accuracy (mean ± std over {args.reps} replications)\n{table}"
    if args.plot:
        text += f"\nplot written to {args.plot}"
    emit(args, text, document)
    return 0


def add_simulate_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``simulate`` sub-command to ``subparsers`` (of ``build_parser``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "simulate",
        help="run policies on a synthetic world (noiseless workers, θ ~ Beta prior)",
        description="Run allocation policies on synthetic worlds: θ_i ~ Beta(a, b), noiseless "
        "workers (label ~ Bernoulli(θ_i)), truth 1{θ_i >= d}. Every policy faces the same "
        "worlds (common random numbers).",
    )
    p.add_argument("--items", type=positive_int, required=True, help="number of items K")
    p.add_argument(
        "--classes", type=int, choices=[2], default=2, help="number of classes (only 2 for now)"
    )
    p.add_argument(
        "--prior", type=float_list, default=None, help="Beta prior a,b of θ (default 1,1)"
    )
    p.add_argument("--threshold", type=float, default=0.5, help="threshold d (default 0.5)")
    p.add_argument("--policies", type=policy_list, required=True, help="comma-separated policy ids")
    p.add_argument("--budget", type=float_list, default=None, help="absolute budgets T1,T2,…")
    p.add_argument(
        "--budget-per-item", type=float_list, default=None, help="budgets as multiples of K"
    )
    p.add_argument("--reps", type=positive_int, default=20, help="replications (default 20)")
    p.add_argument(
        "--mode", choices=["push", "pull"], default="push", help="interaction mode (push)"
    )
    p.add_argument("--plot", default=None, help="write a PNG plot of accuracy to this path")
    add_verdict_argument(p)
    add_common_arguments(p)
    p.set_defaults(func=cmd_simulate)
    return p
