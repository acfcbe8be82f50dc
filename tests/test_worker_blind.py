"""Class-blind workers in the evidence's mixture (``asymmetry="evidence-blind"``, ``bds-ev-blind``;
the worker_blind module docstring; docs/stress-bed.md, "the held-out bed")."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.aggregation import make_aggregator
from crowdbudget.aggregation.worker_asymmetry import log_evidence, worker_model
from crowdbudget.aggregation.worker_blind import (
    BLIND_EVIDENCE,
    WEIGHT_FLOOR,
    BlindEvidence,
    _in_order_sum,
    blind_model,
    blind_parameters,
    fit_weights,
    guard_blind,
    log_evidence_blind,
    log_evidence_free,
    moved_workers,
)
from crowdbudget.experiments.stress import full_bed, make_crowd
from crowdbudget.labels import LabelData


def sequential_blind(labels: np.ndarray, gamma: np.ndarray) -> float:
    """``log Z_blind`` of one worker's labels by the chain rule (each label's posterior
    predictive given the ones before): an independent route to the Pólya formula."""
    seen = np.zeros_like(gamma)
    total = 0.0
    for label in labels:
        total += np.log((gamma[label] + seen[label]) / (gamma.sum() + seen.sum()))
        seen[label] += 1
    return total


@pytest.mark.parametrize("C", [2, 3, 5])
def test_blind_evidence_is_the_chain_rule(C: int) -> None:
    rng = np.random.default_rng(C)
    prior = np.where(np.eye(C, dtype=bool), 4.0, 0.5)
    gamma = blind_parameters(prior)
    assert gamma.shape == (C,) and np.all(gamma == 1.0)
    labels = [rng.integers(0, C, size=n) for n in (0, 1, 7, 30)]
    counts = np.stack([np.bincount(x, minlength=C) for x in labels]).astype(float)
    got = log_evidence_blind(counts, gamma)
    for j, x in enumerate(labels):
        assert got[j] == pytest.approx(sequential_blind(x, gamma), rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("C", [2, 4])
def test_free_evidence_is_log_evidence_free(C: int) -> None:
    rng = np.random.default_rng(20 + C)
    prior = np.where(np.eye(C, dtype=bool), 5.0, 0.3)
    counts = rng.random((12, C, C)) * 8
    _, free = log_evidence(counts, prior)
    assert np.allclose(log_evidence_free(counts, prior), free, rtol=1e-12, atol=1e-10)


def mixture_evidence(w: np.ndarray, log_z: np.ndarray) -> float:
    return float(np.sum(np.log(np.exp(log_z) @ w)))


def test_fit_weights_maximises_the_mixture_evidence() -> None:
    """30 workers clearly blind, 50 clearly free, 20 clearly symmetric: the weights come out
    near (0.2, 0.5, 0.3), and no nearby point of the simplex has a higher evidence."""
    rng = np.random.default_rng(3)
    kinds = np.repeat([0, 1, 2], [20, 50, 30])
    log_z = rng.normal(0.0, 0.3, size=(100, 3)) - 12.0
    log_z[np.arange(100), kinds] += 12.0
    w = fit_weights(log_z, np.full(3, 1.0 / 3))
    assert w.sum() == pytest.approx(1.0)
    assert np.allclose(w, [0.2, 0.5, 0.3], atol=0.01)
    best = mixture_evidence(w, log_z)
    for _ in range(50):
        step = rng.normal(0.0, 0.02, size=3)
        other = np.clip(w + step - step.mean(), 1e-6, None)
        other /= other.sum()
        assert mixture_evidence(other, log_z) <= best + 1e-9
    # no worker: the start, normalised; a kind nobody has: at the floor
    assert np.allclose(fit_weights(np.zeros((0, 3)), np.array([1.0, 1.0, 2.0])), [0.25, 0.25, 0.5])
    only_free = np.tile([-50.0, 0.0, -50.0], (10, 1))
    assert fit_weights(only_free, np.full(3, 1.0 / 3))[0] < 10 * WEIGHT_FLOOR


@pytest.mark.parametrize("asymmetry", ["evidence-blind", "evidence-blind-own"])
def test_a_one_class_worker_is_read_blind_and_a_good_one_not(asymmetry: str) -> None:
    """Counts at the truth (one-hot shares), C = 4: a worker who says class 2 on 40 items of
    every class is blind (its label then moves no item: the same expected log for every
    class); an 80 %-accurate worker is not."""
    C = 4
    prior = np.where(np.eye(C, dtype=bool), 6.0, 0.5)
    rng = np.random.default_rng(0)
    counts = np.zeros((30, C, C))
    counts[0, :, 2] = 10.0  # always 2
    for j in range(1, 30):  # good workers: 80 % right, errors spread
        for c in range(C):
            counts[j, c] = rng.multinomial(10, np.where(np.arange(C) == c, 0.8, 0.2 / (C - 1)))
    model = worker_model(counts, prior, asymmetry, 0.5, means=True)
    assert isinstance(model.evidence, BlindEvidence)
    weights = model.evidence.weights
    assert weights.shape == (3,) and weights.sum() == pytest.approx(1.0)
    log_e = model.expected_log_e
    spread = log_e[0].max(axis=0) - log_e[0].min(axis=0)  # per label, across classes
    assert spread[2] < 0.05, spread  # the blind worker's "2" says almost nothing
    good = log_e[1:, np.arange(C), np.arange(C)].mean()
    wrong = log_e[1:][:, ~np.eye(C, dtype=bool)].mean()
    assert good - wrong > 1.5  # the good workers' labels still decide
    assert model.errors is not None and np.allclose(model.errors.sum(axis=2), 1.0)


def collapse_crowd() -> LabelData:
    """The held-out bed's collapsing draw: ``class10-confusion-biased20-k5``, replication 1
    of seed 0 (two heavy workers who say class 4 on everything)."""
    cells = full_bed()
    index = [c.name for c in cells].index("class10-confusion-biased20-k5")
    child = np.random.SeedSequence([0, index]).spawn(2)[1]
    return make_crowd(cells[index], child)


def test_the_catch_all_class_does_not_form() -> None:
    """``bds-ev`` puts most items in class 4 (accuracy 0.326 measured); with class-blind
    workers the verdict reads the crowd (0.706 measured, 0.710 guarded; majority vote
    0.644): the heavy one-class workers' own evidence passes the guard."""
    data = collapse_crowd()
    assert data.gold is not None
    ev = make_aggregator("bds-ev").fit(data)
    assert np.mean(ev.labels_ == data.gold) < 0.45
    for verdict in ("bds-ev-blind", "bds-ev-blind-own"):
        blind = make_aggregator(verdict).fit(data)
        assert np.mean(blind.labels_ == data.gold) > 0.65, verdict
        assert np.mean(blind.labels_ == 4) < 0.3, verdict


