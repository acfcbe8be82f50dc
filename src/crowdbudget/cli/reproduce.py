"""``crowdbudget reproduce``: a paper's figure or table next to the paper's numbers, with its
PNG plot and the table kept as CSV and Markdown; ``--list`` names every reproduction (the
registry's table: paper, figure, replications, typical time); ``--all`` runs every one
(``--only`` some) at once, their campaigns on one shared pool of processes (the slowest id's
first), and writes every figure, one combined JSON and one Markdown report with when each
finished and its CPU time."""

from __future__ import annotations

import argparse
import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crowdbudget.cli.common import add_common_arguments, emit, note_lines, policy_list
from crowdbudget.cli.io import (
    WRITTEN_ABOVE,
    OutputWriteError,
    prepare_output_folder,
    write_files,
)
from crowdbudget.cli.reproduce_report import (
    Outcome,
    duration_text,
    markdown_report,
    part_path,
    read_part,
    reproduction_entry,
    times_text,
    write_part,
)
from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError

if TYPE_CHECKING:
    from crowdbudget.experiments.papers import ReproductionResult, ReproductionSpec


def _list_reproductions(args: argparse.Namespace) -> int:
    """``reproduce --list``: every registered id by paper — the typical time, the
    replications, what it shows (``--json``: the registry's entries)."""
    import json
    import textwrap

    from crowdbudget.experiments.papers import REPRODUCTIONS
    from crowdbudget.experiments.papers.builtin import reps_text

    entries = list(REPRODUCTIONS.values())
    if args.json:
        rows = [entry.describe() for entry in entries]
        print(json.dumps({"command": "reproduce", "reproductions": rows}, indent=2))
        return 0
    width = max(len(entry.component_id) for entry in entries)
    times = [f"{e.times[0]} / {e.times[1]}" for e in entries]
    reps = [f"{reps_text(e.reps[0])} / {reps_text(e.reps[1])}" for e in entries]
    time_width = max(len("--quick / full"), *(len(t) for t in times))
    reps_width = max(len("reps"), *(len(r) for r in reps))
    text_width = 118 - width - time_width - reps_width - 6
    print(
        f"{'id':<{width}}  {'--quick / full':<{time_width}}  {'reps':<{reps_width}}  what it shows"
    )
    paper = None
    for entry, when, count in zip(entries, times, reps, strict=True):
        if entry.source is not None and entry.source != paper:
            paper = entry.source
            print()
            for line in textwrap.wrap(paper.citation, 118):
                print(line)
        # under its paper's line: the figure and what it shows (the title without the paper)
        shows = entry.title.split(": ", 1)[-1]
        lines = textwrap.wrap(f"{entry.figure}: {shows}" if entry.figure else shows, text_width)
        lines = lines or [""]
        pad = f"{'':<{width}}  {'':<{time_width}}  {'':<{reps_width}}  "
        head = f"{entry.component_id:<{width}}  {when:<{time_width}}  {count:<{reps_width}}  "
        print(head + lines[0])
        for line in lines[1:]:
            print(pad + line)
    print(
        "\nrun one: crowdbudget reproduce ID [--quick]; all: crowdbudget reproduce --all [--quick]."
        "\nTimes on a 2-core machine: --quick in CPU seconds (its wall time alone is at most "
        "that), full runs in wall time."
    )
    return 0


def _warm(args: argparse.Namespace) -> None:
    """``reproduce --warm``: the worker-aware kernels compiled into Numba's on-disk cache
    (:func:`~crowdbudget.experiments.warm.warm_kernels`), once after the install, so that
    no first run pays their compile; one line (or JSON without an id or --all) on what it
    took."""
    import json

    from crowdbudget.experiments.warm import WARM_RUNS, warm_kernels

    seconds = warm_kernels()
    text = (
        f"worker-aware kernels compiled into Numba's cache ({seconds:.1f} s CPU; "
        "later runs load them)"
    )
    if args.id is not None or args.all:
        print(text, file=sys.stderr)
        return
    document = {"command": "reproduce", "warm": list(WARM_RUNS), "cpu_seconds": seconds}
    emit(args, text, json.dumps(document, indent=2))


