"""``crowdbudget aggregate``: final labels for a labels CSV, by any registered aggregator.

Reads crowd-kit's ``task,worker,label`` CSV, fits the aggregator (``--method``, an id of
:func:`crowdbudget.aggregation.registry.make_aggregator`, parameters after colons), and writes
``task,label`` rows (with ``--proba``: ``task`` and one probability column per class) to
``--out`` or to stdout. With ``--gold`` it also reports the accuracy on the gold tasks; with
``--json`` it prints one JSON document (the method, sizes, accuracy and where the rows went).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from crowdbudget.cli_io import add_validation_arguments, prepare_output_file
from crowdbudget.exceptions import DataFormatError


def _methods_help() -> str:
    from crowdbudget.aggregation.registry import registered_aggregators

    return ", ".join(sorted(registered_aggregators()))


def cmd_aggregate(args: argparse.Namespace) -> int:
    from crowdbudget.aggregation.registry import make_aggregator
    from crowdbudget.datasets.loaders import read_labels_csv

    if not Path(args.labels).is_file():
        raise DataFormatError(f"labels file {args.labels!r} not found (a CSV task,worker,label)")
    if args.gold is not None and not Path(args.gold).is_file():
        raise DataFormatError(f"gold file {args.gold!r} not found (a CSV task,label)")
    if args.out is not None:
        prepare_output_file(args.out, "--out")
    method = args.method if ":seed=" in args.method else f"{args.method}:seed={args.seed}"
    aggregator = make_aggregator(method)  # unknown ids fail here, listing the known ones
    data = read_labels_csv(
        args.labels, args.gold, classes=args.classes, duplicates=args.duplicates or "error"
    )
    aggregator.fit(data)
    tasks = pd.Series(data.item_ids, name="task")
    if args.proba:
        rows = pd.DataFrame(aggregator.probas_, columns=list(data.classes))
        rows.insert(0, "task", tasks)
    else:
        classes = pd.Series(list(data.classes), dtype=object)
        rows = pd.DataFrame({"task": tasks, "label": classes[aggregator.labels_].to_numpy()})
    accuracy = None
    if data.gold is not None and (data.gold >= 0).any():
        accuracy = data.accuracy(aggregator.labels_)
    if args.out is not None:
        rows.to_csv(args.out, index=False)
    document: dict[str, Any] = {
        "command": "aggregate",
        "seed": args.seed,
        "settings": {"labels": str(args.labels), "gold": args.gold, "method": args.method},
        "results": {
            "n_tasks": data.n_items,
            "n_workers": data.n_workers,
            "n_labels": data.n_labels,
            "classes": list(data.classes),
            "accuracy": accuracy,
            "gold_tasks_without_labels": int(data.extra.get("gold_without_labels", 0)),
            "out": args.out,
        },
    }
    if args.json:
        if args.out is None:
            document["results"]["rows"] = rows.to_dict(orient="records")
        print(json.dumps(document, indent=2))
        return 0
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
    return 0


def add_aggregate_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``aggregate`` sub-command to ``subparsers`` (of ``build_parser``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "aggregate",
        help="final labels for a labels CSV (majority vote, Dawid-Skene, KOS, BP, ...)",
        description="Aggregate crowd labels (a CSV with columns task,worker,label) into one "
        "label per task and write task,label rows (or class probabilities with --proba).",
    )
    p.add_argument("labels", help="labels CSV with columns task,worker,label")
    p.add_argument(
        "--method",
        default="dawid-skene",
        help=f"aggregator id, parameters after colons (default dawid-skene): {_methods_help()}",
    )
    p.add_argument(
        "--out",
        default=None,
        help="write the rows to this CSV file, creating missing folders (default: stdout)",
    )
    p.add_argument("--gold", default=None, help="gold CSV (task,label): report the accuracy")
    p.add_argument(
        "--proba", action="store_true", help="write class probabilities instead of labels"
    )
    add_validation_arguments(p)
    p.add_argument("--seed", type=int, default=0, help="seed for tie-breaking (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(func=cmd_aggregate)
    return p
