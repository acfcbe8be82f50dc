"""What every ``crowdbudget`` command does alike with data and output paths.

- **Data validation** (one policy for all commands that read crowd labels; the rules are
  :func:`crowdbudget.datasets.from_frame`'s): ``--duplicates error|keep|first|last`` for
  repeated (task, worker) rows and ``--classes c1,c2,...`` for labels outside the gold's
  classes (:func:`add_validation_arguments`).
- **Output paths** (:func:`prepare_output_file`, :func:`prepare_output_folder`): ``--out`` is a
  folder for commands that write a results folder (``compare``, ``reproduce``), a file for
  those that write one file (``aggregate``; ``--plot`` of ``simulate`` and ``replay``).
  Missing parent folders are created; a path under a file, a file path onto a folder, a
  folder path onto a file or a folder where no file can be created (a probe file is created
  and removed there) is a one-line error (exit status 2) before any work starts; so is a plot
  path (``--plot``, ``--reliability``) not ending in an image format (:func:`prepare_plot_file`).
- **Writing** (:func:`write_files`): a command prints its report first and writes its files
  after, so a failure while writing (a full disk, a folder made read-only meanwhile) still
  leaves the report on stdout; the failure is one line naming the file (exit status 2).
- **Label budgets** are whole numbers (:func:`whole_budgets`).
- **Policies that cannot run on the data** are refused naming the id typed
  (:func:`check_policies_apply`).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError

DUPLICATES_HELP = (
    "what to do with repeated (task, worker) rows: error (default for your own files: the "
    "first one is named), keep (every row is a label), first or last (one row per pair); "
    "bundled sets use their declared policy (adult, fact_eval: keep)"
)


def _class_list(text: str) -> tuple[str, ...]:
    classes = tuple(part.strip() for part in text.split(",") if part.strip())
    if len(classes) < 2:
        raise argparse.ArgumentTypeError(
            f"expected at least two comma-separated classes, got {text!r}"
        )
    if len(set(classes)) != len(classes):
        raise argparse.ArgumentTypeError(f"a class is listed twice in {text!r}")
    return classes


def add_validation_arguments(parser: argparse.ArgumentParser) -> None:
    """``--duplicates`` and ``--classes`` (the load-time validation policy)."""
    parser.add_argument(
        "--duplicates",
        choices=["error", "keep", "first", "last"],
        default=None,
        help=DUPLICATES_HELP,
    )
    parser.add_argument(
        "--classes",
        type=_class_list,
        default=None,
        metavar="C1,C2,...",
        help="every class, in order (default: the gold's classes; a label outside them is an "
        "error naming its row)",
    )


def _first_file_ancestor(path: Path) -> Path | None:
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


#: how a write failure's message ends: the report is already on stdout
WRITTEN_ABOVE = "; the results are printed above"


class OutputWriteError(CrowdBudgetError):
    """A results file could not be written (the report was printed before)."""


def check_folder_writable(folder: Path, flag: str, path: str | Path) -> None:
    """Create and remove a probe file in ``folder``: a folder where nothing can be created
    (read-only, immutable, a read-only mount — whatever the operating system refuses, for
    root too) is a one-line error naming ``flag`` and ``path`` before any work starts."""
    probe = folder / f".crowdbudget-write-check-{os.getpid()}"
    try:
        with open(probe, "x", encoding="utf-8"):
            pass
        probe.unlink()
    except OSError as error:
        raise InvalidParameterError(
            f"{flag} {path}: cannot write in folder {folder} ({error.strerror}); "
            "give a folder you can write to"
        ) from None


def write_files(
    files: Sequence[tuple[str, Path, Callable[[Path], object]]], *, announce: bool
) -> None:
    """Write each ``(what, path, write)`` — ``write(path)`` writes it — after the report is
    printed; with ``announce``, a ``<what> written to <path>`` line on stdout for each. A
    failure is an :class:`OutputWriteError` naming the file (after trying the others), so
    the report stays on stdout."""
    failed: list[str] = []
    for what, path, write in files:
        try:
            write(path)
        except OSError as error:
            failed.append(f"{path} ({error.strerror or type(error).__name__})")
            continue
        if announce:
            print(f"{what} written to {path}")
    if failed:
        sys.stdout.flush()
        raise OutputWriteError(f"could not write {'; '.join(failed)}{WRITTEN_ABOVE}")


def prepare_output_file(path: str | Path, flag: str) -> Path:
    """Check that ``path`` can be written as a file: create its missing parent folders and
    check that a file can be created there (:func:`check_folder_writable`)."""
    target = Path(path)
    if target.is_dir():
        raise InvalidParameterError(f"{flag} {path} is a folder; give a file path")
    blocker = _first_file_ancestor(target)
    if blocker is not None:
        raise InvalidParameterError(
            f"{flag} {path}: {blocker} is a file, so nothing can be written under it"
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InvalidParameterError(
            f"{flag} {path}: cannot create folder {target.parent} ({error.strerror})"
        ) from None
    check_folder_writable(target.parent, flag, path)
    return target


#: image formats a plot path may end with (matplotlib writes each; the first is the default)
PLOT_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg", "eps", "ps", "tif", "tiff", "webp")


def prepare_plot_file(path: str | Path, flag: str) -> Path:
    """:func:`prepare_output_file` for a plot: the name must end in an image format of
    :data:`PLOT_FORMATS` (without one, matplotlib would write another file than the one
    named, or fail after the whole run)."""
    suffix = Path(path).suffix.lower().removeprefix(".")
    if suffix not in PLOT_FORMATS:
        found = f"'.{suffix}'" if suffix else "no extension"
        raise InvalidParameterError(
            f"{flag} {path}: a plot file name ends in an image format ({found} given); "
            f"allowed: {', '.join('.' + f for f in PLOT_FORMATS)}"
        )
    return prepare_output_file(path, flag)


def prepare_output_folder(path: str | Path, flag: str) -> Path:
    """Check that ``path`` can be a folder of results: create it (with its parents) and check
    that a file can be created in it (:func:`check_folder_writable`)."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise InvalidParameterError(
            f"{flag} {path} is a file; {flag} names a folder for the results"
        )
    blocker = _first_file_ancestor(target)
    if blocker is not None:
        raise InvalidParameterError(
            f"{flag} {path}: {blocker} is a file, so nothing can be written under it"
        )
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InvalidParameterError(
            f"{flag} {path}: cannot create the folder ({error.strerror})"
        ) from None
    check_folder_writable(target, flag, path)
    return target


