"""Turning summaries into what people read: a text table, the JSON document, a PNG plot.

The JSON document (DESIGN §6): ``{"command", "seed", "settings", "results": [row, ...]}``;
each row is one (policy, budget) cell averaged over replications, a metric ``m`` appearing as
``m_mean``, ``m_std``, ``m_ci_low``, ``m_ci_high``; the ``policy`` field repeats the id as given.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

#: the fewest replications a plotted 95% band is drawn from: with fewer, a t-interval spans
#: most of the axis and reads as signal where there is only noise (the line is still drawn)
MIN_BAND_REPLICATIONS = 5


def _clean(value: Any) -> Any:
    """JSON-safe scalars: numpy → Python, NaN/inf → None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def results_records(summary: pd.DataFrame, n_items: int | None = None) -> list[dict[str, Any]]:
    """Summary rows as JSON-ready dicts (adds ``budget_per_item`` when ``n_items`` is given)."""
    records = []
    for row in summary.to_dict(orient="records"):
        rec = {str(k): _clean(v) for k, v in row.items()}
        if n_items:
            rec["budget_per_item"] = rec["budget"] / n_items
        records.append(rec)
    return records


def json_document(
    command: str,
    seed: int | None,
    settings: Mapping[str, Any],
    results: Sequence[Mapping[str, Any]],
    **extra: Any,
) -> str:
    """The one JSON document a ``--json`` command prints on stdout."""
    doc: dict[str, Any] = {"command": command, "seed": seed, "settings": dict(settings)}
    # wall-clock times differ from run to run (and between a local run and a Dask cluster);
    # they go to "timing" so that "results" is exactly reproducible from the seed
    rows, timing = [], []
    for row in results:
        kept = {k: v for k, v in row.items() if not k.startswith("seconds")}
        times = {k: v for k, v in row.items() if k.startswith("seconds")}
        rows.append(kept)
        if times:
            timing.append({"policy": row.get("policy"), "budget": row.get("budget"), **times})
    doc["results"] = rows
    if timing:
        doc["timing"] = timing
    doc.update(extra)
    return json.dumps(doc, indent=2, default=_clean)


def _table_cells(
    summary: pd.DataFrame,
    n_items: int | None,
    metric: str,
    paper: Mapping[tuple[str, float], float] | None,
) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """The cells of :func:`accuracy_table`: the lead header (``budget``, ``per item``), the
    lead cells of each budget row, and one column per policy (its id, then a cell per
    budget)."""
    policies = list(dict.fromkeys(summary["policy"]))
    budgets = sorted(summary["budget"].unique())
    cells = summary.set_index(["policy", "budget"])
    means = summary[metric + "_mean"].to_numpy(dtype=float)
    finite = means[np.isfinite(means)]
    is_rate = finite.size == 0 or float(np.abs(finite).max()) <= 1.5

    def cell(mean: float, std: float) -> str:
        if not np.isfinite(mean):
            return "—"  # undefined (e.g. accuracy among labeled items when none is)
        if is_rate:
            return f"{mean:.4f} ± {std:.4f}"
        if std == 0 and float(mean).is_integer():
            return f"{int(mean)}"
        return f"{mean:.1f} ± {std:.1f}"

    head = ["budget"] + (["per item"] if n_items else [])
    lead_rows = [[f"{b:g}"] + ([f"{b / n_items:g}"] if n_items else []) for b in budgets]
    columns: list[list[str]] = []
    for pid in policies:
        column = [str(pid)]
        for budget in budgets:
            if (pid, budget) in cells.index:
                c = cells.loc[(pid, budget)]
                text = cell(float(c[metric + "_mean"]), float(c[metric + "_std"]))
                if paper and (pid, budget) in paper:
                    text += f" (paper {paper[(pid, budget)]:.2f})"
                column.append(text)
            else:
                column.append("—")
        columns.append(column)
    return head, lead_rows, columns


