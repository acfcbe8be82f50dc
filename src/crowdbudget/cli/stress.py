"""``crowdbudget stress``: every aggregator on the stress bed and the bundled crowd sets, and
the default-verdict rule applied to the result (docs/stress-bed.md).

Runs :func:`crowdbudget.experiments.stress.run_bed` on the default bed
(:data:`~crowdbudget.experiments.stress.DEFAULT_BED`; ``--full`` the grid of
:func:`~crowdbudget.experiments.stress.full_bed`; ``--quick`` a few small cells and rte) and
the bundled sets rte, temp and wsd (``--sets all``: every bundled set),
prints one row per (set, labels per item, method) — or writes them to ``--out`` as CSV — and
ends with :func:`~crowdbudget.experiments.stress.choose_verdict`'s ranking and choice.
Progress goes to stderr; ``--json`` prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

from crowdbudget.cli.io import prepare_output_file
from crowdbudget.exceptions import InvalidParameterError

#: the bundled sets a default run reads: every method fits each of them in seconds (the
#: others take minutes per fit for some methods; ``--sets all`` reads them too)
SMALL_SETS = ("rte", "temp", "wsd")


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def cmd_stress(args: argparse.Namespace) -> int:
    from crowdbudget.aggregation.registry import parse_aggregator, registered_aggregators
    from crowdbudget.datasets.loaders import BUNDLED
    from crowdbudget.experiments.stress import DEFAULT_BED, choose_verdict, full_bed, run_bed

    if args.quick and args.full:
        raise InvalidParameterError("--quick and --full exclude each other (pick one bed)")
    bed = full_bed() if args.full else DEFAULT_BED
    if args.quick:  # four small cells, 200 items each
        bed = tuple(replace(c, n_items=200) for c in bed[:3] + bed[12:13])
    if args.cells is not None:
        by_name = {c.name: c for c in (*DEFAULT_BED, *full_bed())}
        wanted = _names(args.cells)
        unknown = [n for n in wanted if n not in by_name]
        if unknown:
            raise InvalidParameterError(
                f"unknown stress cell {unknown[0]!r}; cells: {', '.join(by_name)}"
            )
        bed = tuple(by_name[n] for n in wanted)
    default_sets = "rte" if args.quick else ",".join(SMALL_SETS)
    text = args.sets if args.sets is not None else default_sets
    sets = list(BUNDLED) if text.strip() == "all" else _names(text)
    unknown = [s for s in sets if s not in BUNDLED]
    if unknown:
        raise InvalidParameterError(
            f"unknown bundled set {unknown[0]!r}; bundled crowd sets: {', '.join(BUNDLED)}"
        )
    methods = _names(args.methods) if args.methods else list(registered_aggregators())
    for method in methods:
        parse_aggregator(method)  # an unknown id or bad parameter fails before any fit
    if not bed and not sets:
        raise InvalidParameterError("nothing to run: give at least one cell or set")
    if args.out is not None:
        prepare_output_file(args.out, "--out")

    def progress(message: str) -> None:
        if not args.no_progress:
            print(f"stress: {message}", file=sys.stderr, flush=True)

    table = run_bed(
        bed,
        sets,
        methods,
        per_item=args.per_item,
        reps=args.reps,
        seed=args.seed,
        progress=progress,
    )
    if table.empty:
        raise InvalidParameterError("no method could fit any crowd (all refused the data)")
    chosen, ranking = choose_verdict(table)
    if args.out is not None:
        table.to_csv(args.out, index=False, float_format="%.6g")
    if args.json:
        document = {
            "cells": [c.name for c in bed],
            "sets": sets,
            "methods": methods,
            "per_item": list(args.per_item),
            "reps": args.reps,
            "seed": args.seed,
            "rows": table.to_dict(orient="records"),
            "ranking": ranking.reset_index().to_dict(orient="records"),
            "chosen": chosen,
            "out": args.out,
        }
        print(json.dumps(document, default=float))
        return 0
    columns = ["set", "per_item", "method", "accuracy", "nll", "ece", "seconds"]
    if args.out is None:
        print(table[columns].to_string(index=False, float_format="%.4f"))
    else:
        print(f"{len(table)} rows written to {args.out}")
    print("\nDefault-verdict rule (smallest worst accuracy shortfall, then mean NLL):")
    print(ranking.to_string(float_format="%.4f"))
    print(f"chosen: {chosen}")
    return 0


def _budgets(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers >= 1, got {text!r}"
        ) from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated integers >= 1, got {text!r}")
    return values


def add_stress_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``stress`` sub-command to ``subparsers`` (of ``build_parser``)."""
    from crowdbudget.cli.common import positive_int

    parser = subparsers.add_parser(
        "stress",
        help="every aggregator on the stress bed and the bundled sets; the default-verdict rule",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    bed = parser.add_mutually_exclusive_group()
    bed.add_argument("--quick", action="store_true", help="four small cells and rte (a check)")
    bed.add_argument("--full", action="store_true", help="the full grid of cells")
    parser.add_argument("--cells", default=None, help="comma-separated cell names")
    parser.add_argument(
        "--sets",
        default=None,
        help="comma-separated bundled sets, 'all' for every one, '' for none (default "
        "rte,temp,wsd: the large sets take minutes per fit for bp, glad and mmsr)",
    )
    parser.add_argument(
        "--methods", default=None, help="comma-separated aggregator ids (default: all)"
    )
    parser.add_argument(
        "--per-item",
        type=_budgets,
        default=[],
        help="also at these labels per item, e.g. 1,2,3,5",
    )
    parser.add_argument("--reps", type=positive_int, default=1, help="replications (default 1)")
    parser.add_argument("--out", default=None, help="CSV of all rows")
    parser.add_argument("--seed", type=int, default=0, help="root random seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    parser.set_defaults(func=cmd_stress)
    return parser
