"""Quantity-quality metrics (Li et al. 2016 §4.1) against a brute-force per-item loop, and as
a runner hook."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from crowdbudget.datasets import load_dataset
from crowdbudget.experiments.metrics import quality_metrics
from crowdbudget.experiments.runner import run_experiment
from crowdbudget.requirements import parse_requirement
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import CampaignState, Problem


def _loop_reference(counts, final, truth, mask, req):
    quantity = correct = met = met_correct = 0
    for i in range(counts.shape[0]):
        if not mask[i]:
            continue
        n = counts[i].sum()
        if n >= 3:
            quantity += 1
            correct += int(final[i] == truth[i])
        top = sorted(counts[i])[-2:]
        if req.quality_met(top[1] + 1, top[0] + 1, 1.0):
            met += 1
            met_correct += int(final[i] == truth[i])
    return quantity, correct, met, met_correct


@pytest.mark.parametrize("n_classes", [2, 3])
def test_metrics_match_a_loop(n_classes: int) -> None:
    rng = np.random.default_rng(n_classes)
    n = 200
    state = CampaignState.initial(Problem(n_items=n, budget=1000, n_classes=n_classes))
    state.label_counts[:] = rng.integers(0, 6, size=(n, n_classes))
    state.spent = float(state.label_counts.sum())
    final = rng.integers(0, n_classes, size=n)
    truth = rng.integers(0, n_classes, size=n)
    mask = rng.random(n) < 0.8
    req = parse_requirement("fisher=0.2:max-labels=4")
    got = quality_metrics(state, final, truth, mask, req)
    quantity, correct, met, met_correct = _loop_reference(
        state.label_counts, final, truth, mask, req
    )
    assert got["quantity"] == quantity and got["correct"] == correct
    assert got["accuracy_labeled"] == pytest.approx(correct / quantity)
    assert got["met"] == met and got["met_correct"] == met_correct
    assert got["spent"] == state.spent
    assert got["complete"] >= got["met"]  # the cap completes more items than quality alone


def test_nothing_labeled_reports_uninformative_accuracy() -> None:
    state = CampaignState.initial(Problem(n_items=4, budget=10))
    state.label_counts[:, 1] = 2
    got = quality_metrics(state, np.ones(4, int), np.ones(4, int), np.ones(4, bool))
    assert got["quantity"] == 0 and got["accuracy_labeled"] == 0.5


def test_metrics_hook_in_the_runner_on_rte() -> None:
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    hook = functools.partial(quality_metrics, requirement="fisher=0.2:max-labels=14")
    result = run_experiment(
        ["round-robin", "requallo:fisher=0.2:max-labels=14"],
        env,
        [800, 1600],
        2,
        seed=0,
        n_jobs=1,
        progress=False,
        metrics=hook,
    )
    s = result.summary.set_index(["policy", "budget"])
    # looping: two labels per item at 1,600 -> nothing has three labels yet (§4.2)
    assert s.loc[("round-robin", 1600.0), "quantity_mean"] == 0
    # Requallo labels many items (3+ labels) with a budget of one label per item
    assert s.loc[("requallo:fisher=0.2:max-labels=14", 800.0), "quantity_mean"] > 100
    assert s.loc[("requallo:fisher=0.2:max-labels=14", 800.0), "spent_mean"] == 800