#: what marks a ``--quick`` run on its table, its Markdown file and its plot's title
SMOKE_RUN = "smoke run (--quick): too few replications to compare policies, not the figure"


def _render(
    spec: ReproductionSpec, result: ReproductionResult, *, seed: int, quick: bool, out_dir: Path
) -> tuple[str, str, list[tuple[str, Path, Callable[[Path], object]]]]:
    """One reproduction's text (tables next to the paper's numbers), its JSON document
    (DESIGN §6) and the files to write after printing them: the plots, and the table as CSV
    (the JSON rows) and Markdown beside the plot. A ``--quick`` run is marked a smoke run
    (:data:`SMOKE_RUN`) on the tables and the plot."""
    from crowdbudget.experiments.report import (
        accuracy_table,
        json_document,
        markdown_table,
        plot_metrics,
        results_markdown,
        results_records,
        write_results_csv,
    )

    plot_path = out_dir / f"{spec.reproduction_id}{'-quick' if quick else ''}.png"
    title = f"{spec.title} [{SMOKE_RUN}]" if quick else spec.title
    files: list[tuple[str, Path, Callable[[Path], object]]] = [
        (
            "plot",
            plot_path,
            lambda path: plot_metrics(
                result.summary,
                path,
                n_items=result.n_items,
                metrics=result.metrics,
                title=title,
                paper=result.paper,
                x_label=result.x_label,
            ),
        )
    ]
    extra_plots = []
    for extra in result.extra_plots:
        extra_path = plot_path.with_name(f"{plot_path.stem}-{extra.name}.png")
        draw = functools.partial(
            plot_metrics,
            extra.summary,
            metrics=extra.metrics,
            title=f"{extra.title} [{SMOKE_RUN}]" if quick else extra.title,
            x_label=extra.x_label,
            log_x=extra.log_x,
        )
        files.append(("plot", extra_path, draw))
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
    table_csv = plot_path.with_suffix(".csv")
    table_markdown = plot_path.with_suffix(".md")
    document = json_document(
        "reproduce",
        seed,
        {"id": spec.reproduction_id, "quick": quick, **result.settings},
        records,
        plot=str(plot_path),
        table_csv=str(table_csv),
        table_markdown=str(table_markdown),
        notes=result.notes,
        **({"claims": result.claims} if result.claims else {}),
        **({"extra_plots": extra_plots} if extra_plots else {}),
    )
    reps = result.settings.get("reps")
    blocks = [title]
    sections = []
    for metric in result.metrics:
        caption = f"{metric.replace('_', ' ')} (mean ± std over {reps} replications)"
        paper = result.paper.get(metric)
        blocks.append(caption)
        blocks.append(accuracy_table(result.summary, result.n_items, metric=metric, paper=paper))
        sections.append((caption, markdown_table(result.summary, result.n_items, metric, paper)))
    sections += [("", f"```text\n{table}\n```") for table in result.tables]
    blocks += result.tables
    blocks += note_lines(result.notes)
    markdown = results_markdown(title, sections, result.notes)
    files += [
        ("table", table_csv, lambda path: write_results_csv(records, path)),
        ("table", table_markdown, lambda path: path.write_text(markdown, encoding="utf-8")),
    ]
    return "\n".join(blocks), document, files


def _use_data_dir(data_dir: str | None) -> None:
    """The reproductions load their sets by name; the user's folder takes precedence (worker
    processes inherit the environment)."""
    if data_dir is not None:
        from crowdbudget.datasets import list_datasets

        list_datasets(data_dir)  # a missing folder is an error before any work
        os.environ["CROWDBUDGET_DATA_DIR"] = str(data_dir)


def cmd_reproduce(args: argparse.Namespace) -> int:
    if args.warm:
        _warm(args)
        if args.id is None and not args.all:
            return 0
    if args.list:
        return _list_reproductions(args)
    if args.all:
        if args.id is not None:
            raise InvalidParameterError("give one reproduction id or --all, not both")
        return _run_all(args)
    if args.only is not None:
        raise InvalidParameterError(
            "--only picks ids for --all: crowdbudget reproduce --all --only ID,ID"
        )
    if args.resume:
        raise InvalidParameterError(
            "--resume goes with --all: crowdbudget reproduce --all --resume --out FOLDER"
        )
    if args.id is None:
        return _list_reproductions(args)
    spec = reproduction_entry(args.id)
    out_dir = prepare_output_folder(args.out, "--out")
    _use_data_dir(args.data_dir)
    result = spec.run(
        seed=args.seed, quick=args.quick, n_jobs=args.jobs, progress=not args.no_progress
    )
    text, document, files = _render(spec, result, seed=args.seed, quick=args.quick, out_dir=out_dir)
    emit(args, text, document)
    write_files(files, announce=not args.json)
    return 0


