"""The tempered posterior's τ (``temperature="auto"``): the criterion's factored evaluation
against its definition, its slope, and the bounded search against the 40-point grid
(:mod:`crowdbudget.aggregation._tempering`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from crowdbudget.aggregation import BayesianDawidSkene, make_aggregator
from crowdbudget.aggregation import _tempering as tempering
from crowdbudget.datasets import load_dataset
from crowdbudget.datasets.loaders import from_frame
from crowdbudget.experiments.stress import DEFAULT_BED, make_crowd
from crowdbudget.labels import LabelData
from crowdbudget.testing.aggregator_checks import synthetic_frame


def _random_fit(
    C: int, n_items: int, n_workers: int, per_item: int, seed: int
) -> tuple[np.ndarray, ...]:
    """Labels and a fit's numbers drawn at random: (items, workers, labels, log T, E[log e],
    E[e]) with Dirichlet confusions and posteriors of every sharpness."""
    rng = np.random.default_rng(seed)
    items = np.repeat(np.arange(n_items), per_item)
    workers = rng.integers(0, n_workers, items.size)
    labels = rng.integers(0, C, items.size)
    alpha = rng.uniform(0.2, 30.0, (n_workers, C, C)) + 20.0 * np.eye(C)
    errors = alpha / alpha.sum(axis=2, keepdims=True)
    expected_log_e = np.log(errors) - rng.uniform(0.0, 0.3, errors.shape)
    log_T = rng.normal(0.0, rng.uniform(0.1, 40.0, (n_items, 1)), (n_items, C))
    log_T -= np.log(np.sum(np.exp(log_T - log_T.max(axis=1, keepdims=True)), axis=1))[
        :, None
    ] + log_T.max(axis=1, keepdims=True)
    return items, workers, labels, log_T, expected_log_e, errors


def _definition(fit: tuple[np.ndarray, ...], tau: float) -> float:
    """``L(τ)`` as the model's docstring states it: the softmax of ``τ r`` over all C classes
    (no factoring), its mixture of the workers' confusions, the log summed."""
    items, workers, labels, log_T, expected_log_e, errors = fit
    rest = log_T[items] - expected_log_e[workers, :, labels]
    rest -= rest.max(axis=1, keepdims=True)
    weights = np.exp(tau * rest)
    held_out = np.sum(weights * errors[workers, :, labels], axis=1) / weights.sum(axis=1)
    return float(np.sum(np.log(held_out)))


@pytest.mark.parametrize("C", [2, 3, 5])
def test_factored_criterion_and_slope_match_the_definition(C: int) -> None:
    fit = _random_fit(C, n_items=300, n_workers=12, per_item=4, seed=C)
    held = tempering.held_out_labels(*fit)
    assert held.gaps.shape == (C - 1, 1200) and np.all(held.gaps <= 0)
    for tau in (0.025, 0.3, 0.77, 1.0):
        value = tempering.held_out_log_likelihood(held, tau)
        assert value == pytest.approx(_definition(fit, tau), rel=1e-12, abs=1e-9)
        same, slope = tempering.held_out_slope(held, tau)
        assert same == pytest.approx(value, rel=1e-12)
        step = 1e-6
        difference = (_definition(fit, tau + step) - _definition(fit, tau - step)) / (2 * step)
        assert slope == pytest.approx(difference, rel=1e-5, abs=1e-5)


def _crowds() -> Iterator[tuple[str, LabelData]]:
    """Crowds whose criterion peaks inside the interval and at τ = 1: independent synthetic
    labels, synthetic labels with correlated errors (every worker wrong together on a third of
    the items), a three-class crowd, and the bundled rte, temp, wsd."""
    yield "independent", from_frame(synthetic_frame(n_items=300, labels_per_item=7, seed=3))
    rng = np.random.default_rng(11)
    n_items, per_item, n_workers = 400, 7, 20
    truth = rng.integers(0, 3, n_items)
    hard = rng.random(n_items) < 0.3
    decoy = (truth + rng.integers(1, 3, n_items)) % 3
    items = np.repeat(np.arange(n_items), per_item)
    workers = np.concatenate([rng.choice(n_workers, per_item, replace=False) for _ in truth])
    right = rng.random(items.size) < np.where(hard[items], 0.35, 0.9)
    noise = rng.integers(0, 3, items.size)
    labels = np.where(right, truth[items], np.where(hard[items], decoy[items], noise))
    yield (
        "correlated-3-class",
        LabelData(
            items=items,
            workers=workers,
            labels=labels,
            item_ids=np.arange(n_items).astype(str).astype(object),
            worker_ids=np.arange(n_workers).astype(str).astype(object),
            classes=np.array(["a", "b", "c"], dtype=object),
            gold=truth,
        ),
    )
    for name in ("rte", "temp", "wsd"):
        yield name, load_dataset(name)
    # 40 labels per item: a narrow maximum near τ = 0.12 beside a plateau up to τ = 1
    # (docs/stress-bed.md, "2026-12-07: a cheaper τ search")
    index = [cell.name for cell in DEFAULT_BED].index("binary-60-40-k40")
    for draw, seed in enumerate(np.random.SeedSequence([0, index]).spawn(3)):
        yield f"binary-60-40-k40/{draw}", make_crowd(DEFAULT_BED[index], seed)


