"""The default policy with its default verdict against uniform sampling, on every bed cell and
bundled set (docs/stress-bed.md, "The default policy with the default verdict").

For every crowd it replays ``uniform`` and the default policy (``opt-kg:posterior=one-coin``,
read by its default verdict) at 1 / 2 / 3 / 5 labels per item, ``--reps`` replications
(seed ``--seed``), every campaign also read by ``--verdicts``, and prints one row per (crowd,
labels per item): the default policy + its default verdict, uniform + the best verdict
(which), uniform + ``mv``, and whether the target holds (default ≥ uniform + best − 0.005;
default ≥ uniform + mv).

A bed cell is replayed from the crowd ``make_crowd(pool_cell(cell), 0)``: the cell with at
least ``--pool`` labels per item (capped at its workers; the other axes unchanged), so that
every budget up to 5 per item is a choice of the policy, not the whole crowd. The same crowd
written to CSV (``--write-crowds DIR``: ``DIR/NAME/labels.csv`` and ``gold.csv``) replays with
``crowdbudget replay --data-dir DIR --dataset NAME ...``. Run from the repository root:

    python benchmarks/bench_default_policy.py [--cells all|full|heldout|few|NAME,...]
        [--sets rte,...] [--per-item 1,2,3,5] [--reps 5] [--seed 0] [--jobs 1] [--out rows.csv]
        [--policy opt-kg:posterior=one-coin] [--mode push|pull] [--write-crowds DIR]

``--prototype`` runs, instead, the prototype allocation whose item posterior has a class prior
(:func:`class_prior_kg_campaign`; measured, not shipped); ``--prototype-policy`` the
worker-aware default with a learned class prior as its item prior (:func:`class_prior_policy`;
binary cells; measured, not shipped); ``--ceiling`` the accuracy of the Bayes rule with the true
crowd at one label per item (:func:`one_label_ceiling`); ``--table A.csv B.csv`` prints the
table of earlier ``--out`` files without running anything.
Progress (one line per crowd, with its CPU seconds) goes to stderr; ``--out`` appends every
(crowd, policy, verdict, budget) mean and std as CSV rows, so a long run can be split into
several commands with the same ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from crowdbudget.datasets import load_dataset
from crowdbudget.experiments.runner import run_experiment
from crowdbudget.experiments.stress import (
    DEFAULT_BED,
    StressCell,
    draw_crowd,
    full_bed,
    make_crowd,
    subsample_per_item,
)
from crowdbudget.labels import LabelData
from crowdbudget.registry import split_verdict
from crowdbudget.simulation.replay import ReplayEnvironment

DEFAULT_POLICY = "opt-kg:posterior=one-coin"
VERDICTS = ("mv", "ds", "bds", "bds-oc", "bds-ev", "mace-eb-cp")
MARGIN = 0.005


def pool_cell(cell: StressCell, pool: int) -> StressCell:
    """``cell`` with at least ``pool`` labels per item (at most its workers)."""
    k = min(max(cell.labels_per_item, pool), cell.n_workers)
    if k == cell.labels_per_item:
        return cell
    return dataclasses.replace(cell, name=f"{cell.name}-pool{k}", labels_per_item=k)


def write_crowd(data: LabelData, root: Path) -> None:
    """``root/NAME/labels.csv`` (task,worker,label) and ``gold.csv`` (task,label)."""
    folder = root / str(data.name)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "labels.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["task", "worker", "label"])
        for i, j, c in zip(data.items, data.workers, data.labels, strict=True):
            w.writerow([data.item_ids[i], data.worker_ids[j], data.classes[c]])
    with open(folder / "gold.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["task", "label"])
        gold: Sequence[int] = [] if data.gold is None else data.gold.tolist()  # bed: all gold
        for i, g in enumerate(gold):
            w.writerow([data.item_ids[i], data.classes[g]])


def gold_items_only(data: LabelData) -> LabelData:
    """``data`` restricted to its gold items and their labels (fact_eval's 576 of 42,624
    items, as its earlier replays: docs/reproductions.md), workers renumbered."""
    keep_items = np.flatnonzero(data.gold_mask)
    new_item = np.full(data.n_items, -1, dtype=np.int64)
    new_item[keep_items] = np.arange(keep_items.size)
    keep = new_item[data.items] >= 0
    used, workers = np.unique(data.workers[keep], return_inverse=True)
    assert data.gold is not None  # gold_mask is all False without gold
    return LabelData(
        items=new_item[data.items[keep]],
        workers=workers.astype(np.int64),
        labels=data.labels[keep],
        item_ids=data.item_ids[keep_items],
        worker_ids=data.worker_ids[used],
        classes=data.classes,
        gold=data.gold[keep_items],
        name=f"{data.name}-gold",
    )


#: the held-out sample's stride through :func:`full_bed` (:func:`heldout_cells`): 7 is prime
#: to the binary grid's inner periods (2 worker models, 6 = 3 spammer shares × 2 models) and
#: the multi-class grid's (2 biased shares, 4 = 2 models × 2), so the stride walks through
#: every combination of those axes; 6 would keep the worker model and the spammer share fixed
HELDOUT_STRIDE = 7


def heldout_cells() -> list[StressCell]:
    """The held-out sample of :func:`full_bed` for the default policy (24 of its 148 cells,
    chosen by this rule before any was run): every :data:`HELDOUT_STRIDE`-th cell (index 0,
    7, …, 147) except those also in :data:`DEFAULT_BED` (``binary-60-40-k40``: the policy
    was chosen on it), plus the worker-count cells (5 / 40 / 2,000 workers, indices
    144–146), which the stride skips."""
    bed = full_bed()
    chosen = [c for c in bed[::HELDOUT_STRIDE] if c not in DEFAULT_BED]
    return chosen + [c for c in bed if "workers-" in c.name and c not in chosen]


#: the spammer (or biased-worker) share of the few-worker probes (:func:`few_worker_cells`)
#: per crowd size: ``make_crowd(cell, 0)``'s worker-kind draws are 0.081, 0.875, 0.942,
#: 0.262, 0.012, 0.483, 0.183, 0.972, so below 0.1 only worker 0 of 3 (the heaviest: half
#: the labels), below 0.05 only worker 4 of 5 (a quarter) and below 0.19 workers 0, 4 and 6
#: of 8 (worker 6 holds 46 % of the labels, the other two 2 % together); checked by
#: tests/test_bench_few_workers.py
FEW_ODD_SHARE = {3: 0.1, 5: 0.05, 8: 0.19}


def few_worker_cells() -> list[StressCell]:
    """Probe crowds for the verdict's few-worker weakness (docs/stress-bed.md, "The verdict's
    mechanism on the artefact sets": 2–9 workers, a heavy one a spammer or a one-class
    worker): 3, 5 and 8 workers × spammers or biased workers (:data:`FEW_ODD_SHARE`) ×
    50/50 or 80/20, 2 labels per item, a long activity tail (Pareto 0.5). Replay them on
    their own labels (``--pool 1 --per-item 1,1.5,2``: a pool would give every worker every
    item). Not bed cells: no default was chosen or measured on them."""
    cells = []
    for n in (3, 5, 8):
        for kind in ("spam", "biased"):
            for share in (0.5, 0.2):
                odd = FEW_ODD_SHARE[n]
                cells.append(
                    StressCell(
                        f"binary-{round(100 * (1 - share))}-{round(100 * share)}-{n}workers-"
                        f"{kind}-k2",
                        (1.0 - share, share),
                        2,
                        n,
                        activity_tail=0.5,
                        spammer_share=odd if kind == "spam" else 0.0,
                        biased_share=odd if kind == "biased" else 0.0,
                    )
                )
    return cells


def chosen_cells(spec: str) -> list[StressCell]:
    """The cells ``--cells`` names: ``all`` (:data:`DEFAULT_BED`), ``full`` (every cell of
    :func:`full_bed`), ``heldout`` (:func:`heldout_cells`), ``few`` (:func:`few_worker_cells`)
    or names from any of these, comma-separated ('' : none)."""
    names = [c.strip() for c in spec.split(",") if c.strip()]
    few = few_worker_cells()
    groups = {
        "all": list(DEFAULT_BED),
        "full": list(full_bed()),
        "heldout": heldout_cells(),
        "few": few,
    }
    known = {c.name: c for c in (*full_bed(), *DEFAULT_BED, *few)}
    unknown = [n for n in names if n not in groups and n not in known]
    if unknown:
        raise SystemExit(f"unknown cell(s): {', '.join(unknown)}")
    cells: list[StressCell] = []
    for name in names:
        for cell in groups[name] if name in groups else [known[name]]:
            if cell not in cells:
                cells.append(cell)
    return cells


def crowds(args: argparse.Namespace) -> list[LabelData]:
    """The crowds of the run: the chosen bed cells (:func:`chosen_cells`; as pools; written to
    ``--write-crowds``), then the bundled sets."""
    out: list[LabelData] = []
    for cell in chosen_cells(args.cells):
        out.append(make_crowd(pool_cell(cell, args.pool), 0))
        if args.write_crowds:
            write_crowd(out[-1], Path(args.write_crowds))
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        data = load_dataset(name.removesuffix("-gold"))
        out.append(gold_items_only(data) if name.endswith("-gold") else data)
    return out


def measure(data: LabelData, args: argparse.Namespace) -> pd.DataFrame:
    """Replay uniform and the default policy on ``data``: the summary rows (policy label,
    budget, accuracy mean and std) of :func:`run_experiment`."""
    env = ReplayEnvironment.from_label_data(data)
    per_item = [float(p) for p in args.per_item.split(",")]
    cap = data.n_labels / data.n_items
    budgets = [round(p * data.n_items) for p in per_item if p <= cap + 1e-9]
    result = run_experiment(
        ["uniform", args.policy],
        env,
        budgets,
        args.reps,
        seed=args.seed,
        n_jobs=args.jobs,
        progress=False,
        verdicts=list(args.verdicts.split(",")),
        mode=args.mode,
    )
    summary = result.summary.copy()
    summary["per_item"] = summary["budget"] / data.n_items
    return summary


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (``--jobs`` > 1)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def verdict_of(policy: str) -> str:
    """The verdict that reads ``policy``'s campaigns by default."""
    return split_verdict(policy)[1].name