# --------------------------------------------------------------------------- --all


#: set when ``--all`` is interrupted: its threads' reproductions then fail because the shared
#: pool was stopped under them, which is no error to report
_STOPPING = threading.Event()


def _run_one(
    reproduction_id: str,
    seed: int,
    quick: bool,
    n_jobs: int | None,
    progress: bool,
    data_dir: str | None,
) -> Outcome:
    """Run one reproduction (in this process or one of its threads) and time it; a failure
    is returned as its one-line message, not raised, so the others go on."""
    if data_dir is not None:
        os.environ["CROWDBUDGET_DATA_DIR"] = data_dir
    spec = reproduction_entry(reproduction_id)
    started = time.time()
    clock = time.perf_counter()
    cpu = _process_cpu()
    result, error = None, None
    try:
        result = spec.run(seed=seed, quick=quick, n_jobs=n_jobs, progress=progress)
    except CrowdBudgetError as exc:
        error = str(exc)
    except Exception as exc:
        import traceback

        if not _STOPPING.is_set():  # not the echo of Ctrl-C stopping the shared pool
            traceback.print_exc(file=sys.stderr)
        error = f"{type(exc).__name__}: {exc}"
    return Outcome(
        reproduction_id,
        result,
        error,
        time.perf_counter() - clock,
        started,
        _process_cpu() - cpu,
    )


def _process_cpu() -> float:
    """CPU seconds of this process and of its children that have ended (a reproduction's
    own process pool is shut down, its workers waited for, before it returns)."""
    try:
        import resource
    except ImportError:  # not on Windows: this process only
        return time.process_time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _selected(args: argparse.Namespace) -> list[str]:
    """The ids of ``--all`` (``--only``: those, in the registry's order)."""
    from crowdbudget.experiments.papers import REPRODUCTIONS

    if args.only is None:
        return list(REPRODUCTIONS)
    wanted = [reproduction_entry(name).reproduction_id for name in args.only]
    return [rid for rid in REPRODUCTIONS if rid in wanted]


def slowest_first(ids: list[str], quick: bool) -> list[str]:
    """``ids`` by typical time, longest first (the full time, when not recorded, falls back
    to the ``--quick`` one; ties keep the registry's order)."""
    from crowdbudget.experiments.papers import REPRODUCTIONS

    def key(rid: str) -> float:
        spec = REPRODUCTIONS[rid]
        seconds = spec.typical_seconds(quick)
        if seconds is None:
            seconds = spec.typical_seconds(True) or 0.0
        return -seconds

    return sorted(ids, key=key)


#: the packages whose code a reproduction runs (its coordinating thread under ``--all``)
_REPRODUCTION_PACKAGES = (
    "crowdbudget.experiments",
    "crowdbudget.simulation",
    "crowdbudget.policies",
    "crowdbudget.posteriors",
    "crowdbudget.aggregation",
    "crowdbudget.bounds",
    "crowdbudget.datasets",
    "crowdbudget.engine",
)