@contextmanager
def _captured_terms(builder: str = "held_out_labels") -> Iterator[list[tempering.HeldOutLabels]]:
    """The per-label terms every ``auto`` fit inside the block builds with ``tempering``'s
    ``builder`` (the workers' terms, or ``mixture_held_out_labels``: a taken mixture's)."""
    found: list[tempering.HeldOutLabels] = []
    original = getattr(tempering, builder)

    def capture(*arrays: np.ndarray) -> tempering.HeldOutLabels:
        found.append(original(*arrays))
        return found[-1]

    setattr(tempering, builder, capture)
    try:
        yield found
    finally:
        setattr(tempering, builder, original)


#: the default verdict, the plain model, and the first build's prior refitted every iteration
#: (on temp two maxima 0.06 nats apart, the larger at τ = 0.45 between two coarse points)
SPECS = (
    "bds-ev-blind-recheck:temperature=auto",
    "bds:temperature=auto",
    "bds:prior-fit=every:temperature=auto",
)


@pytest.mark.parametrize("spec", SPECS)
def test_search_is_at_least_the_grid_on_every_crowd(spec: str) -> None:
    taus = {}
    for name, data in _crowds():
        with _captured_terms() as terms:
            fitted = make_aggregator(spec).fit(data)
        held = terms[-1]
        searched = tempering.searched_temperature(held)
        grid = tempering.grid_temperature(held)
        value = tempering.held_out_log_likelihood(held, searched)
        best_on_grid = tempering.held_out_log_likelihood(held, grid)
        # the search's value is never below the grid's (a little rounding allowed)
        assert value >= best_on_grid - 1e-9 * abs(best_on_grid), name
        assert fitted.temperature_ == searched, name
        taus[name] = searched
    # the crowds cover both cases: a maximum inside the interval and one at τ = 1
    assert min(taus.values()) < 0.9 and max(taus.values()) == 1.0, taus


def _groups(*groups: tuple[int, float, float, float]) -> tempering.HeldOutLabels:
    """Two-class terms by hand: ``(count, p_k, p_other, gap)`` per group of labels."""
    counts = [g[0] for g in groups]
    return tempering.HeldOutLabels(
        gaps=np.repeat([g[3] for g in groups], counts)[None, :],
        top=np.repeat([g[1] for g in groups], counts),
        others=np.repeat([g[2] for g in groups], counts)[None, :],
    )


@pytest.mark.parametrize(
    ("held", "larger"),
    [
        # labels agreeing with a sharp posterior (the criterion rises at small τ), labels
        # disagreeing with a moderate one (it falls), labels agreeing with a weak one (it
        # rises again towards τ = 1): two local maxima, the larger inside ...
        (_groups((100, 0.9, 0.1, -40.0), (100, 0.2, 0.8, -5.0), (100, 0.9, 0.1, -1.5)), "inside"),
        # ... or at τ = 1
        (_groups((200, 0.9, 0.1, -30.0), (100, 0.2, 0.8, -6.0), (300, 0.9, 0.1, -1.0)), "one"),
    ],
)
def test_search_finds_the_larger_of_two_maxima(held: tempering.HeldOutLabels, larger: str) -> None:
    fine = np.arange(0.025, 1.0 + 1e-9, 0.0025)
    values = np.array([tempering.held_out_log_likelihood(held, float(t)) for t in fine])
    inner = (values[1:-1] > values[:-2]) & (values[1:-1] >= values[2:])
    assert inner.sum() == 1 and values[-1] > values[-2]  # the fixture: two maxima
    searched = tempering.searched_temperature(held)
    grid = tempering.grid_temperature(held)
    value = tempering.held_out_log_likelihood(held, searched)
    assert value >= tempering.held_out_log_likelihood(held, grid) - 1e-9 * abs(value)
    assert value >= values.max() - 1e-6 * abs(value)
    assert (searched == 1.0) == (larger == "one")


