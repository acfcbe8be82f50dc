"""``crowdbudget aggregate``: final labels for a labels CSV, by any registered aggregator.

Reads crowd-kit's ``task,worker,label`` CSV, fits the aggregator (``--method``, an id of
:func:`crowdbudget.aggregation.registry.make_aggregator`, parameters after colons; default
:data:`~crowdbudget.aggregation.registry.DEFAULT_VERDICT`), and writes ``task,label,confidence``
rows — the confidence is the aggregator's probability of the label it chose — (with
``--proba``: ``task`` and one probability column per class) to ``--out`` or to stdout. With
``--gold`` it also reports accuracy and calibration on the gold tasks (ECE over
``--bins`` equal-width and equal-mass bins, NLL, Brier:
:func:`crowdbudget.experiments.metrics.calibration_metrics`), and ``--reliability PNG``
draws the reliability diagram; ``--fit-floor`` fits a probability floor on the gold tasks
(:func:`crowdbudget.aggregation.calibration.fit_probability_floor`: the verdict mixed with the
uniform distribution at the weight under which the gold is most likely), writes the floored
probabilities and reports their metrics cross-fitted over 5 folds of the gold (each gold
task scored with a floor fitted on the others). With ``--json`` it prints one JSON document
(the method, sizes, metrics and where the rows went). A verdict that chooses among models
(``auto``) reports which one and why: a line on stderr, and ``results.choice`` (``chosen``,
``reason``, ``scores``) in the JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crowdbudget.aggregation.registry import DEFAULT_VERDICT
from crowdbudget.cli.io import (
    OutputWriteError,
    add_validation_arguments,
    prepare_output_file,
    prepare_plot_file,
    write_files,
)
from crowdbudget.exceptions import DataFormatError


def _methods_help() -> str:
    """The ids of the aggregator registry's table, and where their parameters are listed."""
    from crowdbudget.aggregation.registry import registered_aggregators

    ids = ", ".join(sorted(registered_aggregators()))
    return f"{ids} (parameters, ranges and defaults: crowdbudget aggregators ID)"


def _check_arguments(args: argparse.Namespace) -> None:
    """Refuse inconsistent options before any work (one line each)."""
    if args.reliability is not None and args.gold is None:
        raise DataFormatError("--reliability needs --gold (a CSV task,label) to compare with")
    if args.fit_floor and args.gold is None:
        raise DataFormatError("--fit-floor needs --gold (a CSV task,label) to fit the floor on")
    if args.bins < 1:
        raise DataFormatError(f"--bins must be an integer >= 1, got {args.bins}")
    if args.out is not None:
        prepare_output_file(args.out, "--out")
    if args.reliability is not None:
        prepare_plot_file(args.reliability, "--reliability")


def _rows(data: Any, probas: np.ndarray, labels: np.ndarray, *, proba: bool) -> pd.DataFrame:
    """One row per task: every class probability (``proba``), else label and confidence."""
    tasks = pd.Series(data.item_ids, name="task")
    if proba:
        rows = pd.DataFrame(probas, columns=list(data.classes))
        rows.insert(0, "task", tasks)
    else:
        classes = pd.Series(list(data.classes), dtype=object)
        confidence = probas[np.arange(data.n_items), labels]
        rows = pd.DataFrame(
            {
                "task": tasks,
                "label": classes[labels].to_numpy(),
                "confidence": confidence,
            }
        )
    return rows


