"""``bds-hard`` (aggregation/item_difficulty.py): items easy or hard, errors correlated on the
hard ones — its fall-backs to ``bds-ev`` bit for bit, the bounds of the hard confusion, the
accelerated and plain updates' common fixed point, what it reads on a crowd whose errors are
correlated, and fact_eval (docs/stress-bed.md, "item difficulty and correlated errors")."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.aggregation import BayesianDawidSkene, make_aggregator
from crowdbudget.aggregation.base import KnownTruth
from crowdbudget.aggregation.dawid_skene import incidence
from crowdbudget.aggregation.item_difficulty import (
    ItemDifficultyDawidSkene,
    bounded_confusion,
    frozen_mixture,
    label_log_likelihood,
    partnered_labels,
    start_responsibilities,
)
from crowdbudget.datasets import load_dataset
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.stress import DEFAULT_BED, full_bed, make_crowd, subsample_per_item


def build(text: str) -> ItemDifficultyDawidSkene:
    """``make_aggregator(text)`` for a ``bds-hard`` id, typed."""
    model = make_aggregator(text)
    assert isinstance(model, ItemDifficultyDawidSkene)
    return model


def correlated_crowd(
    seed: int, n_items: int = 600, n_workers: int = 30, k: int = 5, misleading: float = 0.2
) -> tuple[LabelData, np.ndarray, np.ndarray]:
    """A binary crowd (60 % class 1) of accurate workers (0.88–0.98, symmetric) in which a
    ``misleading`` share of the class-1 items makes every worker say 0 with probability 0.45
    (errors correlated across workers); returns the data, the truth and the misleading mask."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(n_items) < 0.6).astype(np.int64)
    mis = (truth == 1) & (rng.random(n_items) < misleading)
    items = np.repeat(np.arange(n_items), k)
    workers = np.concatenate([rng.choice(n_workers, k, replace=False) for _ in range(n_items)])
    accuracy = rng.uniform(0.88, 0.98, n_workers)
    right = rng.random(items.size) < accuracy[workers]
    labels = np.where(right, truth[items], 1 - truth[items])
    labels = np.where(mis[items], (rng.random(items.size) >= 0.45).astype(np.int64), labels)
    data = LabelData(
        items=items,
        workers=workers,
        labels=labels.astype(np.int64),
        item_ids=np.array([f"i{i}" for i in range(n_items)], dtype=object),
        worker_ids=np.array([f"w{j}" for j in range(n_workers)], dtype=object),
        classes=("0", "1"),
        gold=truth,
    )
    return data, truth, mis


def test_difficulty_none_is_bds_ev_bit_for_bit() -> None:
    data, _, _ = correlated_crowd(0)
    ev = BayesianDawidSkene(
        prior_form="one-coin", prior_floor=0.1, lone_labels="skip", asymmetry="evidence"
    ).fit(data)
    assert repr(make_aggregator("bds-ev")) == repr(ev)
    none = build("bds-hard:difficulty=none").fit(data)
    assert np.array_equal(ev.probas_, none.probas_)
    assert np.array_equal(ev.errors_, none.errors_)
    assert none.hard_share_ == 0.0 and not none.hard_.any()


def test_one_label_per_item_is_bds_ev_bit_for_bit() -> None:
    """Nothing can be checked: no item can look hard, the fit is the parent's."""
    data, _, _ = correlated_crowd(1, k=1)
    ev = make_aggregator("bds-ev").fit(data)
    hard = build("bds-hard").fit(data)
    assert np.array_equal(ev.probas_, hard.probas_)
    assert hard.hard_share_ == 0.0


def test_the_misleading_items_are_read_hard() -> None:
    for seed in range(3):
        data, truth, mis = correlated_crowd(seed)
        fit = build("bds-hard:difficulty=mixture").fit(data)
        ev = make_aggregator("bds-ev").fit(data)
        assert fit.hard_[mis].mean() > 3 * fit.hard_[~mis].mean(), seed
        assert np.mean(fit.labels_ == truth) >= np.mean(ev.labels_ == truth), seed
        assert fit.probas_.shape == (600, 2) and np.allclose(fit.probas_.sum(axis=1), 1.0)


