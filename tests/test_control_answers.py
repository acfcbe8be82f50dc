"""Control answers as labels of known truth in the policies' posteriors and the verdicts, and
the calibration on control answers (:mod:`crowdbudget.aggregation.control_calibration`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from crowdbudget.aggregation import make_aggregator
from crowdbudget.aggregation.control_calibration import calibrate_on_control
from crowdbudget.datasets import load_dataset
from crowdbudget.engine.control import ControlLedger, ControlTasks, control_seed
from crowdbudget.engine.live import LiveRules
from crowdbudget.engine.loop import Clock, StopAtSpend, drive
from crowdbudget.experiments.runner import run_experiment
from crowdbudget.posteriors.categorical_workers import (
    ConfusionPosterior,
    OneCoinCategoricalPosterior,
)
from crowdbudget.posteriors.one_coin import OneCoinPosterior
from crowdbudget.posteriors.two_coin import TwoCoinPosterior
from crowdbudget.registry import make_policy
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.simulation.workers import WorkerPool
from crowdbudget.types import CampaignState, LabelEvent


@pytest.mark.parametrize("label", [0, 1])
def test_one_coin_posterior_counts_a_control_answer_as_definite(label: int) -> None:
    post = OneCoinPosterior((1.0, 1.0), (1.0, 4.0), n_items=3, n_workers=2)
    post.update_known(LabelEvent(item=1, worker=0, label=label), truth=1)
    right = label == 1
    assert post.c[0] == pytest.approx(4.0 + right, abs=1e-6)
    assert post.d[0] == pytest.approx(1.0 + (not right), abs=1e-6)
    # an ordinary label with the item at its prior moves the worker far less
    plain = OneCoinPosterior((1.0, 1.0), (1.0, 4.0), n_items=3, n_workers=2)
    plain.update(LabelEvent(item=1, worker=0, label=label))
    assert abs(plain.c[0] + plain.d[0] - 5.0) < abs(post.c[0] + post.d[0] - 5.0)


def test_two_coin_posterior_moves_only_the_coin_of_the_known_class() -> None:
    post = TwoCoinPosterior((1.0, 1.0), (1.0, 4.0), n_items=2, n_workers=1)
    post.update_known(LabelEvent(item=0, worker=0, label=0), truth=1)  # a missed positive
    assert post.d1[0] == pytest.approx(2.0, abs=1e-6) and post.c1[0] == pytest.approx(4.0)
    assert post.c2[0] == pytest.approx(4.0, abs=1e-6) and post.d2[0] == pytest.approx(1.0, abs=1e-6)


def test_categorical_posteriors_count_a_control_answer_as_definite() -> None:
    post = OneCoinCategoricalPosterior(np.ones(3), (1.0, 4.0), n_items=2, n_workers=1)
    post.update_known(LabelEvent(item=0, worker=0, label=2), truth=1)
    assert post.d[0] == pytest.approx(2.0, abs=1e-6) and post.c[0] == pytest.approx(4.0, abs=1e-6)
    assert post.q[0].argmax() == 1
    # a refit re-reads the control answer with the item's known class as its prior
    post.refit([0], [0], [2])
    assert post.d[0] == pytest.approx(2.0, abs=1e-6)
    confusion = ConfusionPosterior(np.ones(3), n_items=2, n_workers=1)
    before = confusion.alpha[0].copy()
    confusion.update_known(LabelEvent(item=0, worker=0, label=2), truth=1)
    assert np.allclose(confusion.alpha[0] - before, np.eye(3)[1][:, None] * np.eye(3)[2])


class _Spy:
    """Wraps a policy, recording which labels came as control answers."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.known: list[tuple[int, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def observe_known(self, event: LabelEvent, truth: int) -> None:
        self.known.append((event.item, truth))
        self.inner.observe_known(event, truth)