def accuracy_table(
    summary: pd.DataFrame,
    n_items: int | None = None,
    metric: str = "accuracy",
    paper: Mapping[tuple[str, float], float] | None = None,
    width: int = 120,
) -> str:
    """Budgets down, policies across: ``mean ± std`` of ``metric`` (and the paper's value).

    Rates (every mean within [-1.5, 1.5]) show 4 decimals; counts and amounts (labels spent,
    tasks completed, ...) show 1 decimal, and an exact whole number with std 0 shows as an
    integer. Tables wider than ``width`` columns are split into blocks of policies, each
    repeating the budget columns."""
    head, lead_rows, columns = _table_cells(summary, n_items, metric, paper)
    lead_widths = [max(len(r[i]) for r in [head, *lead_rows]) for i in range(len(head))]
    lead_width = sum(lead_widths) + 2 * (len(lead_widths) - 1)
    blocks: list[list[list[str]]] = [[]]
    used = lead_width
    for column in columns:
        column_width = 2 + max(len(v) for v in column)
        if blocks[-1] and used + column_width > width:
            blocks.append([])
            used = lead_width
        blocks[-1].append(column)
        used += column_width
    out: list[str] = []
    for block in blocks:
        header = head + [c[0] for c in block]
        rows = [lead + [c[k + 1] for c in block] for k, lead in enumerate(lead_rows)]
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        fmt = "  ".join(f"{{:>{w}}}" for w in widths)
        if out:
            out.append("")
        out += [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
        out += [fmt.format(*r) for r in rows]
    return "\n".join(out)


def markdown_table(
    summary: pd.DataFrame,
    n_items: int | None = None,
    metric: str = "accuracy",
    paper: Mapping[tuple[str, float], float] | None = None,
) -> str:
    """:func:`accuracy_table`'s cells as one Markdown table (budgets down, policies across;
    ``|`` in a policy id escaped)."""
    head, lead_rows, columns = _table_cells(summary, n_items, metric, paper)
    header = head + [c[0].replace("|", "\\|") for c in columns]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---:" for _ in header) + "|",
    ]
    for k, lead in enumerate(lead_rows):
        lines.append("| " + " | ".join(lead + [c[k + 1] for c in columns]) + " |")
    return "\n".join(lines)


def results_markdown(title: str, sections: Sequence[tuple[str, str]], notes: Sequence[str]) -> str:
    """A results file in Markdown: ``title`` as the heading, each ``(caption, table)`` of
    ``sections`` under its caption, the notes as a list."""
    lines = [f"# {title}", ""]
    for caption, table in sections:
        lines += [caption, "", table, ""]
    if notes:
        lines += ["Notes:", ""] + [f"- {note}" for note in notes] + [""]
    return "\n".join(lines)