def test_an_independent_crowd_has_few_hard_items_and_the_evidence_keeps_bds_ev() -> None:
    data, truth, _ = correlated_crowd(4, misleading=0.0)
    fit = build("bds-hard:difficulty=mixture").fit(data)
    ev = make_aggregator("bds-ev").fit(data)
    assert fit.hard_share_ < 0.05
    assert np.mean(fit.labels_ == truth) == pytest.approx(np.mean(ev.labels_ == truth), abs=0.005)
    chosen = build("bds-hard").fit(data)
    assert chosen.difficulty_ == "none" and chosen.evidence_gain_ < 0
    assert np.array_equal(chosen.probas_, ev.probas_) and chosen.hard_share_ == 0.0


def test_the_evidence_refuses_the_mixture_where_it_reads_worse() -> None:
    """ordinal5-k5 at 3 labels per item: the mixture calls 62 % of the items hard and loses
    0.09 of accuracy (docs/stress-bed.md); its label likelihood is below bds-ev's."""
    cell = {c.name: c for c in DEFAULT_BED}["ordinal5-k5"]
    data = subsample_per_item(make_crowd(cell, 0), 3, np.random.default_rng(1))
    mixture = build("bds-hard:difficulty=mixture").fit(data)
    assert mixture.hard_share_ > 0.3
    chosen = build("bds-hard").fit(data)
    ev = make_aggregator("bds-ev").fit(data)
    assert chosen.difficulty_ == "none" and chosen.evidence_gain_ < -50
    assert np.array_equal(chosen.probas_, ev.probas_)
    assert label_log_likelihood(data, vars(mixture)) < label_log_likelihood(data, vars(ev))


def test_accelerated_and_plain_updates_reach_the_same_fixed_point() -> None:
    data, _, _ = correlated_crowd(2)
    fast = ItemDifficultyDawidSkene(mixture_tol=1e-9, n_iter=2000, difficulty="mixture").fit(data)
    plain = ItemDifficultyDawidSkene(
        mixture_tol=1e-9, n_iter=2000, difficulty="mixture", accelerate=False
    ).fit(data)
    assert np.max(np.abs(fast.probas_ - plain.probas_)) < 1e-5
    assert fast.n_iter_ < plain.n_iter_


def test_deterministic() -> None:
    data, _, _ = correlated_crowd(3)
    a = build("bds-hard").fit(data)
    b = build("bds-hard").fit(data)
    assert np.array_equal(a.probas_, b.probas_) and a.n_iter_ == b.n_iter_


def mean_first(alpha: np.ndarray) -> float:
    """Row 0's largest other entry of the posterior mean: the plurality lift's level."""
    mean = alpha / alpha.sum(axis=1, keepdims=True)
    return float(mean[0, 1:].max())


def test_bounded_confusion_keeps_the_plurality_and_stays_halfway_to_the_easy_rate() -> None:
    alpha = np.array([[41.0, 59.0, 0.5], [10.0, 90.0, 0.5], [30.0, 30.0, 40.0]])
    easy_rate = np.array([0.9, 0.8, 0.95])
    H = bounded_confusion(alpha, easy_rate)
    assert np.allclose(H.sum(axis=1), 1.0) and np.all(H > 0)
    diagonal = np.diag(H)
    off = np.where(np.eye(3, dtype=bool), 0.0, H).max(axis=1)
    assert np.all(diagonal >= off - 1e-12)  # row 0 lifted to its plurality: 0.5 / 0.5
    assert diagonal[0] == pytest.approx(H[0, 1]) and diagonal[0] < mean_first(alpha)
    assert diagonal[1] == pytest.approx((1 / 3 + 0.8) / 2)  # halfway to the easy items' rate
    mean = alpha / alpha.sum(axis=1, keepdims=True)
    assert np.allclose(H[2], mean[2])  # within both bounds: the posterior mean


def test_start_splits_by_disagreement() -> None:
    T = np.array([[1.0, 0.0], [0.6, 0.4], [0.5, 0.5]])
    R = start_responsibilities(T)
    assert R.shape == (3, 4) and np.allclose(R[:, :2] + R[:, 2:], T)
    assert np.allclose(R[:, 2:].sum(axis=1), [0.0, 0.8, 1.0])


