"""Symmetric or free workers, as the evidence decides (``asymmetry``; the worker_asymmetry
module docstring; docs/stress-bed.md, "the workers' asymmetry chosen by the evidence")."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.aggregation import BayesianDawidSkene, make_aggregator
from crowdbudget.aggregation.worker_asymmetry import (
    SHARE_BOUNDS,
    evidence_difference,
    fit_share,
    log_evidence,
    worker_model,
)
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.labels import LabelData


def sequential_log_evidence(counts: np.ndarray, prior: np.ndarray) -> tuple[float, float]:
    """``(log Z_sym, log Z_free)`` of one worker's integer counts (C, C) by the chain rule:
    the labels one at a time, each by its posterior predictive given the ones before (an
    independent route to the Pólya formulas)."""
    C = prior.shape[0]
    a = float(np.mean(np.diag(prior)))
    b = float(np.mean(prior.sum(axis=1))) - a
    free = sym = 0.0
    seen = np.zeros((C, C))
    right = wrong = 0
    for c in range(C):
        for label in range(C):
            for _ in range(int(counts[c, label])):
                row = prior[c] + seen[c]
                free += np.log(row[label] / row.sum())
                if label == c:
                    sym += np.log((a + right) / (a + b + right + wrong))
                    right += 1
                else:
                    off = np.delete(row, c)
                    share = row[label] / off.sum()
                    sym += np.log((b + wrong) / (a + b + right + wrong)) + np.log(share)
                    wrong += 1
                seen[c, label] += 1
    return sym, free


@pytest.mark.parametrize("C", [2, 3, 4])
def test_log_evidence_is_the_chain_rule(C: int) -> None:
    rng = np.random.default_rng(C)
    prior = np.where(np.eye(C, dtype=bool), 3.0, 0.4) + rng.random((C, C)) * np.eye(C)
    prior = np.where(np.eye(C, dtype=bool), prior.diagonal().mean(), 0.4)  # one-coin form
    counts = rng.integers(0, 6, size=(5, C, C)).astype(float)
    sym, free = log_evidence(counts, prior)
    for j in range(counts.shape[0]):
        want_sym, want_free = sequential_log_evidence(counts[j], prior)
        assert sym[j] == pytest.approx(want_sym, rel=1e-10, abs=1e-10)
        assert free[j] == pytest.approx(want_free, rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("C", [2, 3, 5])
def test_evidence_difference_is_the_two_evidences_difference(C: int) -> None:
    """The verdict's difference (the shared cells cancelled) is ``log Z_sym − log Z_free`` of
    :func:`log_evidence`, on soft counts from none to hundreds of labels per row."""
    rng = np.random.default_rng(10 + C)
    prior = np.where(np.eye(C, dtype=bool), 6.0, 0.3) + rng.random((C, C))
    counts = rng.random((40, C, C)) * rng.choice([0.0, 0.2, 3.0, 300.0], size=(40, 1, 1))
    counts = counts.transpose(0, 2, 1)  # the verdict's layout: a transposed view
    right = np.diagonal(counts, axis1=1, axis2=2)
    difference = evidence_difference(prior, counts.sum(axis=2), right)
    sym, free = log_evidence(counts, prior)
    assert np.allclose(difference, sym - free, rtol=1e-9, atol=1e-9)
    assert np.all(difference[counts.sum(axis=(1, 2)) == 0] == 0.0)


def mixture_evidence(w: float, difference: np.ndarray) -> float:
    """``Σ_j log(w e^{d_j} + 1 − w)``: the crowd's evidence up to ``Σ_j log Z_free,j``."""
    return float(np.sum(np.logaddexp(np.log(w) + difference, np.log1p(-w))))


