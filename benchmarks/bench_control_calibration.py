"""Control tasks in a replay: the verdict with the control answers as known truth, calibrated on
them, against the no-control default at the same total spend (docs/calibration.md, "With
control tasks").

For each data set and seed: one control subset (``fraction`` of the gold items, drawn from the
seed as ``crowdbudget replay --control-fraction`` draws it) and four campaigns of the default
policy (``opt-kg:posterior=one-coin``, verdict ``bds-oc``) at ``per-item × n_items`` labels,
the control labels paid out of it:

- ``none``: no control tasks (the same spend, all on the policy's choices);
- ``control``: control tasks; the verdict reads their answers as known truth;
- ``floor`` / ``difficulty`` / ``answers`` / ``splits`` / ``splits-np``: the same,
  calibrated on the control answers by that method
  (:func:`crowdbudget.aggregation.control_calibration.calibrate_on_control`).

Every campaign is also read by Dawid–Skene (``ds``). ``--all-labels``: no campaign; every label
of the set, the same control subsets, ``bds-oc`` calibrated by each method (the settings other
than ``none`` / ``control``; "control labels" are then the control items' labels). Every
score is on the gold items that are not control items (the no-control run too: same items).
Prints one row per (set, setting, verdict) with the mean ± standard error over the seeds and
the worst seed's ECE, and the targets' verdicts.

    python benchmarks/bench_control_calibration.py --sets rte,temp --seeds 0-4 --per-item 5
    python benchmarks/bench_control_calibration.py --sets trec --seeds 0-4 --all-labels \
        --settings floor,splits-np
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from crowdbudget.datasets import load_dataset
from crowdbudget.datasets.loaders import BUNDLED_DUPLICATES
from crowdbudget.engine.control import ControlTasks, control_seed
from crowdbudget.experiments.runner import run_experiment
from crowdbudget.simulation.replay import ReplayEnvironment

POLICY = "opt-kg:posterior=one-coin"
SETTINGS = ("none", "control", "floor", "difficulty", "answers", "splits", "splits-np")


def _seeds(text: str) -> list[int]:
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(s) for s in text.split(",")]


def run_one(
    name: str, seed: int, per_item: float, fraction: float, settings: tuple[str, ...] = SETTINGS
) -> list[dict[str, Any]]:
    """The ``settings``' rows (bds-oc and ds readings) of one seed (repeated labels of a set
    resolved as the bundled copy declares, also when read from a data folder)."""
    data = load_dataset(name, duplicates=BUNDLED_DUPLICATES.get(name))
    gold = data.gold >= 0
    tasks = ControlTasks(fraction=fraction)
    control_items = tasks.choose(gold, control_seed(seed))
    budget = per_item * data.n_items
    rows: list[dict[str, Any]] = []
    for setting in settings:
        env = ReplayEnvironment.from_label_data(data)
        control = None
        if setting == "none":
            env.evaluation_mask = gold & ~control_items  # the same items as the others
        else:
            calibrate = None if setting == "control" else setting
            control = ControlTasks(fraction=fraction, calibrate=calibrate)
        result = run_experiment(
            [POLICY],
            env,
            [budget],
            1,
            seed=seed,
            n_jobs=1,
            progress=False,
            verdicts=["ds"],
            control=control,
        )
        for record in result.runs.to_dict("records"):
            verdict = "ds" if str(record["policy"]).endswith("verdict=ds") else "bds-oc"
            rows.append(
                {
                    "set": name,
                    "seed": seed,
                    "setting": setting,
                    "verdict": verdict,
                    "accuracy": float(record["accuracy"]),
                    "ece": float(record["ece"]),
                    "nll": float(record["nll"]),
                    "labels_used": float(record["labels_used"]),
                    "control_labels": float(record.get("control_labels", 0.0) or 0.0),
                }
            )
    return rows


def run_all_labels(
    name: str, seed: int, fraction: float, settings: tuple[str, ...]
) -> list[dict[str, Any]]:
    """The ``settings``' rows of one seed on every label of the set (module docstring,
    ``--all-labels``): the same control subset as :func:`run_one`, no campaign."""
    from crowdbudget.aggregation.calibration import calibration_metrics
    from crowdbudget.aggregation.control_calibration import calibrate_on_control

    data = load_dataset(name, duplicates=BUNDLED_DUPLICATES.get(name))
    gold = data.gold >= 0
    control_items = ControlTasks(fraction=fraction).choose(gold, control_seed(seed))
    control = {int(i): int(data.gold[i]) for i in np.flatnonzero(control_items)}
    scored = gold & ~control_items
    answers = float(np.isin(data.items, np.flatnonzero(control_items)).sum())
    rows: list[dict[str, Any]] = []
    for setting in settings:
        if setting in ("none", "control"):
            continue
        probas = calibrate_on_control("bds-oc", data, control, rng=seed, method=setting)[0]
        metrics = calibration_metrics(probas[scored], data.gold[scored])
        rows.append(
            {
                "set": name,
                "seed": seed,
                "setting": setting,
                "verdict": "bds-oc",
                "accuracy": metrics["accuracy"],
                "ece": metrics["ece"],
                "nll": metrics["nll"],
                "labels_used": float(data.items.size),
                "control_labels": answers,
            }
        )
    return rows


def _mean_se(values: list[float]) -> tuple[float, float]:
    array = np.asarray(values, dtype=float)
    se = float(array.std(ddof=1) / np.sqrt(array.size)) if array.size > 1 else float("nan")
    return float(array.mean()), se


def report(rows: list[dict[str, Any]]) -> list[str]:
    """The table (mean ± SE over seeds) and the targets, one line each."""
    lines = [
        f"{'set':<5} {'setting':<11} {'verdict':<7} {'accuracy':>16} {'ECE':>14} {'NLL':>14} "
        f"{'control labels':>15} {'worst ECE':>9}"
    ]
    cells: dict[tuple[str, str, str], dict[str, tuple[float, float]]] = {}
    for key in sorted({(r["set"], r["setting"], r["verdict"]) for r in rows}):
        chosen = [r for r in rows if (r["set"], r["setting"], r["verdict"]) == key]
        stats = {m: _mean_se([r[m] for r in chosen]) for m in ("accuracy", "ece", "nll")}
        stats["control_labels"] = _mean_se([r["control_labels"] for r in chosen])
        cells[key] = stats
        lines.append(
            f"{key[0]:<5} {key[1]:<11} {key[2]:<7} "
            + " ".join(f"{stats[m][0]:>8.4f} ± {stats[m][1]:.4f}" for m in ("accuracy", "ece"))
            + f" {stats['nll'][0]:>7.3f} ± {stats['nll'][1]:.3f}"
            + f" {stats['control_labels'][0]:>15.1f}"
            + f" {max(r['ece'] for r in chosen):>9.4f}"
        )
    for name in sorted({r["set"] for r in rows}):
        base = cells.get((name, "none", "bds-oc"))
        ds = cells.get((name, "none", "ds"))
        for setting in ("floor", "difficulty", "answers", "splits", "splits-np"):
            got = cells.get((name, setting, "bds-oc"))
            if base is None or ds is None or got is None:
                continue
            lines.append(
                f"target {name} {setting}: ECE {got['ece'][0]:.4f} (<= 0.03: "
                f"{got['ece'][0] <= 0.03}); NLL / DS's {got['nll'][0] / ds['nll'][0]:.3f} "
                f"(<= 0.5: {got['nll'][0] <= 0.5 * ds['nll'][0]}); accuracy − no control "
                f"{got['accuracy'][0] - base['accuracy'][0]:+.4f} (within 0.005: "
                f"{abs(got['accuracy'][0] - base['accuracy'][0]) <= 0.005})"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="rte,temp")
    parser.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 0,3,7")
    parser.add_argument("--per-item", type=float, default=5.0)
    parser.add_argument("--fraction", type=float, default=0.05)
    parser.add_argument("--settings", default=",".join(SETTINGS), help="a subset, comma-separated")
    parser.add_argument("--out", default=None, help="JSON of every row")
    parser.add_argument(
        "--all-labels", action="store_true", help="every label of the set, no campaign"
    )
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for name in args.sets.split(","):
        for seed in _seeds(args.seeds):
            settings = tuple(args.settings.split(","))
            if args.all_labels:
                rows += run_all_labels(name, seed, args.fraction, settings)
            else:
                rows += run_one(name, seed, args.per_item, args.fraction, settings)
            print(f"done {name} seed {seed}", flush=True)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(rows, handle, indent=1)
    print("\n".join(report(rows)))


if __name__ == "__main__":
    main()