def test_tempered_fit_keeps_the_labels_with_either_search() -> None:
    data = load_dataset("temp")
    plain = make_aggregator("bds-ev-blind-recheck").fit(data)
    searched = make_aggregator("bds-ev-blind-recheck:temperature=auto").fit(data)
    BayesianDawidSkene._temperature_search = "grid"
    try:
        grid = make_aggregator("bds-ev-blind-recheck:temperature=auto").fit(data)
    finally:
        BayesianDawidSkene._temperature_search = "search"
    np.testing.assert_array_equal(searched.labels_, plain.labels_)
    np.testing.assert_array_equal(grid.labels_, plain.labels_)
    assert 0.025 <= searched.temperature_ < 1.0
    assert abs(searched.temperature_ - grid.temperature_) <= 0.025


def test_the_form_is_chosen_on_the_fit_not_on_its_tempered_report() -> None:
    """``bds-ev-blind-recheck`` scores each candidate fit's evidence bound at its variational
    shares; tempering must not move that choice (a campaign's first 12 labels: worker 0 on
    every item, saying 1 on six of eight; the confusion reading wins by 0.23 nats, and its
    tempered shares — τ = 0.025 here — would score 0.37 nats lower)."""
    items = np.array([0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 1, 1])
    data = LabelData(
        items=items,
        workers=np.array([0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 2]),
        labels=np.array([0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1]),
        item_ids=np.arange(8).astype(str).astype(object),
        worker_ids=np.arange(3).astype(str).astype(object),
        classes=np.array(["0", "1"], dtype=object),
    )
    plain = make_aggregator("bds-ev-blind-recheck").fit(data)
    tempered = make_aggregator("bds-ev-blind-recheck:temperature=auto").fit(data)
    assert tempered.form_bounds_ == plain.form_bounds_ and len(plain.form_bounds_) == 2
    assert tempered.prior_form_ == plain.prior_form_
    assert tempered.temperature_ < 1.0  # the fixture tempers the chosen fit
    np.testing.assert_array_equal(tempered.labels_, plain.labels_)


def _mixture_definition(
    fit: tuple[np.ndarray, ...], log_R: np.ndarray, hard: np.ndarray, tau: float
) -> float:
    """``L(τ)`` on the item-difficulty mixture as its derivation states it (the module
    docstring, "On the mixture"): the joint posterior over (class, difficulty) from the other
    labels, summed within each class and tempered, times the label's probability given the
    class mixed over difficulty — written out over the 2C cells, no factoring."""
    items, workers, labels, _, expected_log_e, errors = fit
    C = hard.shape[0]
    easy = log_R[items, :C] - expected_log_e[workers, :, labels]
    difficult = log_R[items, C:] - np.log(hard[:, labels].T)
    shift = np.maximum(easy.max(axis=1), difficult.max(axis=1))[:, None]
    joint_easy, joint_hard = np.exp(easy - shift), np.exp(difficult - shift)
    given_class = joint_easy + joint_hard  # q(c | rest), up to a per-label constant
    split = joint_easy / given_class  # q(easy | c, rest)
    predict = split * errors[workers, :, labels] + (1 - split) * hard[:, labels].T
    weights = given_class**tau
    held_out = np.sum(weights * predict, axis=1) / weights.sum(axis=1)
    return float(np.sum(np.log(held_out)))