def test_the_guard_keeps_only_strong_own_evidence() -> None:
    """``guard_blind``: the blind entry stays where its log Bayes factor against the better of
    the other two kinds exceeds :data:`BLIND_EVIDENCE`, else −∞; a worker with no counts (all
    three evidences 0) is never blind; the other entries are untouched."""
    t = BLIND_EVIDENCE
    log_z = np.array(
        [
            [0.0, 0.0, 0.0],  # no counts
            [-10.0, -12.0, -10.0 + t],  # exactly at the threshold: refused
            [-10.0, -12.0, -10.0 + t + 0.01],  # just past it
            [-30.0, -20.0, -19.0],  # blind the best, but by 1 nat
            [-80.0, -70.0, -20.0],  # a one-class worker
        ]
    )
    got = guard_blind(log_z)
    assert np.array_equal(got[:, :2], log_z[:, :2])
    assert np.array_equal(np.isneginf(got[:, 2]), [True, True, False, True, False])
    assert got[2, 2] == log_z[2, 2] and got[4, 2] == log_z[4, 2]
    # the weights fitted on the guarded terms: only the two strong workers can be blind
    w = fit_weights(got, np.full(3, 1.0 / 3))
    assert w[2] == pytest.approx(2 / 5, abs=0.05)


def test_a_worker_without_partnered_labels_is_not_read_blind() -> None:
    """A crowd whose few checked workers look blind: unguarded, the workers with no count
    take the crowd's blind weight and their labels barely move an item; guarded, they are
    symmetric or free, and their labels decide (C = 2)."""
    C = 2
    prior = np.array([[6.0, 1.0], [1.0, 6.0]])
    counts = np.zeros((12, C, C))
    counts[:6, :, 0] = 8.0  # six heavy workers who say 0 whatever the class
    # workers 6..11: no partnered label (their counts 0)
    blind = worker_model(counts, prior, "evidence-blind", 0.5, means=False)
    own = worker_model(counts, prior, "evidence-blind-own", 0.5, means=False)
    for model, informative in ((blind, False), (own, True)):
        log_e = model.expected_log_e[6:]  # (6, 2, 2)
        margin = float(np.mean(log_e[:, 0, 0] - log_e[:, 1, 0]))  # what a "0" says for class 0
        assert (margin > 1.0) == informative, margin
        # the heavy workers are read blind either way: their "0" says nothing
        heavy = model.expected_log_e[:6]
        assert np.all(np.abs(heavy[:, 0, 0] - heavy[:, 1, 0]) < 0.2)


