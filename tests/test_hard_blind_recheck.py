"""``bds-hard-blind-recheck``: the item-difficulty mixture (aggregation/item_difficulty.py) on
the default verdict's exact reading, ``bds-ev-blind-recheck`` — its fall-backs to the default
bit for bit, the re-check of a one-class reading kept under the mixture, the mixture it takes
on correlated errors, and the form it reads (the item_difficulty module docstring, "On the
default's reading")."""

from __future__ import annotations

import numpy as np

from crowdbudget.aggregation import DEFAULT_VERDICT, make_aggregator
from crowdbudget.aggregation.item_difficulty import ItemDifficultyDawidSkene
from crowdbudget.datasets import load_dataset
from crowdbudget.experiments.stress import DEFAULT_BED, StressCell, make_crowd
from test_hard_blind_own import accuracy, correlated_crowd, log_loss

#: the few-worker probe that the one-coin reading takes for one class (as in
#: tests/test_prior_form_choice.py): 8 workers, a one-class worker among the heavy two
COLLAPSING = StressCell(
    "binary-80-20-8workers-biased-k2",
    (0.8, 0.2),
    2,
    8,
    activity_tail=0.5,
    biased_share=0.19,
)

RECHECK = "bds-ev-blind-recheck"


def build(text: str) -> ItemDifficultyDawidSkene:
    model = make_aggregator(text)
    assert isinstance(model, ItemDifficultyDawidSkene)
    return model


def same_fit(a: object, b: object) -> bool:
    """The same class posterior, workers, class prior and crowd prior, to the bit."""
    return all(
        np.array_equal(getattr(a, name), getattr(b, name))
        for name in ("probas_", "errors_", "priors_", "confusion_prior_", "symmetric_")
    )


def test_the_id_is_bds_hard_on_bds_ev_blind_recheck_s_reading() -> None:
    model = build("bds-hard-blind-recheck")
    assert model.asymmetry == "evidence-blind-own"
    assert model.prior_form == "evidence-one-class"
    assert model.difficulty == "evidence"
    assert make_aggregator(RECHECK).get_params() == {
        name: value
        for name, value in model.get_params().items()
        if name not in ("difficulty", "accelerate", "mixture_tol")
    }
    # the tempered id is this reading with its posterior tempered
    tempered = make_aggregator("bds-hard-blind-recheck-tempered")
    assert tempered.get_params() == {**model.get_params(), "temperature": "auto"}
    # the default (defaults.py) is that, its crowd prior chosen by the evidence
    default = make_aggregator(DEFAULT_VERDICT)
    assert default.get_params() == {**tempered.get_params(), "refit": "evidence"}


def test_without_the_mixture_it_is_bds_ev_blind_recheck_bit_for_bit() -> None:
    # difficulty=none, and the gate's refusal on crowds of independent workers
    cells = [c for c in DEFAULT_BED if c.name in ("binary-65-35-biased30-k5", "class3-spam30-k5")]
    for data in [*(make_crowd(cell, 0) for cell in cells), load_dataset("rte")]:
        reference = make_aggregator(RECHECK).fit(data)
        plain = build("bds-hard-blind-recheck:difficulty=none").fit(data)
        assert same_fit(plain, reference) and plain.hard_share_ == 0.0
        gated = build("bds-hard-blind-recheck").fit(data)
        assert gated.difficulty_ == "none" and gated.evidence_gate_
        assert same_fit(gated, reference)
        assert gated.reading_ == ("one-coin", "skip") and gated.prior_form_ == "one-coin"


def test_a_one_class_reading_is_rechecked_under_the_mixture() -> None:
    """The probe ``bds-hard-blind-own`` reads as one class (0.766, the one-coin reading):
    the composition re-checks it as the default does and reads ``bds``'s form (0.840); the
    gate and the mixture then read every label, as that form's fit does."""
    data = make_crowd(COLLAPSING, 0)
    own = build("bds-hard-blind-own").fit(data)
    assert np.unique(own.labels_).size == 1
    composed = build("bds-hard-blind-recheck").fit(data)
    reference = make_aggregator(RECHECK).fit(data)
    assert composed.prior_form_ == "confusion" and composed.reading_ == ("confusion", "count")
    assert composed.form_bounds_ == reference.form_bounds_
    assert composed.difficulty_ == "none"
    assert same_fit(composed, reference)
    assert accuracy(composed, data) >= 0.83


