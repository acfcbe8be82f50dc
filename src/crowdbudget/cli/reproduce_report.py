"""The parts of ``crowdbudget reproduce`` that name and report reproductions: the registry
look-up of an id, one ``--all`` id as it ended (:class:`Outcome`), the part file each finished
id is saved to (``--resume`` reads it back), and the ``--all`` report — the times table printed
at the end and the Markdown report with every id's tables and plots."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crowdbudget.exceptions import InvalidParameterError

if TYPE_CHECKING:
    from crowdbudget.experiments.papers import ReproductionSpec


def reproduction_entry(name: str) -> ReproductionSpec:
    """The registry's entry of reproduction ``name``; an unknown id is a one-line error that
    lists the known ones."""
    from crowdbudget.experiments.papers import REPRODUCTIONS

    spec = REPRODUCTIONS.get(name)
    if spec is None:
        raise InvalidParameterError(
            f"unknown reproduction {name!r}; available: {', '.join(sorted(REPRODUCTIONS))}"
        )
    return spec


@dataclass
class Outcome:
    """One reproduction of ``--all`` as it ended (or as ``--resume`` read it back)."""

    reproduction_id: str
    result: Any  # ReproductionResult, or None when it failed
    error: str | None
    seconds: float
    started: float  # time.time() when it started
    #: CPU seconds on every core it used: its coordinating thread's and its campaigns' (the
    #: workers' time of its units), or this process's and its finished children's
    cpu_seconds: float = 0.0
    #: read back from an earlier run's part file (``--resume``), not run now
    resumed: bool = False


def duration_text(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def part_path(out_dir: Path, reproduction_id: str, quick: bool) -> Path:
    """Where ``--all`` keeps one finished id (beside its plot): ``<id>[-quick].json``."""
    return out_dir / f"{reproduction_id}{'-quick' if quick else ''}.json"


def write_part(path: Path, args: argparse.Namespace, outcome: Outcome, row: dict[str, Any]) -> None:
    """Save a finished id as soon as it ends — its ``--json`` document, its text and times —
    so that a long ``--all`` stopped half-way keeps what it did (``--resume`` reads it).
    Written to a temporary file first, then renamed: never a torn file."""
    import json

    from crowdbudget import __version__

    part = {
        "command": "reproduce",
        "part_of": "reproduce --all",
        "version": __version__,
        "id": outcome.reproduction_id,
        "seed": args.seed,
        "quick": args.quick,
        "seconds": outcome.seconds,
        "cpu_seconds": outcome.cpu_seconds,
        "document": json.loads(row["document"]),
        "text": row["text"],
    }
    scratch = path.with_name(f".{path.name}.partial")
    scratch.write_text(json.dumps(part, indent=2) + "\n", encoding="utf-8")
    os.replace(scratch, path)


def read_part(path: Path, args: argparse.Namespace, reproduction_id: str) -> dict[str, Any] | None:
    """An earlier run's part file of ``reproduction_id`` if it is one of this run — same id,
    seed, ``--quick`` and crowdbudget version, complete — else None (the id runs again)."""
    import json

    from crowdbudget import __version__

    try:
        part = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(part, dict):
        return None
    wanted = {
        "part_of": "reproduce --all",
        "version": __version__,
        "id": reproduction_id,
        "seed": args.seed,
        "quick": args.quick,
    }
    if any(part.get(key) != value for key, value in wanted.items()):
        return None
    if not isinstance(part.get("document"), dict) or not isinstance(part.get("text"), str):
        return None
    if not all(isinstance(part.get(key), (int, float)) for key in ("seconds", "cpu_seconds")):
        return None
    return part


#: the ``--all`` column of each id's time from its start to its end (see :func:`times_text`)
FINISHED_AFTER = "finished after"


def times_text(
    args: argparse.Namespace,
    ids: list[str],
    order: list[str],
    rendered: dict[str, dict[str, Any]],
    total: float,
    how: str,
    workers: int,
) -> str:
    """When each id finished and its CPU time (slowest first, as they were started).

    ``finished after`` is the time from the id's start to its end. Under ``--all`` every id
    starts at once and their campaigns share one pool, so it says when the id was done, not
    what it cost alone (its CPU time does); on one worker the ids run one after the other and
    it is the id's own wall time."""
    width = max(len("id"), *(len(rid) for rid in ids))
    lines = [
        f"reproduce --all{' --quick' if args.quick else ''}: "
        f"{where_text(ids, rendered, how, workers)}, slowest first (seed {args.seed})",
        f"{'id':<{width}}  {FINISHED_AFTER:>14}  {'CPU time':>10}  status",
    ]
    for rid in order:
        outcome = rendered[rid]["outcome"]
        status = status_text(outcome)
        lines.append(
            f"{rid:<{width}}  {duration_text(outcome.seconds):>14}  "
            f"{duration_text(outcome.cpu_seconds):>10}  {status}"
        )
    lines.append(f"total wall time {duration_text(total)}, {cpu_text(ids, rendered, total)}")
    return "\n".join(lines)


