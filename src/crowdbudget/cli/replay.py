"""``crowdbudget replay``: policies on a real data set by replaying its recorded labels, and
what ``replay`` and ``compare`` share: the data set options (:func:`add_data_arguments`), its
loading, the run and its report (:func:`run_replay`, with the quantity–quality metrics and
the fairness check under permuted class codes, worker ids or item order)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crowdbudget.cli.common import (
    add_budget_arguments,
    add_common_arguments,
    add_verdict_argument,
    default_verdicts,
    emit,
    label_budgets,
    note_lines,
    policy_list,
    run_policies,
    verdict_note,
)
from crowdbudget.cli.control import add_control_arguments
from crowdbudget.cli.io import (
    add_validation_arguments,
    check_policies_apply,
    prepare_plot_file,
    write_files,
)
from crowdbudget.exceptions import InvalidParameterError


def add_data_arguments(p: argparse.ArgumentParser, default_hint: str) -> None:
    """The data set, budget, replication, mode and report options of ``replay`` and
    ``compare``."""
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
    add_budget_arguments(p, "budgets in labels, T1,T2,… (e.g. 800,1600)")
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
    p.add_argument(
        "--permute-items",
        action="store_true",
        help="fairness check: rerun with the item order reversed (item i becomes n-1-i; "
        "the answers and the truth unchanged) and report the change",
    )


def dataset_name(args: argparse.Namespace) -> str:
    """The name a run's tables and output files give its data set: ``--dataset``, the file
    stem of ``--labels`` (``my_labels.csv`` → ``my_labels``), else the default ``rte``."""
    if args.labels is not None:
        return Path(args.labels).name.removesuffix(".gz").rsplit(".", 1)[0] or "labels"
    return str(args.dataset or "rte")


def load_label_data(args: argparse.Namespace) -> Any:
    """The data set named by ``--dataset`` or read from ``--labels``/``--gold`` (named by
    :func:`dataset_name`)."""
    from crowdbudget.datasets import load_dataset, read_labels_csv

    if args.labels is not None:
        if args.dataset is not None:
            raise InvalidParameterError("give either --dataset or --labels, not both")
        data = read_labels_csv(
            args.labels,
            args.gold,
            classes=args.classes,
            duplicates=args.duplicates or "error",
            name=dataset_name(args),
        )
        if args.gold is None:  # the runs are scored against gold: say which flag gives it
            raise InvalidParameterError(
                f"--labels {args.labels} needs --gold FILE (a CSV with columns task,label) "
                "to score the policies against"
            )
        return data
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


def round_robin_notes(summary: Any, n_classes: int) -> list[str]:
    """A ``note:`` on round-robin's zig-zag between budgets, when the table shows one: with
    two classes, an even number of labels per item allows a tie (which the final rule sends to
    one class) and an odd number does not, so its accuracy drops at every even count
    (docs/reproductions.md, Chen et al. Fig. 3(a))."""
    if n_classes != 2:
        return []
    notes = []
    for pid in dict.fromkeys(summary["policy"]):
        if str(pid).split(":", 1)[0] != "round-robin":
            continue
        rows = summary[summary["policy"] == pid].sort_values("budget")
        means = rows["accuracy_mean"].to_numpy(dtype=float)
        budgets = rows["budget"].to_numpy(dtype=float)
        drops = [k for k in range(1, len(means)) if means[k] < means[k - 1]]
        if not drops:
            continue
        shown = " / ".join(f"{m:.4f}" for m in means[: min(len(means), 4)])
        at = " / ".join(f"{b:g}" for b in budgets[: min(len(means), 4)])
        notes.append(
            f"{pid} zig-zags ({shown} at budgets {at}): it gives every item the same number "
            "of labels in turn, so at an even number per item many items are tied votes, which "
            "the final rule sends to one class, and at an odd number none is; not a bug "
            "(docs/reproductions.md, Fig. 3(a) of Chen et al.)"
        )
    return notes


def run_replay(
    args: argparse.Namespace,
    command: str,
    plot_path: str | None,
    notes: Callable[[Any, Any], list[str]] | None = None,
    table_stem: Path | None = None,
) -> int:
    """Run ``args.policies`` on the data set of ``args`` and print the report of ``command``;
    ``notes(summary, data)`` gives the ``note:`` lines under the table (``compare``'s). The
    report is printed first, then the files are written: the plot at ``plot_path`` and, with
    ``table_stem``, the table as ``<table_stem>.csv`` (the JSON rows) and ``.md``."""
    from crowdbudget.experiments.metrics import quality_metrics
    from crowdbudget.experiments.report import accuracy_table, json_document, results_records
    from crowdbudget.registry import parse_policy
    from crowdbudget.simulation.replay import ReplayEnvironment
    from crowdbudget.types import Problem

    data = load_label_data(args)
    env = ReplayEnvironment.from_label_data(data)
    budgets = label_budgets(args, data.n_items)
    check_policies_apply(
        args.policies,
        # a two-item stand-in of the run's problem: what a policy refuses in reset is the
        # class count or the worker model, not the size (and a small reset stays cheap)
        Problem(n_items=2, budget=1, n_classes=data.n_classes, n_workers=data.n_workers),
        f"data set {data.name!r} ({data.n_classes} classes: {', '.join(data.classes)})",
        args.verdict,
        args.verdicts,
    )
    # quantity–quality metrics (Li et al. §4.1) when asked, or when a policy that targets them
    # is compared (Requallo stops early and leaves items unlabeled: accuracy alone misleads)
    quality = getattr(args, "quality", False) or any(
        parse_policy(pid).id in QUALITY_POLICIES for pid in args.policies
    )
    result = run_policies(args, env, budgets, quality_metrics if quality else None)
    defaulted = default_verdicts(args.policies, args.verdict)
    settings = _replay_settings(args, data, budgets, defaulted)
    title = (
        f"{command}: {data.name} ({data.n_items} items, {data.n_labels} labels), {args.reps} reps"
    )
    records = [
        {"dataset": data.name, **rec} for rec in results_records(result.summary, data.n_items)
    ]
    note_texts = notes(result.summary, data) if notes is not None else []
    note_texts += round_robin_notes(result.summary, data.n_classes)
    fairness_rows, fairness_lines = _fairness_checks(args, data, budgets, result.summary)
    tables = (
        {"table_csv": f"{table_stem}.csv", "table_markdown": f"{table_stem}.md"}
        if table_stem is not None
        else {}
    )
    document = json_document(
        command,
        args.seed,
        settings,
        records,
        **({"plot": plot_path} if plot_path else {}),
        **tables,
        **({"notes": note_texts} if note_texts else {}),
        **({"fairness": fairness_rows} if fairness_rows else {}),
    )
    table = accuracy_table(result.summary, data.n_items)
    extra = list(fairness_lines)
    if quality:
        extra += _quality_tables(result.summary, data.n_items)
    caption = _replay_caption(args, data)
    text = "\n".join(
        [title, caption, table, *extra, *verdict_note(defaulted), *note_lines(note_texts)]
    )
    emit(args, text, document)
    _write_replay_files(
        args, result.summary, data.n_items, records, title, caption, note_texts, plot_path, tables
    )
    return 0


def _replay_settings(
    args: argparse.Namespace, data: Any, budgets: list[float], defaulted: dict[str, str]
) -> dict[str, Any]:
    """The ``settings`` of :func:`run_replay`'s JSON document: the data set's sizes, the run's
    options, and the verdicts (``--verdicts``, and ``defaulted``: those given by default)."""
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
    if args.verdicts:
        settings["verdicts"] = args.verdicts
    if defaulted:
        settings["default_verdicts"] = defaulted
    return settings


def _fairness_checks(
    args: argparse.Namespace, data: Any, budgets: list[float], summary: Any
) -> tuple[list[dict[str, Any]], list[str]]:
    """The fairness check of :func:`run_replay`: the same runs with the class codes / worker
    ids / item order permuted (``--permute-*``, in that order, each drawn from ``args.seed``),
    compared with ``summary`` by :func:`_fairness`: its JSON rows and text lines, concatenated
    (empty when no permutation is asked)."""
    from crowdbudget.simulation.replay import ReplayEnvironment

    fairness_rows: list[dict[str, Any]] = []
    fairness_lines: list[str] = []
    for flag, permutation in (
        ("permute_classes", "classes"),
        ("permute_workers", "workers"),
        ("permute_items", "items"),
    ):
        if not getattr(args, flag, False):
            continue
        permuted = data.permuted(
            classes=permutation == "classes",
            workers=permutation == "workers",
            items=permutation == "items",
            seed=args.seed,
        )
        again = run_policies(args, ReplayEnvironment.from_label_data(permuted), budgets)
        rows, lines = _fairness(summary, again.summary, args.reps, permutation)
        fairness_rows += rows
        fairness_lines += lines
    return fairness_rows, fairness_lines


def _quality_tables(summary: Any, n_items: int) -> list[str]:
    """The text tables of the quantity–quality metrics (:data:`QUALITY_TABLES`), each under
    its heading, and a legend line when some cell shows — (nothing labeled)."""
    from crowdbudget.experiments.report import accuracy_table

    lines: list[str] = []
    shown = summary.copy()
    # Li et al. write 0.5 where nothing is labeled ("uninformative"; the JSON keeps it):
    # the text table shows — there instead of a number that reads like a coin
    nothing = shown["quantity_mean"] == 0
    shown.loc[nothing, ["accuracy_labeled_mean", "accuracy_labeled_std"]] = float("nan")
    for metric, what in QUALITY_TABLES:
        lines += [f"{what} (mean ± std)", accuracy_table(shown, n_items, metric)]
    if nothing.any():
        lines.append("— : no item reached 3 labels (Li et al. report 0.5, uninformative)")
    return lines


def _replay_caption(args: argparse.Namespace, data: Any) -> str:
    """The caption of :func:`run_replay`'s accuracy table: what is scored, over how many
    replications, and the control tasks left out."""
    caption = f"accuracy on the {_gold_note(data)} (mean ± std over {args.reps} replications)"
    control = getattr(args, "control", None)
    if control is not None:
        caption += (
            f"; control tasks ({control.n_items or control.fraction} of the gold items, paid, "
            "not scored) are left out"
        )
    return caption


def _write_replay_files(
    args: argparse.Namespace,
    summary: Any,
    n_items: int,
    records: list[dict[str, Any]],
    title: str,
    caption: str,
    note_texts: list[str],
    plot_path: str | None,
    tables: dict[str, str],
) -> None:
    """Write :func:`run_replay`'s files: the table (``tables``: its ``.csv`` of ``records``
    and ``.md``, when given) and the plot at ``plot_path`` (when given)."""
    from crowdbudget.experiments.report import (
        markdown_table,
        plot_metrics,
        results_markdown,
        write_results_csv,
    )

    files: list[tuple[str, Path, Callable[[Path], object]]] = []
    if tables:
        markdown = results_markdown(
            title, [(caption, markdown_table(summary, n_items))], note_texts
        )
        files += [
            ("table", Path(tables["table_csv"]), lambda path: write_results_csv(records, path)),
            (
                "table",
                Path(tables["table_markdown"]),
                lambda path: path.write_text(markdown, encoding="utf-8"),
            ),
        ]
    if plot_path:
        files.append(
            (
                "plot",
                Path(plot_path),
                lambda path: plot_metrics(summary, path, n_items=n_items, title=title),
            )
        )
    write_files(files, announce=not args.json)


def _fairness(
    original: Any, permuted: Any, reps: int, what: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """Accuracy before and after permuting the ``what`` codes, per policy and budget: JSON
    rows and text lines. A change beyond two standard errors of the difference (the two
    runs' replication stds, ``sqrt(s1² / n + s2² / n)``) is flagged: the policy or its
    verdict depends on the coding."""
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
    from crowdbudget.cli.control import control_tasks

    args.control = control_tasks(args)
    if args.plot:
        prepare_plot_file(args.plot, "--plot")
    return run_replay(args, "replay", args.plot)


def add_replay_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``replay`` sub-command to ``subparsers`` (of ``build_parser``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "replay",
        help="run policies on a real data set by replaying its recorded labels",
        description="Replay a real data set (Chen et al. 2013 §7.2): a label exists only if the "
        "data set holds it and is used at most once; an item-only policy gets the label of a "
        "random unused worker of the chosen item. Accuracy is measured on the gold items.",
    )
    add_data_arguments(p, "default rte")
    p.add_argument("--policies", type=policy_list, required=True, help="comma-separated policy ids")
    p.add_argument("--plot", default=None, help="write a PNG plot of accuracy to this path")
    add_control_arguments(p)
    add_verdict_argument(p)
    add_common_arguments(p)
    p.set_defaults(func=cmd_replay)
    return p
