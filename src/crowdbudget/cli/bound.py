"""The ``crowdbudget bound`` command: the Lagrangian upper bound of Hu & Frazier (§5) and, for
each given policy, its simulated value in continuous time and the gap to the bound.

    crowdbudget bound --items 100 --budget 120 --arrival-rate 0.1 --completion-rate 0.4 \\
        --policies lagrangian-index,opt-kg --reps 200 --seed 0 --json

JSON: ``{"command": "bound", "seed", "settings", "bound", "bound_per_item", "bound_details",
"results": [{"policy", "reward_mean", "reward_std", "reward_ci_low", "reward_ci_high", "gap",
"gap_ci_low", "gap_ci_high", "gap_percent", ...}]}`` — ``reward`` is the total expected reward
of eq. (2) (expected number of correctly classified tasks), ``gap = bound − reward_mean`` with
the 95% interval of the mean carried over (the bound is exact).

Wiring (in :func:`crowdbudget.cli.build_parser`): ``add_bound_parser(sub)``; the parser's
``func`` is :func:`cmd_bound`.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from crowdbudget.cli.common import policy_list, positive_float, positive_int
from crowdbudget.exceptions import InvalidParameterError


def _prior(text: str) -> tuple[float, float]:
    try:
        parts = [float(p) for p in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) != 2 or not all(p > 0 and math.isfinite(p) for p in parts):
        raise argparse.ArgumentTypeError(f"--prior takes two numbers a,b > 0, got {text!r}")
    return parts[0], parts[1]


def add_bound_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``bound`` sub-command to ``subparsers`` (of ``build_parser``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "bound",
        help="Lagrangian upper bound on the Bayes-optimal reward (Hu & Frazier) and policy gaps",
        description="Upper bound on the Bayes-optimal expected number of correctly classified "
        "tasks in continuous time (Poisson arrivals of rate r, Exp(μ) work, U workers; Hu & "
        "Frazier §5), and each given policy's simulated total reward (eq. 2) with a 95% "
        "interval and its gap to the bound.",
    )
    p.add_argument("--items", type=positive_int, required=True, help="number of tasks K")
    p.add_argument("--budget", type=positive_int, required=True, help="worker budget U")
    p.add_argument(
        "--arrival-rate",
        "--rate",
        dest="arrival_rate",
        type=positive_float,
        default=0.1,
        help="worker arrival rate r (default 0.1)",
    )
    p.add_argument(
        "--completion-rate",
        "--work-rate",
        dest="completion_rate",
        type=positive_float,
        default=0.4,
        help="completion rate μ of one worker (default 0.4)",
    )
    p.add_argument(
        "--horizon",
        type=positive_float,
        default=math.inf,
        help="time horizon T (default: none; a finite T is bounded by the T = inf bound)",
    )
    p.add_argument("--prior", type=_prior, default=(1.0, 1.0), help="Beta prior a,b (1,1)")
    p.add_argument("--threshold", type=float, default=0.5, help="threshold d in (0, 1) (0.5)")
    p.add_argument(
        "--policies",
        "--policy",
        dest="policies",
        type=policy_list,
        default=[],
        help="comma-separated policy ids to simulate (e.g. lagrangian-index,opt-kg)",
    )
    p.add_argument("--reps", type=positive_int, default=100, help="replications (100)")
    p.add_argument(
        "--label-cap",
        type=positive_int,
        default=None,
        help="workers per task in "
        "the DP (default 3*ceil(U/K)+12); the output says whether it binds",
    )
    p.add_argument(
        "--vector",
        action="store_true",
        help="also minimise over one λ per arrival (subgradient; tighter, slower)",
    )
    p.add_argument("--seed", type=int, default=0, help="root random seed (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument(
        "--jobs", type=positive_int, default=None, help="worker processes (default: all cores)"
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=cmd_bound)
    return p


def cmd_bound(args: argparse.Namespace) -> int:
    """Compute the bound, simulate the policies, print a table or the JSON document."""
    from crowdbudget.bounds.lagrangian import lagrangian_bound
    from crowdbudget.experiments.continuous import run_continuous_experiment
    from crowdbudget.simulation.continuous_time import (
        ContinuousTimeEnvironment,
    )
    from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment

    if not 0 < args.threshold < 1:
        raise InvalidParameterError(f"--threshold must be in (0, 1), got {args.threshold}")
    a, b = args.prior
    bound = lagrangian_bound(
        n_items=args.items,
        budget=args.budget,
        arrival_rate=args.arrival_rate,
        completion_rate=args.completion_rate,
        prior=(b, a),
        thresholds=args.threshold,
        label_cap=args.label_cap,
        horizon=args.horizon,
        vector=args.vector,
    )
    rows: list[dict[str, Any]] = []
    if args.policies:
        env = ContinuousTimeEnvironment(
            SyntheticBernoulliEnvironment(args.items, prior=(b, a), thresholds=args.threshold),
            arrival_rate=args.arrival_rate,
            completion_rate=args.completion_rate,
            horizon=args.horizon,
        )
        result = run_continuous_experiment(
            args.policies,
            env,
            [args.budget],
            args.reps,
            seed=args.seed,
            n_jobs=args.jobs,
            progress=not args.no_progress,
        )
        for rec in result.summary.to_dict(orient="records"):
            row = {
                "policy": rec["policy"],
                "budget": args.budget,
                "reps": int(rec["reps"]),
                "reward_mean": rec["reward_mean"],
                "reward_std": rec["reward_std"],
                "reward_ci_low": rec["reward_ci_low"],
                "reward_ci_high": rec["reward_ci_high"],
                "reward_per_item_mean": rec["reward_per_item_mean"],
                "accuracy_mean": rec["accuracy_mean"],
                "gap": bound.bound - rec["reward_mean"],
                "gap_ci_low": bound.bound - rec["reward_ci_high"],
                "gap_ci_high": bound.bound - rec["reward_ci_low"],
                "gap_percent": 100.0 * (bound.bound - rec["reward_mean"]) / bound.bound,
                "max_labels_per_item_max": None,
            }
            runs = result.runs[result.runs["policy"] == rec["policy"]]
            row["max_labels_per_item_max"] = int(runs["max_labels_per_item"].max())
            rows.append({k: (float(v) if hasattr(v, "item") else v) for k, v in row.items()})
    settings = {
        "n_items": args.items,
        "budget": args.budget,
        "arrival_rate": args.arrival_rate,
        "completion_rate": args.completion_rate,
        "horizon": None if math.isinf(args.horizon) else args.horizon,
        "prior": [a, b],
        "threshold": args.threshold,
        "policies": args.policies,
        "reps": args.reps,
    }
    if args.json:
        details = bound.as_dict()
        document = {
            "command": "bound",
            "seed": args.seed,
            "settings": settings,
            "bound": bound.bound,
            "bound_per_item": bound.bound_per_item,
            "bound_details": details,
            "results": rows,
            "notes": bound.notes,
        }
        print(json.dumps(document, indent=2))
        return 0
    lines = [
        f"upper bound (Hu & Frazier Thm. 2, T = inf): {bound.bound:.6f} total, "
        f"{bound.bound_per_item:.6f} per task  (scalar λ = {bound.lambda_scalar:.6f}"
        + (f", vector bound {bound.bound_vector:.6f}" if bound.bound_vector is not None else "")
        + ")",
        f"label cap {bound.label_cap}: "
        + ("binds — raise --label-cap" if bound.cap_binds else "does not bind"),
    ]
    if rows:
        lines.append(f"{'policy':<24} {'reward (95% CI)':>30} {'gap':>10} {'gap %':>8}")
        for r in rows:
            ci = f"{r['reward_mean']:.4f} [{r['reward_ci_low']:.4f}, {r['reward_ci_high']:.4f}]"
            lines.append(f"{r['policy']:<24} {ci:>30} {r['gap']:>10.4f} {r['gap_percent']:>8.3f}")
        lines.append(f"({args.reps} replications, seed {args.seed})")
    lines += [f"note: {n}" for n in bound.notes]
    print("\n".join(lines))
    return 0