def sparse_campaign(seed: int) -> LabelData:
    """A campaign at about one label per item (400 items, 65/35; 60 workers, a third of them
    always answering the common class, the rest 85 % right): every item one label from a
    random worker, 60 items a second from another — few partnered labels per worker, as the
    default policy's campaigns at one label per item (docs/stress-bed.md)."""
    rng = np.random.default_rng(seed)
    n, J = 400, 60
    truth = (rng.random(n) < 0.35).astype(np.int64)

    def answer(j: int, i: int) -> int:
        if j < 20:
            return 0
        return int(truth[i]) if rng.random() < 0.85 else 1 - int(truth[i])

    items, workers = list(range(n)), [int(rng.integers(J)) for _ in range(n)]
    labels = [answer(j, i) for i, j in zip(items, workers, strict=True)]
    for i in rng.choice(n, 60, replace=False):
        j = int(rng.integers(J))
        while j == workers[i]:
            j = int(rng.integers(J))
        items.append(int(i))
        workers.append(j)
        labels.append(answer(j, int(i)))
    return LabelData(
        items=np.array(items),
        workers=np.array(workers),
        labels=np.array(labels),
        item_ids=np.array([f"i{i}" for i in range(n)], dtype=object),
        worker_ids=np.array([f"w{j}" for j in range(J)], dtype=object),
        classes=("a", "b"),
        gold=truth,
    )


def test_sparse_campaigns_do_not_fall_to_the_class_prior() -> None:
    """On ten such campaigns (seeds 0–9) ``bds-ev-blind`` is below ``bds-ev`` on every one
    (by 0.005 to 0.048, 0.023 on average: measured) — the workers seen only alone take the
    crowd's blind weight; the guarded kind gives ``bds-ev``'s labels on every one (no
    worker's own evidence is strong)."""
    gaps = []
    for seed in range(10):
        data = sparse_campaign(seed)
        blind = make_aggregator("bds-ev-blind").fit(data).labels_
        own = make_aggregator("bds-ev-blind-own").fit(data).labels_
        ev = make_aggregator("bds-ev").fit(data).labels_
        assert np.array_equal(own, ev), seed
        gaps.append(np.mean(own == data.gold) - np.mean(blind == data.gold))
    assert min(gaps) > 0.0 and np.mean(gaps) > 0.015, gaps


def test_one_label_per_item_is_bds_oc_to_the_bit() -> None:
    """Nothing can be checked with one label per item: the workers stay free, as ``bds-oc``."""
    rng = np.random.default_rng(5)
    n = 200
    data = LabelData(
        items=np.arange(n),
        workers=rng.integers(0, 20, size=n),
        labels=rng.integers(0, 3, size=n),
        item_ids=np.array([f"i{i}" for i in range(n)], dtype=object),
        worker_ids=np.array([f"w{j}" for j in range(20)], dtype=object),
        classes=("a", "b", "c"),
    )
    oc = make_aggregator("bds-oc").fit(data)
    for verdict in ("bds-ev-blind", "bds-ev-blind-own"):
        blind = make_aggregator(verdict).fit(data)
        assert np.array_equal(blind.probas_, oc.probas_), verdict


@pytest.mark.parametrize("verdict", ["bds-ev-blind", "bds-ev-blind-own"])
def test_deterministic(verdict: str) -> None:
    data = collapse_crowd()
    first = make_aggregator(verdict).fit(data).probas_
    second = make_aggregator(verdict).fit(data).probas_
    assert np.array_equal(first, second)


def numpy_fit_weights(log_z: np.ndarray, start: np.ndarray, n_steps: int = 200) -> np.ndarray:
    """The NumPy expressions ``fit_weights`` compiles (its first form), the reference."""
    w = np.maximum(np.asarray(start, dtype=float), WEIGHT_FLOOR)
    w /= w.sum()
    if log_z.shape[0] == 0:
        return w
    likelihood = np.exp(log_z - log_z.max(axis=1, keepdims=True))
    for _ in range(n_steps):
        joint = likelihood * w
        q = joint / joint.sum(axis=1, keepdims=True)
        new = np.maximum(q.mean(axis=0), WEIGHT_FLOOR)
        new /= new.sum()
        if np.max(np.abs(new - w)) < 1e-10:
            return new
        w = new
    return w