def write_results_csv(records: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """The JSON document's ``results`` rows as a CSV file (one row per policy and budget)."""
    out = Path(path)
    pd.DataFrame(list(records)).to_csv(out, index=False)
    return out


def _facets(summary: pd.DataFrame) -> list[str] | None:
    """The cases of a multi-setting summary, or None. Reproductions with several settings
    label rows ``"<policy id> @<case>"`` and keep the bare id in ``policy_id`` (DESIGN §6)."""
    if "policy_id" not in summary or not summary["policy"].astype(str).str.contains(" @").all():
        return None
    cases = summary["policy"].astype(str).str.split(" @", n=1).str[1]
    return list(dict.fromkeys(cases))


def plot_metrics(
    summary: pd.DataFrame,
    path: str | Path,
    *,
    n_items: int | None = None,
    metrics: Sequence[str] = ("accuracy",),
    title: str = "",
    paper: Mapping[str, Mapping[tuple[str, float], float]] | None = None,
    x_label: str | None = None,
    log_x: bool = False,
) -> Path:
    """One panel per metric: mean against budget (per item when ``n_items``), 95% band (only
    where a point has at least :data:`MIN_BAND_REPLICATIONS` replications, the summary's
    ``reps``), one line per policy; the paper's values (per metric, keyed by (policy,
    budget)) as hollow diamonds in the policy's colour; ``log_x`` puts the budget axis on a
    log scale.

    A summary of several settings (rows ``"<id> @<case>"`` with ``policy_id``, e.g. bbta-fig2's
    nine data set × worker model cases) gets one panel per (metric, case), three cases to a
    row, one colour per policy id and one legend; with an ``n_items`` column the budget axis
    is per item of each case."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = _facets(summary)
    frame = summary.copy()
    if cases is None:
        frame["_case"] = ""
        frame["_line"] = frame["policy"].astype(str)
        panel_cases = [""]
    else:
        frame["_case"] = frame["policy"].astype(str).str.split(" @", n=1).str[1]
        frame["_line"] = frame["policy_id"].astype(str)
        panel_cases = cases
    per_row_items = cases is not None and n_items is None and "n_items" in frame
    scale = frame["n_items"].to_numpy(float) if per_row_items else float(n_items or 1)
    frame["_x"] = frame["budget"].to_numpy(float) / scale
    n_cols = min(3, len(panel_cases)) if cases is not None else len(metrics)
    rows_per_metric = math.ceil(len(panel_cases) / n_cols) if cases is not None else 1
    n_rows = rows_per_metric * len(metrics) if cases is not None else 1
    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=(6.0 * n_cols, 4.4 * n_rows), dpi=120, squeeze=False
    )
    colors = {p: f"C{k % 10}" for k, p in enumerate(dict.fromkeys(frame["_line"]))}
    styles = {p: ("-" if k < 10 else "--") for k, p in enumerate(dict.fromkeys(frame["_line"]))}
    panels = []
    for m_index, metric in enumerate(metrics):
        for c_index, case in enumerate(panel_cases):
            if cases is None:
                ax = axes[0][m_index]
            else:
                row = m_index * rows_per_metric + c_index // n_cols
                ax = axes[row][c_index % n_cols]
            panels.append(ax)
            _draw_panel(
                ax,
                frame[frame["_case"] == case],
                metric,
                colors,
                styles,
                (paper or {}).get(metric, {}),
                scale=float(n_items or 1) if not per_row_items else None,
                facet=cases is not None,
            )
            if case:
                ax.set_title(case, fontsize=9)
            if log_x:
                ax.set_xscale("log")
            default_x = "budget per item" if per_row_items else "budget"
            if n_items and not per_row_items:
                default_x = "budget per item (T / K)"
            ax.set_xlabel(x_label or default_x)
            ax.set_ylabel(metric.replace("_", " ") + _band_caption(frame))
            ax.grid(alpha=0.3)
            if cases is None:
                ax.legend(fontsize=8)
    for ax in axes.flat:
        if ax not in panels:
            ax.set_visible(False)
    if cases is not None:
        # one legend for every panel; the figure title is its title, so the two never overlap
        handles, labels = panels[0].get_legend_handles_labels()
        fig.legend(
            handles,
            labels,
            loc="upper center",
            ncol=3,
            fontsize=9,
            frameon=False,
            title=title or None,
            title_fontsize=10,
        )
    elif title:
        fig.suptitle(title, fontsize=10)
    if cases is not None:
        # room at the top for the shared legend (one line per three policies)
        legend_rows = math.ceil(len(colors) / 3)
        fig.tight_layout(rect=(0, 0, 1, 1 - (0.25 + 0.18 * legend_rows) / (4.4 * n_rows)))
    else:
        fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, bbox_inches="tight")
    plt.close(fig)
    return out


def _has_band(frame: pd.DataFrame) -> npt.NDArray[np.bool_]:
    """Which rows get a 95% band: those of at least :data:`MIN_BAND_REPLICATIONS`
    replications (every row when the summary has no ``reps`` column)."""
    if "reps" not in frame:
        return np.ones(len(frame), dtype=bool)
    return frame["reps"].to_numpy(dtype=float) >= MIN_BAND_REPLICATIONS


def _band_caption(frame: pd.DataFrame) -> str:
    """The y label's suffix: says where a band is left out for too few replications."""
    banded = _has_band(frame)
    if banded.all():
        return " (mean, 95% CI)"
    if not banded.any():
        return f" (mean; no band: < {MIN_BAND_REPLICATIONS} replications)"
    return f" (mean, 95% CI where ≥ {MIN_BAND_REPLICATIONS} replications)"


def _draw_panel(
    ax: Any,
    frame: pd.DataFrame,
    metric: str,
    colors: Mapping[str, str],
    styles: Mapping[str, str],
    points: Mapping[tuple[str, float], float],
    *,
    scale: float | None,
    facet: bool,
) -> None:
    """One panel: a line (mean) and a 95% band per policy; the paper's values as diamonds
    (``points`` keyed by (policy, budget); in facet mode keyed by the row's full label)."""
    for line_key, group in frame.groupby("_line", sort=False):
        line = str(line_key)
        group = group.sort_values("_x")
        if group[f"{metric}_mean"].isna().all():
            continue
        x = group["_x"].to_numpy()
        color = colors[line]
        ax.plot(
            x,
            group[f"{metric}_mean"],
            marker="o",
            ms=3,
            label=line,
            color=color,
            linestyle=styles[line],
        )
        if f"{metric}_ci_low" in group:
            banded = _has_band(group)
            if banded.any():
                ax.fill_between(
                    x,
                    group[f"{metric}_ci_low"],
                    group[f"{metric}_ci_high"],
                    where=banded,
                    alpha=0.18,
                    color=color,
                )
    shown = False
    for (pid, budget), value in points.items():
        rows = frame[frame["policy"] == pid]
        if facet and rows.empty:
            continue
        if facet:
            x_at = float(budget) / float(rows["n_items"].iloc[0]) if scale is None else budget
            color = colors.get(str(rows["_line"].iloc[0]), "gray")
        else:
            x_at = budget / (scale or 1.0)
            color = colors.get(pid, "gray")
        ax.plot(x_at, value, linestyle="none", marker="D", mfc="none", color=color, ms=7)
        shown = True
    if shown:
        ax.plot([], [], linestyle="none", marker="D", mfc="none", color="gray", label="paper")


def plot_accuracy(
    summary: pd.DataFrame,
    path: str | Path,
    *,
    n_items: int | None = None,
    metric: str = "accuracy",
    title: str = "",
    paper_points: Mapping[str, Sequence[tuple[float, float]]] | None = None,
) -> Path:
    """Single-metric plot; ``paper_points`` are (x, value) pairs per policy (x per item)."""
    scale = n_items or 1
    paper = {
        metric: {(pid, x * scale): v for pid, pts in (paper_points or {}).items() for x, v in pts}
    }
    return plot_metrics(summary, path, n_items=n_items, metrics=(metric,), title=title, paper=paper)