@pytest.mark.parametrize("seed", range(6))
def test_fit_share_maximises_the_mixture_evidence(seed: int) -> None:
    """From any start, :func:`fit_share` (EM) lands on the maximum of the crowd's evidence:
    no grid point beats it, and inside the bounds it is the fixed point ``w = mean q``."""
    rng = np.random.default_rng(seed)
    difference = rng.normal(rng.uniform(-4, 4), rng.uniform(0.5, 6), size=rng.integers(3, 300))
    grid = np.linspace(SHARE_BOUNDS[0], SHARE_BOUNDS[1], 2001)
    best_on_grid = max(mixture_evidence(float(w), difference) for w in grid)
    for start in (SHARE_BOUNDS[0], 0.03, 0.5, 0.97, SHARE_BOUNDS[1]):
        w = fit_share(difference, start)
        assert SHARE_BOUNDS[0] <= w <= SHARE_BOUNDS[1]
        assert mixture_evidence(w, difference) >= best_on_grid - 1e-9
        if SHARE_BOUNDS[0] < w < SHARE_BOUNDS[1]:
            q = 1.0 / (1.0 + np.exp(-(np.log(w / (1 - w)) + difference)))
            assert np.mean(q) == pytest.approx(w, rel=1e-7, abs=1e-12)


def test_fit_share_at_the_bounds_and_without_workers() -> None:
    assert fit_share(np.array([30.0, 5.0, 800.0]), 0.5) == SHARE_BOUNDS[1]
    assert fit_share(np.array([-30.0, -5.0, -800.0]), 0.5) == SHARE_BOUNDS[0]
    assert fit_share(np.zeros(0), 0.25) == 0.25
    assert fit_share(np.zeros(0), 2.0) == SHARE_BOUNDS[1]


def test_the_iterations_skip_the_means() -> None:
    """``means=False`` (the verdict's iterations) gives the same logs and no means."""
    rng = np.random.default_rng(4)
    counts = rng.random((9, 3, 3)) * 5
    prior = np.where(np.eye(3, dtype=bool), 4.0, 0.5)
    for asymmetry in ("free", "none", "evidence"):
        full = worker_model(counts, prior, asymmetry, 0.5)
        lean = worker_model(counts, prior, asymmetry, 0.5, means=False)
        assert lean.errors is None and full.errors is not None
        assert np.array_equal(lean.expected_log_e, full.expected_log_e)
        assert lean.share == full.share


def two_coin_crowd(
    sensitivity: float, specificity: float, seed: int = 0, n_items: int = 600
) -> LabelData:
    """Binary, 60 % class 1, 12 workers, 5 labels per item, every worker with the given
    sensitivity (right on class 1) and specificity (right on class 0)."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(n_items) < 0.6).astype(np.int64)
    items = np.repeat(np.arange(n_items), 5)
    workers = np.concatenate([rng.choice(12, 5, replace=False) for _ in range(n_items)])
    right = rng.random(items.size) < np.where(truth[items] == 1, sensitivity, specificity)
    labels = np.where(right, truth[items], 1 - truth[items])
    return LabelData(
        items=items,
        workers=workers,
        labels=labels,
        item_ids=np.arange(n_items).astype(str).astype(object),
        worker_ids=np.arange(12).astype(str).astype(object),
        classes=("0", "1"),
        gold=truth,
    )


def test_the_evidence_tells_symmetric_from_asymmetric_workers() -> None:
    """Workers right 80 % of the time on both classes are read as symmetric; workers right
    97 % on class 1 and 60 % on class 0 (a "say 1 when unsure" crowd) as free."""
    symmetric = make_aggregator("bds-ev").fit(two_coin_crowd(0.8, 0.8))
    asymmetric = make_aggregator("bds-ev").fit(two_coin_crowd(0.97, 0.6))
    assert symmetric.symmetric_share_ > 0.9 and symmetric.symmetric_.min() > 0.5
    assert asymmetric.symmetric_share_ < 0.1 and asymmetric.symmetric_.max() < 0.5
    # and the free reading is the better one there: symmetric workers lose accuracy
    data = two_coin_crowd(0.97, 0.6)
    accuracy = {
        m: float(np.mean(make_aggregator(m).fit(data).labels_ == data.gold))
        for m in ("bds-ev", "bds-sym")
    }
    assert accuracy["bds-ev"] > accuracy["bds-sym"] + 0.01, accuracy


def test_the_mixture_between_its_two_ends() -> None:
    """``worker_model`` with w at the ends: "none" is every worker symmetric, "free" the
    Dawid–Skene worker; the mixture's expected log confusion lies between them."""
    rng = np.random.default_rng(3)
    counts = rng.random((7, 3, 3)) * 10
    prior = np.where(np.eye(3, dtype=bool), 4.0, 0.5)
    free = worker_model(counts, prior, "free", 0.5)
    none = worker_model(counts, prior, "none", 0.5)
    mixed = worker_model(counts, prior, "evidence", 0.5)
    q = mixed.symmetric[:, None, None]
    assert np.allclose(
        mixed.expected_log_e, q * none.expected_log_e + (1 - q) * free.expected_log_e
    )
    assert np.allclose(none.errors.sum(axis=2), 1.0) and np.allclose(mixed.errors.sum(axis=2), 1)
    # a symmetric worker has one accuracy on every class
    assert np.allclose(np.diagonal(none.errors, axis1=1, axis2=2).std(axis=1), 0.0)
    assert 0.0 < mixed.share < 1.0


