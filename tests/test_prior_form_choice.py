"""The prior's form chosen by the evidence bound (``prior_form="evidence"``,
``bds-ev-blind-form``; the bayesian_dawid_skene module docstring, "Form chosen by the
evidence"; docs/stress-bed.md)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from crowdbudget.aggregation import BayesianDawidSkene, make_aggregator
from crowdbudget.aggregation.worker_blind import crowd_log_evidence, log_evidence_free
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.stress import StressCell, make_crowd
from crowdbudget.labels import LabelData

#: the few-worker probe that the one-coin verdict reads as one class (benchmarks/
#: bench_default_policy.py ``few_worker_cells``: 8 workers, a one-class worker among the
#: heavy two, 80/20, 2 labels per item)
COLLAPSING = StressCell(
    "binary-80-20-8workers-biased-k2",
    (0.8, 0.2),
    2,
    8,
    activity_tail=0.5,
    biased_share=0.19,
)


def test_the_few_worker_collapse_is_closed() -> None:
    data = make_crowd(COLLAPSING, 0)
    gold = np.asarray(data.gold)
    old = make_aggregator("bds-ev-blind-own").fit(data)
    assert np.unique(old.labels_).size == 1  # the collapse: every item one class
    new = make_aggregator("bds-ev-blind-form").fit(data)
    assert isinstance(new, BayesianDawidSkene)
    assert new.prior_form_ == "confusion"
    assert new.form_bounds_["confusion"] > new.form_bounds_["one-coin"] + 1.0
    assert np.unique(new.labels_).size == 2
    assert float(np.mean(new.labels_ == gold)) >= 0.83  # the confusion form's 0.840
    assert float(new.priors_[1]) > 0.1  # the class prior off the corner (one-coin: 0.055)


def test_the_chosen_fit_is_that_form_s_fit() -> None:
    data = make_crowd(COLLAPSING, 0)
    chosen = make_aggregator("bds-ev-blind-form").fit(data)
    assert isinstance(chosen, BayesianDawidSkene)
    lone = "count" if chosen.prior_form_ == "confusion" else "skip"
    spec = f"bds-ev-blind-own:prior-form={chosen.prior_form_}:lone-labels={lone}"
    alone = make_aggregator(spec).fit(data)
    assert np.array_equal(chosen.probas_, alone.probas_)
    assert np.array_equal(chosen.errors_, alone.errors_)
    assert np.array_equal(chosen.confusion_prior_, alone.confusion_prior_)
    bound = alone.evidence_bound(data, alone.probas_)
    assert chosen.form_bounds_[chosen.prior_form_] == bound
    assert chosen.form_bounds_[chosen.prior_form_] == max(chosen.form_bounds_.values())


def test_a_fixed_prior_or_form_fits_once() -> None:
    data = make_crowd(COLLAPSING, 0)
    fixed = make_aggregator("bds-ev-blind-form:confusion-prior=2,1").fit(data)
    assert isinstance(fixed, BayesianDawidSkene)
    assert fixed.form_bounds_ == {}
    own = make_aggregator("bds-ev-blind-own").fit(data)
    assert isinstance(own, BayesianDawidSkene)
    assert own.prior_form_ == "one-coin" and own.form_bounds_ == {}


def test_a_bad_form_is_one_line() -> None:
    data = make_crowd(COLLAPSING, 0)
    with pytest.raises(InvalidParameterError, match="evidence"):
        BayesianDawidSkene(prior_form="best").fit(data)


def tiny_crowd(seed: int) -> LabelData:
    """7 items, 3 workers, 2 classes, 2–3 labels per item (small enough to sum over every
    assignment of the items' classes)."""
    rng = np.random.default_rng(seed)
    items, workers, labels = [], [], []
    truth = rng.integers(0, 2, size=7)
    for i in range(7):
        for j in rng.choice(3, size=int(rng.integers(2, 4)), replace=False):
            items.append(i)
            workers.append(int(j))
            labels.append(int(truth[i]) if rng.random() < 0.75 else int(1 - truth[i]))
    return LabelData(
        items=np.array(items),
        workers=np.array(workers),
        labels=np.array(labels),
        item_ids=np.array([f"i{i}" for i in range(7)], dtype=object),
        worker_ids=np.array([f"w{j}" for j in range(3)], dtype=object),
        classes=np.array(["a", "b"], dtype=object),
        gold=truth,
    )


def exact_log_evidence(data: LabelData, prior: np.ndarray, asymmetry: str) -> float:
    """``log p(labels | α₀, ν₀ = 1)`` by summing over all 2^N class assignments: for a
    hard assignment the Pólya integrals are exact (integer counts)."""
    C, J = 2, data.n_workers
    terms = []
    for z in itertools.product(range(C), repeat=data.n_items):
        z_arr = np.array(z)
        counts = np.zeros((J, C, C))
        np.add.at(counts, (data.workers, z_arr[data.items], data.labels), 1.0)
        n = np.bincount(z_arr, minlength=C).astype(float)
        classes = np.sum(gammaln(1.0 + n)) - gammaln(C + n.sum()) + gammaln(C)
        terms.append(classes + crowd_log_evidence(counts, prior, asymmetry))
    return float(logsumexp(terms))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("asymmetry", ["free", "none"])
def test_the_bound_is_below_the_exact_evidence(seed: int, asymmetry: str) -> None:
    data = tiny_crowd(seed)
    model = BayesianDawidSkene(asymmetry=asymmetry, prior_form="one-coin").fit(data)
    prior = model.confusion_prior_
    exact = exact_log_evidence(data, prior, asymmetry)
    rng = np.random.default_rng(seed)
    shares = [model.probas_, np.full((7, 2), 0.5), rng.dirichlet(np.ones(2), size=7)]
    for T in shares:
        bound = model.evidence_bound(data, T)
        assert np.isfinite(bound)
        assert bound <= exact + 1e-9
    # the fitted shares are close to the best a factorised q can do: within a few nats
    assert model.evidence_bound(data, model.probas_) > exact - 3.0


def test_a_hard_assignment_s_bound_is_its_joint() -> None:
    data = tiny_crowd(4)
    model = BayesianDawidSkene(prior_form="confusion").fit(data)
    prior = model.confusion_prior_
    z = np.asarray(data.gold)
    T = np.eye(2)[z]
    counts = np.zeros((data.n_workers, 2, 2))
    np.add.at(counts, (data.workers, z[data.items], data.labels), 1.0)
    n = np.bincount(z, minlength=2).astype(float)
    joint = np.sum(gammaln(1.0 + n)) - gammaln(2 + n.sum()) + gammaln(2)
    joint += float(np.sum(log_evidence_free(counts, prior)))
    assert model.evidence_bound(data, T) == pytest.approx(joint, abs=1e-10)


def partial(data: LabelData, n_labels: int, seed: int) -> LabelData:
    """``n_labels`` of ``data``'s labels drawn without replacement (a campaign stopped at
    1.5 labels per item: most items two labels, the rest one)."""
    keep = np.sort(np.random.default_rng(seed).choice(data.n_labels, n_labels, replace=False))
    return data.labels_subset(keep)


@pytest.mark.parametrize(
    ("cell", "seed", "least"),
    [
        (
            StressCell("binary-80-20-3workers-spam-k2", (0.8, 0.2), 2, 3, 0.5, spammer_share=0.1),
            0,
            0.77,
        ),
        (
            StressCell("binary-50-50-8workers-biased-k2", (0.5, 0.5), 2, 8, 0.5, biased_share=0.19),
            1,
            0.72,
        ),
    ],
)
def test_a_partial_few_worker_log_is_not_read_as_one_class(
    cell: StressCell, seed: int, least: float
) -> None:
    """With lone labels (``skip``) the one-coin fit reads these logs as one class (0.234 —
    every item the rare class — and 0.446); the confusion fit counting every label has the
    larger bound."""
    data = partial(make_crowd(cell, 0), 750, seed)
    gold = np.asarray(data.gold)
    old = make_aggregator("bds-ev-blind-own").fit(data)
    assert np.unique(old.labels_).size == 1
    new = make_aggregator("bds-ev-blind-form").fit(data)
    assert isinstance(new, BayesianDawidSkene) and new.prior_form_ == "confusion"
    assert float(np.mean(new.labels_ == gold)) >= least


class _OwnLoop(BayesianDawidSkene):
    """A subclass with its own variational loop (the parent's, called through)."""

    def _variational(self, data: LabelData, known: object) -> np.ndarray:
        return super()._variational(data, None)


def test_a_subclass_with_its_own_loop_refuses_the_choice() -> None:
    # (bds-hard makes the choice itself: tests/test_hard_blind_recheck.py)
    data = make_crowd(COLLAPSING, 0)
    with pytest.raises(InvalidParameterError, match="evidence"):
        _OwnLoop(prior_form="evidence").fit(data)


def test_the_recheck_reads_a_two_class_fit_as_the_one_coin_verdict() -> None:
    """``bds-ev-blind-recheck`` (``prior_form="evidence-one-class"``): a fit that reads two
    classes is ``bds-ev-blind-own``'s, bit for bit, and no second fit is made."""
    cell = StressCell("binary-50-50-5workers-spam-k2", (0.5, 0.5), 2, 5, 0.5, spammer_share=0.05)
    data = make_crowd(cell, 0)
    own = make_aggregator("bds-ev-blind-own").fit(data)
    recheck = make_aggregator("bds-ev-blind-recheck").fit(data)
    assert isinstance(recheck, BayesianDawidSkene)
    assert recheck.form_bounds_ == {} and recheck.prior_form_ == "one-coin"
    assert np.array_equal(own.probas_, recheck.probas_)
    assert np.array_equal(own.errors_, recheck.errors_)


def test_the_recheck_closes_the_one_class_reading() -> None:
    data = make_crowd(COLLAPSING, 0)
    recheck = make_aggregator("bds-ev-blind-recheck").fit(data)
    form = make_aggregator("bds-ev-blind-form").fit(data)
    assert isinstance(recheck, BayesianDawidSkene) and isinstance(form, BayesianDawidSkene)
    assert recheck.prior_form_ == "confusion"
    assert recheck.form_bounds_ == form.form_bounds_
    assert np.array_equal(recheck.probas_, form.probas_)
    assert float(np.mean(recheck.labels_ == np.asarray(data.gold))) >= 0.83