def status_text(outcome: Outcome) -> str:
    if outcome.error is not None:
        return f"failed: {outcome.error}"
    return "ok (read back: --resume)" if outcome.resumed else "ok"


def where_text(ids: list[str], rendered: dict[str, dict[str, Any]], how: str, workers: int) -> str:
    """``16 reproductions on 2 worker processes`` (and how many were read back)."""
    resumed = sum(rendered[rid]["outcome"].resumed for rid in ids)
    if resumed == len(ids):
        return f"{len(ids)} reproductions, all read back from an earlier run (--resume)"
    text = f"{len(ids)} reproductions on {workers} {how}"
    return text + (f" ({resumed} read back from an earlier run, --resume)" if resumed else "")


def cpu_text(ids: list[str], rendered: dict[str, dict[str, Any]], total: float) -> str:
    """The CPU time of the ids run now, and how many cores they kept busy on average (the
    read-back ids' CPU time is their earlier run's, shown per id)."""
    cpu = sum(
        rendered[rid]["outcome"].cpu_seconds for rid in ids if not rendered[rid]["outcome"].resumed
    )
    busy = f" ({cpu / total:.1f} cores busy on average)" if total >= 1.0 else ""
    return f"CPU time {duration_text(cpu)}{busy}"


def markdown_report(
    args: argparse.Namespace,
    ids: list[str],
    rendered: dict[str, dict[str, Any]],
    total: float,
    how: str,
    workers: int,
    out_dir: Path,
) -> str:
    """The Markdown report: a summary table, then each reproduction's tables (our numbers
    next to the paper's, as ``reproduce ID`` prints them), notes and plot."""
    import json

    from crowdbudget.experiments.papers.builtin import reps_text

    flag = " --quick" if args.quick else ""
    lines = [
        f"# crowdbudget reproduce --all{flag}",
        "",
        f"Seed {args.seed}; {where_text(ids, rendered, how, workers)}, slowest first; total "
        f"wall time {duration_text(total)}, {cpu_text(ids, rendered, total)}. Each "
        "table is our mean ± std next to the paper's number where the paper prints one "
        "(`paper ≈ …`); where it prints none, its claims are checked in a table.",
        "",
        f"| id | paper | figure | reps | {FINISHED_AFTER} | CPU time | paper values | "
        "claims held | "
        "status |",
        "|---|---|---|---|---:|---:|---:|---:|---|",
    ]
    for rid in ids:
        spec = reproduction_entry(rid)
        outcome = rendered[rid]["outcome"]
        paper = spec.source.short if spec.source is not None else ""
        reps = reps_text(spec.reps[0 if args.quick else 1])
        if outcome.error is not None:
            values, held, status = "", "", f"failed: {outcome.error}"
        else:
            doc = json.loads(rendered[rid]["document"])
            values = str(sum(1 for r in doc["results"] for k in r if k.startswith("paper_")))
            claims = [c for c in doc.get("claims", []) if c.get("holds") is not None]
            held = f"{sum(bool(c['holds']) for c in claims)} / {len(claims)}" if claims else ""
            status = status_text(outcome)
        lines.append(
            f"| [{rid}](#{rid}) | {paper} | {spec.figure} | {reps} | "
            f"{duration_text(outcome.seconds)} | {duration_text(outcome.cpu_seconds)} | {values} | "
            f"{held} | {status} |"
        )
    for rid in ids:
        spec = reproduction_entry(rid)
        outcome = rendered[rid]["outcome"]
        lines += ["", f"## {rid}", ""]
        if spec.source is not None:
            lines.append(
                f"{spec.source.citation} {spec.figure}. Finished after "
                f"{duration_text(outcome.seconds)}, "
                f"CPU time {duration_text(outcome.cpu_seconds)}."
            )
        if outcome.error is not None:
            lines += ["", f"**Failed:** {outcome.error}"]
            continue
        doc = json.loads(rendered[rid]["document"])
        plots = [doc["plot"], *doc.get("extra_plots", [])]
        lines.append("")
        for plot in plots:
            name = Path(plot).name
            lines.append(f"![{name}]({os.path.relpath(plot, out_dir)})")
        lines += ["", "```text", rendered[rid]["text"], "```"]
    return "\n".join(lines) + "\n"