@pytest.mark.parametrize("J", [0, 1, 7, 164, 5000, 40000])
@pytest.mark.parametrize("n_steps", [200, 3])
def test_the_compiled_weights_are_the_numpy_bits(J: int, n_steps: int) -> None:
    rng = np.random.default_rng(J + n_steps)
    log_z = rng.normal(size=(J, 3)) * 4 - rng.random((J, 1)) * 50
    log_z[: J // 5, 2] += 3.0  # some workers read blind
    log_z[J // 3 :: 2, 2] = -np.inf  # guarded workers: a blind likelihood of 0 (no division)
    for start in (np.full(3, 1.0 / 3), np.array([0.7, 1e-9, 0.3]), rng.random(3)):
        got = fit_weights(log_z, start, n_steps)
        want = numpy_fit_weights(log_z, start, n_steps)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (J, start)


@pytest.mark.parametrize("C", [2, 3, 4, 7, 8, 10])
def test_the_in_order_sums_are_numpy_sums(C: int) -> None:
    """The short sums of ``blind_model`` give ``np.sum``'s bits on either layout of the
    counts (the verdict's counts are a transposed view), pairwise sums from 8 entries on."""
    rng = np.random.default_rng(C)
    x = rng.random((500, C, C)) * rng.choice([1.0, 1e-8, 1e8], size=(500, C, C))
    for view in (x, x.transpose(0, 2, 1)):
        for axis in (1, 2):
            want = view.sum(axis=axis)
            assert np.array_equal(_in_order_sum(view, axis).view(np.uint8), want.view(np.uint8))
        rows = view.sum(axis=1)
        assert np.array_equal(_in_order_sum(rows, 1), rows.sum(axis=1))


def worker_counts(C: int, J: int, seed: int) -> np.ndarray:
    """Expected counts (J, C, C) of J workers, most diagonal-heavy, a few one-class."""
    rng = np.random.default_rng(seed)
    counts = rng.gamma(1.0, 1.0, size=(J, C, C)) + 6.0 * np.eye(C)[None] * rng.random((J, 1, 1))
    counts[: J // 6, :, 1:] = 0.0  # always label 0: read blind
    return counts


@pytest.mark.parametrize("C", [2, 3, 4])
@pytest.mark.parametrize("guarded", [False, True])
def test_unmoved_workers_keep_their_evidence(C: int, guarded: bool) -> None:
    """A worker whose counts moved by at most STALE_COUNTS keeps the evidence of the last
    call (the same bits as computed then); one that moved more is computed anew, with the
    bits a fresh call gives it (each worker's numbers do not depend on the others')."""
    prior = np.where(np.eye(C, dtype=bool), 2.5, 0.7)
    J = 40
    counts = worker_counts(C, J, seed=C)
    first = blind_model(counts, prior, False, None, guarded)
    assert isinstance(first.evidence, BlindEvidence)
    moved = counts.copy()
    moved[3, 0, 0] += 1e-13  # within STALE_COUNTS: kept
    moved[5, C - 1, 0] += 1e-6  # an off-diagonal cell only: computed anew
    moved[7] *= 1.5
    mask = moved_workers(moved, prior, first.evidence)
    assert mask is not None
    assert list(np.flatnonzero(mask)) == [5, 7]
    second = blind_model(moved, prior, False, first.evidence, guarded)
    fresh = blind_model(moved, prior, False, None, guarded)
    kept, anew = second.evidence, fresh.evidence
    assert isinstance(kept, BlindEvidence) and isinstance(anew, BlindEvidence)
    for name in ("difference", "free", "blind", "on", "off", "free_total", "wrong_total"):
        got, want, old = getattr(kept, name), getattr(anew, name), getattr(first.evidence, name)
        assert np.array_equal(got[mask], want[mask]), name  # anew: a fresh call's bits
        assert np.array_equal(got[~mask], old[~mask]), name  # kept: the last call's
    assert np.array_equal(kept.counts[3], counts[3])  # the counts it was computed at
    assert kept.free[3] != blind_model(moved[3:4], prior, False, None, guarded).evidence.free[0]
    assert moved_workers(moved, prior * 1.01, first.evidence) is None  # a new prior: all anew
    assert moved_workers(moved[:-1], prior, first.evidence) is None  # another crowd
