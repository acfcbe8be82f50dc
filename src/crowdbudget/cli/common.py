"""What the ``crowdbudget`` commands share: the parser that reports a usage error on one line
(exit status 2), the argument types, the options every run command takes (``--seed``,
``--json``, ``--jobs``, ``--no-progress``, ``--scheduler``), label budgets, and running the
policies through :func:`~crowdbudget.experiments.runner.run_experiment`.

A command module (``simulate``, ``replay``, ``compare``, ...) defines ``cmd_<name>(args)`` and
``add_<name>_parser(subparsers)``; :func:`crowdbudget.cli.build_parser` wires them in order.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

from crowdbudget.aggregation.registry import DEFAULT_VERDICT
from crowdbudget.cli.io import whole_budgets
from crowdbudget.exceptions import InvalidParameterError

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error on one line, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def float_list(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def policy_list(text: str) -> list[str]:
    """Comma-separated policy ids. A part that does not start with a letter continues the
    value before it: ``opt-kg:worker-prior=8,2,uniform`` is two ids (an id starts with a
    letter; a pair parameter's second number does not)."""
    ids: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if ids and not part[0].isalpha():
            ids[-1] += "," + part
        else:
            ids.append(part)
    if not ids:
        raise argparse.ArgumentTypeError("expected at least one policy id")
    return ids


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """``--seed``, ``--json``, ``--jobs``, ``--no-progress`` and ``--scheduler``."""
    parser.add_argument("--seed", type=int, default=0, help="root random seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    parser.add_argument(
        "--jobs", type=positive_int, default=None, help="worker processes (default: all cores)"
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument(
        "--scheduler",
        default=None,
        help="run the campaigns on Dask: 'local' (a local cluster) or tcp://host:port "
        "(same results as without)",
    )


def add_verdict_argument(parser: argparse.ArgumentParser) -> None:
    """``--verdict``: where the final labels and their confidence come from."""
    parser.add_argument(
        "--verdict",
        default=None,
        metavar="ID",
        help="the verdict of every policy id that names none: 'posterior' (each policy's own "
        "model; an even vote goes to the class the decided items say is more common, never to "
        "a fixed class; the default for most policies — the worker-aware one-coin policies "
        f"default to the default verdict, {DEFAULT_VERDICT}, and reports say so), 'paper' (the "
        "papers' rule: "
        "binary ties to class 1, "
        "what reproduce uses) or an aggregator id fitted on the labels received (ds, "
        "one-coin-em, mace, mace-eb, bds, bds-oc, ...; 'crowdbudget aggregators'); an id names "
        "its own "
        "with :verdict=, e.g. opt-kg:verdict=ds",
    )
    parser.add_argument(
        "--verdicts",
        type=verdict_list,
        default=None,
        metavar="ID,ID",
        help="also read every campaign with these verdicts (e.g. posterior,ds,mace,bds): one "
        "row per policy and verdict, labelled <id>:verdict=<v> — the rows those ids would "
        "give, at the cost of one allocation",
    )


def verdict_list(text: str) -> list[str]:
    """Comma-separated verdict ids (``posterior``, ``paper`` or aggregator ids)."""
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise argparse.ArgumentTypeError("expected at least one verdict id")
    return ids


def default_verdicts(policies: Sequence[str], verdict: str | None) -> dict[str, str]:
    """The policies among ``policies`` whose verdict is their own default and not their
    posterior (neither the id nor ``--verdict`` names one; e.g. ``opt-kg:posterior=one-coin``
    → the default verdict), with that verdict: what a report states so that nobody reads a
    column of another model as the policy's own."""
    from crowdbudget.registry import split_verdict

    if verdict:
        return {}
    out: dict[str, str] = {}
    for pid in policies:
        named = split_verdict(pid, "posterior")[1]
        chosen = split_verdict(pid)[1]
        if named.is_posterior and not chosen.is_posterior:
            out[str(pid)] = chosen.name
    return out


def verdict_note(defaulted: dict[str, str], width: int = 118) -> list[str]:
    """``verdict:`` lines (wrapped to ``width`` columns) naming each policy read by its
    default verdict (:func:`default_verdicts`)."""
    return wrapped_lines(
        "verdict",
        [
            f"{pid} is read by {name}, the policy's default "
            f"({pid}:verdict=posterior reads its own model)"
            for pid, name in defaulted.items()
        ],
        width,
    )


def add_budget_arguments(parser: argparse.ArgumentParser, budget_help: str) -> None:
    """The budget grid and the replications a run command takes (read by
    :func:`label_budgets`): ``--budget`` (``budget_help``), ``--budget-per-item``,
    ``--reps`` and ``--mode``."""
    parser.add_argument("--budget", type=float_list, default=None, help=budget_help)
    parser.add_argument(
        "--budget-per-item",
        type=float_list,
        default=None,
        help="budgets in labels per item, r1,r2,… (e.g. 1,2,4: T = r × the number of items K)",
    )
    parser.add_argument("--reps", type=positive_int, default=20, help="replications (default 20)")
    parser.add_argument(
        "--mode", choices=["push", "pull"], default="push", help="interaction mode (push)"
    )


def label_budgets(args: argparse.Namespace, n_items: int) -> list[float]:
    """Label budgets: ``--budget`` whole numbers, or ``--budget-per-item`` r times the number
    of items, rounded down to whole labels (a label is bought whole)."""
    import math

    if args.budget is not None and args.budget_per_item is not None:
        raise InvalidParameterError("give either --budget or --budget-per-item, not both")
    if args.budget is not None:
        return whole_budgets(args.budget, "--budget")
    if args.budget_per_item is None:
        raise InvalidParameterError("a budget is needed: --budget T1,T2 or --budget-per-item r1,r2")
    for r in args.budget_per_item:
        if not r > 0 or math.floor(r * n_items) < 1:
            raise InvalidParameterError(
                f"--budget-per-item {r:g} buys no label for {n_items} items; "
                f"allowed: at least {1 / n_items:.3g}"
            )
    return [float(math.floor(r * n_items)) for r in args.budget_per_item]


def emit(args: argparse.Namespace, text: str, document: str) -> None:
    """Print the JSON document with ``--json``, the text otherwise."""
    print(document if args.json else text)


def run_policies(args: argparse.Namespace, env: Any, budgets: Any, metrics: Any = None) -> Any:
    """``run_experiment`` with the command line's policies, replications, seed, jobs,
    progress and mode."""
    from crowdbudget.experiments.runner import run_experiment

    return run_experiment(
        args.policies,
        env,
        budgets,
        args.reps,
        seed=args.seed,
        n_jobs=args.jobs,
        progress=not args.no_progress,
        mode=args.mode,
        metrics=metrics,
        verdict=getattr(args, "verdict", None),
        verdicts=getattr(args, "verdicts", None) or (),
        control=getattr(args, "control", None),
    )


def wrapped_lines(label: str, texts: list[str], width: int = 118) -> list[str]:
    """``label: text`` lines wrapped to ``width`` columns, continuations indented under the
    text."""
    import textwrap

    lines: list[str] = []
    for text in texts:
        lines += textwrap.wrap(
            f"{label}: {text}",
            width=width,
            subsequent_indent=" " * (len(label) + 2),
            break_on_hyphens=False,
        )
    return lines


def note_lines(notes: list[str], width: int = 118) -> list[str]:
    """``note:`` lines wrapped to ``width`` columns (continuations indented)."""
    return wrapped_lines("note", notes, width)
