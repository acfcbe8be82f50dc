"""``bds-ev-blind-own-refit``, ``bds-ev-blind-recheck-refit-ev`` and
``bds-hard-blind-recheck-refit-ev`` (aggregation/prior_refit.py): the crowd prior re-fitted once
on the verdict's own posterior — stage 1 is the parent's fit, a fixed prior leaves nothing to
re-fit, the re-fitted crowd is less accurate than the vote's on a half-spammer crowd, and what that
does to its reading (docs/stress-bed.md, "the held-out bed's worst rows")."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.aggregation import make_aggregator
from crowdbudget.aggregation.base import Aggregator
from crowdbudget.aggregation.bayesian_dawid_skene import BayesianDawidSkene
from crowdbudget.aggregation.item_difficulty import ItemDifficultyDawidSkene
from crowdbudget.aggregation.prior_refit import PriorRefitDawidSkene, PriorRefitItemDifficulty
from crowdbudget.datasets import load_dataset
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.stress import full_bed, make_crowd, subsample_per_item


def build_hard(text: str) -> PriorRefitItemDifficulty:
    model = make_aggregator(text)
    assert isinstance(model, PriorRefitItemDifficulty)
    return model


def build_default() -> ItemDifficultyDawidSkene:
    model = make_aggregator("bds-hard-blind-recheck")
    assert isinstance(model, ItemDifficultyDawidSkene)
    return model


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


# --- bds-ev-blind-recheck-refit-ev: the stage read by the evidence bound ---------------------


def biased_crowd(seed: int) -> LabelData:
    """A held-out cell (20 % biased workers, ten classes), all labels: the re-fit opened it."""
    cell = {c.name: c for c in full_bed()}["class10-confusion-biased20-k3"]
    return make_crowd(cell, seed)


def test_the_evidence_id_is_the_default_readings_settings() -> None:
    model = build("bds-ev-blind-recheck-refit-ev")
    recheck = make_aggregator("bds-ev-blind-recheck")
    for name in ("prior_form", "prior_floor", "lone_labels", "asymmetry", "prior_fit"):
        assert getattr(model, name) == getattr(recheck, name), name
    assert model.refit == "evidence"
    assert build("bds-ev-blind-own-refit").refit == "always"


def test_the_bounds_are_each_stages_own_and_the_larger_is_read() -> None:
    for data in (spammer_crowd(0), biased_crowd(0)):
        model = build("bds-ev-blind-recheck-refit-ev").fit(data)
        first, second = model.stage_bounds_
        assert model.refit_read_ == (second > first)
        # the bound of the stage read, recomputed at its shares under its prior
        read = model.evidence_bound(data, model._variational_shares)
        assert np.isclose(read, max(first, second), rtol=0, atol=1e-9)


def test_the_evidence_reads_the_refit_on_a_half_spammer_imbalanced_crowd() -> None:
    # three draws of binary-88-12-one-coin-spam50-k5 at 2 per item: the re-fitted prior's
    # bound is 8-10 nats above the vote's, and the refit's reading is read
    for seed in range(3):
        data = spammer_crowd(seed)
        model = build("bds-ev-blind-recheck-refit-ev").fit(data)
        always = build("bds-ev-blind-recheck-refit-ev:refit=always").fit(data)
        first, second = model.stage_bounds_
        assert second > first + 1.0, seed
        assert model.refit_read_
        assert np.array_equal(model.probas_, always.probas_), seed
        assert not np.array_equal(model.first_prior_, model.confusion_prior_), seed


def test_the_evidence_keeps_the_vote_prior_on_a_biased_multi_class_crowd() -> None:
    # the rows the prototype opened: the re-fitted prior's bound is lower, and the fit read
    # is the default reading's, bit for bit
    for seed in range(2):
        data = biased_crowd(seed)
        model = build("bds-ev-blind-recheck-refit-ev").fit(data)
        recheck = make_aggregator("bds-ev-blind-recheck").fit(data)
        first, second = model.stage_bounds_
        assert second < first, seed
        assert not model.refit_read_
        assert np.array_equal(model.probas_, recheck.probas_), seed
        assert isinstance(recheck, BayesianDawidSkene)
        assert np.array_equal(model.confusion_prior_, recheck.confusion_prior_), seed
        assert np.array_equal(model.errors_, recheck.errors_), seed


def test_always_has_no_bounds_and_a_fixed_prior_no_second_stage() -> None:
    data = spammer_crowd(0)
    always = build("bds-ev-blind-own-refit").fit(data)
    assert always.stage_bounds_ == () and always.refit_read_
    fixed = build("bds-ev-blind-recheck-refit-ev:confusion-prior=4,1").fit(data)
    assert fixed.stage_bounds_ == () and not fixed.refit_read_


def test_a_refit_rule_it_does_not_know_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="refit"):
        build("bds-ev-blind-recheck-refit-ev:refit=twice")
    with pytest.raises(InvalidParameterError, match="refit must be one of"):
        PriorRefitDawidSkene(refit="twice").fit(spammer_crowd(0))


# --- bds-hard-blind-recheck-refit-ev: the default's difficulty mixture on that reading -------


def test_with_the_mixture_refused_it_is_the_evidence_reading_bit_for_bit() -> None:
    # the gate refuses on both crowds (as on every bed cell): the workers' model alone is read
    for data in (spammer_crowd(1), biased_crowd(0)):
        hard = build_hard("bds-hard-blind-recheck-refit-ev").fit(data)
        alone = build("bds-ev-blind-recheck-refit-ev").fit(data)
        assert hard.difficulty_ == "none"
        assert np.array_equal(hard.probas_, alone.probas_)
        assert hard.stage_bounds_ == alone.stage_bounds_
        assert hard.refit_read_ == alone.refit_read_


def test_where_the_vote_prior_is_kept_it_is_the_default_verdict_bit_for_bit() -> None:
    data = biased_crowd(1)
    hard = build_hard("bds-hard-blind-recheck-refit-ev").fit(data)
    default = build_default().fit(data)
    assert not hard.refit_read_
    assert np.array_equal(hard.probas_, default.probas_)
    assert np.array_equal(hard.errors_, default.errors_)
    assert hard.refit == "evidence"
    assert hard.prior_form == default.prior_form
    assert hard.asymmetry == default.asymmetry


def test_where_the_mixture_is_taken_it_reads_the_default_verdicts_mixture() -> None:
    # fact_eval, all labels (correlated errors): the workers' model alone reads the re-fit
    # (its bound the larger) and the mixture's evidence still takes the mixture, fitted as
    # the default's (its own vote-started prior)
    data = load_dataset("fact_eval")
    hard = build_hard("bds-hard-blind-recheck-refit-ev").fit(data)
    default = build_default().fit(data)
    assert hard.difficulty_ == default.difficulty_ == "mixture"
    assert hard.refit_read_
    assert np.array_equal(hard.probas_, default.probas_)
