"""The ``crowdbudget`` command-line tool (DESIGN §6).

Every command has ``--help``, ``--seed`` and ``--json`` (one JSON document on stdout; progress
and logs go to stderr). User errors print one line that says what is wrong and what is
allowed, and exit with status 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from crowdbudget.aggregation.registry import DEFAULT_VERDICT
from crowdbudget.cli_io import (
    add_validation_arguments,
    check_policies_apply,
    prepare_output_file,
    prepare_output_folder,
    whole_budgets,
)
from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error on one line, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def _float_list(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def _policy_list(text: str) -> list[str]:
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise argparse.ArgumentTypeError("expected at least one policy id")
    return ids


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=0, help="root random seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    parser.add_argument(
        "--jobs", type=_positive_int, default=None, help="worker processes (default: all cores)"
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument(
        "--scheduler",
        default=None,
        help="run the campaigns on Dask: 'local' (a local cluster) or tcp://host:port "
        "(same results as without)",
    )


def _budgets(args: argparse.Namespace, n_items: int) -> list[float]:
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


def _emit(args: argparse.Namespace, text: str, document: str) -> None:
    print(document if args.json else text)


def cmd_simulate(args: argparse.Namespace) -> int:
    from crowdbudget.experiments.report import (
        accuracy_table,
        json_document,
        plot_accuracy,
        results_records,
    )
    from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment

    if args.plot:
        prepare_output_file(args.plot, "--plot")
    if args.prior is None:
        a, b = 1.0, 1.0
    else:
        if len(args.prior) != 2 or min(args.prior) <= 0:
            raise InvalidParameterError(
                f"--prior takes two numbers a,b > 0 (Beta(a, b)), got {args.prior}"
            )
        a, b = args.prior
    env = SyntheticBernoulliEnvironment(
        args.items, prior=(b, a), thresholds=args.threshold
    )  # columns: class 0 (b), class 1 (a)
    budgets = _budgets(args, args.items)
    result = _run_policies(args, env, budgets)
    settings = {
        "n_items": args.items,
        "n_classes": args.classes,
        "prior": [a, b],
        "threshold": args.threshold,
        "workers": "noiseless",
        "mode": args.mode,
        "policies": args.policies,
        "budgets": sorted(set(budgets)),
        "reps": args.reps,
    }
    if args.plot:
        plot_accuracy(
            result.summary,
            args.plot,
            n_items=args.items,
            title=f"simulate: K={args.items}, Beta({a:g},{b:g}), {args.reps} reps",
        )
    table = accuracy_table(result.summary, args.items)
    document = json_document(
        "simulate", args.seed, settings, results_records(result.summary, args.items)
    )
    text = f"accuracy (mean ± std over {args.reps} replications)\n{table}"
    if args.plot:
        text += f"\nplot written to {args.plot}"
    _emit(args, text, document)
    return 0


def _load_label_data(args: argparse.Namespace) -> Any:
    """The data set named by ``--dataset`` or read from ``--labels``/``--gold``."""
    from crowdbudget.datasets import load_dataset, read_labels_csv

    if args.labels is not None:
        if args.dataset is not None:
            raise InvalidParameterError("give either --dataset or --labels, not both")
        return read_labels_csv(
            args.labels, args.gold, classes=args.classes, duplicates=args.duplicates or "error"
        )
    if args.gold is not None:
        raise InvalidParameterError("--gold needs --labels (bundled data sets carry their gold)")
    return load_dataset(
        args.dataset or "rte",
        data_dir=args.data_dir,
        duplicates=args.duplicates,
        classes=args.classes,
    )


def _gold_note(data: Any) -> str:
    """How many gold tasks the accuracy counts, and those it cannot (no labels)."""
    missing = int(data.extra.get("gold_without_labels", 0))
    text = f"{int(data.gold_mask.sum())} gold tasks"
    if missing:
        examples = ", ".join(data.extra.get("gold_without_labels_examples", []))
        text += f"; {missing} more gold tasks have no labels and are not counted (e.g. {examples})"
    return text


#: policies whose comparison needs the quantity–quality metrics (Li et al. 2016 §4.1)
QUALITY_POLICIES = ("requallo", "label-uncertainty")
QUALITY_TABLES = [
    ("quantity", "items with at least 3 labels"),
    ("correct", "labeled items correct"),
    ("accuracy_labeled", "accuracy among labeled items"),
    ("spent", "budget spent"),
]


def _run_policies(args: argparse.Namespace, env: Any, budgets: Any, metrics: Any = None) -> Any:
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
    )


def _run_replay(
    args: argparse.Namespace,
    command: str,
    plot_path: str | None,
    left_out: dict[str, str] | None = None,
) -> int:
    from crowdbudget.experiments.metrics import quality_metrics
    from crowdbudget.experiments.report import (
        accuracy_table,
        json_document,
        plot_metrics,
        results_records,
    )
    from crowdbudget.registry import parse_policy
    from crowdbudget.simulation.replay import ReplayEnvironment
    from crowdbudget.types import Problem

    data = _load_label_data(args)
    env = ReplayEnvironment.from_label_data(data)
    budgets = _budgets(args, data.n_items)
    check_policies_apply(
        args.policies,
        # a two-item stand-in of the run's problem: what a policy refuses in reset is the
        # class count or the worker model, not the size (and a small reset stays cheap)
        Problem(n_items=2, budget=1, n_classes=data.n_classes, n_workers=data.n_workers),
        f"data set {data.name!r} ({data.n_classes} classes: {', '.join(data.classes)})",
    )
    # quantity–quality metrics (Li et al. §4.1) when asked, or when a policy that targets them
    # is compared (Requallo stops early and leaves items unlabeled: accuracy alone misleads)
    quality = getattr(args, "quality", False) or any(
        parse_policy(pid).id in QUALITY_POLICIES for pid in args.policies
    )
    result = _run_policies(args, env, budgets, quality_metrics if quality else None)
    settings = {
        "dataset": data.name,
        "n_items": data.n_items,
        "n_workers": data.n_workers,
        "n_labels": data.n_labels,
        "n_classes": data.n_classes,
        "gold_items": int(data.gold_mask.sum()),
        "gold_items_without_labels": int(data.extra.get("gold_without_labels", 0)),
        "mode": args.mode,
        "policies": args.policies,
        "budgets": sorted(set(budgets)),
        "reps": args.reps,
    }
    title = (
        f"{command}: {data.name} ({data.n_items} items, {data.n_labels} labels), {args.reps} reps"
    )
    if plot_path:
        plot_metrics(result.summary, plot_path, n_items=data.n_items, title=title)
    records = [
        {"dataset": data.name, **rec} for rec in results_records(result.summary, data.n_items)
    ]
    notes = _compare_notes(result.summary, data, left_out or {}) if command == "compare" else []
    # issue 15's fairness check: the same runs with the class codes / worker ids permuted
    fairness_rows: list[dict[str, Any]] = []
    fairness_lines: list[str] = []
    for flag, permutation in (("permute_classes", "classes"), ("permute_workers", "workers")):
        if not getattr(args, flag, False):
            continue
        permuted = data.permuted(
            classes=permutation == "classes", workers=permutation == "workers", seed=args.seed
        )
        again = _run_policies(args, ReplayEnvironment.from_label_data(permuted), budgets)
        rows, lines = _fairness(result.summary, again.summary, args.reps, permutation)
        fairness_rows += rows
        fairness_lines += lines

    document = json_document(
        command,
        args.seed,
        settings,
        records,
        **({"plot": plot_path} if plot_path else {}),
        **({"notes": notes} if notes else {}),
        **({"fairness": fairness_rows} if fairness_rows else {}),
    )
    table = accuracy_table(result.summary, data.n_items)
    extra = list(fairness_lines)
    if quality:
        shown = result.summary.copy()
        # Li et al. write 0.5 where nothing is labeled ("uninformative"; the JSON keeps it):
        # the text table shows — there instead of a number that reads like a coin
        nothing = shown["quantity_mean"] == 0
        shown.loc[nothing, ["accuracy_labeled_mean", "accuracy_labeled_std"]] = float("nan")
        for metric, what in QUALITY_TABLES:
            extra += [f"{what} (mean ± std)", accuracy_table(shown, data.n_items, metric)]
        if nothing.any():
            extra.append("— : no item reached 3 labels (Li et al. report 0.5, uninformative)")
    text = "\n".join(
        [
            title,
            f"accuracy on the {_gold_note(data)} (mean ± std over {args.reps} replications)",
            table,
            *extra,
            *_note_lines(notes),
            *([f"plot written to {plot_path}"] if plot_path else []),
        ]
    )
    _emit(args, text, document)
    return 0


def _fairness(
    original: Any, permuted: Any, reps: int, what: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """Accuracy before and after permuting the ``what`` codes, per policy and budget: JSON
    rows and text lines. A change beyond two standard errors of the difference (the two
    runs' replication stds, ``sqrt(s1² / n + s2² / n)``) is flagged: the policy or its
    verdict depends on the coding (issue 15)."""
    import math

    key = ["policy", "budget"]
    merged = original[[*key, "accuracy_mean", "accuracy_std"]].merge(
        permuted[[*key, "accuracy_mean", "accuracy_std"]], on=key, suffixes=("", "_permuted")
    )
    rows: list[dict[str, Any]] = []
    lines = [
        f"fairness: accuracy with the {what} permuted (Δ = permuted − original; "
        "* beyond 2 standard errors: the result depends on the coding)",
        f"{'policy':<34} {'budget':>8} {'original':>9} {'permuted':>9} {'Δ':>8}",
    ]
    for record in merged.itertuples(index=False):
        delta = record.accuracy_mean_permuted - record.accuracy_mean
        error = math.hypot(record.accuracy_std, record.accuracy_std_permuted) / math.sqrt(reps)
        flagged = bool(abs(delta) > 2 * error + 1e-12)
        rows.append(
            {
                "permuted": what,
                "policy": record.policy,
                "budget": float(record.budget),
                "accuracy": float(record.accuracy_mean),
                "accuracy_permuted": float(record.accuracy_mean_permuted),
                "difference": float(delta),
                "standard_error": error,
                "beyond_two_standard_errors": flagged,
            }
        )
        lines.append(
            f"{record.policy:<34} {record.budget:>8g} {record.accuracy_mean:>9.4f} "
            f"{record.accuracy_mean_permuted:>9.4f} {delta:>+8.4f}{' *' if flagged else ''}"
        )
    return rows, lines


def cmd_replay(args: argparse.Namespace) -> int:
    if args.plot:
        prepare_output_file(args.plot, "--plot")
    return _run_replay(args, "replay", args.plot)


#: The main job's default policies (those registered are used, in this order).
COMPARE_POLICIES = [
    "uniform",
    "round-robin",
    "kg-random",
    "opt-kg",
    f"opt-kg:final={DEFAULT_VERDICT}",  # the default verdict (docs/calibration.md)
    "opt-kg:workers=one-coin",
]

#: Worker-aware policies rescore every unused pair of the labeling worker after each label, so
#: their cost per label grows with the busiest worker's record count: they are default policies
#: of ``compare`` up to this many recorded labels (RTE: 8,000, about 0.4 ms per label; trec's
#: 88,000 labels with a 7,078-label worker would take minutes per replay).
COMPARE_WORKER_AWARE_MAX_LABELS = 20_000


def _note_lines(notes: list[str], width: int = 118) -> list[str]:
    """``note:`` lines wrapped to ``width`` columns (continuations indented)."""
    import textwrap

    lines: list[str] = []
    for note in notes:
        lines += textwrap.wrap(
            f"note: {note}", width=width, subsequent_indent="      ", break_on_hyphens=False
        )
    return lines


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
        data = _load_label_data(args)
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
    name = args.dataset or (Path(args.labels).stem if args.labels else "rte")
    plot_path = str(out_dir / f"compare-{name}.png")
    return _run_replay(args, "compare", plot_path, left_out=left_out)


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
    blocks += _note_lines(result.notes)
    blocks.append(f"plot written to {plot_path}")
    blocks += [f"plot written to {path}" for path in extra_plots]
    text = "\n".join(blocks)
    _emit(args, text, document)
    return 0


def cmd_policies(args: argparse.Namespace) -> int:
    import json

    from crowdbudget.registry import POLICIES, describe_entry

    aliases = POLICIES.aliases()
    if args.name is not None:
        # one policy's parameter table and capabilities (the id may carry parameters)
        spec = POLICIES.spec(args.name)
        row = describe_entry(POLICIES.entry(spec.id))
        row["capabilities"] = spec.capabilities.names()
        if args.json:
            print(json.dumps({"command": "policies", "seed": None, "results": [row]}, indent=2))
            return 0
        print(f"{spec}: {row['summary']}")
        if row["paper"]:
            print(f"paper: {row['paper']}")
        print("capabilities: " + (", ".join(row["capabilities"]) or "none"))
        for p in row["parameters"]:
            allowed = (
                f" one of {', '.join(p['choices'])}"
                if "choices" in p
                else (" in " + POLICIES.entry(spec.id).params[p["name"]].range_text)
                if "range" in p
                else ""
            )
            default = f", default {p['default']}" if "default" in p else ""
            server = "" if p["network_settable"] else " (server setting: not over the API)"
            print(f"  {p['name']}: {p['type']}{allowed}{default} -- {p['doc']}{server}")
        print("  final: aggregator id giving the final labels (every policy)")
        return 0
    rows = [describe_entry(entry) for _, entry in sorted(POLICIES.entries().items())]
    if args.json:
        document = {"command": "policies", "seed": None, "results": rows, "aliases": aliases}
        print(json.dumps(document, indent=2))
    else:
        width = max(len(r["id"]) for r in rows)
        for r in rows:
            params = ", ".join(p["name"] for p in r["parameters"])
            caps = ", ".join(r["capabilities"])
            print(
                f"{r['id']:<{width}}  {r['summary']}"
                + (f"  [{params}]" if params else "")
                + (f"  ({caps})" if caps else "")
            )
        print(
            "\nEvery id also takes final=<aggregator> (e.g. opt-kg:final=ds): the same "
            "allocation, final labels by that aggregator (mv, wmv, ds, one-coin-em, bp, kos-mean)."
        )
        if aliases:
            print("aliases: " + ", ".join(f"{a} = {t}" for a, t in sorted(aliases.items())))
        print("--json lists every parameter's type, default, range, doc and network_settable.")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``crowdbudget`` command."""
    from crowdbudget import __version__

    parser = _Parser(
        prog="crowdbudget",
        description="Budget-optimal crowdsourced labeling: allocation policies, simulations, "
        "paper reproductions.",
    )
    parser.add_argument("--version", action="version", version=f"crowdbudget {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    sim = sub.add_parser(
        "simulate",
        help="run policies on a synthetic world (noiseless workers, θ ~ Beta prior)",
        description="Run allocation policies on synthetic worlds: θ_i ~ Beta(a, b), noiseless "
        "workers (label ~ Bernoulli(θ_i)), truth 1{θ_i >= d}. Every policy faces the same "
        "worlds (common random numbers).",
    )
    sim.add_argument("--items", type=_positive_int, required=True, help="number of items K")
    sim.add_argument(
        "--classes", type=int, choices=[2], default=2, help="number of classes (only 2 for now)"
    )
    sim.add_argument(
        "--prior", type=_float_list, default=None, help="Beta prior a,b of θ (default 1,1)"
    )
    sim.add_argument("--threshold", type=float, default=0.5, help="threshold d (default 0.5)")
    sim.add_argument(
        "--policies", type=_policy_list, required=True, help="comma-separated policy ids"
    )
    sim.add_argument("--budget", type=_float_list, default=None, help="absolute budgets T1,T2,…")
    sim.add_argument(
        "--budget-per-item", type=_float_list, default=None, help="budgets as multiples of K"
    )
    sim.add_argument("--reps", type=_positive_int, default=20, help="replications (default 20)")
    sim.add_argument(
        "--mode", choices=["push", "pull"], default="push", help="interaction mode (push)"
    )
    sim.add_argument("--plot", default=None, help="write a PNG plot of accuracy to this path")
    _common(sim)
    sim.set_defaults(func=cmd_simulate)

    rep = sub.add_parser(
        "reproduce",
        help="reproduce a paper figure or table",
        description="Reproduce a figure or table of the papers; prints the table next to the "
        "paper's numbers and writes a PNG plot.",
    )
    rep.add_argument(
        "id", nargs="?", default=None, help="reproduction id, e.g. chen2013-fig2a (see --list)"
    )
    rep.add_argument(
        "--list", action="store_true", help="list every reproduction: paper, what, typical time"
    )
    rep.add_argument("--quick", action="store_true", help="a small, fast version")
    rep.add_argument(
        "--out", default="crowdbudget-results", help="folder for the plots (crowdbudget-results)"
    )
    rep.add_argument(
        "--data-dir",
        default=None,
        help="folder of your own data sets, used in place of bundled sets of the same name "
        "(or set CROWDBUDGET_DATA_DIR)",
    )
    _common(rep)
    rep.set_defaults(func=cmd_reproduce)

    def data_arguments(p: argparse.ArgumentParser, default_hint: str) -> None:
        p.add_argument(
            "--dataset", default=None, help=f"data set name ({default_hint}; see `datasets`)"
        )
        p.add_argument("--labels", default=None, help="labels CSV with columns task,worker,label")
        p.add_argument("--gold", default=None, help="gold CSV with columns task,label")
        p.add_argument(
            "--data-dir",
            default=None,
            help="folder of your own data sets: DIR/NAME/labels.csv and gold.csv for "
            "--dataset NAME (or set CROWDBUDGET_DATA_DIR)",
        )
        add_validation_arguments(p)
        p.add_argument("--budget", type=_float_list, default=None, help="absolute budgets T1,T2,…")
        p.add_argument(
            "--budget-per-item", type=_float_list, default=None, help="budgets as multiples of K"
        )
        p.add_argument("--reps", type=_positive_int, default=20, help="replications (default 20)")
        p.add_argument(
            "--mode", choices=["push", "pull"], default="push", help="interaction mode (push)"
        )
        p.add_argument(
            "--quality",
            action="store_true",
            help="also report Li et al.'s quantity (items with 3+ labels), correct, accuracy "
            "among labeled items and budget spent (automatic with requallo or "
            "label-uncertainty)",
        )
        p.add_argument(
            "--permute-classes",
            action="store_true",
            help="fairness check: rerun with the class codes shifted (c -> c+1 mod L; the "
            "answers and the truth unchanged) and report the change of accuracy",
        )
        p.add_argument(
            "--permute-workers",
            action="store_true",
            help="fairness check: rerun with the worker ids shuffled and report the change",
        )

    rpl = sub.add_parser(
        "replay",
        help="run policies on a real data set by replaying its recorded labels",
        description="Replay a real data set (Chen et al. 2013 §7.2): a label exists only if the "
        "data set holds it and is used at most once; an item-only policy gets the label of a "
        "random unused worker of the chosen item. Accuracy is measured on the gold items.",
    )
    data_arguments(rpl, "default rte")
    rpl.add_argument(
        "--policies", type=_policy_list, required=True, help="comma-separated policy ids"
    )
    rpl.add_argument("--plot", default=None, help="write a PNG plot of accuracy to this path")
    _common(rpl)
    rpl.set_defaults(func=cmd_replay)

    cmp_ = sub.add_parser(
        "compare",
        help="the main job: compare policies on a data set over a budget grid (table, PNG, JSON)",
        description="Compare allocation policies on a real data set (default: the bundled RTE "
        "set) over a budget grid (default 1..10 labels per item): prints the accuracy table, "
        "writes a PNG plot, and with --json one JSON document.",
    )
    data_arguments(cmp_, "default rte")
    cmp_.add_argument(
        "--policies",
        type=_policy_list,
        default=None,
        help="comma-separated policy ids (default: " + ",".join(COMPARE_POLICIES) + ")",
    )
    cmp_.add_argument(
        "--out", default="crowdbudget-results", help="folder for the plot (crowdbudget-results)"
    )
    _common(cmp_)
    cmp_.set_defaults(func=cmd_compare)

    dsets = sub.add_parser(
        "datasets",
        help="list the data sets, or describe one",
        description="List the data sets (all bundled in the package, plus your own in --data-dir), "
        "or describe one (counts, classes, gold).",
    )
    dsets.add_argument("name", nargs="?", default=None, help="a data set to describe")
    dsets.add_argument(
        "--data-dir",
        default=None,
        help="folder of your own data sets: DIR/NAME/labels.csv and gold.csv (or "
        "features.csv and gold.csv); or set CROWDBUDGET_DATA_DIR",
    )
    dsets.add_argument(
        "--duplicates",
        choices=["error", "keep", "first", "last"],
        default=None,
        help="repeated (task, worker) rows when describing a set (see compare --help)",
    )
    dsets.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    dsets.set_defaults(func=cmd_datasets)

    from crowdbudget.cli_serve import add_serve_parser

    add_serve_parser(sub)

    from crowdbudget.cli_aggregate import add_aggregate_parser
    from crowdbudget.cli_bound import add_bound_parser
    from crowdbudget.cli_labelstudio import add_labelstudio_parser

    add_bound_parser(sub)
    add_aggregate_parser(sub)
    add_labelstudio_parser(sub)

    pol = sub.add_parser(
        "policies", help="list the registered policy ids, or describe one's parameters"
    )
    pol.add_argument(
        "name", nargs="?", default=None, help="a policy id (with parameters) to describe"
    )
    pol.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    pol.set_defaults(func=cmd_policies)
    _add_examples(sub.choices)
    return parser


#: The examples that end each command's ``--help`` (commands added later get theirs here too).
HELP_EXAMPLES = {
    "simulate": [
        "crowdbudget simulate --items 50 --policies uniform,opt-kg --budget-per-item 2,6,10",
        "crowdbudget simulate --items 50 --policies kg-random --budget 500 --reps 100 --json",
    ],
    "reproduce": [
        "crowdbudget reproduce --list",
        "crowdbudget reproduce chen2013-fig2a --quick --out results/",
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
    "aggregate": [
        "crowdbudget aggregate my_labels.csv --method dawid-skene --out results/labels.csv",
        "crowdbudget aggregate my_labels.csv --method mv --gold my_gold.csv --json",
    ],
    "bound": [
        "crowdbudget bound --items 100 --budget 120 --arrival-rate 0.1 --completion-rate 0.4",
    ],
    "labelstudio": [
        "crowdbudget labelstudio serve-webhook --url http://127.0.0.1:8080 --token-file t "
        "--project 1 --budget 600",
        "crowdbudget labelstudio export --url http://127.0.0.1:8080 --token-file t --project 1",
    ],
}


def _add_examples(commands: Mapping[str, argparse.ArgumentParser]) -> None:
    """End every command's ``--help`` with its examples (kept as written: raw epilog)."""
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run the command; user errors → one line on stderr and exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
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
    except KeyboardInterrupt:
        print("crowdbudget: interrupted", file=sys.stderr)
        return 130


def _run() -> Any:  # pragma: no cover - console entry
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    _run()