@pytest.mark.parametrize("policy_id", ["opt-kg:posterior=one-coin", "opt-kg:posterior=two-coin"])
def test_drive_hands_control_answers_to_the_policy_as_known_truth(policy_id: str) -> None:
    accuracies = [0.9, 0.85, 0.8, 0.6, 0.55, 0.9]
    pool = WorkerPool(np.array([[[a, 1 - a], [1 - a, a]] for a in accuracies]))
    env = SyntheticBernoulliEnvironment(40, prior=(0.1, 0.1), workers=pool)
    env.reset(seed=1)
    problem = env.problem(120)
    state = CampaignState.initial(problem)
    tasks = ControlTasks(n_items=4, first_k=2, rate=0.1)
    control_items = tasks.choose(np.ones(40, dtype=bool), control_seed(1))
    ledger = ControlLedger.start(tasks, control_items, env.true_labels, problem.n_workers)
    spy = _Spy(make_policy(policy_id))
    spy.reset(problem, np.random.default_rng(1))
    drive(spy, env, state, Clock("pull"), StopAtSpend(120), live=LiveRules(control=ledger))
    assert len(spy.known) == ledger.control_labels > 0
    assert all(control_items[i] and env.true_labels[i] == t for i, t in spy.known)


def test_calibrate_on_control_is_cross_fitted_and_keeps_the_labels() -> None:
    data = load_dataset("rte")
    sample = np.random.default_rng(0).choice(800, 60, replace=False)  # with confident errors
    control = {int(i): int(data.gold[i]) for i in sample}
    aggregator = make_aggregator("bds-oc")
    probas, report = calibrate_on_control(aggregator, data, control, rng=0)
    plain = make_aggregator("bds-oc").fit(data, known_truth=control)
    # the floor keeps every row's order, and the aggregator is left fitted with all the truth
    assert np.array_equal(aggregator.labels_, plain.labels_)
    assert np.array_equal(probas.argmax(axis=1), plain.probas_.argmax(axis=1))
    rows = np.array(sorted(control))
    assert np.array_equal(probas[rows], plain.probas_[rows])  # one-hot truth
    assert report["n_control"] == 60 and report["n_folds"] == 5 and 0 < report["floor"] <= 0.5
    crossed = report["cross_fitted"]
    assert crossed["nll"] < report["raw"]["nll"]  # the floor prices the confident errors
    assert crossed["nll_se"] > 0 and crossed["ece_se_bootstrap"] > 0
    # the same call, the same report (folds and bootstrap from the seed)
    again = calibrate_on_control("bds-oc", data, control, rng=0)[1]
    assert again == report
    # the difficulty floor: from the control answers, also cross-fitted
    difficulty = calibrate_on_control("bds-oc", data, control, rng=0, method="difficulty")[1]
    assert difficulty["method"] == "difficulty" and 0 < difficulty["floor"] <= 0.5
    assert difficulty["cross_fitted"]["nll"] < difficulty["raw"]["nll"]


def test_calibrate_on_control_with_too_few_answers_maps_nothing() -> None:
    data = load_dataset("rte")
    probas, report = calibrate_on_control("ds", data, {0: int(data.gold[0])})
    assert report["cross_fitted"] is None and report["floor"] == 0.0
    assert np.array_equal(probas, make_aggregator("ds").fit(data, known_truth={0: 0}).probas_) or (
        data.gold[0] != 0
    )


@pytest.mark.parametrize("method", ["floor", "answers", "splits-np"])
def test_replay_with_control_fits_the_verdict_with_known_truth_and_calibrates(
    method: str,
) -> None:
    accuracies = [0.9, 0.85, 0.8, 0.7, 0.6, 0.55, 0.9, 0.75]
    pool = WorkerPool(np.array([[[a, 1 - a], [1 - a, a]] for a in accuracies]))
    env = SyntheticBernoulliEnvironment(60, prior=(0.1, 0.1), workers=pool)
    runs = {}
    for calibrate in (None, method):
        tasks = ControlTasks(n_items=10, first_k=2, rate=0.1, calibrate=calibrate)
        runs[calibrate] = run_experiment(
            ["opt-kg:posterior=one-coin:verdict=bds-oc"],
            env,
            [180],
            n_reps=2,
            seed=3,
            mode="pull",
            n_jobs=1,
            control=tasks,
            progress=False,
        ).runs
    plain, calibrated = runs[None], runs[method]
    # the calibration keeps the labels: same accuracy; the probabilities (so NLL) change
    assert np.array_equal(plain["accuracy"].to_numpy(), calibrated["accuracy"].to_numpy())
    assert np.isfinite(calibrated["nll"].to_numpy()).all()
    if method == "floor":
        assert not np.array_equal(plain["nll"].to_numpy(), calibrated["nll"].to_numpy())
