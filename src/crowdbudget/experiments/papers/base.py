"""What every reproduction returns, and how it is registered.

A reproduction module exposes functions ``f(*, seed, quick, n_jobs, progress) ->
ReproductionResult`` and adds them to :data:`crowdbudget.experiments.papers.REPRODUCTIONS`.
The ``reproduce`` command prints one table per metric, writes one PNG with one panel per
metric (paper values as hollow diamonds) and, with ``--json``, the DESIGN §6 document.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

import pandas as pd


class PaperRules(TypedDict):
    """The runner keywords that make a run a faithful reproduction (:data:`PAPER_RULES`)."""

    verdict: str
    ties: str


#: passed as ``**PAPER_RULES`` to :func:`~crowdbudget.experiments.runner.run_experiment` (and
#: the continuous-time runner) by every reproduction: the papers' tie rule for the final
#: labels (``verdict``) and among tied items (``ties``: tie-break=first)
PAPER_RULES: PaperRules = {"verdict": "paper", "ties": "paper"}


@dataclass
class ReproductionResult:
    """The outcome of one reproduction.

    Attributes:
        reproduction_id: e.g. ``"chen2013-fig2a"``.
        summary: one row per (policy, budget) as from :func:`summarize` (columns ``policy``,
            ``budget``, and ``<metric>_mean/_std/_ci_low/_ci_high`` per metric); extra
            columns (e.g. ``dataset``, ``n_items``) name the setting.
        settings: the parameters of the run (JSON-ready).
        n_items: when given, budgets are shown per item.
        metrics: the metrics to tabulate and plot, in panel order.
        paper: per metric, the paper's published values keyed by (policy, budget).
        notes: one-line remarks printed under the tables (gaps, data differences, skips).
        tables: extra preformatted text blocks (e.g. a paper table laid out as published).
        x_label: axis label of the budget axis (default: budget or budget per item).
        claims: the paper's claims checked against the summary, JSON-ready rows (what each
            claim compares, where it holds); printed as text through ``tables`` and emitted
            as ``"claims"`` by ``--json``.
        extra_plots: further figures (e.g. a regret curve), each written next to the main
            PNG as ``<id>-<name>.png`` and listed under ``"extra_plots"`` by ``--json``.
    """

    reproduction_id: str
    summary: pd.DataFrame
    settings: dict[str, Any]
    n_items: int | None = None
    metrics: tuple[str, ...] = ("accuracy",)
    paper: dict[str, dict[tuple[str, float], float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    x_label: str | None = None
    claims: list[dict[str, Any]] = field(default_factory=list)
    extra_plots: list[ExtraPlot] = field(default_factory=list)


@dataclass(frozen=True)
class ExtraPlot:
    """A figure beside the main one: ``summary`` in the layout of
    :func:`~crowdbudget.experiments.report.plot_metrics` (``policy``, ``budget``,
    ``<metric>_mean`` and optionally ``_ci_low/_ci_high``), one panel per metric."""

    name: str
    summary: pd.DataFrame
    metrics: tuple[str, ...]
    title: str = ""
    x_label: str | None = None
    log_x: bool = False


@dataclass(frozen=True)
class Reproduction:
    """A reproducible experiment: its id, what it shows, and the function that runs it."""

    reproduction_id: str
    title: str
    run: Callable[..., ReproductionResult]
