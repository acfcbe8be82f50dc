"""``bds-ev-blind-own-refit`` (aggregation/prior_refit.py): the crowd prior re-fitted once on the
verdict's own posterior — stage 1 is the parent's fit, a fixed prior leaves nothing to re-fit,
the re-fitted crowd is less accurate than the vote's on a half-spammer crowd, and what that
does to its reading (docs/stress-bed.md, "the held-out bed's worst rows")."""

from __future__ import annotations

import numpy as np

from crowdbudget.aggregation import make_aggregator
from crowdbudget.aggregation.base import Aggregator
from crowdbudget.aggregation.bayesian_dawid_skene import BayesianDawidSkene
from crowdbudget.aggregation.prior_refit import PriorRefitDawidSkene
from crowdbudget.datasets import load_dataset
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.experiments.stress import full_bed, make_crowd, subsample_per_item


def build(text: str) -> PriorRefitDawidSkene:
    model = make_aggregator(text)
    assert isinstance(model, PriorRefitDawidSkene)
    return model


def accuracy(model: Aggregator, data: LabelData) -> float:
    assert data.gold is not None
    return float(np.mean(model.probas_.argmax(axis=1) == data.gold))


def spammer_crowd(seed: int, name: str = "binary-88-12-one-coin-spam50-k5") -> LabelData:
    """A held-out cell (half the workers answer at random) at 2 labels per item."""
    cell = {c.name: c for c in full_bed()}[name]
    return subsample_per_item(make_crowd(cell, seed), 2, np.random.default_rng(seed))


def test_the_id_has_the_default_verdicts_settings() -> None:
    model = build("bds-ev-blind-own-refit")
    own = make_aggregator("bds-ev-blind-own")
    for name in ("prior_form", "prior_floor", "lone_labels", "asymmetry", "prior_fit"):
        assert getattr(model, name) == getattr(own, name), name


def test_stage_one_is_the_parents_fit_and_the_crowd_looks_less_accurate() -> None:
    for seed in range(3):
        data = spammer_crowd(seed)
        own = make_aggregator("bds-ev-blind-own").fit(data)
        refit = build("bds-ev-blind-own-refit").fit(data)
        assert isinstance(own, BayesianDawidSkene)
        assert np.array_equal(refit.first_prior_, own.confusion_prior_), seed
        first = refit.first_prior_[0, 0] / refit.first_prior_[0].sum()
        second = refit.confusion_prior_[0, 0] / refit.confusion_prior_[0].sum()
        # the vote's start credits every worker with the vote's agreement
        assert second < first - 0.03, seed
        # one-coin form kept, floor kept
        assert np.allclose(np.diag(refit.confusion_prior_), refit.confusion_prior_[0, 0])
        assert refit.confusion_prior_.min() >= 0.1


def test_it_reads_a_half_spammer_imbalanced_crowd_better() -> None:
    # three draws of binary-88-12-one-coin-spam50-k5 at 2 per item: 0.858 / 0.874 / 0.866
    # for bds-ev-blind-own, 0.862 / 0.894 / 0.886 re-fitted
    gains = []
    for seed in range(3):
        data = spammer_crowd(seed)
        own = make_aggregator("bds-ev-blind-own").fit(data)
        refit = build("bds-ev-blind-own-refit").fit(data)
        gains.append(accuracy(refit, data) - accuracy(own, data))
    assert min(gains) >= 0.0 and np.mean(gains) > 0.01


def test_a_fixed_prior_leaves_nothing_to_refit() -> None:
    data = load_dataset("rte")
    fixed = "confusion-prior=4,1"
    refit = build(f"bds-ev-blind-own-refit:{fixed}").fit(data)
    own = make_aggregator(f"bds-ev-blind-own:{fixed}").fit(data)
    assert np.array_equal(refit.probas_, own.probas_)
    assert np.array_equal(refit.first_prior_, refit.confusion_prior_)


def test_deterministic() -> None:
    data = spammer_crowd(0)
    a = build("bds-ev-blind-own-refit").fit(data)
    b = build("bds-ev-blind-own-refit").fit(data)
    assert np.array_equal(a.probas_, b.probas_)
