"""The ``crowdbudget`` command-line tool (DESIGN §6): :func:`main` and :func:`build_parser`.

Every command has ``--help``, ``--seed`` and ``--json`` (one JSON document on stdout; progress
and logs go to stderr). User errors print one line that says what is wrong and what is
allowed, and exit with status 2 — never a traceback.

One module per command (or command group), each with ``cmd_<name>(args)`` and
``add_<name>_parser(subparsers)``: :mod:`~crowdbudget.cli.simulate`,
:mod:`~crowdbudget.cli.reproduce`, :mod:`~crowdbudget.cli.replay`,
:mod:`~crowdbudget.cli.compare`, :mod:`~crowdbudget.cli.datasets`,
:mod:`~crowdbudget.cli.serve`, :mod:`~crowdbudget.cli.bound`,
:mod:`~crowdbudget.cli.aggregate`, :mod:`~crowdbudget.cli.labelstudio`,
:mod:`~crowdbudget.cli.policies`, :mod:`~crowdbudget.cli.environments` and
:mod:`~crowdbudget.cli.stress`. What they share:
:mod:`~crowdbudget.cli.common` (the one-line-error parser, argument types, the run options,
budgets, running the policies) and
:mod:`~crowdbudget.cli.io` (data validation options, output paths).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from crowdbudget.cli.common import EXIT_USAGE, Parser
from crowdbudget.exceptions import CrowdBudgetError

__all__ = ["EXIT_USAGE", "HELP_EXAMPLES", "all_commands", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``crowdbudget`` command."""
    from crowdbudget import __version__
    from crowdbudget.cli.aggregate import add_aggregate_parser
    from crowdbudget.cli.aggregators import add_aggregators_parser
    from crowdbudget.cli.bound import add_bound_parser
    from crowdbudget.cli.compare import add_compare_parser
    from crowdbudget.cli.datasets import add_datasets_parser
    from crowdbudget.cli.environments import add_environments_parser
    from crowdbudget.cli.labelstudio import add_labelstudio_parser
    from crowdbudget.cli.policies import add_policies_parser
    from crowdbudget.cli.replay import add_replay_parser
    from crowdbudget.cli.reproduce import add_reproduce_parser
    from crowdbudget.cli.serve import add_serve_parser
    from crowdbudget.cli.simulate import add_simulate_parser
    from crowdbudget.cli.stress import add_stress_parser

    parser = Parser(
        prog="crowdbudget",
        description="Budget-optimal crowdsourced labeling: allocation policies, simulations, "
        "paper reproductions.",
    )
    parser.add_argument("--version", action="version", version=f"crowdbudget {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    # the order of `crowdbudget --help`
    for add_parser in (
        add_simulate_parser,
        add_reproduce_parser,
        add_replay_parser,
        add_compare_parser,
        add_datasets_parser,
        add_serve_parser,
        add_bound_parser,
        add_aggregate_parser,
        add_aggregators_parser,
        add_labelstudio_parser,
        add_policies_parser,
        add_environments_parser,
        add_stress_parser,
    ):
        add_parser(sub)
    _add_examples(all_commands(parser))
    return parser


#: The examples that end each command's ``--help`` (commands added later get theirs here too),
#: by full name: an action of a command group is ``"<command> <action>"``.
HELP_EXAMPLES = {
    "simulate": [
        "crowdbudget simulate --items 50 --policies uniform,opt-kg --budget-per-item 2,6,10",
        "crowdbudget simulate --items 100 --policies b-kube,bounded-eps-first --worker-set A "
        "--budget 500 --json",
    ],
    "reproduce": [
        "crowdbudget reproduce chen2013-fig2a --quick --out results/",
        "crowdbudget reproduce --all --quick --jobs 2",
    ],
    "replay": [
        "crowdbudget replay --dataset temp --policies uniform,opt-kg --budget-per-item 1,3,5",
        "crowdbudget replay --labels my_labels.csv --gold my_gold.csv --policies opt-kg "
        "--budget 2000 --duplicates first",
    ],
    "compare": [
        "crowdbudget compare",
        "crowdbudget compare --dataset trec --policies uniform,opt-kg --budget-per-item 1,2,4",
    ],
    "datasets": ["crowdbudget datasets", "crowdbudget datasets adult --json"],
    "serve": [
        "crowdbudget serve --db sqlite:///campaign.db --port 8000   "
        "(needs: pip install -e '.[service]')"
    ],
    "policies": ["crowdbudget policies", "crowdbudget policies --json"],
    "environments": [
        "crowdbudget environments",
        "crowdbudget environments priced-workers-v0 --json",
    ],
    "aggregators": ["crowdbudget aggregators", "crowdbudget aggregators ds --json"],
    "aggregate": [
        "crowdbudget aggregate my_labels.csv --method dawid-skene --out results/labels.csv",
        "crowdbudget aggregate my_labels.csv --method mv --gold my_gold.csv --json",
    ],
    "stress": [
        "crowdbudget stress --quick",
        "crowdbudget stress --per-item 1,2,3,5 --reps 3 --out stress.csv",
    ],
    "bound": [
        "crowdbudget bound --items 100 --budget 120 --arrival-rate 0.1 --completion-rate 0.4",
    ],
    "labelstudio": [
        "crowdbudget labelstudio serve-webhook --url http://127.0.0.1:8080 --token-file t "
        "--project 1 --budget 600",
        "crowdbudget labelstudio export --url http://127.0.0.1:8080 --token-file t --project 1",
    ],
    "labelstudio sync": [
        "crowdbudget labelstudio sync --url http://127.0.0.1:8080 --token-file t --project 1 "
        "--budget 600",
        "crowdbudget labelstudio sync --url http://127.0.0.1:8080 --token-file t --project 1 "
        "--budget 600 --once --json",
    ],
    "labelstudio serve-webhook": [
        "crowdbudget labelstudio serve-webhook --url http://127.0.0.1:8080 --token-file t "
        "--project 1 --budget 600",
        "crowdbudget labelstudio serve-webhook --url http://ls:8080 --token-file t --project 1 "
        "--budget 600 --max-seconds 3600",
    ],
    "labelstudio export": [
        "crowdbudget labelstudio export --url http://127.0.0.1:8080 --token-file t --project 1 "
        "--out labels.csv",
        "crowdbudget labelstudio export --url http://127.0.0.1:8080 --token-file t --project 1 "
        "> labels.csv",
    ],
}


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The sub-commands of ``parser`` by name (empty when it has none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def all_commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every command and action under ``parser`` by its full name, a group before its
    actions: ``{"simulate": …, "labelstudio": …, "labelstudio sync": …, …}``."""
    found: dict[str, argparse.ArgumentParser] = {}
    for name, command in subcommands(parser).items():
        found[name] = command
        for action, sub in all_commands(command).items():
            found[f"{name} {action}"] = sub
    return found


def _add_examples(commands: Mapping[str, argparse.ArgumentParser]) -> None:
    """End the ``--help`` of every command of ``commands`` (full names, e.g.
    ``labelstudio sync``: :func:`all_commands`) with its examples (kept as written: raw
    epilog)."""
    for name, command in commands.items():
        examples = HELP_EXAMPLES.get(name)
        if not examples:
            continue
        lines = "\n".join(f"  {line}" for line in examples)
        command.epilog = f"examples:\n{lines}"
        command.formatter_class = _ExamplesFormatter


class _ExamplesFormatter(argparse.HelpFormatter):
    """Wraps the description as usual; keeps the examples epilog line by line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt so that the same
    clean-up runs (a process pool's workers are stopped at once, not awaited)."""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Inside the block, SIGTERM raises :class:`Terminated` in the main thread (the default
    would end this process at once and leave its pool workers running on to the end of
    their queue); the previous handler is back afterwards (:func:`main` then sends the
    signal again to this process)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum: int, _: Any) -> None:
        raise Terminated(signum)

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run the command; user errors → one line on stderr and exit status 2."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # refused by the command's own parser: its name and --help in the line
        command_parser = subcommands(parser).get(getattr(args, "command", None) or "", parser)
        command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    command = getattr(args, "command", "")

    def notice(message: Any, category: Any, *_: Any, **__: Any) -> None:
        # a warning (e.g. an old spelling's new one) is one line, like an error
        print(f"crowdbudget {command}: note: {message}", file=sys.stderr)

    try:
        with warnings.catch_warnings(), _sigterm_as_interrupt():
            warnings.showwarning = notice
            scheduler = getattr(args, "scheduler", None)
            if scheduler is None:
                return func(args)
            from crowdbudget.experiments.runner import dask_scheduler

            with dask_scheduler(scheduler, getattr(args, "jobs", None)):
                return func(args)
    except CrowdBudgetError as error:
        command = getattr(args, "command", "")
        print(f"crowdbudget {command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # output piped into e.g. `head`: not an error of ours
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Terminated:
        print(
            "crowdbudget: interrupted (SIGTERM): stopped at once, with any worker processes",
            file=sys.stderr,
            flush=True,
        )
        # the clean-up done, SIGTERM again under the handler found on entry (restored on
        # leaving the block): by default the process ends by the signal, as its sender
        # expects (a shell shows 143), also when main() runs inside another program
        signal.raise_signal(signal.SIGTERM)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print(
            "crowdbudget: interrupted (SIGINT): stopped at once, with any worker processes",
            file=sys.stderr,
        )
        return 128 + signal.SIGINT