def _best(readings: dict[str, float]) -> tuple[float, str]:
    """The largest reading and its verdict (``posterior``: the policy's own model)."""
    label = max(readings, key=lambda u: readings[u])
    return readings[label], label.split("verdict=", 1)[1] if "verdict=" in label else "posterior"


def compare(summary: pd.DataFrame, policy: str) -> list[dict[str, object]]:
    """One row per budget: the default policy with its verdict, uniform + best verdict
    (which), uniform + mv, met?, and the best verdict on the default policy's campaigns."""
    rows: list[dict[str, object]] = []
    acc = summary.set_index(["policy", "per_item"])["accuracy_mean"]
    std = summary.set_index(["policy", "per_item"])["accuracy_std"]
    labels = list(dict.fromkeys(summary["policy"]))
    uniform = [p for p in labels if str(p).split(":", 1)[0] == "uniform"]
    own = [p for p in labels if p == policy or str(p).startswith(f"{policy}:verdict=")]
    for k in sorted(set(summary["per_item"])):
        default = float(acc[(policy, k)])
        best, which = _best({u: float(acc[(u, k)]) for u in uniform if (u, k) in acc.index})
        best_own, which_own = _best({u: float(acc[(u, k)]) for u in own if (u, k) in acc.index})
        mv = float(acc.get(("uniform:verdict=mv", k), float("nan")))
        rows.append(
            {
                "per_item": k,
                "default": default,
                "default_std": float(std[(policy, k)]),
                "uniform_best": best,
                "uniform_best_verdict": which,
                "uniform_mv": mv,
                "met": default >= best - MARGIN - 1e-12,
                "above_mv": default >= mv - 1e-12,
                "default_campaign_best": best_own,
                "default_campaign_best_verdict": which_own.replace("posterior", verdict_of(policy)),
            }
        )
    return rows


