"""The ``crowdbudget`` command-line tool (DESIGN §6).

Every command has ``--help``, ``--seed`` and ``--json`` (one JSON document on stdout; progress
and logs go to stderr). User errors print one line that says what is wrong and what is
allowed, and exit with status 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from crowdbudget.aggregation.registry import DEFAULT_VERDICT
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
    if args.budget is not None and args.budget_per_item is not None:
        raise InvalidParameterError("give either --budget or --budget-per-item, not both")
    if args.budget is not None:
        budgets = list(args.budget)
    elif args.budget_per_item is not None:
        budgets = [r * n_items for r in args.budget_per_item]
    else:
        raise InvalidParameterError("a budget is needed: --budget T1,T2 or --budget-per-item r1,r2")
    for b in budgets:
        if not b > 0:
            raise InvalidParameterError(f"budgets must be > 0, got {b:g}")
    return budgets


def _emit(args: argparse.Namespace, text: str, document: str) -> None:
    print(document if args.json else text)


def cmd_simulate(args: argparse.Namespace) -> int:
    from crowdbudget.experiments.report import (
        accuracy_table,
        json_document,
        plot_accuracy,
        results_records,
    )
    from crowdbudget.experiments.runner import run_experiment
    from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment

    if args.classes != 2:
        raise InvalidParameterError(
            f"--classes {args.classes} is not supported by simulate yet; allowed: 2"
        )
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
    result = run_experiment(
        args.policies,
        env,
        budgets,
        args.reps,
        seed=args.seed,
        n_jobs=args.jobs,
        progress=not args.no_progress,
        mode=args.mode,
    )
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
        return read_labels_csv(args.labels, args.gold)
    if args.gold is not None:
        raise InvalidParameterError("--gold needs --labels (bundled data sets carry their gold)")
    return load_dataset(args.dataset or "rte", data_dir=args.data_dir)


#: policies whose comparison needs the quantity–quality metrics (Li et al. 2016 §4.1)
QUALITY_POLICIES = ("requallo", "label-uncertainty")
QUALITY_TABLES = [
    ("quantity", "items with at least 3 labels"),
    ("correct", "labeled items correct"),
    ("accuracy_labeled", "accuracy among labeled items"),
    ("spent", "budget spent"),
]


def _run_replay(args: argparse.Namespace, command: str, plot_path: str | None) -> int:
    from crowdbudget.experiments.metrics import quality_metrics
    from crowdbudget.experiments.report import (
        accuracy_table,
        json_document,
        plot_metrics,
        results_records,
    )
    from crowdbudget.experiments.runner import run_experiment
    from crowdbudget.registry import parse_policy
    from crowdbudget.simulation.replay import ReplayEnvironment

    data = _load_label_data(args)
    env = ReplayEnvironment.from_label_data(data)
    budgets = _budgets(args, data.n_items)
    # quantity–quality metrics (Li et al. §4.1) when asked, or when a policy that targets them
    # is compared (Requallo stops early and leaves items unlabeled: accuracy alone misleads)
    quality = getattr(args, "quality", False) or any(
        parse_policy(pid).id in QUALITY_POLICIES for pid in args.policies
    )
    result = run_experiment(
        args.policies,
        env,
        budgets,
        args.reps,
        seed=args.seed,
        n_jobs=args.jobs,
        progress=not args.no_progress,
        mode=args.mode,
        metrics=quality_metrics if quality else None,
    )
    settings = {
        "dataset": data.name,
        "n_items": data.n_items,
        "n_workers": data.n_workers,
        "n_labels": data.n_labels,
        "n_classes": data.n_classes,
        "gold_items": int(data.gold_mask.sum()),
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
    document = json_document(
        command, args.seed, settings, records, **({"plot": plot_path} if plot_path else {})
    )
    table = accuracy_table(result.summary, data.n_items)
    extra = []
    if quality:
        for metric, what in QUALITY_TABLES:
            extra += [f"{what} (mean ± std)", accuracy_table(result.summary, data.n_items, metric)]
    text = "\n".join(
        [
            title,
            f"accuracy on the {settings['gold_items']} gold items "
            f"(mean ± std over {args.reps} replications)",
            table,
            *extra,
            *([f"plot written to {plot_path}"] if plot_path else []),
        ]
    )
    _emit(args, text, document)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
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


def cmd_compare(args: argparse.Namespace) -> int:
    from crowdbudget.registry import parse_policy
    from crowdbudget.types import Problem

    if args.policies is None or (args.budget is None and args.budget_per_item is None):
        data = _load_label_data(args)
    if args.policies is None:
        # the default policies whose declared needs this data set meets (e.g. KG is binary
        # only), worker-aware ones only up to a size where they stay fast
        problem = Problem(
            n_items=data.n_items, budget=1, n_classes=data.n_classes, n_workers=data.n_workers
        )
        specs = [parse_policy(pid) for pid in COMPARE_POLICIES]
        args.policies = [
            str(spec)
            for spec in specs
            if spec.refusal(problem) is None
            and (
                not spec.capabilities.chooses_workers
                or data.n_labels <= COMPARE_WORKER_AWARE_MAX_LABELS
            )
        ]
    if args.budget is None and args.budget_per_item is None:
        # 1..10 labels per item, or ten steps up to every recorded label when the data set
        # has fewer than 10 per item (a replay cannot spend more than was recorded)
        if data.n_labels >= 10 * data.n_items:
            args.budget_per_item = [float(k) for k in range(1, 11)]
        else:
            args.budget = [float(round(data.n_labels * k / 10)) for k in range(1, 11)]
    name = args.dataset or (Path(args.labels).stem if args.labels else "rte")
    plot_path = str(Path(args.out) / f"compare-{name}.png")
    return _run_replay(args, "compare", plot_path)


def cmd_datasets(args: argparse.Namespace) -> int:
    import json

    from crowdbudget.datasets import list_datasets, load_dataset

    rows = list_datasets()
    if args.name is not None:
        data = load_dataset(args.name, data_dir=args.data_dir)
        per_item = data.label_counts().sum(axis=1)
        info = {
            "name": data.name,
            "n_items": data.n_items,
            "n_workers": data.n_workers,
            "n_labels": data.n_labels,
            "classes": list(data.classes),
            "gold_items": int(data.gold_mask.sum()),
            "labels_per_item": [int(per_item.min()), float(per_item.mean()), int(per_item.max())],
            "has_contexts": data.contexts is not None,
        }
        if args.json:
            print(json.dumps({"command": "datasets", "dataset": info}, indent=2))
        else:
            for key, value in info.items():
                print(f"{key:>16}: {value}")
        return 0
    if args.json:
        print(json.dumps({"command": "datasets", "datasets": rows}, indent=2))
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        where = (
            "bundled" if r["bundled"] else (r["location"] or "not found (set CROWDBUDGET_DATA_DIR)")
        )
        print(f"{r['name']:<{width}}  {r['description']}  [{where}]")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from crowdbudget.experiments.papers import REPRODUCTIONS
    from crowdbudget.experiments.report import (
        accuracy_table,
        json_document,
        plot_metrics,
        results_records,
    )

    spec = REPRODUCTIONS.get(args.id)
    if spec is None:
        raise InvalidParameterError(
            f"unknown reproduction {args.id!r}; available: {', '.join(sorted(REPRODUCTIONS))}"
        )
    result = spec.run(
        seed=args.seed, quick=args.quick, n_jobs=args.jobs, progress=not args.no_progress
    )
    out_dir = Path(args.out)
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
    blocks += [f"note: {n}" for n in result.notes]
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
    sim.add_argument("--classes", type=_positive_int, default=2, help="number of classes (2)")
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
    rep.add_argument("id", help="reproduction id, e.g. chen2013-fig2a")
    rep.add_argument("--quick", action="store_true", help="a small, fast version")
    rep.add_argument(
        "--out", default="crowdbudget-results", help="directory for plots (crowdbudget-results)"
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
            help="directory of the large data sets (CROWDBUDGET_DATA_DIR)",
        )
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
        "--out", default="crowdbudget-results", help="directory for the plot (crowdbudget-results)"
    )
    _common(cmp_)
    cmp_.set_defaults(func=cmd_compare)

    dsets = sub.add_parser(
        "datasets",
        help="list the data sets, or describe one",
        description="List the bundled and external data sets, or describe one (counts, classes, "
        "gold).",
    )
    dsets.add_argument("name", nargs="?", default=None, help="a data set to describe")
    dsets.add_argument("--data-dir", default=None, help="directory of the large data sets")
    dsets.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    dsets.set_defaults(func=cmd_datasets)

    from crowdbudget.cli_serve import add_serve_parser

    add_serve_parser(sub)

    from crowdbudget.cli_aggregate import add_aggregate_parser
    from crowdbudget.cli_bound import add_bound_parser

    add_bound_parser(sub)
    add_aggregate_parser(sub)

    pol = sub.add_parser(
        "policies", help="list the registered policy ids, or describe one's parameters"
    )
    pol.add_argument(
        "name", nargs="?", default=None, help="a policy id (with parameters) to describe"
    )
    pol.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    pol.set_defaults(func=cmd_policies)
    return parser


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