def test_refusals_are_one_line() -> None:
    data, _, _ = correlated_crowd(0)
    for model in (
        ItemDifficultyDawidSkene(prior_fit="every", difficulty="mixture"),
        ItemDifficultyDawidSkene(difficulty="sometimes"),
        ItemDifficultyDawidSkene(difficulty="mixture", mixture_tol=-1.0),
    ):
        with pytest.raises(InvalidParameterError) as info:
            model.fit(data)
        assert "\n" not in str(info.value)


def test_the_mixture_stops_at_its_own_tolerance() -> None:
    """``mixture_tol`` stops the mixture's fit, ``tol`` the workers' model alone. On the
    correlated crowds the default 1e-4 ends within 0.005 of the fixed point (a 1e-9 fit) with
    the same labels and the same choice, in fewer updates; 1e-3 ended 0.15 from it on the
    first (the move of one update is not the distance where the hard share drifts slowly:
    module docstring, "Start"). With ``difficulty="none"`` the mixture's tolerance changes
    nothing."""
    for seed, far in ((0, True), (2, False)):
        data, _, _ = correlated_crowd(seed, k=8)
        fits = {
            tol: ItemDifficultyDawidSkene(difficulty="evidence-full", mixture_tol=tol).fit(data)
            for tol in (1e-9, 1e-4, 1e-3)
        }
        exact, default = fits[1e-9], build("bds-hard:difficulty=evidence-full").fit(data)
        assert default.mixture_tol == 1e-4
        assert np.array_equal(default.probas_, fits[1e-4].probas_)
        assert default.difficulty_ == exact.difficulty_ == "mixture"
        assert np.array_equal(default.labels_, exact.labels_)
        assert np.max(np.abs(default.probas_ - exact.probas_)) < 5e-3
        assert default.n_iter_ < exact.n_iter_
        assert (np.max(np.abs(fits[1e-3].probas_ - exact.probas_)) > 0.1) == far
        none = [
            ItemDifficultyDawidSkene(difficulty="none", mixture_tol=t).fit(data) for t in (1e-4, 1)
        ]
        assert np.array_equal(none[0].probas_, none[1].probas_)


def test_known_truth_keeps_the_class_and_leaves_the_difficulty() -> None:
    data, truth, mis = correlated_crowd(0)
    known = {int(i): int(truth[i]) for i in np.flatnonzero(mis)[:10]}
    fit = build("bds-hard").fit(data, known_truth=known)
    for i, c in known.items():
        assert fit.probas_[i, c] == 1.0
    assert np.all((fit.hard_ >= 0) & (fit.hard_ <= 1 + 1e-12))


def test_fact_eval_closer_to_the_vote() -> None:
    """fact_eval, all labels: bds-ev 0.8767 on the 576 gold items, majority vote 0.901
    (docs/stress-bed.md); bds-hard reads its split items as hard."""
    data = load_dataset("fact_eval")
    gold = data.gold
    assert gold is not None
    mask = gold >= 0
    fit = build("bds-hard").fit(data)
    accuracy = float(np.mean(fit.labels_[mask] == gold[mask]))
    assert accuracy >= 0.893
    assert 0.05 < fit.hard_share_ < 0.25
    assert fit.difficulty_ == "mixture" and fit.evidence_gain_ > 1000


def same_fit(a: ItemDifficultyDawidSkene, b: ItemDifficultyDawidSkene) -> bool:
    """Two fits equal to the bit: the class posterior, the workers and the hard side."""
    return (
        np.array_equal(a.probas_, b.probas_)
        and np.array_equal(a.errors_, b.errors_)
        and np.array_equal(a.hard_, b.hard_)
        and a.difficulty_ == b.difficulty_
    )


def ordinal_at_3() -> LabelData:
    cell = {c.name: c for c in DEFAULT_BED}["ordinal5-k5"]
    return subsample_per_item(make_crowd(cell, 0), 3, np.random.default_rng(1))