def test_nothing_to_check_keeps_free_workers() -> None:
    """One label per item: a worker's counts are its labels' agreement with themselves, no
    evidence of asymmetry, so ``bds-ev`` is ``bds-oc`` to the bit."""
    data = two_coin_crowd(0.9, 0.7)
    first = np.flatnonzero(np.r_[True, data.items[1:] != data.items[:-1]])
    lone = data.labels_subset(first)
    ev, oc = make_aggregator("bds-ev").fit(lone), make_aggregator("bds-oc").fit(lone)
    assert np.array_equal(ev.probas_, oc.probas_)
    assert np.array_equal(ev.symmetric_, np.zeros(lone.n_workers))


def test_deterministic_known_truth_and_refusals() -> None:
    data = two_coin_crowd(0.85, 0.75, seed=5)
    first = make_aggregator("bds-ev").fit(data)
    again = make_aggregator("bds-ev").fit(data)
    assert np.array_equal(first.probas_, again.probas_)
    known = {data.item_ids[i]: data.classes[int(data.gold[i])] for i in range(20)}
    clamped = make_aggregator("bds-ev").fit(data, known_truth=known)
    assert np.array_equal(clamped.labels_[:20], data.gold[:20])
    with pytest.raises(InvalidParameterError, match="asymmetry must be one of"):
        BayesianDawidSkene(asymmetry="some").fit(data)
    with pytest.raises(InvalidParameterError, match="asymmetry"):
        make_aggregator("bds-oc:asymmetry=some")
    assert make_aggregator("bds-ev").get_params()["asymmetry"] == "evidence"
    assert make_aggregator("bds-sym").get_params()["asymmetry"] == "none"
    assert make_aggregator("bds-oc").get_params()["asymmetry"] == "free"


def _fit_share_numpy(difference: np.ndarray, share: float) -> float:
    """The share's fixed point in NumPy: the reference the compiled loop must equal."""
    from scipy.special import expit, logit

    from crowdbudget.aggregation.worker_asymmetry import SHARE_BOUNDS

    low, high = SHARE_BOUNDS
    w = min(max(float(share), low), high)
    if difference.size == 0:
        return w
    for _ in range(200):
        new_w = min(
            max(float(np.add.reduce(expit(logit(w) + difference))) / difference.size, low), high
        )
        if abs(new_w - w) < 1e-10:
            return new_w
        w = new_w
    return w


def test_the_compiled_share_fit_is_the_numpy_fixed_point_bit_for_bit() -> None:
    """Crowds of 1 to 50,000 workers (past NumPy's summation chunk), evidence differences
    from near 0 to ±100 nats, starts at both bounds and inside."""
    from crowdbudget.aggregation.worker_asymmetry import fit_share

    rng = np.random.default_rng(5)
    sizes = [*range(1, 300, 7), 1000, 8191, 8192, 8193, 20000, 37332, 50000]
    for size in sizes:
        for share in (0.5, 1e-9, 1.0, 0.3):
            difference = rng.normal(rng.normal(0.0, 3.0), rng.uniform(0.1, 30.0), size)
            assert fit_share(difference, share) == _fit_share_numpy(difference, share)