def _import_ahead(packages: tuple[str, ...] = _REPRODUCTION_PACKAGES) -> None:
    """Import every module of ``packages`` and every module they import inside functions,
    in this thread, before several threads run their code at once.

    CPython's import lock is per module: when two threads import a package with circular
    imports at the same time (scikit-learn's ``sklearn.base`` and ``sklearn.utils``), one of
    them can be handed the partially initialised module and fail ("cannot import name 'clone'
    from partially initialized module" — seen with ``--all``'s threads). Imported here first,
    every later import is a dictionary look-up. The function-level imports are found by
    reading the modules' source (``ast``), so a new lazy import is covered without a list to
    keep. Dask is left out (``--scheduler`` imports it before the threads start; without it,
    nothing imports it), as is a name that is no module."""
    import ast
    import importlib
    import pkgutil

    lazy: set[str] = set()
    for name in packages:
        package = importlib.import_module(name)
        modules = [package] + [
            importlib.import_module(info.name)
            for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}.")
        ]
        for module in modules:
            source = getattr(module, "__file__", None)
            if source is None or not source.endswith(".py"):
                continue
            tree = ast.parse(Path(source).read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    lazy.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    lazy.add(node.module)
                    # ``from package import submodule`` imports the submodule too
                    lazy.update(f"{node.module}.{alias.name}" for alias in node.names)
    for name in sorted(lazy):
        if name.split(".")[0] in ("dask", "distributed"):
            continue  # optional, and imported by --scheduler itself before any thread starts
        try:
            importlib.import_module(name)
        except ImportError:  # a name that is no module, or an optional package not installed
            continue


def _execute(args: argparse.Namespace, order: list[str], done: Any) -> tuple[str, int]:
    """Run ``order`` (slowest first); ``done(outcome)`` in this thread as each finishes.
    Returns how they ran and on how many workers.

    On one worker (``--jobs 1``) or for one id: each id in this process, one after the other,
    with ``--jobs`` processes of its own and its progress bar. Otherwise every id at once,
    each in a thread of this process that only coordinates: their campaigns (replications ×
    cases) all go to one :class:`~crowdbudget.experiments.runner.SharedPool` of ``--jobs``
    worker processes — or, with ``--scheduler``, to the Dask cluster — the slowest id's
    first, so every core works until the last campaign ends (no id runs alone on one core at
    the end). The numbers do not depend on it: every campaign carries its own seeds."""
    import contextvars
    import queue

    from tqdm.auto import tqdm

    from crowdbudget.experiments.runner import (
        FanOutSeat,
        SharedPool,
        fan_out,
        resolve_executor,
    )

    data_dir = None if args.data_dir is None else str(args.data_dir)
    executor, workers = resolve_executor(None, args.jobs, len(order))
    if executor == "serial":
        progress = not args.no_progress
        for rid in order:
            done(_run_one(rid, args.seed, args.quick, args.jobs, progress, data_dir))
        return "process", 1
    outcomes: queue.Queue[Outcome] = queue.Queue()
    _STOPPING.clear()
    # before the pool: its forked workers start with these modules loaded
    _import_ahead()
    pool = None
    if executor == "processes":
        # the pool is shared by all ids: as many workers as asked, not one per id
        workers = args.jobs if args.jobs is not None else os.cpu_count() or 1
        pool = SharedPool(workers)

    seats: list[FanOutSeat] = []

    def seated(rid: str, rank: int) -> None:
        clock, started = time.perf_counter(), time.time()
        try:
            with fan_out(pool, rank) as seat:
                seats.append(seat)
                thread_cpu = time.thread_time()
                outcome = _run_one(rid, args.seed, args.quick, args.jobs, False, None)
                outcome.cpu_seconds = seat.cpu_seconds + time.thread_time() - thread_cpu
        except BaseException as exc:  # never leave the main thread waiting
            message = f"{type(exc).__name__}: {exc}"
            outcome = Outcome(rid, None, message, time.perf_counter() - clock, started)
        outcomes.put(outcome)

    # each thread runs in a copy of this context (the Dask session of --scheduler)
    threads = [
        threading.Thread(
            target=contextvars.copy_context().run,
            args=(seated, rid, rank),
            name=f"reproduce {rid}",
            daemon=True,
        )
        for rank, rid in enumerate(order)
    ]
    stopped = True
    # one line that moves: campaign chunks finished / queued so far (ids queue more as they
    # go, so no time estimate) and ids finished; the per-id lines are written above it
    bar = tqdm(
        total=0,
        desc="reproduce --all",
        unit="chunk",
        bar_format="{desc}: {n}/{total} campaign chunks done [{elapsed}]{postfix}",
        disable=args.no_progress,
        file=sys.stderr,
    )
    try:
        for thread in threads:
            thread.start()
        finished = 0
        while finished < len(order):
            try:
                outcome = outcomes.get(timeout=1.0)
            except queue.Empty:
                outcome = None
            if outcome is not None:
                finished += 1
                with bar.external_write_mode():
                    done(outcome)  # plots are drawn here, in this thread only
            seen = list(seats)
            bar.total = sum(seat.units_queued for seat in seen)
            bar.n = sum(seat.units_done for seat in seen)
            bar.set_postfix_str(f"{finished}/{len(order)} ids finished", refresh=True)
        stopped = False
    finally:
        bar.close()
        if stopped:
            _STOPPING.set()
        if pool is not None:
            pool.close(cancel=stopped)  # Ctrl-C: stop the workers now
    return ("Dask workers" if pool is None else "worker processes"), workers


def _read_back(
    args: argparse.Namespace, ids: list[str], order: list[str], out_dir: Path, start: float
) -> dict[str, dict[str, Any]]:
    """``--resume``: the ids whose part file in ``out_dir`` matches these settings, as
    rendered rows (outcome, text, document), announced on stderr."""
    import json

    rendered: dict[str, dict[str, Any]] = {}
    for rid in ids:
        part = read_part(part_path(out_dir, rid, args.quick), args, rid)
        if part is None:
            continue
        outcome = Outcome(
            rid, None, None, part["seconds"], start, part["cpu_seconds"], resumed=True
        )
        rendered[rid] = {
            "outcome": outcome,
            "text": part["text"],
            "document": json.dumps(part["document"]),
        }
    if rendered and not args.no_progress:
        print(
            f"reproduce --all: {len(rendered)} of {len(ids)} read back from {out_dir} "
            f"(--resume): {', '.join(r for r in order if r in rendered)}",
            file=sys.stderr,
        )
    return rendered


def _combined(
    args: argparse.Namespace,
    ids: list[str],
    order: list[str],
    rendered: dict[str, dict[str, Any]],
    start: float,
    total: float,
    how: str,
    workers: int,
) -> dict[str, Any]:
    """The combined ``--json`` document of ``--all``: every id's document (or its error),
    the timing table and the settings."""
    import json

    timing = [
        {
            "id": rid,
            "seconds": rendered[rid]["outcome"].seconds,
            "cpu_seconds": rendered[rid]["outcome"].cpu_seconds,
            "start": max(0.0, rendered[rid]["outcome"].started - start),
            "status": "ok" if rendered[rid]["outcome"].error is None else "failed",
            "resumed": rendered[rid]["outcome"].resumed,
        }
        for rid in ids
    ]
    documents = []
    for rid in ids:
        outcome = rendered[rid]["outcome"]
        if outcome.error is None:
            documents.append({**json.loads(rendered[rid]["document"]), "seconds": outcome.seconds})
        else:
            documents.append(
                {"command": "reproduce", "settings": {"id": rid}, "error": outcome.error}
            )
    combined = {
        "command": "reproduce",
        "seed": args.seed,
        "settings": {
            "all": True,
            "quick": args.quick,
            "ids": ids,
            "order": order,
            "workers": workers,
            "executor": how,
            "resumed": [rid for rid in ids if rendered[rid]["outcome"].resumed],
        },
        "reproductions": documents,
        "timing": timing,
        "total_seconds": total,
    }
    return combined


def _run_all(args: argparse.Namespace) -> int:
    """``reproduce --all``: every id (``--only``: some), every figure, one combined JSON, one
    Markdown report, when each finished and its CPU time; each id saved as it finishes
    (``<id>[-quick].json``), which ``--resume`` reads back instead of running it again."""
    import json

    ids = _selected(args)
    order = slowest_first(ids, args.quick)
    out_dir = prepare_output_folder(args.out, "--out")
    _use_data_dir(args.data_dir)
    suffix = "-quick" if args.quick else ""
    start = time.time()
    clock = time.perf_counter()
    rendered = _read_back(args, ids, order, out_dir, start) if args.resume else {}
    to_run = [rid for rid in order if rid not in rendered]

    unwritten: list[str] = []

    def done(outcome: Outcome) -> None:
        rid = outcome.reproduction_id
        row: dict[str, Any] = {"outcome": outcome}
        if outcome.result is not None:
            row["text"], row["document"], files = _render(
                reproduction_entry(rid),
                outcome.result,
                seed=args.seed,
                quick=args.quick,
                out_dir=out_dir,
            )
            part = part_path(out_dir, rid, args.quick)
            files.append(("part", part, lambda path: write_part(path, args, outcome, row)))
            try:
                write_files(files, announce=False)
            except OutputWriteError as error:  # the others go on; named at the end
                unwritten.append(str(error).removesuffix(WRITTEN_ABOVE))
        rendered[rid] = row
        if not args.no_progress:
            status = "ok" if outcome.error is None else f"failed: {outcome.error}"
            print(
                f"reproduce --all: [{len(rendered)}/{len(order)}] {rid} "
                f"{duration_text(outcome.seconds)} "
                f"(CPU {duration_text(outcome.cpu_seconds)}) {status}",
                file=sys.stderr,
            )

    how, workers = _execute(args, to_run, done) if to_run else ("earlier runs", 0)
    total = time.perf_counter() - clock
    json_path = out_dir / f"reproduce-all{suffix}.json"
    report_path = out_dir / f"reproduce-all{suffix}.md"
    combined = _combined(args, ids, order, rendered, start, total, how, workers)
    combined.update(report=str(report_path), json=str(json_path))
    document = json.dumps(combined, indent=2)
    report = markdown_report(args, ids, rendered, total, how, workers, out_dir)
    failed = [rid for rid in ids if rendered[rid]["outcome"].error is not None]
    emit(args, times_text(args, ids, order, rendered, total, how, workers), document)
    try:
        write_files(
            [
                (
                    "JSON",
                    json_path,
                    lambda path: path.write_text(document + "\n", encoding="utf-8"),
                ),
                ("report", report_path, lambda path: path.write_text(report, encoding="utf-8")),
            ],
            announce=not args.json,
        )
    except OutputWriteError as error:
        unwritten.append(str(error).removesuffix(WRITTEN_ABOVE))
    if failed:
        print(
            f"crowdbudget reproduce: error: {len(failed)} of {len(ids)} reproductions failed: "
            + "; ".join(f"{rid} ({rendered[rid]['outcome'].error})" for rid in failed),
            file=sys.stderr,
        )
    if unwritten:
        raise OutputWriteError("; ".join(unwritten) + WRITTEN_ABOVE)
    return 1 if failed else 0


def add_reproduce_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``reproduce`` sub-command to ``subparsers`` (of ``build_parser``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "reproduce",
        help="reproduce a paper figure or table",
        description="Reproduce a figure or table of the papers; prints the table next to the "
        "paper's numbers and keeps it in --out as <id>[-quick].csv and .md beside the PNG plot "
        "(--quick: a smoke run, said on both). --all runs every one (their campaigns on one "
        "pool of --jobs processes, the slowest id's first) and writes every plot, "
        "reproduce-all[-quick].json and a Markdown report reproduce-all[-quick].md into --out. "
        "--warm, once after the install (the README's set-up runs it), compiles the "
        "worker-aware kernels into Numba's cache, so no first run compiles them.",
    )
    p.add_argument(
        "id", nargs="?", default=None, help="reproduction id, e.g. chen2013-fig2a (see --list)"
    )
    p.add_argument(
        "--list",
        action="store_true",
        help="list every reproduction: paper, typical time, replications, what it shows",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="run every reproduction: all at once, their campaigns on one pool of --jobs "
        "processes (or the --scheduler cluster), the slowest id's first; prints the wall and "
        "CPU time of each",
    )
    p.add_argument(
        "--only",
        type=policy_list,
        default=None,
        metavar="ID,ID",
        help="with --all: run only these ids (a part of the report, e.g. to re-run some)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="with --all: read back the ids an earlier --all finished into --out (same seed, "
        "--quick and version) instead of running them again",
    )
    p.add_argument("--quick", action="store_true", help="a small, fast version")
    p.add_argument(
        "--warm",
        action="store_true",
        help="compile the worker-aware policy's kernels into Numba's cache first (once after "
        "the install, as the README's set-up does: about 30 s of CPU; without it the first "
        "run that needs them, e.g. chen2013-fig3b, compiles them); alone: only that",
    )
    p.add_argument(
        "--out",
        default="crowdbudget-results",
        help="folder for the plots and tables (crowdbudget-results)",
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
