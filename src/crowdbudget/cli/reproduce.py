"""``crowdbudget reproduce``: a paper's figure or table next to the paper's numbers, with its
PNG plot; ``--list`` names every reproduction and its typical time."""

from __future__ import annotations

import argparse
from typing import Any

from crowdbudget.cli.common import add_common_arguments, emit, note_lines
from crowdbudget.cli.io import prepare_output_folder
from crowdbudget.exceptions import InvalidParameterError


def _list_reproductions(args: argparse.Namespace) -> int:
    """``reproduce --list``: every id, the paper and what it shows, the typical time."""
    import json
    import textwrap

    from crowdbudget.experiments.papers import REPRODUCTIONS, TYPICAL_TIMES

    rows = [
        {
            "id": rid,
            "title": spec.title,
            "quick_time": TYPICAL_TIMES.get(rid, ("?", "?"))[0],
            "full_time": TYPICAL_TIMES.get(rid, ("?", "?"))[1],
        }
        for rid, spec in REPRODUCTIONS.items()
    ]
    if args.json:
        print(json.dumps({"command": "reproduce", "reproductions": rows}, indent=2))
        return 0
    width = max(len(r["id"]) for r in rows)
    times = [f"{r['quick_time']} / {r['full_time']}" for r in rows]
    time_width = max(len("--quick / full"), *(len(t) for t in times))
    text_width = 118 - width - time_width - 4
    print(f"{'id':<{width}}  {'--quick / full':<{time_width}}  paper and what it shows")
    for row, when in zip(rows, times, strict=True):
        lines = textwrap.wrap(row["title"], text_width) or [""]
        print(f"{row['id']:<{width}}  {when:<{time_width}}  {lines[0]}")
        for line in lines[1:]:
            print(f"{'':<{width}}  {'':<{time_width}}  {line}")
    print(
        "\nrun one: crowdbudget reproduce ID [--quick]. Times on a 2-core machine: --quick in "
        "CPU seconds (its wall\ntime alone is at most that), full runs in wall time."
    )
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from crowdbudget.experiments.papers import REPRODUCTIONS
    from crowdbudget.experiments.report import (
        accuracy_table,
        json_document,
        plot_metrics,
        results_records,
    )

    if args.list or args.id is None:
        return _list_reproductions(args)
    spec = REPRODUCTIONS.get(args.id)
    if spec is None:
        raise InvalidParameterError(
            f"unknown reproduction {args.id!r}; available: {', '.join(sorted(REPRODUCTIONS))}"
        )
    out_dir = prepare_output_folder(args.out, "--out")
    if args.data_dir is not None:
        # the reproductions load their sets by name; the user's folder takes precedence
        # (worker processes inherit the environment)
        import os

        from crowdbudget.datasets import list_datasets

        list_datasets(args.data_dir)  # a missing folder is an error before any work
        os.environ["CROWDBUDGET_DATA_DIR"] = str(args.data_dir)
    result = spec.run(
        seed=args.seed, quick=args.quick, n_jobs=args.jobs, progress=not args.no_progress
    )
    plot_path = out_dir / f"{spec.reproduction_id}{'-quick' if args.quick else ''}.png"
    plot_metrics(
        result.summary,
        plot_path,
        n_items=result.n_items,
        metrics=result.metrics,
        title=spec.title,
        paper=result.paper,
        x_label=result.x_label,
    )
    extra_plots = []
    for extra in result.extra_plots:
        extra_path = plot_path.with_name(f"{plot_path.stem}-{extra.name}.png")
        plot_metrics(
            extra.summary,
            extra_path,
            metrics=extra.metrics,
            title=extra.title,
            x_label=extra.x_label,
            log_x=extra.log_x,
        )
        extra_plots.append(str(extra_path))
    records = results_records(result.summary, result.n_items)
    for rec in records:
        if "policy_id" in rec:
            # one summary row per (policy, setting): the label that keeps the settings apart
            # in the text tables becomes "case", and "policy" carries the bare id (DESIGN §6)
            rec["case"] = rec["policy"]
            rec["policy"] = rec.pop("policy_id")
        for metric, values in result.paper.items():
            paper_value = values.get((rec["policy"], rec["budget"]))
            if paper_value is not None:
                rec[f"paper_{metric}"] = paper_value
    document = json_document(
        "reproduce",
        args.seed,
        {"id": spec.reproduction_id, "quick": args.quick, **result.settings},
        records,
        plot=str(plot_path),
        notes=result.notes,
        **({"claims": result.claims} if result.claims else {}),
        **({"extra_plots": extra_plots} if extra_plots else {}),
    )
    reps = result.settings.get("reps")
    blocks = [spec.title + (" [quick]" if args.quick else "")]
    for metric in result.metrics:
        blocks.append(f"{metric.replace('_', ' ')} (mean ± std over {reps} replications)")
        blocks.append(
            accuracy_table(
                result.summary, result.n_items, metric=metric, paper=result.paper.get(metric)
            )
        )
    blocks += result.tables
    blocks += note_lines(result.notes)
    blocks.append(f"plot written to {plot_path}")
    blocks += [f"plot written to {path}" for path in extra_plots]
    text = "\n".join(blocks)
    emit(args, text, document)
    return 0


def add_reproduce_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``reproduce`` sub-command to ``subparsers`` (of ``build_parser``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "reproduce",
        help="reproduce a paper figure or table",
        description="Reproduce a figure or table of the papers; prints the table next to the "
        "paper's numbers and writes a PNG plot.",
    )
    p.add_argument(
        "id", nargs="?", default=None, help="reproduction id, e.g. chen2013-fig2a (see --list)"
    )
    p.add_argument(
        "--list", action="store_true", help="list every reproduction: paper, what, typical time"
    )
    p.add_argument("--quick", action="store_true", help="a small, fast version")
    p.add_argument(
        "--out", default="crowdbudget-results", help="folder for the plots (crowdbudget-results)"
    )
    p.add_argument(
        "--data-dir",
        default=None,
        help="folder of your own data sets, used in place of bundled sets of the same name "
        "(or set CROWDBUDGET_DATA_DIR)",
    )
    add_common_arguments(p)
    p.set_defaults(func=cmd_reproduce)
    return p
