"""``crowdbudget compare``, the main job: policies on a data set over a budget grid (the table
on stdout and, in ``--out``, as ``compare-<data set>.csv`` and ``.md`` beside the PNG plot;
JSON), with notes on the winners and on columns that coincide."""

from __future__ import annotations

import argparse
from typing import Any

from crowdbudget.aggregation.registry import DEFAULT_VERDICT
from crowdbudget.cli.common import add_common_arguments, add_verdict_argument, policy_list
from crowdbudget.cli.io import prepare_output_folder
from crowdbudget.cli.replay import add_data_arguments, dataset_name, load_label_data, run_replay

#: The main job's default policies (those registered are used, in this order).
COMPARE_POLICIES = [
    "uniform",
    "round-robin",
    "kg-random",
    "opt-kg",
    f"opt-kg:verdict={DEFAULT_VERDICT}",  # the default verdict (docs/calibration.md)
    "opt-kg:posterior=one-coin",
]

#: Worker-aware policies rescore every unused pair of the labeling worker after each label, so
#: their cost per label grows with the busiest worker's record count: they are default policies
#: of ``compare`` up to this many recorded labels (RTE: 8,000, about 0.4 ms per label; trec's
#: 88,000 labels with a 7,078-label worker would take minutes per replay).
COMPARE_WORKER_AWARE_MAX_LABELS = 20_000


def _compare_notes(summary: Any, data: Any, left_out: dict[str, str]) -> list[str]:
    """The ``note:`` lines under the compare table: the winner at each budget and its lead
    (with the replications' std), why columns coincide, the default policies left out."""
    notes = []
    winners = []
    for budget, rows in summary.groupby("budget", sort=True):
        ranked = rows.sort_values("accuracy_mean", ascending=False)
        best = ranked.iloc[0]
        if len(ranked) == 1:
            winners.append(f"{budget:g}: {best['policy']}")
            continue
        second = ranked.iloc[1]
        lead = best["accuracy_mean"] - second["accuracy_mean"]
        noise = max(best["accuracy_std"], second["accuracy_std"])
        tied = "" if lead > noise else ", within the std"
        winners.append(
            f"{budget:g}: {best['policy']} +{lead:.4f} over {second['policy']} "
            f"(std {best['accuracy_std']:.4f}/{second['accuracy_std']:.4f}{tied})"
        )
    if winners:
        notes.append(
            "best mean accuracy per budget (lead over the runner-up): " + "; ".join(winners)
        )
    coincide = []
    for budget, rows in summary.groupby("budget", sort=True):
        key = (
            rows["accuracy_mean"].round(10).astype(str)
            + "/"
            + rows["accuracy_std"].round(10).astype(str)
        )
        for _, group in rows.groupby(key):
            if len(group) > 1:
                coincide.append((budget, list(group["policy"]), group.iloc[0]))
    if coincide:
        at_all = [c for c in coincide if c[0] >= data.n_labels]
        other = [c for c in coincide if c[0] < data.n_labels]
        if at_all:
            budget, policies, row = at_all[0]
            notes.append(
                f"at budget {budget:g} = every recorded label, {', '.join(policies)} coincide "
                f"({row['accuracy_mean']:.4f} ± {row['accuracy_std']:.4f}): each buys all "
                "labels, so the same final rule gives the same answers in every replay"
            )
        if other:
            budget, policies, row = other[0]
            more = f" (and at {len(other) - 1} more budget(s))" if len(other) > 1 else ""
            notes.append(
                f"at budget {budget:g}{more} {', '.join(policies)} coincide "
                f"({row['accuracy_mean']:.4f} ± {row['accuracy_std']:.4f}): they bought the "
                "same labels and share the final rule"
            )
    if left_out:
        notes.append(
            "default policies left out: "
            + "; ".join(f"{pid} ({why})" for pid, why in left_out.items())
        )
    return notes


def cmd_compare(args: argparse.Namespace) -> int:
    from crowdbudget.registry import parse_policy
    from crowdbudget.types import Problem

    out_dir = prepare_output_folder(args.out, "--out")
    if args.policies is None or (args.budget is None and args.budget_per_item is None):
        data = load_label_data(args)
    left_out: dict[str, str] = {}
    if args.policies is None:
        # the default policies whose declared needs this data set meets (e.g. KG is binary
        # only), worker-aware ones only up to a size where they stay fast; the others are
        # named in the notes with the reason
        problem = Problem(
            n_items=data.n_items, budget=1, n_classes=data.n_classes, n_workers=data.n_workers
        )
        args.policies = []
        for pid in COMPARE_POLICIES:
            spec = parse_policy(pid)
            refusal = spec.refusal(problem)
            if refusal is not None:
                left_out[pid] = refusal
            elif (
                spec.capabilities.chooses_workers
                and data.n_labels > COMPARE_WORKER_AWARE_MAX_LABELS
            ):
                left_out[pid] = (
                    f"worker-aware policies are defaults up to "
                    f"{COMPARE_WORKER_AWARE_MAX_LABELS:,} recorded labels; this set has "
                    f"{data.n_labels:,} (name it in --policies to run it)"
                )
            else:
                args.policies.append(str(spec))
    if args.budget is None and args.budget_per_item is None:
        # 1..10 labels per item, or ten steps up to every recorded label when the data set
        # has fewer than 10 per item (a replay cannot spend more than was recorded)
        if data.n_labels >= 10 * data.n_items:
            args.budget_per_item = [float(k) for k in range(1, 11)]
        else:
            args.budget = [float(round(data.n_labels * k / 10)) for k in range(1, 11)]
    stem = out_dir / f"compare-{dataset_name(args)}"
    return run_replay(
        args,
        "compare",
        f"{stem}.png",
        notes=lambda summary, data: _compare_notes(summary, data, left_out),
        table_stem=stem,
    )


def add_compare_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``compare`` sub-command to ``subparsers`` (of ``build_parser``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "compare",
        help="the main job: compare policies on a data set over a budget grid (table, PNG, JSON)",
        description="Compare allocation policies on a real data set (default: the bundled RTE "
        "set) over a budget grid (default 1..10 labels per item): prints the accuracy table, "
        "keeps it in --out as compare-<data set>.csv and .md beside the PNG plot "
        "compare-<data set>.png (the data set named by --dataset or the --labels file's "
        "name), and with --json prints one JSON document.",
    )
    add_data_arguments(p, "default rte")
    p.add_argument(
        "--policies",
        type=policy_list,
        default=None,
        help="comma-separated policy ids (default: " + ",".join(COMPARE_POLICIES) + ")",
    )
    p.add_argument(
        "--out",
        default="crowdbudget-results",
        help="folder for the plot and the table files (crowdbudget-results)",
    )
    add_verdict_argument(p)
    add_common_arguments(p)
    p.set_defaults(func=cmd_compare)
    return p
