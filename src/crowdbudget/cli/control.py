"""The control-task options of ``simulate`` and ``replay`` (:mod:`crowdbudget.engine.control`):
``--control-fraction`` / ``--control-items`` take gold items as control tasks, served to every
worker as their first ``--control-first`` tasks and then every ``1/--control-rate``-th; their
labels cost budget and accuracy is reported on the other gold items; ``--block-below`` blocks
a worker whose accuracy on control answers is below that level with posterior probability at
least ``--block-confidence`` (Beta(1, 1) prior). ``--control-rule value`` serves a control task
after the first ones whenever its answer is worth more than the label it displaces (the block
decision's expected value of sample information); ``--blocked-labels keep`` lets the verdict
weigh the blocked workers' labels (default ``drop``: fitted without them). The verdict's soft
count of each worker's other labels joins the block evidence unless ``--no-block-agreement``;
``--control-prior crowd`` reads each worker against the crowd's fitted accuracy distribution,
``--control-prior share`` has the value rule weigh the crowd's share of bad workers."""

from __future__ import annotations

import argparse
from typing import Any

from crowdbudget.exceptions import InvalidParameterError


def add_control_arguments(p: argparse.ArgumentParser) -> None:
    """Add the control-task options to ``p`` (all off by default)."""
    group = p.add_argument_group("control tasks")
    group.add_argument(
        "--control-fraction",
        type=float,
        default=None,
        help="share of the gold items used as control tasks (paid; not scored)",
    )
    group.add_argument("--control-items", type=int, default=None, help="or their number (not both)")
    group.add_argument(
        "--control-first",
        type=int,
        default=3,
        help="every worker's first N tasks are control tasks (default 3)",
    )
    group.add_argument(
        "--control-rate",
        type=float,
        default=0.05,
        help="then this share of their tasks, every round(1/rate)-th (default 0.05; 0: none)",
    )
    group.add_argument(
        "--control-rule",
        choices=("fixed", "value"),
        default="fixed",
        help="after the first tasks: a fixed --control-rate, or 'value': a control task "
        "whenever its answer is worth more to the block decision than the label it displaces "
        "(needs --block-below; default fixed)",
    )
    group.add_argument(
        "--block-below",
        type=float,
        default=None,
        help="block a worker whose control accuracy is below this level (default: no blocking)",
    )
    group.add_argument(
        "--block-confidence",
        type=float,
        default=0.95,
        help="posterior probability of being below the level that blocks (default 0.95)",
    )
    group.add_argument(
        "--block-agreement",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the block test also reads the verdict's expected right answers among each "
        "worker's other labels (soft counts), not only the control answers (default: on; "
        "--no-block-agreement: control answers only)",
    )
    group.add_argument(
        "--control-prior",
        choices=("fixed", "crowd", "share"),
        default="fixed",
        help="read a worker against the fixed Beta(1, 1) prior or the crowd's fitted accuracy "
        "distribution (empirical Bayes); share: the value rule predicts a worker's answers "
        "from the posterior of the crowd's share of bad workers (default fixed)",
    )
    group.add_argument(
        "--blocked-labels",
        choices=("drop", "keep"),
        default="drop",
        help="the verdict is fitted without the blocked workers' labels (drop, the default, as "
        "in a live campaign) or keeps them (its worker model weighs them)",
    )
    group.add_argument(
        "--control-calibrate",
        nargs="?",
        const="floor",
        default=None,
        choices=("floor", "difficulty", "answers", "splits", "splits-np"),
        help="map an aggregator verdict's probabilities by a floor fitted on the control "
        "answers: floor (its likelihood on the control items, the default) or difficulty "
        "(from the control answers' item difficulty) or answers (both, prediction-powered) or "
        "splits (every item's vote split, debiased on the control items) or splits-np (the "
        "same with the items' accuracies on a grid); docs/calibration.md",
    )


def _agreement(args: argparse.Namespace) -> bool:
    """``agreement``: as the command line sets it, else ControlTasks' default (on)."""
    from crowdbudget.engine.control import ControlTasks

    given = getattr(args, "block_agreement", None)
    if given is None:
        return bool(ControlTasks.__dataclass_fields__["agreement"].default)
    return bool(given)


def control_tasks(args: argparse.Namespace) -> Any:
    """The :class:`~crowdbudget.engine.control.ControlTasks` of the command line (None: no
    control tasks); a blocking option without control tasks is refused."""
    from crowdbudget.engine.control import ControlTasks

    fraction = getattr(args, "control_fraction", None)
    n_items = getattr(args, "control_items", None)
    if fraction is None and n_items is None:
        for option in (
            "block_below",
            "control_rule",
            "blocked_labels",
            "block_agreement",
            "control_prior",
        ):
            if getattr(args, option, None) not in (None, "fixed", "drop"):
                raise InvalidParameterError(
                    f"--{option.replace('_', '-')} needs control tasks "
                    "(--control-fraction or --control-items)"
                )
        return None
    return ControlTasks(
        fraction=fraction,
        n_items=n_items,
        first_k=args.control_first,
        rate=args.control_rate,
        block_below=args.block_below,
        block_confidence=args.block_confidence,
        rule=getattr(args, "control_rule", "fixed"),
        blocked_labels=getattr(args, "blocked_labels", "drop"),
        calibrate=getattr(args, "control_calibrate", None),
        agreement=_agreement(args),
        prior_fit=getattr(args, "control_prior", "fixed"),
    )