def whole_budgets(values: Sequence[float], flag: str) -> list[float]:
    """Label budgets: whole numbers > 0 (a label is bought whole)."""
    for value in values:
        if not math.isfinite(value) or value <= 0 or value != int(value):
            raise InvalidParameterError(f"{flag} takes whole numbers of labels > 0, got {value:g}")
    return [float(v) for v in values]


def check_policies_apply(
    policy_ids: Sequence[str],
    problem: Any,
    what: str,
    verdict: str | None = None,
    verdicts: Sequence[str] | None = None,
) -> None:
    """Refuse, naming the id typed, a policy that cannot run on ``problem`` (its declared
    needs, :meth:`crowdbudget.registry.PolicySpec.refusal`; then its verdict's — the id's or
    ``verdict`` —; then what ``reset`` refuses), and a verdict of ``verdicts`` (``--verdicts``)
    that cannot read it."""
    import numpy as np

    from crowdbudget.registry import make_policy, parse_policy, policies_for, split_verdict

    def instead() -> str:
        working = policies_for(problem)
        return f"; ids that work here: {', '.join(working)}" if working else ""

    for policy_id in policy_ids:
        reason = parse_policy(policy_id).refusal(problem)  # unknown ids fail here, listed
        if reason is not None:
            raise InvalidParameterError(f"{reason} ({what}){instead()}")
        policy_spec, verdict_spec = split_verdict(policy_id, verdict)
        policy = make_policy(policy_spec)
        refused = verdict_spec.refusal(problem)
        if refused is not None:
            raise InvalidParameterError(f"{policy_id!r}: {refused} ({what})")
        try:
            policy.reset(problem, np.random.default_rng(0))
        except CrowdBudgetError as error:
            reason = str(error)
            name = type(policy).__name__
            if reason.startswith(name):
                reason = repr(policy_id) + reason[len(name) :]
            raise InvalidParameterError(f"{reason} ({what}){instead()}") from None
    from crowdbudget.registry import VerdictSpec

    for name in verdicts or ():
        spec = VerdictSpec(name)
        spec.build()  # an unknown aggregator fails here, with the allowed ones
        refused = spec.refusal(problem)
        if refused is not None:
            raise InvalidParameterError(f"--verdicts {name!r}: {refused} ({what})")