def table_lines(summary: pd.DataFrame, policy: str) -> list[str]:
    """The markdown rows of :func:`compare` for every crowd of ``summary``."""
    lines = []
    for crowd in dict.fromkeys(summary["crowd"]):
        for r in compare(summary[summary["crowd"] == crowd], policy):
            lines.append(
                f"| {crowd} | {r['per_item']:g} | {r['default']:.4f} ± "
                f"{r['default_std']:.4f} | {r['uniform_best']:.4f} ({r['uniform_best_verdict']}) "
                f"| {r['uniform_mv']:.4f} | {'yes' if r['met'] else '**no**'} "
                f"| {'yes' if r['above_mv'] else '**no**'} "
                f"| {r['default_campaign_best']:.4f} ({r['default_campaign_best_verdict']}) |"
            )
    return lines


def tally_lines(summary: pd.DataFrame, policy: str, worst: int = 5) -> list[str]:
    """The count of rows met and of rows below uniform + mv over every crowd of ``summary``,
    and the ``worst`` largest shortfalls to uniform + best verdict (crowd @ labels per item:
    the default ± std against uniform + best)."""
    rows = [
        {"crowd": crowd, **r}
        for crowd in dict.fromkeys(summary["crowd"])
        for r in compare(summary[summary["crowd"] == crowd], policy)
    ]
    below = [f"{r['crowd']}@{r['per_item']:g}" for r in rows if not r["above_mv"]]
    met = sum(bool(r["met"]) for r in rows)
    ranked = sorted(rows, key=lambda r: float(r["default"]) - float(r["uniform_best"]))  # type: ignore[arg-type]
    lines = [
        f"met (>= uniform + best - {MARGIN}): {met} of {len(rows)} rows; below uniform + mv: "
        f"{len(below)}{' (' + ', '.join(below) + ')' if below else ''}",
        "largest shortfalls to uniform + best:",
    ]
    for r in ranked[:worst]:
        lines.append(
            f"  {r['crowd']}@{r['per_item']:g}: {r['default']:.4f} ± {r['default_std']:.4f} "
            f"against {r['uniform_best']:.4f} ({r['uniform_best_verdict']}), "
            f"uniform + mv {r['uniform_mv']:.4f}"
        )
    return lines


