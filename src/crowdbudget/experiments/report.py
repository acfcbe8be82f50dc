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
import pandas as pd


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


def accuracy_table(
    summary: pd.DataFrame,
    n_items: int | None = None,
    metric: str = "accuracy",
    paper: Mapping[tuple[str, float], float] | None = None,
) -> str:
    """Budgets down, policies across: ``mean ± std`` of ``metric`` (and the paper's value)."""
    policies = list(dict.fromkeys(summary["policy"]))
    budgets = sorted(summary["budget"].unique())
    header = ["budget"] + (["per item"] if n_items else []) + policies
    lines = []
    cells = summary.set_index(["policy", "budget"])
    for budget in budgets:
        row = [f"{budget:g}"] + ([f"{budget / n_items:g}"] if n_items else [])
        for pid in policies:
            if (pid, budget) in cells.index:
                c = cells.loc[(pid, budget)]
                text = f"{c[metric + '_mean']:.4f} ± {c[metric + '_std']:.4f}"
                if paper and (pid, budget) in paper:
                    text += f" (paper {paper[(pid, budget)]:.2f})"
                row.append(text)
            else:
                row.append("—")
        lines.append(row)
    widths = [max(len(str(r[i])) for r in [header, *lines]) for i in range(len(header))]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    out = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*r) for r in lines]
    return "\n".join(out)


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
    """One panel per metric: mean against budget (per item when ``n_items``), 95% band, one
    line per policy; the paper's values (per metric, keyed by (policy, budget)) as hollow
    diamonds in the policy's colour; ``log_x`` puts the budget axis on a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(metrics)
    fig, axes = plt.subplots(1, n, figsize=(6.0 * n, 4.4), dpi=120, squeeze=False)
    scale = n_items or 1
    colors = {str(p): f"C{k}" for k, p in enumerate(dict.fromkeys(summary["policy"]))}
    for ax, metric in zip(axes[0], metrics, strict=True):
        for pid_key, group in summary.groupby("policy", sort=False):
            pid = str(pid_key)
            group = group.sort_values("budget")
            x = group["budget"].to_numpy() / scale
            color = colors[pid]
            ax.plot(x, group[f"{metric}_mean"], marker="o", ms=3, label=pid, color=color)
            if f"{metric}_ci_low" in group:
                ax.fill_between(
                    x,
                    group[f"{metric}_ci_low"],
                    group[f"{metric}_ci_high"],
                    alpha=0.18,
                    color=color,
                )
        points = (paper or {}).get(metric, {})
        for (pid, budget), value in points.items():
            ax.plot(
                budget / scale,
                value,
                linestyle="none",
                marker="D",
                mfc="none",
                color=colors.get(pid, "gray"),
                ms=7,
            )
        if points:
            ax.plot([], [], linestyle="none", marker="D", mfc="none", color="gray", label="paper")
        if log_x:
            ax.set_xscale("log")
        ax.set_xlabel(x_label or ("budget per item (T / K)" if n_items else "budget"))
        ax.set_ylabel(metric.replace("_", " ") + " (mean, 95% CI)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


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