def test_the_gate_refuses_as_the_full_evidence_does() -> None:
    """Independent crowds and a crowd where the mixture reads worse: the gate refuses without
    fitting the mixture, and the fit is the full evidence's (and bds-ev's) bit for bit."""
    crowds = [correlated_crowd(seed, misleading=0.0)[0] for seed in (4, 5)]
    crowds += [ordinal_at_3(), load_dataset("rte"), load_dataset("wsd")]
    for data in crowds:
        gated = build("bds-hard").fit(data)
        full = build("bds-hard:difficulty=evidence-full").fit(data)
        assert full.difficulty_ == "none" and gated.evidence_gate_
        charge = 0.5 * (data.n_classes * (data.n_classes - 1) + 1) * np.log(data.n_items)
        assert gated.gate_gain_ <= 0 and gated.evidence_gain_ == gated.gate_gain_ - charge
        assert same_fit(gated, full)
        assert np.array_equal(gated.probas_, make_aggregator("bds-ev").fit(data).probas_)
        assert np.isnan(full.gate_gain_) and not full.evidence_gate_


def test_the_gate_passes_where_the_mixture_is_chosen() -> None:
    """Correlated crowds the full evidence gives the mixture (by 2.2 to 29 nats past BIC's
    charge): the frozen workers' mixture gains something, so both models are fitted and the
    fit is the one without the gate, bit for bit."""
    for seed, k in ((0, 5), (0, 8), (2, 8)):
        data, _, _ = correlated_crowd(seed, k=k)
        gated = build("bds-hard").fit(data)
        full = build("bds-hard:difficulty=evidence-full").fit(data)
        assert full.difficulty_ == "mixture" and not gated.evidence_gate_
        assert gated.gate_gain_ > 0 and gated.evidence_gain_ == full.evidence_gain_
        assert same_fit(gated, full)


def test_the_frozen_gain_is_a_reached_likelihood() -> None:
    """frozen_mixture's G (``best``) is the likelihood gain of a mixture it reached: >= 0 (ρ → 0 is
    bds-ev), 0 on independent crowds, > 0 where the full evidence takes the mixture, and
    the worker re-fit raises it (the frozen workers alone: 1.2 nats on seed 0)."""
    ev = make_aggregator("bds-ev")
    for seed, misleading in ((0, 0.2), (1, 0.0), (2, 0.0)):
        data, _, _ = correlated_crowd(seed, misleading=misleading)
        fit = ev.fit(data)
        partnered = partnered_labels(data, None)
        assert partnered is not None
        frozen = frozen_mixture(data, vars(fit), partnered, fit.probas_, np.inf, refits=0).best
        refitted = frozen_mixture(data, vars(fit), partnered, fit.probas_, np.inf).best
        assert 0.0 <= frozen <= refitted
        if misleading:
            assert frozen > 0.5 and refitted > frozen + 2.0
        else:
            assert refitted == 0.0


def test_partnered_labels_is_the_parents() -> None:
    data, truth, _ = correlated_crowd(0, k=2)
    rng = np.random.default_rng(0)
    drop = rng.random(data.n_labels) < 0.3  # some items left with one label
    keep = ~drop
    thin = data.labels_subset(keep)
    known = KnownTruth(items=np.array([3, 7]), classes=truth[[3, 7]].astype(np.int64))
    for k in (None, known):
        ours = partnered_labels(thin, k)
        theirs = BayesianDawidSkene._partnered(thin, incidence(thin), k)
        assert ours is not None and theirs is not None and np.array_equal(ours, theirs)
    one = correlated_crowd(1, k=1)[0]
    assert (
        partnered_labels(one, None) is None
        and BayesianDawidSkene._partnered(one, incidence(one), None) is None
    )


def test_the_gate_with_known_truth_is_the_full_evidence() -> None:
    """Known truth: the gate refuses as the full evidence does (seed 0, no misleading items)
    and passes where it takes the mixture (seed 0 at 35 % misleading)."""
    for misleading in (0.35, 0.0):
        data, truth, _ = correlated_crowd(0, misleading=misleading)
        known = {int(i): int(truth[i]) for i in range(0, 600, 40)}
        gated = build("bds-hard").fit(data, known_truth=known)
        full = build("bds-hard:difficulty=evidence-full").fit(data, known_truth=known)
        assert same_fit(gated, full) and gated.evidence_gate_ == (misleading == 0.0)
        assert full.difficulty_ == ("none" if misleading == 0.0 else "mixture")