HEADER = [
    "| crowd | labels / item | default policy + its verdict | uniform + best verdict (which) "
    "| uniform + mv | met (−0.005) | ≥ uniform + mv | best verdict on the default's "
    "campaigns (which) |",
    "|---|---|---|---|---|---|---|---|",
]


# --- the prototype allocation with a class prior (measured, not shipped: docs/stress-bed.md) ---


def _one_coin_map(
    votes: np.ndarray, prior: tuple[float, float] = (16.0, 4.0), n_iter: int = 20
) -> tuple[float, np.ndarray]:
    """One crowd accuracy ``a`` (MAP under Beta(16, 4), the worker-aware default's worker
    prior) and the class prior π (posterior mean under Dir(1), over labelled items) by EM on
    the vote counts ``votes`` (n_items, C); errors spread evenly over the other classes."""
    C = votes.shape[1]
    a, pi = prior[0] / sum(prior), np.full(C, 1.0 / C)
    labelled = votes.sum(axis=1) > 0
    for _ in range(n_iter):
        post = _item_posterior(votes, a, pi)
        agree, total = float((post * votes).sum()), float(votes.sum())
        a = (agree + prior[0] - 1.0) / (total + sum(prior) - 2.0)
        pi = (post[labelled].sum(axis=0) + 1.0) / (labelled.sum() + C)
    return a, pi


def _item_posterior(votes: np.ndarray, a: float, pi: np.ndarray) -> np.ndarray:
    """P(class | votes) per item (n_items, C) for a one-coin crowd of accuracy ``a``."""
    C = votes.shape[1]
    log_odds = np.log(a) - np.log((1.0 - a) / max(C - 1, 1))
    log_p = np.log(pi)[None, :] + votes * log_odds
    post = np.exp(log_p - log_p.max(axis=1, keepdims=True))  # shifted: no overflow
    return np.asarray(post / post.sum(axis=1, keepdims=True))


def _knowledge_gradient(votes: np.ndarray, a: float, pi: np.ndarray) -> np.ndarray:
    """Expected gain in the probability of a correct final label from one more label, per
    item (n_items,): ``Σ_l max_c P(c) P(l | c) − max_c P(c)``. Zero for an item whose
    decision no single label can change — an unlabelled item whose class prior outweighs one
    label, the mechanism the prototype exploits."""
    C = votes.shape[1]
    post = _item_posterior(votes, a, pi)
    gain = -post.max(axis=1)
    for label in range(C):
        like = np.full(C, (1.0 - a) / max(C - 1, 1))
        like[label] = a
        gain += (post * like[None, :]).max(axis=1)
    return gain


