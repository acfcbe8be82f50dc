"""The share prior of the value control rule: the posterior of the crowd's share of bad
workers from control answers and peer agreement, and the value of a control answer under it
(:class:`crowdbudget.engine.crowd_prior.SharePrior`, ``ControlTasks(prior_fit="share")``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from crowdbudget.engine.control import ControlLedger, ControlTasks
from crowdbudget.engine.crowd_prior import (
    NO_BAD_PRIOR,
    POINTS,
    SharePrior,
    grid_net_values,
    log_likelihood,
    peer_log_likelihood,
)
from crowdbudget.exceptions import InvalidParameterError


def _control(right: int, answered: int) -> np.ndarray:
    return log_likelihood(np.array([right]), np.array([answered]))[0]


def test_without_evidence_the_share_is_its_prior_mean() -> None:
    prior = SharePrior((1.0, 1.0), 0.7).fit({})
    # the spike at 0 and the rest uniform on 1/100..1: mean (1 − p0) · 0.505
    assert prior.share_without(None) == pytest.approx((1 - NO_BAD_PRIOR) * 0.505)
    assert prior.bad[POINTS >= 0.7].sum() == 0 and prior.good[POINTS < 0.7].sum() == 0
    assert prior.bad.sum() == pytest.approx(1.0) and prior.good.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("n_bad", [0, 6])
def test_the_share_follows_the_crowd(n_bad: int) -> None:
    rng = np.random.default_rng(0)
    accuracy = np.r_[np.full(n_bad, 0.5), rng.uniform(0.8, 0.95, 20 - n_bad)]
    right = [int(r) for r in rng.binomial(30, accuracy, size=accuracy.size)]
    prior = SharePrior((1.0, 1.0), 0.7).fit({j: _control(right[j], 30) for j in range(20)})
    share = prior.share_without(None)
    if n_bad:
        assert share == pytest.approx(n_bad / 20, abs=0.12)
    else:
        assert share < 0.02


def test_a_worker_is_read_against_the_others_exactly() -> None:
    evidence = {j: _control(r, 10) for j, r in enumerate([10, 9, 9, 5, 4, 10, 8])}
    full = SharePrior((1.0, 1.0), 0.7).fit(evidence)
    rest = SharePrior((1.0, 1.0), 0.7).fit({j: e for j, e in evidence.items() if j != 3})
    assert full.share_without(3) == pytest.approx(rest.share_without(None), rel=1e-10)
    np.testing.assert_allclose(full.without(3), rest.weights, rtol=1e-10)


def test_peer_agreement_is_the_two_coin_agreement() -> None:
    # agree with probability ½ + (2a − 1) s / 2; no pairs: no evidence
    np.testing.assert_array_equal(peer_log_likelihood(0, 0, 0.6), np.zeros(POINTS.size))
    one = peer_log_likelihood(1, 1, 0.6)
    np.testing.assert_allclose(np.exp(one), 0.5 + (2 * POINTS - 1) * 0.3, rtol=1e-12)
    # a crowd at chance (s = 0) tells nothing about anyone
    np.testing.assert_allclose(
        peer_log_likelihood(7, 10, 0.0), np.full(POINTS.size, 10 * np.log(0.5))
    )


def test_the_block_read_on_the_beta_while_answers_are_predicted_by_the_grid() -> None:
    """``block_beta``: the block decision is the Beta test's (``I_L(α + s, β + k − s)``)
    whatever the grid posterior predicts; with the same Beta on both it agrees with the
    grid's own test up to the grid."""
    beta_on_grid = np.exp(_control(3, 4))
    beta_on_grid /= beta_on_grid.sum()
    own = grid_net_values(beta_on_grid, 40.0, 0.3, 12, 0.7, 0.9, 0)
    read = grid_net_values(beta_on_grid, 40.0, 0.3, 12, 0.7, 0.9, 0, block_beta=(4.0, 2.0))
    np.testing.assert_allclose(read, own, atol=0.02 * np.abs(own).max())
    # a Beta test that cannot block within 12 answers: V_k is the k displaced labels' worth
    good = np.where(POINTS > 0.9, 1.0, 0.0) / (POINTS > 0.9).sum()
    sure = grid_net_values(good, 40.0, 0.3, 12, 0.7, 0.9, 0, block_beta=(30.0, 1.0))
    np.testing.assert_allclose(sure, -np.arange(1, 13) * float(good @ (2 * POINTS - 1) ** 2))
    # a Beta test that blocks on one wrong answer: the false block is a cost, not a gain
    hasty = grid_net_values(good, 40.0, 0.3, 12, 0.7, 0.9, 0, block_beta=(1.0, 1.0))
    assert (hasty < sure).all()