def _write_files(
    args: argparse.Namespace,
    data: Any,
    aggregator: Any,
    rows: pd.DataFrame,
    calibration: dict[str, float] | None,
) -> None:
    """The reliability diagram and the rows' CSV, as asked (the rows go to stdout when
    their file cannot be written)."""
    from crowdbudget.experiments.metrics import reliability_diagram

    files: list[tuple[str, Path, Any]] = []
    if args.reliability is not None and calibration is not None and data.gold is not None:
        gold = data.gold
        files.append(
            (
                "reliability diagram",
                Path(args.reliability),
                lambda path: reliability_diagram(
                    aggregator.probas_,
                    gold,
                    path,
                    labels=aggregator.labels_,
                    n_bins=args.bins,
                    title=args.method,
                ),
            )
        )
    if args.out is not None:
        files.append(("rows", Path(args.out), lambda path: rows.to_csv(path, index=False)))
    try:
        write_files(files, announce=False)
    except OutputWriteError:
        if args.out is not None and not args.json:
            rows.to_csv(sys.stdout, index=False)
        raise


def cmd_aggregate(args: argparse.Namespace) -> int:
    from crowdbudget.aggregation.calibration import apply_probability_floor, floor_calibration
    from crowdbudget.aggregation.registry import make_aggregator
    from crowdbudget.datasets.loaders import read_labels_csv
    from crowdbudget.experiments.metrics import calibration_metrics

    _check_arguments(args)
    make_aggregator(args.method)  # an unknown id or a bad parameter fails here, as typed
    method = args.method if ":seed=" in args.method else f"{args.method}:seed={args.seed}"
    aggregator = make_aggregator(method)
    data = read_labels_csv(
        args.labels, args.gold, classes=args.classes, duplicates=args.duplicates or "error"
    )
    aggregator.fit(data)
    probas = aggregator.probas_
    floor: dict[str, Any] | None = None
    has_gold = data.gold is not None and bool((data.gold >= 0).any())
    if args.fit_floor and has_gold:
        assert data.gold is not None
        floor = floor_calibration(
            probas,
            data.gold,
            labels=aggregator.labels_,
            n_bins=args.bins,
            rng=np.random.default_rng(args.seed),
        )
        # the rows carry the floored probabilities (ε fitted on every gold task); the
        # labels do not change: the floor keeps each row's order
        probas = apply_probability_floor(probas, floor["floor"])
    rows = _rows(data, probas, aggregator.labels_, proba=args.proba)
    accuracy = None
    calibration: dict[str, float] | None = None
    if has_gold:
        assert data.gold is not None
        accuracy = data.accuracy(aggregator.labels_)
        calibration = calibration_metrics(
            aggregator.probas_, data.gold, labels=aggregator.labels_, n_bins=args.bins
        )
    document: dict[str, Any] = {
        "command": "aggregate",
        "seed": args.seed,
        "settings": {
            "labels": str(args.labels),
            "gold": args.gold,
            "method": args.method,
            "bins": args.bins,
            "fit_floor": args.fit_floor,
        },
        "results": {
            "n_tasks": data.n_items,
            "n_workers": data.n_workers,
            "n_labels": data.n_labels,
            "classes": list(data.classes),
            "accuracy": accuracy,
            "calibration": calibration,
            "floor": None
            if floor is None
            else {
                "epsilon": floor["floor"],
                "n_folds": floor["n_folds"],
                "cross_fitted": floor["cross_fitted"],
            },
            "reliability": args.reliability if calibration is not None else None,
            "gold_tasks_without_labels": int(data.extra.get("gold_without_labels", 0)),
            "out": args.out,
        },
    }
    # a verdict that chooses among models (``auto``) says which one and why
    choice = aggregator.choice() if hasattr(aggregator, "choice") else None
    if choice is not None:
        document["results"]["choice"] = choice
    if args.json:
        if args.out is None:
            document["results"]["rows"] = rows.to_dict(orient="records")
        print(json.dumps(document, indent=2))
    else:
        if choice is not None:
            print(f"{args.method} chose {choice['reason']}", file=sys.stderr)
        _print_report(args, data, rows, accuracy, calibration, floor)
    # the files last: a failure while writing them leaves the report printed (and the rows,
    # which then go to stdout)
    _write_files(args, data, aggregator, rows, calibration)
    return 0