def test_it_takes_the_mixture_on_correlated_errors() -> None:
    """Two classes read: the one-coin reading kept, so the composition is
    ``bds-hard-blind-own`` bit for bit — the mixture taken, the misleading items read hard,
    NLL below the default's."""
    data = correlated_crowd(0)
    misleading = data.extra["misleading"]
    composed = build("bds-hard-blind-recheck").fit(data)
    own = build("bds-hard-blind-own").fit(data)
    default = make_aggregator(RECHECK).fit(data)
    assert composed.difficulty_ == "mixture" and composed.evidence_gain_ > 0
    assert composed.evidence_gain_ == own.evidence_gain_
    assert np.array_equal(composed.probas_, own.probas_)
    assert np.array_equal(composed.hard_, own.hard_)
    assert composed.hard_[misleading].mean() > 3 * composed.hard_[~misleading].mean()
    assert accuracy(composed, data) >= accuracy(default, data)
    assert log_loss(composed, data) < log_loss(default, data) - 0.05


def test_the_mixture_alone_reads_the_one_coin_form() -> None:
    data = correlated_crowd(1)
    alone = build("bds-hard-blind-recheck:difficulty=mixture").fit(data)
    own = build("bds-hard-blind-own:difficulty=mixture").fit(data)
    assert alone.reading_ == ("one-coin", "skip") and alone.difficulty_ == "mixture"
    assert np.array_equal(alone.probas_, own.probas_)


def test_known_truth_reaches_the_rechecked_fit() -> None:
    data = make_crowd(COLLAPSING, 0)
    gold = np.asarray(data.gold)
    known = {int(i): int(gold[i]) for i in range(0, data.n_items, 25)}
    composed = build("bds-hard-blind-recheck:difficulty=none").fit(data, known_truth=known)
    reference = make_aggregator(RECHECK).fit(data, known_truth=known)
    assert same_fit(composed, reference)
    for item, truth in known.items():
        assert composed.probas_[item, truth] == 1.0


def test_the_label_statistic_flags_fact_eval_and_no_independent_bed_cell() -> None:
    """The gate's ``G`` (a statistic of the labels and the default's own fit, no gold) flags
    fact_eval's correlated errors — the mixture fitted and taken — and flags none of the
    verdict table's bed cells (independent errors by construction, first draw, all labels):
    ``G`` = 0 (or nothing to check), and the fit is the default's, bit for bit."""
    fact_eval = load_dataset("fact_eval")
    flagged = build("bds-hard-blind-recheck").fit(fact_eval)
    assert flagged.gate_gain_ > 100 and not flagged.evidence_gate_
    assert flagged.difficulty_ == "mixture" and flagged.evidence_gain_ > 1000
    gold = np.asarray(fact_eval.gold)
    mask = gold >= 0
    default = make_aggregator(RECHECK).fit(fact_eval)
    assert (
        np.mean(flagged.labels_[mask] == gold[mask])
        > np.mean(default.labels_[mask] == gold[mask]) + 0.015
    )
    for cell in DEFAULT_BED:
        data = make_crowd(cell, np.random.SeedSequence([0, DEFAULT_BED.index(cell)]).spawn(1)[0])
        fit = build("bds-hard-blind-recheck").fit(data)
        # (one label per item: nothing to check, the gate does not run — NaN)
        assert not fit.gate_gain_ > 0.0 and fit.difficulty_ == "none", cell.name
        assert same_fit(fit, make_aggregator(RECHECK).fit(data)), cell.name


def test_the_form_chosen_on_every_fit_is_bds_ev_blind_form_s() -> None:
    """``prior_form="evidence"`` (both forms always fitted, the larger bound read): where the
    gate refuses, the composition is ``bds-ev-blind-form``'s fit bit for bit."""
    data = make_crowd(COLLAPSING, 0)
    composed = build("bds-hard-blind-own:prior-form=evidence").fit(data)
    reference = make_aggregator("bds-ev-blind-form").fit(data)
    assert composed.prior_form_ == reference.prior_form_ == "confusion"
    assert composed.form_bounds_ == reference.form_bounds_
    assert composed.difficulty_ == "none" and same_fit(composed, reference)
