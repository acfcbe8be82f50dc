"""The learned class prior of the categorical worker-aware policy (``class_prior="gated"``,
:mod:`crowdbudget.policies._class_prior_multiclass`): its estimate, its gate, and the fast path
(one shared state for every unlabelled item, moved at refits) deciding as the reference path
that scores every pair on its own."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.stress import StressCell, make_crowd
from crowdbudget.policies._class_prior import GateMemory
from crowdbudget.policies._class_prior_multiclass import (
    class_shares,
    gated_class_prior,
    lone_label_decides,
)
from crowdbudget.policies.worker_aware_multiclass import CategoricalWorkerKnowledgeGradient
from crowdbudget.registry import make_policy
from crowdbudget.simulation.replay import ReplayEnvironment
from decision_log import run_recorded

GATED = "opt-kg:posterior=one-coin:multiclass-class-prior=gated"


def _one_coin_labels(
    pi: tuple[float, ...], a: float, n_items: int, per_item: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(items, workers, labels): every item ``per_item`` labels of 50 one-coin workers of
    accuracy a (a wrong label uniform over the other classes)."""
    rng = np.random.default_rng(seed)
    k = len(pi)
    truth = rng.choice(k, size=n_items, p=np.asarray(pi))
    items = np.repeat(np.arange(n_items), per_item)
    workers = rng.integers(0, 50, size=items.shape[0])
    right = rng.random(items.shape[0]) < a
    wrong = (truth[items] + rng.integers(1, k, size=items.shape[0])) % k
    return items, workers, np.where(right, truth[items], wrong)


def test_class_shares_recover_a_one_coin_crowd() -> None:
    items, workers, labels = _one_coin_labels((0.85, 0.1, 0.05), 0.8, 4000, 3, 0)
    pi, n_soft, right2, n2 = class_shares(items, workers, labels, 3, (4.0, 1.0))
    np.testing.assert_allclose(pi, [0.85, 0.1, 0.05], atol=0.02)
    assert n_soft.sum() == pytest.approx(4000.0)
    assert n2 == 12000.0
    assert right2 / n2 == pytest.approx(0.8, abs=0.02)


def test_lone_label_condition() -> None:
    # K = 3, a = 0.8: a lone label decides while π_max / π_min ≤ 0.8 · 2 / 0.2 = 8
    assert lone_label_decides(0.1, 0.7, 0.8, 3)
    assert not lone_label_decides(0.05, 0.9, 0.8, 3)
    # an accuracy below 1/K is read as 1/K: only uniform classes are decided
    assert not lone_label_decides(0.3, 0.4, 0.1, 3)


def test_gate_opens_only_where_a_lone_label_cannot_decide() -> None:
    skewed = _one_coin_labels((0.9, 0.07, 0.03), 0.75, 3000, 2, 1)
    prior = gated_class_prior(*skewed, 3, (4.0, 1.0))
    assert prior is not None
    np.testing.assert_allclose(prior, [0.9, 0.07, 0.03], atol=0.03)
    assert prior.sum() == pytest.approx(1.0)
    balanced = _one_coin_labels((0.4, 0.3, 0.3), 0.75, 3000, 2, 1)
    assert gated_class_prior(*balanced, 3, (4.0, 1.0)) is None
    # accurate workers decide even a skewed crowd once pairs show their accuracy
    accurate = _one_coin_labels((0.8, 0.15, 0.05), 0.97, 3000, 2, 1)
    assert gated_class_prior(*accurate, 3, (4.0, 1.0)) is None
    empty = np.empty(0, dtype=np.int64)
    assert gated_class_prior(empty, empty, empty, 3, (4.0, 1.0)) is None


def test_a_runaway_ratio_locks_the_gate_shut() -> None:
    memory = GateMemory()
    first = _one_coin_labels((0.85, 0.1, 0.05), 0.75, 3000, 2, 2)
    assert gated_class_prior(*first, 3, (4.0, 1.0), memory=memory) is not None
    assert memory.opened_at is not None
    runaway = _one_coin_labels((0.995, 0.004, 0.001), 0.75, 3000, 2, 2)
    assert gated_class_prior(*runaway, 3, (4.0, 1.0), memory=memory) is None
    assert memory.locked
    assert gated_class_prior(*first, 3, (4.0, 1.0), memory=memory) is None


def test_class_prior_is_validated() -> None:
    with pytest.raises(InvalidParameterError, match="class_prior"):
        CategoricalWorkerKnowledgeGradient(class_prior="learned").validate_params()
    with pytest.raises(InvalidParameterError, match="refit"):
        CategoricalWorkerKnowledgeGradient(class_prior="gated", refit=0).validate_params()
    with pytest.raises(InvalidParameterError, match="refit"):
        make_policy(GATED + ":refit=0")
    with pytest.raises(InvalidParameterError, match="multiclass-class-prior"):
        make_policy("opt-kg:posterior=one-coin:multiclass-class-prior=learned")
    with pytest.raises(InvalidParameterError, match="posterior=one-coin"):
        make_policy("opt-kg:multiclass-class-prior=gated")


def _skewed() -> ReplayEnvironment:
    cell = StressCell("t-3-skewed", (0.85, 0.1, 0.05), 6, 30, accuracy=(3.0, 2.0), n_items=150)
    return ReplayEnvironment.from_label_data(make_crowd(cell, 0))


class _Recording(CategoricalWorkerKnowledgeGradient):
    """Records every shared prior state the refits set."""

    def _update_class_prior(self, log: np.ndarray) -> None:
        super()._update_class_prior(log)
        self.states_ = [*getattr(self, "states_", []), self._at_prior.copy()]


@pytest.mark.parametrize("model", ["one-coin", "confusion"])
@pytest.mark.parametrize("mode", ["push", "pull"])
def test_fast_path_decides_as_reference_with_a_moving_prior(mode: str, model: str) -> None:
    env = _skewed()
    for seed in (0, 1):
        runs = []
        for reference in (False, True):
            policy = _Recording(model, refit=10, class_prior="gated", tie_break="random")
            policy.reference = reference
            log, acc = run_recorded(policy, env, [150.0, 300.0], seed, mode)
            runs.append((log, acc, policy))
        (fast_log, fast_acc, fast), (ref_log, ref_acc, ref) = runs
        assert fast_log == ref_log
        assert fast_acc == ref_acc
        assert fast._share and not ref._share
        # the shared state moved off the uniform prior (else this test would test nothing)
        assert any(not np.allclose(s, 1.0 / 3.0) for s in fast.states_)
        live = fast._scores > -np.inf
        np.testing.assert_array_equal(fast._scores[live], ref._scores[live])


def test_gated_prior_changes_a_three_class_campaign_and_none_does_not() -> None:
    env = _skewed()
    default, gated = make_policy("opt-kg:posterior=one-coin"), make_policy(GATED)
    none = make_policy("opt-kg:posterior=one-coin:multiclass-class-prior=none")
    logs = [run_recorded(p, env, [150.0], 0)[0] for p in (default, none, gated)]
    # the registry's default is the gated prior (_refit_schedule.DEFAULT_MULTICLASS_CLASS_PRIOR)
    assert logs[0] == logs[2]
    assert logs[1] != logs[2]
    assert gated.multiclass_ is not None  # type: ignore[attr-defined]
    assert gated.multiclass_.class_prior == "gated"  # type: ignore[attr-defined]
    # the mechanism: a lone label cannot overturn the common class, so the budget goes to
    # second labels and some items keep the common class unlabelled
    labelled = [len({i for i, _, _ in log}) for log in logs]
    assert labelled[1] == 150
    assert labelled[2] < 150