def class_prior_kg_campaign(
    data: LabelData, budget: int, rng: np.random.Generator, refresh: int = 25
) -> LabelData:
    """The labels a prototype item-level KG buys on ``data`` (a replay: the chosen item gets
    a random unused label): each item's posterior has the crowd's class prior and one
    accuracy, re-estimated every ``refresh`` labels (:func:`_one_coin_map`); the item of
    largest :func:`_knowledge_gradient` is labelled; when no label can change any decision,
    an item with the fewest labels (random among them). Ignores who labels; not a policy of
    the package — the measurement of what a class prior in the allocation is worth."""
    n, C = data.n_items, data.n_classes
    order = np.lexsort((rng.random(data.n_labels), data.items))  # items, random within
    starts = np.searchsorted(data.items[order], np.arange(n))
    ends = np.searchsorted(data.items[order], np.arange(n), side="right")
    used = np.zeros(n, dtype=np.int64)
    taken: list[int] = []
    a, pi = 0.8, np.full(C, 1.0 / C)
    votes = np.zeros((n, C))
    for t in range(budget):
        if t % refresh == 0 and taken:
            a, pi = _one_coin_map(votes)
        gain = _knowledge_gradient(votes, a, pi)
        gain[starts + used >= ends] = -np.inf
        best = gain.max()
        if best <= 1e-12:
            open_items = np.flatnonzero(gain > -np.inf)
            candidates = open_items[used[open_items] == used[open_items].min()]
        else:
            candidates = np.flatnonzero(gain >= best - 1e-12)
        i = int(rng.choice(candidates))
        label = int(order[starts[i] + used[i]])
        used[i] += 1
        taken.append(label)
        votes[i, data.labels[label]] += 1
    return data.labels_subset(np.sort(np.array(taken, dtype=np.int64)))


def run_prototype(args: argparse.Namespace) -> int:
    """``--prototype``: :func:`class_prior_kg_campaign` on every chosen cell and set, read by
    ``bds-oc`` and ``mace-eb-cp`` (replications r = 0 … reps − 1 seed the campaigns)."""
    from crowdbudget.aggregation.registry import make_aggregator

    per_item = [float(p) for p in args.per_item.split(",")]
    for data in crowds(args):
        for k in per_item:
            if k > data.n_labels / data.n_items + 1e-9:
                continue
            scores: dict[str, list[float]] = {"bds-oc": [], "mace-eb-cp": [], "unlabelled": []}
            for r in range(args.reps):
                sub = class_prior_kg_campaign(
                    data, round(k * data.n_items), np.random.default_rng(r)
                )
                counts = np.bincount(sub.items, minlength=data.n_items)
                scores["unlabelled"].append(float(np.mean(counts == 0)))
                for method in ("bds-oc", "mace-eb-cp"):
                    fitted = make_aggregator(method).fit(sub)
                    scores[method].append(data.accuracy(fitted.labels_))
            print(
                f"{data.name} {k:g} "
                + " ".join(f"{m} {np.mean(v):.4f}" for m, v in scores.items()),
                flush=True,
            )
    return 0


def one_label_ceiling(cell: StressCell, reps: int = 5) -> tuple[float, float, float]:
    """What any verdict can reach when every item has exactly one label (the default policy's
    campaign at 1 label per item): the Bayes rule with the *true* class prior and confusion
    matrices (redrawn as :func:`make_crowd` draws them, seed 0), reading the label, and
    answering the common class — each averaged over ``reps`` random one-label subsamples of
    the cell's pool crowd."""
    pool = pool_cell(cell, 10)
    data = make_crowd(pool, 0)
    drawn = draw_crowd(pool, np.random.default_rng(0))  # the crowd behind make_crowd(pool, 0)
    truth, confusion = drawn.truth, drawn.pool.confusion
    assert data.gold is not None and np.array_equal(truth, data.gold)
    original = np.array([int(str(w)[1:]) for w in data.worker_ids])  # "w17" -> 17
    prior = np.asarray(pool.class_prior)
    common = int(prior.argmax())
    scores = []
    for r in range(reps):
        one = subsample_per_item(data, 1, np.random.default_rng(r))
        bayes = np.full(data.n_items, common)
        bayes[one.items] = (
            prior[None, :] * confusion[original[one.workers], :, one.labels]
        ).argmax(axis=1)
        read = np.full(data.n_items, common)
        read[one.items] = one.labels
        scores.append((np.mean(bayes == truth), np.mean(read == truth), np.mean(truth == common)))
    bayes_acc, read_acc, common_acc = np.mean(scores, axis=0)
    return float(bayes_acc), float(read_acc), float(common_acc)


def run_ceiling(args: argparse.Namespace) -> int:
    """``--ceiling``: :func:`one_label_ceiling` for every chosen cell."""
    for cell in chosen_cells(args.cells):
        bayes, read, common = one_label_ceiling(cell, args.reps)
        print(f"{cell.name}: Bayes rule {bayes:.4f}, the label {read:.4f}, common {common:.4f}")
    return 0


