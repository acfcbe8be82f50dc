"""``crowdbudget datasets``: list the data sets (bundled and your own), or describe one."""

from __future__ import annotations

import argparse
from typing import Any


def cmd_datasets(args: argparse.Namespace) -> int:
    import json

    import numpy as np

    from crowdbudget.datasets import list_datasets, load_dataset, load_feature_set

    rows = list_datasets(args.data_dir)
    if args.name is not None:
        kinds = {r["name"]: r["kind"] for r in rows}
        info: dict[str, Any]
        if kinds.get(args.name) == "features":
            features = load_feature_set(args.name, data_dir=args.data_dir)
            info = {
                "name": features.name,
                "kind": "features",
                "n_items": features.n_items,
                "n_features": len(features.feature_names),
                "classes": list(features.classes),
                "class_counts": [int(c) for c in np.bincount(features.gold, minlength=2)],
                "has_split": features.split is not None,
            }
        else:
            data = load_dataset(args.name, data_dir=args.data_dir, duplicates=args.duplicates)
            per_item = data.label_counts().sum(axis=1)
            info = {
                "name": data.name,
                "kind": "labels",
                "n_items": data.n_items,
                "n_workers": data.n_workers,
                "n_labels": data.n_labels,
                "classes": list(data.classes),
                "gold_items": int(data.gold_mask.sum()),
                "gold_items_without_labels": int(data.extra.get("gold_without_labels", 0)),
                "labels_per_item": [
                    int(per_item.min()),
                    round(float(per_item.mean()), 2),
                    int(per_item.max()),
                ],
                "has_contexts": data.contexts is not None,
            }
        if args.json:
            print(json.dumps({"command": "datasets", "dataset": info}, indent=2))
        else:
            for key, value in info.items():
                print(f"{key:>25}: {value}")
        return 0
    if args.json:
        print(json.dumps({"command": "datasets", "datasets": rows}, indent=2))
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        print(f"{r['name']:<{width}}  {r['kind']:<8}  {r['description']}  [{r['location']}]")
    return 0


def add_datasets_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``datasets`` sub-command to ``subparsers`` (of ``build_parser``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "datasets",
        help="list the data sets, or describe one",
        description="List the data sets (all bundled in the package, plus your own in --data-dir), "
        "or describe one (counts, classes, gold).",
    )
    p.add_argument("name", nargs="?", default=None, help="a data set to describe")
    p.add_argument(
        "--data-dir",
        default=None,
        help="folder of your own data sets: DIR/NAME/labels.csv and gold.csv (or "
        "features.csv and gold.csv); or set CROWDBUDGET_DATA_DIR",
    )
    p.add_argument(
        "--duplicates",
        choices=["error", "keep", "first", "last"],
        default=None,
        help="repeated (task, worker) rows when describing a set (see compare --help)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(func=cmd_datasets)
    return p