@pytest.mark.parametrize("C", [2, 3, 4])
def test_mixture_criterion_matches_its_definition_and_the_workers_without_hard_mass(
    C: int,
) -> None:
    fit = _random_fit(C, n_items=200, n_workers=9, per_item=5, seed=10 + C)
    items, workers, labels, log_T, expected_log_e, errors = fit
    rng = np.random.default_rng(C)
    hard = rng.uniform(0.5, 3.0, (C, C)) + 2.0 * np.eye(C)
    hard /= hard.sum(axis=1, keepdims=True)
    # split each class's mass between easy and hard at random
    share = rng.uniform(0.0, 1.0, log_T.shape)
    log_R = np.concatenate([log_T + np.log(share), log_T + np.log1p(-share)], axis=1)
    held = tempering.mixture_held_out_labels(
        items, workers, labels, log_R, expected_log_e, errors, hard
    )
    for tau in (0.025, 0.4, 1.0):
        value = tempering.held_out_log_likelihood(held, tau)
        assert value == pytest.approx(_mixture_definition(fit, log_R, hard, tau), rel=1e-11)
    # no hard mass (the hard cells at the 1e-300 floor): the workers' criterion
    empty = np.concatenate([log_T, np.full(log_T.shape, np.log(1e-300))], axis=1)
    held = tempering.mixture_held_out_labels(
        items, workers, labels, empty, expected_log_e, errors, hard
    )
    plain = tempering.held_out_labels(*fit)
    for tau in (0.1, 1.0):
        assert tempering.held_out_log_likelihood(held, tau) == pytest.approx(
            tempering.held_out_log_likelihood(plain, tau), rel=1e-12
        )


def test_a_taken_mixture_reads_its_own_predictive() -> None:
    """On the correlated crowd (a third of the items mislead every worker together) the
    mixture is taken; ``auto``'s τ is the maximiser of the mixture's criterion, the workers'
    criterion on the same fit would temper more, and the labels are the untempered fit's."""
    data = dict(_crowds())["correlated-3-class"]
    plain = make_aggregator("bds-hard-blind-recheck").fit(data)
    assert plain.difficulty_ == "mixture"
    with _captured_terms("mixture_held_out_labels") as found:
        tempered = make_aggregator("bds-hard-blind-recheck:temperature=auto").fit(data)
    assert tempered.difficulty_ == "mixture" and len(found) == 1
    assert tempered.temperature_ == tempering.searched_temperature(found[0])
    np.testing.assert_array_equal(tempered.labels_, plain.labels_)
    BayesianDawidSkene._temperature_reads_mixture = False
    try:
        workers_only = make_aggregator("bds-hard-blind-recheck:temperature=auto").fit(data)
    finally:
        BayesianDawidSkene._temperature_reads_mixture = True
    assert workers_only.temperature_ < tempered.temperature_


def test_the_tempered_default_has_an_id_of_its_own() -> None:
    """``bds-hard-blind-recheck-tempered`` is ``bds-hard-blind-recheck:temperature=auto``
    under a name without a colon, so a policy string can compose it."""
    from crowdbudget.registry import split_verdict

    data = load_dataset("temp")
    named = make_aggregator("bds-hard-blind-recheck-tempered").fit(data)
    spelled = make_aggregator("bds-hard-blind-recheck:temperature=auto").fit(data)
    np.testing.assert_array_equal(named.probas_, spelled.probas_)
    assert named.temperature_ == spelled.temperature_ < 1.0
    policy = "opt-kg:posterior=one-coin:verdict=bds-hard-blind-recheck-tempered"
    assert split_verdict(policy)[1].name == "bds-hard-blind-recheck-tempered"


def test_tempering_is_applied_after_every_choice_between_fits() -> None:
    """The mixture's gate and evidence read both fits untempered (a held-out bed crowd whose
    evidence is level to 1e-3 nats: before, the workers' fit tempered to τ ≈ 0.5 shifted
    its class proportions and the evidence took the mixture, three labels moving); the
    tempered verdict reads the plain one's model and labels, and reports τ < 1."""
    from crowdbudget.experiments.stress import full_bed

    cells = full_bed()
    index = [cell.name for cell in cells].index("binary-70-30-one-coin-spam0-k10")
    data = make_crowd(cells[index], np.random.SeedSequence([0, index]).spawn(2)[1])
    plain = make_aggregator("bds-hard-blind-recheck").fit(data)
    tempered = make_aggregator("bds-hard-blind-recheck-tempered").fit(data)
    assert abs(plain.evidence_gain_) < 1e-2  # the fixture: a choice on a knife's edge
    for name in ("difficulty_", "evidence_gain_", "gate_gain_", "priors_"):
        np.testing.assert_array_equal(getattr(tempered, name), getattr(plain, name), name)
    np.testing.assert_array_equal(tempered.labels_, plain.labels_)
    assert tempered.temperature_ < 1.0 and plain.temperature_ == 1.0
    assert tempered._tempering_inputs is None  # used once, not kept after the fit