# --- the worker-aware default with a learned class prior (prototype; docs/stress-bed.md) ---


def beta_for_share(share: float, total: float = 2.0) -> tuple[float, float]:
    """The Beta(a0, b0) with ``a0 + b0 = total`` whose P(θ ≥ ½) is ``share`` (bisection:
    P(θ ≥ ½) rises with a0 at a fixed total)."""
    from scipy.special import betainc

    lo, hi = 1e-3, total - 1e-3
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if 1.0 - float(betainc(mid, total - mid, 0.5)) < share:
            lo = mid
        else:
            hi = mid
    return lo, total - lo


def class_prior_policy(learned: bool | str) -> object:
    """The registry's default on two classes (``opt-kg:posterior=one-coin``: Opt-KG, worker
    prior Beta(16, 4), random ties, refit every 10 labels) on its reference scan path (the
    fast path assumes every unlabelled item stays in one fixed prior state); with
    ``learned``, every refit first replaces every item's prior Beta(1, 1) by a class prior:
    ``True`` or ``"beliefs"``: the Beta of total 2 whose P(θ ≥ ½) is the mean P(θ ≥ ½) of
    the labelled items (clipped to [0.02, 0.98]; the first prototype); ``"em"``: the same
    Beta with the share of the discrete one-coin EM on the labels
    (:func:`~crowdbudget.policies._class_prior.share_and_accuracy`), always;
    ``"gated-map"``: that one only where a lone label cannot decide, the gate at the point
    estimates (:func:`~crowdbudget.policies._class_prior.gated_class_prior`) — these through
    the refit's prior for control items, ``_known_prior`` (private attributes: prototypes);
    ``"gated"``: the package's option ``class_prior="gated"`` itself."""
    from scipy.special import betainc

    from crowdbudget.policies._class_prior import (
        gated_class_prior,
        share_and_accuracy,
    )
    from crowdbudget.policies.worker_aware_multiclass import OneCoinAnyClassKnowledgeGradient

    rule = "beliefs" if learned is True else (learned or "")

    class ClassPriorKG(OneCoinAnyClassKnowledgeGradient):
        def _reestimate_beliefs(self, n_rounds: int) -> None:
            n = self._n_log
            if rule and n:
                log = self._log[:n]
                state: tuple[float, float] | None
                if rule == "beliefs":
                    post = self.posterior_
                    items = np.unique(log[:, 0])
                    share = float(np.mean(1.0 - betainc(post.a[items], post.b[items], 0.5)))
                    state = beta_for_share(min(max(share, 0.02), 0.98))
                elif rule == "em":
                    pi = share_and_accuracy(
                        log[:, 0], log[:, 1], log[:, 2], self.problem_.n_items, self.worker_prior
                    )[0]
                    state = beta_for_share(min(max(pi, 0.02), 0.98))
                else:  # gated-map: the package's gate at the point estimates, no memory
                    state = gated_class_prior(
                        log[:, 0],
                        log[:, 1],
                        log[:, 2],
                        self.problem_.n_items,
                        self.worker_prior,
                        None,
                    )
                if state is None:
                    self._known_prior = None
                else:
                    a0, b0 = state
                    self._known_prior = np.tile([b0, a0], (self.problem_.n_items, 1))  # (b, a)
            super()._reestimate_beliefs(n_rounds)

    if rule == "gated":  # the package's rule (class_prior="gated"), no override
        policy = OneCoinAnyClassKnowledgeGradient(
            worker_prior=(16.0, 4.0), tie_break="random", refit=10, class_prior="gated"
        )
    else:
        policy = ClassPriorKG(worker_prior=(16.0, 4.0), tie_break="random", refit=10)
    policy.reference = True
    return policy