def test_the_worker_refit_keeps_a_thin_acceptance() -> None:
    """The full bed's binary-50-50-one-coin-spam0-k10 (all labels, the stress run's draw):
    the full evidence takes the mixture by 0.7 nats past BIC's charge; the frozen workers
    alone gain nothing (the gate would refuse), one worker re-fit shows the gain."""
    cells = full_bed()
    index = [c.name for c in cells].index("binary-50-50-one-coin-spam0-k10")
    data = make_crowd(cells[index], np.random.SeedSequence([0, index]).spawn(1)[0])
    ev = make_aggregator("bds-ev").fit(data)
    partnered = partnered_labels(data, None)
    assert partnered is not None
    assert frozen_mixture(data, vars(ev), partnered, ev.probas_, np.inf, refits=0).best == 0.0
    assert frozen_mixture(data, vars(ev), partnered, ev.probas_, np.inf, refits=1).best > 1.0
    gated = build("bds-hard").fit(data)
    full = build("bds-hard:difficulty=evidence-full").fit(data)
    assert full.difficulty_ == "mixture" and 0 < full.evidence_gain_ < 2
    assert same_fit(gated, full) and not gated.evidence_gate_


def test_the_compiled_update_is_the_numpy_update_to_rounding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compiled passes over the labels (aggregation/_difficulty_kernel.py) give the NumPy
    update's fit up to the order of the sums: two and three classes, lone labels left out of
    the workers' counts, known truth."""
    data, truth, _ = correlated_crowd(0)
    keep = np.random.default_rng(0).random(data.n_labels) < 0.7  # some items left alone
    thin = data.labels_subset(np.flatnonzero(keep))
    three = make_crowd({c.name: c for c in DEFAULT_BED}["class3-spam30-k5"], 0)
    known = {int(i): int(truth[i]) for i in range(0, 600, 50)}
    cases = [(data, None), (thin, None), (three, None), (data, known)]
    for crowd, known_truth in cases:
        fits = []
        for compiled in (True, False):
            monkeypatch.setattr(ItemDifficultyDawidSkene, "_compiled_update", compiled)
            model = build("bds-hard:difficulty=mixture")
            fits.append(model.fit(crowd, known_truth=known_truth))
        fast, plain = fits
        assert np.max(np.abs(fast.probas_ - plain.probas_)) < 1e-9
        assert np.max(np.abs(fast.hard_ - plain.hard_)) < 1e-9
        assert np.max(np.abs(fast.errors_ - plain.errors_)) < 1e-9
        assert abs(fast.n_iter_ - plain.n_iter_) <= 2


def test_the_compiled_gate_is_the_numpy_gate_to_rounding(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate's compiled E-step gives NumPy's ``G`` and state up to the order of the sums:
    a correlated crowd (``G`` > 0), an independent one (``G`` = 0), three classes."""
    from crowdbudget.aggregation import _difficulty_gate

    crowds = [correlated_crowd(0)[0], correlated_crowd(4, misleading=0.0)[0], ordinal_at_3()]
    for data in crowds:
        ev = make_aggregator("bds-ev").fit(data)
        partnered = partnered_labels(data, None)
        assert partnered is not None
        states = []
        for compiled in (True, False):
            monkeypatch.setattr(_difficulty_gate, "COMPILED_GATE", compiled)
            states.append(
                _difficulty_gate.frozen_mixture(data, vars(ev), partnered, ev.probas_, np.inf)
            )
        fast, plain = states
        assert abs(fast.best - plain.best) < 1e-6 and (fast.best == 0.0) == (plain.best == 0.0)
        assert fast.responsibilities is not None and plain.responsibilities is not None
        assert np.max(np.abs(fast.responsibilities - plain.responsibilities)) < 1e-9
        assert np.max(np.abs(fast.hard - plain.hard)) < 1e-9
