"""``crowdbudget simulate``: policies on synthetic worlds, every policy facing the same
worlds. The world is a registered environment (``--env``, :data:`crowdbudget.registry.
ENVIRONMENTS`; ``crowdbudget environments`` lists them); the default, ``bernoulli-v0``, is θ ~
Beta prior with noiseless workers, and ``--worker-set A|B`` is short for
``--env priced-workers-v0:worker-set=A|B`` (Rangi & Franceschetti 2018 §6)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crowdbudget.cli.common import (
    add_budget_arguments,
    add_common_arguments,
    add_verdict_argument,
    default_verdicts,
    emit,
    float_list,
    label_budgets,
    policy_list,
    positive_int,
    run_policies,
    verdict_note,
)
from crowdbudget.cli.control import add_control_arguments
from crowdbudget.cli.io import prepare_plot_file, write_files
from crowdbudget.exceptions import InvalidParameterError

if TYPE_CHECKING:
    from crowdbudget.registry import Spec


#: the world ``simulate`` builds when no ``--env`` is given
DEFAULT_ENVIRONMENT = "bernoulli-v0"
#: ``--worker-set X`` is short for ``--env priced-workers-v0:worker-set=X``
PRICED_ENVIRONMENT = "priced-workers-v0"


def environment_spec(args: argparse.Namespace) -> Spec:
    """The checked environment :class:`~crowdbudget.registry.Spec` of the command line:
    ``--env`` (or ``--worker-set``'s shorthand, or the default) with ``n-items`` from
    ``--items`` and, for a world that has them, ``prior`` and ``threshold`` from ``--prior``
    and ``--threshold``. An option that contradicts the id, or names a parameter the world
    does not have, is refused in one line."""
    from crowdbudget.registry import ENVIRONMENTS, Spec, parse

    if args.worker_set is not None:
        if args.env is not None:
            raise InvalidParameterError(
                f"--worker-set {args.worker_set} is short for --env "
                f"{PRICED_ENVIRONMENT}:worker-set={args.worker_set}; give one of them"
            )
        text = f"{PRICED_ENVIRONMENT}:worker-set={args.worker_set}"
    else:
        text = args.env or DEFAULT_ENVIRONMENT
    parsed = parse(text)
    entry = ENVIRONMENTS.entry(parsed.id)  # an unknown id fails here, listing the registered
    given = dict(parsed.params)
    extra: list[tuple[str, str]] = []
    options = {"n-items": ("--items", args.items)}
    if args.prior is not None:
        options["prior"] = ("--prior", ";".join(repr(float(v)) for v in args.prior))
    if args.threshold is not None:
        options["threshold"] = ("--threshold", repr(float(args.threshold)))
    for name, (flag, value) in options.items():
        if name not in entry.params:
            allowed = ", ".join(sorted(entry.params))
            raise InvalidParameterError(
                f"{flag} does not apply to environment {parsed.id!r} (its parameters: {allowed})"
            )
        if name in given:
            owner = f"environment {parsed.id!r}"
            row = entry.params[name]
            if row.convert(given[name], owner) != row.convert(str(value), owner):
                raise InvalidParameterError(
                    f"{flag} {value} and {name}={given[name]} in {text!r} disagree; give one"
                )
            continue
        extra.append((name, str(value)))
    return ENVIRONMENTS.spec(Spec(parsed.id, (*parsed.params, *extra)))


def cmd_simulate(args: argparse.Namespace) -> int:
    from crowdbudget.cli.io import check_policies_apply
    from crowdbudget.experiments.report import (
        accuracy_table,
        json_document,
        plot_accuracy,
        results_records,
    )
    from crowdbudget.registry import ENVIRONMENTS, make_environment

    if args.plot:
        prepare_plot_file(args.plot, "--plot")
    if args.prior is not None and (len(args.prior) != 2 or min(args.prior) <= 0):
        raise InvalidParameterError(
            f"--prior takes two numbers a,b > 0 (Beta(a, b)), got {args.prior}"
        )
    from crowdbudget.cli.control import control_tasks

    args.control = control_tasks(args)
    spec = environment_spec(args)
    env = make_environment(spec)
    budgets = label_budgets(args, args.items)
    if args.mode == "pull" and not ENVIRONMENTS.capabilities(spec).supports_pull:
        raise InvalidParameterError(
            f"environment {str(spec)!r}: the policy picks the worker here (push mode only); "
            "drop --mode pull"
        )
    # what a policy refuses (named workers, prices, features, contexts, its reset's own
    # checks) is seen on the same world at two items: a small reset stays cheap
    problem = _two_item_problem(spec)
    check_policies_apply(
        args.policies, problem, f"environment {str(spec)!r}", args.verdict, args.verdicts
    )
    _check_priced(args.policies, problem, spec)
    result = run_policies(args, env, budgets)
    values = ENVIRONMENTS.values(spec)
    settings: dict[str, Any]
    if spec.id == DEFAULT_ENVIRONMENT:
        a, b = values.get("prior", (1.0, 1.0))
        settings = {
            "n_items": args.items,
            "n_classes": args.classes,
            "prior": [a, b],
            "threshold": values.get("threshold", 0.5),
            "workers": "noiseless",
            "mode": args.mode,
            "policies": args.policies,
            "budgets": sorted(set(budgets)),
            "reps": args.reps,
        }
        if args.env is not None:  # the default's document stays as it was
            settings = {"environment": str(spec), **settings}
        title = f"simulate: K={args.items}, Beta({a:g},{b:g}), {args.reps} reps"
    else:
        settings = {
            "environment": str(spec),
            "n_items": args.items,
            "n_classes": env.n_classes,
            "mode": args.mode,
            "policies": args.policies,
            "budgets": sorted(set(budgets)),
            "reps": args.reps,
        }
        title = f"simulate: {spec}, {args.reps} reps"
    if args.verdicts:
        settings["verdicts"] = args.verdicts
    if args.control is not None:
        settings["control"] = repr(args.control)
    defaulted = default_verdicts(args.policies, args.verdict)
    if defaulted:
        settings["default_verdicts"] = defaulted
    table = accuracy_table(result.summary, args.items)
    document = json_document(
        "simulate", args.seed, settings, results_records(result.summary, args.items)
    )
    caption = f"accuracy (mean ± std over {args.reps} replications)"
    if args.control is not None:
        share = args.control.n_items or args.control.fraction
        caption += f" on the items that are not control tasks ({share} of the items, paid)"
    text = "\n".join([caption, table, *verdict_note(defaulted)])
    if spec.id != DEFAULT_ENVIRONMENT:
        text = f"environment {spec}\n{text}"
    emit(args, text, document)
    if args.plot:
        write_files(
            [
                (
                    "plot",
                    Path(args.plot),
                    lambda path: plot_accuracy(
                        result.summary, path, n_items=args.items, title=title
                    ),
                )
            ],
            announce=not args.json,
        )
    return 0


def _check_priced(policy_ids: list[str], problem: Any, spec: Spec) -> None:
    """Refuse a policy that picks items only on a world whose workers have different prices:
    the world would pick the worker, and the label's price would not be the one the policy
    reserved (its budget would overrun, the capacities too)."""
    import numpy as np

    from crowdbudget.registry import parse_policy, policies_for

    prices = problem.worker_prices
    if prices is None or np.all(prices == problem.default_price):
        return
    for policy_id in policy_ids:
        if not parse_policy(policy_id).capabilities.chooses_workers:
            working = [
                p for p in policies_for(problem) if parse_policy(p).capabilities.chooses_workers
            ]
            raise InvalidParameterError(
                f"{policy_id!r} picks items only; in environment {str(spec)!r} a label costs the "
                "price of the worker who gives it, so the policy must choose the worker"
                + (f"; ids that work here: {', '.join(working)}" if working else "")
            )


def _two_item_problem(spec: Spec) -> Any:
    """The problem of ``spec``'s world at two items (a stand-in for the policies' checks)."""
    from crowdbudget.registry import Spec, make_environment

    params = tuple((k, v) for k, v in spec.params if k != "n-items")
    small = make_environment(Spec(spec.id, (*params, ("n-items", "2"))))
    small.reset(seed=0)
    return small.problem(1.0)


def add_simulate_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``simulate`` sub-command to ``subparsers`` (of ``build_parser``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "simulate",
        help="run policies on a synthetic world (--env; default: θ ~ Beta prior, noiseless "
        "workers)",
        description="Run allocation policies on synthetic worlds. Every policy faces the same "
        "worlds (common random numbers). The world is a registered environment (--env ID, "
        "versioned; 'crowdbudget environments' lists them with their parameters); the default, "
        "bernoulli-v0, draws θ_i ~ Beta(a, b) and asks noiseless workers (label ~ "
        "Bernoulli(θ_i)), truth 1{θ_i >= d}. --worker-set A|B is short for --env "
        "priced-workers-v0:worker-set=A|B: workers with prices and capacities (Rangi & "
        "Franceschetti 2018 §6), the budget in money, for b-kube, eps-first, bounded-eps-first "
        "and trailsourcing. --items sets every world's n-items; --prior and --threshold set "
        "the prior and threshold of the worlds that have them.",
    )
    p.add_argument("--items", type=positive_int, required=True, help="number of items K")
    p.add_argument(
        "--env",
        default=None,
        metavar="ID",
        help="the world: an environment id with parameters, e.g. "
        "one-coin-workers-v0:n-workers=20 (default bernoulli-v0; see 'crowdbudget "
        "environments')",
    )
    p.add_argument(
        "--worker-set",
        choices=["A", "B"],
        default=None,
        help="short for --env priced-workers-v0:worker-set=A|B (B: 5 of the 20 workers are "
        "spammers)",
    )
    p.add_argument(
        "--classes", type=int, choices=[2], default=2, help="number of classes (only 2 for now)"
    )
    p.add_argument(
        "--prior", type=float_list, default=None, help="Beta prior a,b of θ (default 1,1)"
    )
    p.add_argument("--threshold", type=float, default=None, help="threshold d (default 0.5)")
    p.add_argument("--policies", type=policy_list, required=True, help="comma-separated policy ids")
    add_budget_arguments(p, "budgets in labels, T1,T2,… (money when the workers have prices)")
    p.add_argument("--plot", default=None, help="write a PNG plot of accuracy to this path")
    add_control_arguments(p)
    add_verdict_argument(p)
    add_common_arguments(p)
    p.set_defaults(func=cmd_simulate)
    return p