def _ledger(tasks: ControlTasks, n_workers: int = 20) -> ControlLedger:
    control = np.zeros(400, dtype=bool)
    control[:40] = True
    return ControlLedger.start(
        tasks, control, np.zeros(400, dtype=np.int64), n_workers, budget=3000.0
    )


def _feed(ledger: ControlLedger, accuracy: np.ndarray, rng: np.random.Generator) -> None:
    """Every worker answers 2 control items and labels 12 ordinary items shared in threes
    (truth 0), each right with their accuracy."""
    workers = accuracy.size
    for w in range(workers):
        for item in (w % 40, (w + 1) % 40):
            ledger.handed(w, item)
            ledger.answer(w, item, int(rng.random() > accuracy[w]), float(ledger.labels_total + 1))
    for item in range(40, 120):
        for w in rng.choice(workers, 3, replace=False):
            ledger.handed(int(w), item)
            ledger.answer(
                int(w), item, int(rng.random() > accuracy[w]), float(ledger.labels_total + 1)
            )


def test_the_value_of_control_falls_in_a_crowd_without_bad_workers() -> None:
    rule: dict[str, Any] = {"n_items": 40, "first_k": 0, "rule": "value", "block_below": 0.7}
    rng = np.random.default_rng(1)
    tested, shares = {}, {}
    for kind, accuracy in (
        ("good", rng.uniform(0.75, 0.95, 20)),
        ("spammers", np.r_[np.full(6, 0.5), rng.uniform(0.75, 0.95, 14)]),
    ):
        for fit in ("fixed", "share"):
            ledger = _ledger(ControlTasks(**rule, prior_fit=fit))
            _feed(ledger, accuracy, np.random.default_rng(2))
            tested[kind, fit] = {w for w in range(20) if ledger.control_value(w) > 0}
            crowd = ledger.crowd()
            if isinstance(crowd, SharePrior):
                shares[kind] = crowd.share_without(None)
    # the fixed prior tests workers of either crowd; the share prior nobody in the good
    # one, and in the other mostly spammers (workers 0-5)
    assert len(tested["good", "fixed"]) >= 5 and len(tested["spammers", "fixed"]) >= 5
    assert tested["good", "share"] == set()
    spammers = tested["spammers", "share"] & set(range(6))
    assert len(spammers) >= 3 > len(tested["spammers", "share"] - spammers)
    assert shares["good"] < shares["spammers"]


def test_the_share_prior_needs_a_block_level() -> None:
    with pytest.raises(InvalidParameterError, match="share prior"):
        ControlTasks(n_items=3, prior_fit="share")
    # the block test itself stays the requester's Beta
    tasks = ControlTasks(n_items=3, prior_fit="share", block_below=0.7)
    ledger = _ledger(tasks)
    assert ledger.p_below(2, 6, 0) == pytest.approx(
        ControlLedger.start(
            ControlTasks(n_items=3, block_below=0.7),
            np.ones(4, dtype=bool),
            np.zeros(4, dtype=np.int64),
        ).p_below(2, 6, 0)
    )
