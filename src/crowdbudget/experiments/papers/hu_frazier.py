"""Reproductions of Hu & Frazier, "Bayes-Optimal Effort Allocation in Crowdsourcing: Bounds
and Index Policies", §7.

Fig. 1 (§7.1): K = 10, 100, 1000 tasks, U = 1.2K workers, arrival rate r = 0.1, completion
rate μ = 0.4, prior Beta(1, 1), d_x = 0.5, T = ∞; the index policy, optimistic KG and the
Lagrangian upper bound; the per-task reward R/K (eq. 2) with 95% intervals over 5,000
replications. The text gives no per-task values, only: the index policy beats OKG at every K,
the bound–index gap shrinks as K grows, and at the largest size "the index policy is within
0.03% of optimal".

Fig. 2 (§7.2): RTE (Snow et al. 2008: 800 tasks, 10 labels each, gold labels). 50 tasks are
held back as history and a common Beta prior is fitted to their label frequencies by the
method of moments (:func:`crowdbudget.priors.fit_beta_prior`); K = 10, 100, 750 tasks are drawn
from the other 750 (afresh in every replication), the arrivals and completions are simulated
as in Fig. 1, and a completion returns a random unused recorded label of the task; the index
policy, OKG, Thompson sampling and UCB1-tuned are compared by accuracy against the gold
labels. The text gives no numbers, only the ordering: "Index Policy performing consistently
the best among all the policies". The worker budget of Fig. 2 is not stated; we use
U = 1.2K as in §7.1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from crowdbudget._random import as_seed_sequence, child_seed
from crowdbudget.bounds.lagrangian import lagrangian_bound
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.continuous import run_continuous_experiment
from crowdbudget.experiments.papers.base import PAPER_RULES, ReproductionResult
from crowdbudget.priors import BetaPriorFit, fit_beta_prior
from crowdbudget.simulation.continuous_time import (
    ContinuousTimeEnvironment,
)
from crowdbudget.simulation.environment import LabelingEnvironment, SyntheticBernoulliEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import Assignment, Problem, StepResult

ARRIVAL_RATE = 0.1
COMPLETION_RATE = 0.4
BUDGET_PER_TASK = 1.2

FIG1_POLICIES = ["lagrangian-index", "opt-kg"]
FIG1_SIZES = (10, 100, 1000)
#: §7.1: "the index policy is within 0.03% of optimal" at the largest size.
FIG1_PAPER_GAP_PERCENT = 0.03
BOUND_ID = "upper-bound"

FIG2_POLICIES = ["lagrangian-index", "opt-kg", "thompson", "ucb1-tuned"]
FIG2_SIZES = (10, 100, 750)
FIG2_HISTORY = 50


def _fig1_reps(quick: bool) -> dict[int, int]:
    return {10: 40, 100: 20, 1000: 4} if quick else {10: 5000, 100: 5000, 1000: 5000}


def fig1(
    *, seed: int = 0, quick: bool = False, n_jobs: int | None = None, progress: bool = True
) -> ReproductionResult:
    """Fig. 1: per-task reward of the index policy and OKG against the upper bound.

    ``quick``: 40 / 20 / 4 replications at K = 10 / 100 / 1000 (seconds); the full version runs
    5,000 at every K (minutes on two cores).
    """
    reps = _fig1_reps(quick)
    if quick and n_jobs is None:
        n_jobs = 1  # a process pool costs more than the few quick campaigns
    # quick: the index policy's campaigns in Python — the same numbers as the compiled loop
    # (engine.index_loop), without its compile (about 8 s of CPU on a first-ever run), which
    # the few quick campaigns would never earn back
    engine = "reference" if quick else "auto"
    frames = []
    bounds: dict[int, Any] = {}
    for n_items in FIG1_SIZES:
        budget = round(BUDGET_PER_TASK * n_items)
        env = ContinuousTimeEnvironment(
            SyntheticBernoulliEnvironment(n_items, prior=(1.0, 1.0)),
            arrival_rate=ARRIVAL_RATE,
            completion_rate=COMPLETION_RATE,
        )
        result = run_continuous_experiment(
            FIG1_POLICIES,
            env,
            [budget],
            reps[n_items],
            seed=seed,
            n_jobs=n_jobs,
            progress=progress,
            **PAPER_RULES,  # a faithful reproduction: the papers' tie rules
            engine=engine,
        )
        summary = result.summary.copy()
        summary["n_items"] = n_items
        bound = lagrangian_bound(
            n_items=n_items,
            budget=budget,
            arrival_rate=ARRIVAL_RATE,
            completion_rate=COMPLETION_RATE,
            vector=n_items <= 100,
        )
        bounds[n_items] = bound
        row: dict[str, Any] = {"policy": BOUND_ID, "budget": float(budget), "reps": 0}
        for metric, value in (
            ("reward_per_item", bound.bound_per_item),
            ("reward", bound.bound),
        ):
            for suffix in ("mean", "ci_low", "ci_high"):
                row[f"{metric}_{suffix}"] = value
            row[f"{metric}_std"] = 0.0
        row["n_items"] = n_items
        frames.append(summary)
        frames.append(pd.DataFrame([row]))
    summary = pd.concat(frames, ignore_index=True)
    table, notes = _fig1_gaps(summary, bounds)
    return ReproductionResult(
        reproduction_id="hu-frazier-fig1",
        summary=summary,
        settings={
            "n_items": list(FIG1_SIZES),
            "budget": [round(BUDGET_PER_TASK * k) for k in FIG1_SIZES],
            "arrival_rate": ARRIVAL_RATE,
            "completion_rate": COMPLETION_RATE,
            "prior": [1.0, 1.0],
            "threshold": 0.5,
            "horizon": None,
            "reps": max(reps.values()),
            "reps_per_size": {str(k): v for k, v in reps.items()},
            "policies": [*FIG1_POLICIES, BOUND_ID],
        },
        metrics=("reward_per_item",),
        paper={},
        notes=notes,
        tables=[table],
        x_label="workers U = 1.2 K (K = 10, 100, 1000)",
    )


def _fig1_gaps(summary: pd.DataFrame, bounds: dict[int, Any]) -> tuple[str, list[str]]:
    lines = [
        "gap to the upper bound, per task (bound − policy; 95% interval; % of the bound)",
        f"{'K':>6} {'U':>6} {'bound/K':>9} {'policy':<18} {'reward/K':>9} {'gap %':>8} "
        f"{'95% interval of gap %':>24} {'paper gap %':>12}",
    ]
    for n_items, bound in bounds.items():
        per = bound.bound_per_item
        rows = summary[(summary["n_items"] == n_items) & (summary["policy"] != BOUND_ID)]
        for _, r in rows.iterrows():
            gap = 100 * (per - r["reward_per_item_mean"]) / per
            lo = 100 * (per - r["reward_per_item_ci_high"]) / per
            hi = 100 * (per - r["reward_per_item_ci_low"]) / per
            paper = (
                f"{FIG1_PAPER_GAP_PERCENT:.2f}"
                if n_items == max(bounds) and r["policy"] == "lagrangian-index"
                else "—"
            )
            lines.append(
                f"{n_items:>6} {bound.budget:>6} {per:>9.5f} {r['policy']:<18} "
                f"{r['reward_per_item_mean']:>9.5f} {gap:>8.3f} {f'[{lo:.3f}, {hi:.3f}]':>24} "
                f"{paper:>12}"
            )
    notes = [
        "the paper gives no per-task values for Fig. 1 (the figure is missing from our copy); "
        "its only number is the index policy's gap at the largest size, 0.03% (the text says "
        "'K=1200', i.e. U = 1200 workers for K = 1000 tasks)",
        "reward = eq. (2): posterior expected number of correctly classified tasks, per task",
        "the bound is the scalar-λ bound (golden section); at K <= 100 the vector-λ subgradient "
        "bound is computed too and the smaller is shown",
        "OKG in continuous time assigns by its score at the arrival; with ties to the smallest "
        "index it gives the same task to every worker who arrives while its label is pending, "
        "which is one reason it trails (ties at random, opt-kg:tie-break=random, spread the "
        "workers and do better)",
    ]
    for n_items, bound in bounds.items():
        notes.append(
            f"K={n_items}: label cap {bound.label_cap} does not bind "
            f"(reach probability {max(bound.cap_reach_probability):.1e}, forbid-at-cap bound "
            f"{bound.bound_forbid / n_items:.6f} vs {bound.bound_per_item:.6f} per task)"
            if not bound.cap_binds
            else f"K={n_items}: the label cap {bound.label_cap} binds; raise it"
        )
    return "\n".join(lines), notes


class SubsetReplayEnvironment(LabelingEnvironment):
    """K tasks drawn afresh at every reset from a pool of a real data set, then replayed.

    Args:
        data: a :class:`~crowdbudget.datasets.LabelData` with gold labels.
        pool: the task indices to draw from, shape (n_pool,).
        n_items: K.
        prior: the prior row ``[b, a]`` handed to the policies.
    """

    def __init__(self, data: Any, pool: np.ndarray, n_items: int, prior: np.ndarray) -> None:
        self.data = data
        self.pool = np.asarray(pool, dtype=np.int64)
        if not 1 <= n_items <= self.pool.shape[0]:
            raise InvalidParameterError(
                f"n_items must be in 1..{self.pool.shape[0]} (the pool size), got {n_items}"
            )
        self.n_items = n_items
        self.prior = np.asarray(prior, dtype=float)
        self.true_labels = np.zeros(n_items, dtype=np.int64)
        self._inner: ReplayEnvironment | None = None

    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> dict[str, Any]:
        seq = as_seed_sequence(seed)
        chosen = np.random.default_rng(child_seed(seq, 0)).choice(
            self.pool, size=self.n_items, replace=False
        )
        remap = np.full(self.data.n_items, -1, dtype=np.int64)
        remap[chosen] = np.arange(self.n_items)
        keep = remap[self.data.items] >= 0
        inner = ReplayEnvironment(
            remap[self.data.items[keep]],
            self.data.workers[keep],
            self.data.labels[keep],
            self.data.gold[chosen],
            n_items=self.n_items,
            n_workers=self.data.n_workers,
            n_classes=2,
            prior=self.prior,
            name=f"{self.data.name}-subset",
        )
        inner.reset(seed=child_seed(seq, 1))
        self._inner = inner
        self.chosen_ = chosen
        self.true_labels = inner.true_labels
        self.eligible = inner.eligible
        self.evaluation_mask = inner.evaluation_mask
        return {"tasks": chosen}

    def record_counts(self) -> np.ndarray:
        assert self._inner is not None, "reset first"
        return np.bincount(self._inner.items, minlength=self.n_items)

    def step(self, assignment: Assignment) -> StepResult:
        assert self._inner is not None, "reset first"
        result = self._inner.step(assignment)
        self.eligible = self._inner.eligible
        return result

    def problem(self, budget: float) -> Problem:
        return Problem(n_items=self.n_items, budget=budget, prior=self.prior)


def rte_history_prior(data: Any, seed: int) -> tuple[BetaPriorFit, np.ndarray, np.ndarray]:
    """Hold back 50 RTE tasks (chosen by ``seed``), fit the prior on them (the paper's
    frequency method of moments); returns the fit, the held-back and the remaining tasks."""
    order = np.random.default_rng(child_seed(as_seed_sequence(seed), 99)).permutation(data.n_items)
    history, rest = np.sort(order[:FIG2_HISTORY]), np.sort(order[FIG2_HISTORY:])
    counts = data.label_counts()[history]
    return fit_beta_prior(counts[:, 1], counts.sum(axis=1)), history, rest


def fig2(
    *, seed: int = 0, quick: bool = False, n_jobs: int | None = None, progress: bool = True
) -> ReproductionResult:
    """Fig. 2: accuracy on RTE of the index policy, OKG, Thompson sampling and UCB1-tuned.

    ``quick``: 20 / 10 / 2 replications at K = 10 / 100 / 750; full: 5,000 / 2,000 / 500
    (the paper runs 5,000 at every K; see the notes).
    """
    from crowdbudget.datasets import load_dataset

    data = load_dataset("rte")
    fit, history, rest = rte_history_prior(data, seed)
    reps = {10: 20, 100: 10, 750: 2} if quick else {10: 5000, 100: 2000, 750: 500}
    if quick and n_jobs is None:
        n_jobs = 1
    frames = []
    for n_items in FIG2_SIZES:
        budget = round(BUDGET_PER_TASK * n_items)
        env = ContinuousTimeEnvironment(
            SubsetReplayEnvironment(data, rest, n_items, fit.as_prior_row()),
            arrival_rate=ARRIVAL_RATE,
            completion_rate=COMPLETION_RATE,
        )
        result = run_continuous_experiment(
            FIG2_POLICIES,
            env,
            [budget],
            reps[n_items],
            seed=seed,
            n_jobs=n_jobs,
            progress=progress,
            **PAPER_RULES,  # a faithful reproduction: the papers' tie rules
        )
        summary = result.summary.copy()
        summary["n_items"] = n_items
        frames.append(summary)
    summary = pd.concat(frames, ignore_index=True)
    notes = [
        f"prior fitted on {FIG2_HISTORY} held-back RTE tasks (label frequencies, method of "
        f"moments): Beta({fit.a:.3f}, {fit.b:.3f}), mean {fit.mean:.3f} (the paper says 50 "
        "held-back tasks in one sentence and 45 in the next; we use 50)",
        "worker budget U = 1.2K (not stated for Fig. 2; §7.1's value); a completion returns a "
        "random unused recorded label of the task (the paper: 'the most recent label')",
        "the paper gives no numbers for Fig. 2, only the ordering: the index policy is the "
        "best at every K",
    ]
    for n_items in FIG2_SIZES:
        rows = summary[summary["n_items"] == n_items].sort_values("accuracy_mean", ascending=False)
        ranking = ", ".join(
            f"{r['policy']} {r['accuracy_mean']:.4f} ± "
            f"{r['accuracy_ci_high'] - r['accuracy_mean']:.4f}"
            for _, r in rows.iterrows()
        )
        notes.append(f"K={n_items}: measured ordering (accuracy ± 95% half-width): {ranking}")
    if not quick:
        notes.append(
            "replications: 5,000 / 2,000 / 500 at K = 10 / 100 / 750 (the paper: 5,000 each); "
            "the intervals at K = 750 are already narrower than the differences"
        )
    return ReproductionResult(
        reproduction_id="hu-frazier-fig2",
        summary=summary,
        settings={
            "dataset": "rte",
            "n_items": list(FIG2_SIZES),
            "budget": [round(BUDGET_PER_TASK * k) for k in FIG2_SIZES],
            "arrival_rate": ARRIVAL_RATE,
            "completion_rate": COMPLETION_RATE,
            "prior": [fit.a, fit.b],
            "history_tasks": history.tolist(),
            "reps": max(reps.values()),
            "reps_per_size": {str(k): v for k, v in reps.items()},
            "policies": FIG2_POLICIES,
        },
        metrics=("accuracy",),
        paper={},
        notes=notes,
        x_label="workers U = 1.2 K (K = 10, 100, 750)",
    )


__all__ = ["SubsetReplayEnvironment", "fig1", "fig2", "rte_history_prior"]