def run_policy_prototype(args: argparse.Namespace) -> int:
    """``--prototype-policy``: :func:`class_prior_policy` with each rule of ``--prior-rules``
    (``none``: Beta(1, 1)) on every chosen binary cell, ``--reps`` campaigns (world and
    policy seeded by the replication r), read by ``bds-oc`` (and ``mace-eb-cp``)."""
    from crowdbudget.experiments.runner import run_campaign
    from crowdbudget.policies.verdict import make_verdict

    per_item = [float(p) for p in args.per_item.split(",")]
    rules = [r.strip() for r in args.prior_rules.split(",") if r.strip()]
    for data in crowds(args):
        if data.n_classes != 2:
            continue
        env = ReplayEnvironment.from_label_data(data)
        budgets = [round(k * data.n_items) for k in per_item]
        for rule in rules:
            start = cpu_seconds()
            acc: dict[tuple[str, int], list[float]] = {}
            for r in range(args.reps):
                rows = run_campaign(
                    class_prior_policy("" if rule == "none" else rule),  # type: ignore[arg-type]
                    env,
                    budgets,
                    world_seed=np.random.SeedSequence(r),
                    policy_rng=np.random.default_rng(r),
                    verdict=make_verdict("bds-oc"),
                    readers=[("mace-eb-cp", make_verdict("mace-eb-cp"))],
                )
                for row in rows:
                    key = (str(row.get("policy", "bds-oc")), int(row["budget"]))
                    acc.setdefault(key, []).append(float(row["accuracy"]))
            shown = " ".join(
                f"{b / data.n_items:g}: {np.mean(acc[('bds-oc', b)]):.4f}"
                f"/{np.mean(acc[('mace-eb-cp', b)]):.4f}"
                for b in budgets
            )
            print(
                f"{data.name} {rule} {shown} ({cpu_seconds() - start:.0f} s CPU)",
                flush=True,
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--cells",
        default="all",
        help="bed cells: all (the default bed), full (full_bed()), heldout, few (few-worker "
        "probes), or names; '' none",
    )
    p.add_argument(
        "--sets",
        default="",
        help="bundled sets, comma-separated (NAME-gold: only its gold items, e.g. fact_eval-gold)",
    )
    p.add_argument("--per-item", default="1,2,3,5")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--pool", type=int, default=10, help="labels per item of a cell's crowd")
    p.add_argument("--policy", default=DEFAULT_POLICY)
    p.add_argument(
        "--mode",
        choices=("push", "pull"),
        default="push",
        help="push: the policy chooses the item-worker pair (the default); pull: the replay's "
        "next worker arrives and the policy chooses its item (a live campaign's requests)",
    )
    p.add_argument("--verdicts", default=",".join(VERDICTS))
    p.add_argument("--out", default=None, help="append the summary rows to this CSV")
    p.add_argument("--write-crowds", default=None, help="also write each cell's crowd here")
    p.add_argument(
        "--prototype",
        action="store_true",
        help="run the prototype class-prior KG allocation instead (not a package policy)",
    )
    p.add_argument(
        "--prototype-policy",
        action="store_true",
        help="run the worker-aware default with and without a learned class prior (prototype)",
    )
    p.add_argument(
        "--prior-rules",
        default="beliefs,none",
        help="--prototype-policy: class-prior rules to run (beliefs, em, gated-map, gated, none)",
    )
    p.add_argument(
        "--ceiling",
        action="store_true",
        help="print what any verdict can reach with one label per item on each cell",
    )
    p.add_argument(
        "--table",
        nargs="+",
        default=None,
        help="print the table of earlier --out files, run nothing",
    )
    args = p.parse_args(argv)
    print(
        f"policy {args.policy} read by {verdict_of(args.policy)}; reps {args.reps}, "
        f"seed {args.seed}",
        file=sys.stderr,
    )
    if args.prototype:
        return run_prototype(args)
    if args.ceiling:
        return run_ceiling(args)
    if args.prototype_policy:
        return run_policy_prototype(args)
    if args.table:
        frames = [pd.read_csv(path) for path in args.table]
        frame = pd.concat(frames)
        print("\n".join(HEADER + table_lines(frame, args.policy)))
        print("\n".join(tally_lines(frame, args.policy)), file=sys.stderr)
        return 0
    lines = list(HEADER)
    for data in crowds(args):
        start, wall = cpu_seconds(), time.perf_counter()
        summary = measure(data, args)
        summary.insert(0, "crowd", data.name)
        summary.insert(1, "n_items", data.n_items)
        if args.out:
            new = not os.path.exists(args.out)
            summary.to_csv(args.out, mode="a", header=new, index=False)
        for line in table_lines(summary, args.policy):
            lines.append(line)
            print(line, file=sys.stderr)
        print(
            f"{data.name}: {data.n_items} items, {data.n_labels} labels; "
            f"{cpu_seconds() - start:.0f} s CPU, {time.perf_counter() - wall:.0f} s wall",
            file=sys.stderr,
            flush=True,
        )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