def _print_report(
    args: argparse.Namespace,
    data: Any,
    rows: pd.DataFrame,
    accuracy: float | None,
    calibration: dict[str, float] | None,
    floor: dict[str, Any] | None,
) -> None:
    """The text report: the rows (without ``--out``) or where they go on stdout; accuracy,
    calibration, the floor and the diagram's path on stderr."""
    if args.out is None:
        rows.to_csv(sys.stdout, index=False)
    else:
        summary = f"{data.n_items} tasks, {data.n_labels} labels, {data.n_workers} workers"
        print(f"{args.method}: {summary} → {args.out}")
    if accuracy is not None:
        gold_items = int((data.gold >= 0).sum()) if data.gold is not None else 0
        missing = int(data.extra.get("gold_without_labels", 0))
        unlabeled = f" ({missing} more gold tasks have no labels)" if missing else ""
        print(
            f"accuracy on the {gold_items} gold tasks: {accuracy:.4f}{unlabeled}", file=sys.stderr
        )
        if calibration is not None:
            print(
                f"calibration: ECE {calibration['ece']:.4f} ({args.bins} equal-width bins), "
                f"ECE {calibration['ece_mass']:.4f} (equal-mass), NLL {calibration['nll']:.4f}, "
                f"Brier {calibration['brier']:.4f}, mean confidence "
                f"{calibration['confidence']:.4f}",
                file=sys.stderr,
            )
        if floor is not None:
            fitted = floor["cross_fitted"]
            line = f"probability floor fitted on the gold tasks: ε = {floor['floor']:.4f}"
            if fitted is not None:
                line += (
                    f"; floored, cross-fitted over {floor['n_folds']} folds of the gold: "
                    f"ECE {fitted['ece']:.4f}, NLL {fitted['nll']:.4f}, Brier "
                    f"{fitted['brier']:.4f}, mean confidence {fitted['confidence']:.4f}"
                )
            print(line, file=sys.stderr)
        if args.reliability is not None:
            print(f"reliability diagram → {args.reliability}", file=sys.stderr)


def add_aggregate_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``aggregate`` sub-command to ``subparsers`` (of ``build_parser``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "aggregate",
        help="final labels for a labels CSV (majority vote, Dawid-Skene, KOS, BP, ...)",
        description="Aggregate crowd labels (a CSV with columns task,worker,label) into one "
        "label per task and write task,label,confidence rows (or class probabilities with "
        "--proba).",
    )
    p.add_argument("labels", help="labels CSV with columns task,worker,label")
    p.add_argument(
        "--method",
        default=DEFAULT_VERDICT,
        help=f"aggregator id, parameters after colons (default {DEFAULT_VERDICT}, chosen by "
        f"its worst case on the stress bed, docs/stress-bed.md): {_methods_help()}",
    )
    p.add_argument(
        "--out",
        default=None,
        help="write the rows to this CSV file, creating missing folders (default: stdout)",
    )
    p.add_argument(
        "--gold",
        default=None,
        help="gold CSV (task,label): report accuracy, ECE, NLL and Brier score",
    )
    p.add_argument(
        "--reliability", default=None, help="with --gold: write a reliability diagram PNG here"
    )
    p.add_argument("--bins", type=int, default=10, help="ECE / diagram bins (default 10)")
    p.add_argument(
        "--fit-floor",
        action="store_true",
        help="with --gold: mix the probabilities with the uniform distribution at the weight "
        "that makes the gold most likely, write those, and report their calibration "
        "cross-fitted over 5 folds of the gold (EM verdicts are over-confident where the "
        "gold disagrees with many workers; crowd labels alone cannot tell how often)",
    )
    p.add_argument(
        "--proba",
        action="store_true",
        help="write every class probability instead of label and confidence",
    )
    add_validation_arguments(p)
    p.add_argument("--seed", type=int, default=0, help="seed for tie-breaking (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(func=cmd_aggregate)
    return p
