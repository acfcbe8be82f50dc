"""The learned class prior of the binary one-coin worker-aware policy (``class-prior=gated``,
:mod:`crowdbudget.policies._class_prior`): its estimate, its gate, and the fast path deciding
as the reference path once the unlabelled items' shared state moves at refits."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.stress import StressCell, make_crowd
from crowdbudget.policies import _class_prior
from crowdbudget.policies._class_prior import (
    GateMemory,
    beta_for_share,
    gated_class_prior,
    share_and_accuracy,
    shared_prior,
)
from crowdbudget.registry import make_policy
from crowdbudget.simulation.replay import ReplayEnvironment
from decision_log import run_recorded

GATED = "opt-kg:posterior=one-coin:class-prior=gated"
PLAIN = "opt-kg:posterior=one-coin:class-prior=none"


def _one_coin_labels(
    pi: float, a: float, n_items: int, per_item: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(items, workers, labels): every item ``per_item`` labels of 50 workers of accuracy a."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(n_items) < pi).astype(np.int64)
    items = np.repeat(np.arange(n_items), per_item)
    workers = rng.integers(0, 50, size=items.shape[0])
    right = rng.random(items.shape[0]) < a
    labels = np.where(right, truth[items], 1 - truth[items])
    return items, workers, labels


def test_share_and_accuracy_recovers_a_one_coin_crowd() -> None:
    items, workers, labels = _one_coin_labels(0.12, 0.85, 4000, 3, 0)
    pi, a, right2, n2 = share_and_accuracy(items, workers, labels, 4000, (16.0, 4.0))
    assert abs(pi - 0.12) < 0.02
    assert abs(a - 0.85) < 0.02
    assert n2 == 12000 and abs(right2 / n2 - 0.85) < 0.02
    # lone labels say nothing about the accuracy: no item with two labels, no evidence
    lone = share_and_accuracy(items[::3], workers[::3], labels[::3], 4000, (16.0, 4.0))
    assert lone[3] == 0.0


def test_gate_opens_only_where_a_lone_label_cannot_decide() -> None:
    # class odds 7.3 against label odds 3 (0.75): open, the prior says class 0
    state = gated_class_prior(*_one_coin_labels(0.12, 0.75, 3000, 3, 1), 3000, (16.0, 4.0))
    assert state is not None and state[0] < state[1]
    # balanced, or label odds above the class odds: shut
    for pi, a in ((0.5, 0.75), (0.3, 0.9)):
        labelled = _one_coin_labels(pi, a, 3000, 3, 2)
        assert gated_class_prior(*labelled, 3000, (16.0, 4.0)) is None
    none = np.empty(0, np.int64)
    assert gated_class_prior(none, none, none, 5, (16, 4)) is None
    # one label per item, an accurate crowd on 70/30: no pair says how often a label is
    # right, so the gate reads a low accuracy and opens; at the MAP accuracy it stays shut
    lone = _one_coin_labels(0.3, 0.9, 3000, 1, 3)
    assert gated_class_prior(*lone, 3000, (16.0, 4.0)) is not None
    assert gated_class_prior(*lone, 3000, (16.0, 4.0), quantile=None) is None


def test_a_runaway_share_locks_the_gate_shut() -> None:
    memory = GateMemory()
    first = _one_coin_labels(0.2, 0.7, 3000, 3, 4)
    assert gated_class_prior(*first, 3000, (16.0, 4.0), memory=memory) is not None
    assert memory.opened_at is not None and not memory.locked
    # the same crowd again: open, nothing moved
    assert gated_class_prior(*first, 3000, (16.0, 4.0), memory=memory) is not None
    # a share whose odds grew more than RUNAWAY times since the gate opened: locked for good
    runaway = _one_coin_labels(0.02, 0.7, 3000, 3, 5)
    assert gated_class_prior(*runaway, 3000, (16.0, 4.0), memory=memory) is None
    assert memory.locked
    assert gated_class_prior(*first, 3000, (16.0, 4.0), memory=memory) is None


def test_beta_for_share_hits_the_share() -> None:
    from scipy.special import betainc

    for share in (0.02, 0.12, 0.5, 0.9):
        a0, b0 = beta_for_share(share)
        assert a0 + b0 == pytest.approx(2.0)
        assert 1.0 - betainc(a0, b0, 0.5) == pytest.approx(share, abs=1e-9)


def test_shared_prior_keeps_known_rows() -> None:
    known = np.array([[1.0, 1.0], [1e-6, 1e6], [1.0, 1.0]])
    out = shared_prior(known, 3, (1.0, 1.0), (1.7, 0.3))
    np.testing.assert_array_equal(out, [[1.7, 0.3], [1e-6, 1e6], [1.7, 0.3]])
    assert known[0, 0] == 1.0  # a new array
    np.testing.assert_array_equal(shared_prior(None, 2, (1.0, 1.0), (1.5, 0.5)), [[1.5, 0.5]] * 2)


@pytest.mark.parametrize(
    ("suffix", "message"),
    [
        (":class-prior=gated:refit=0", "needs refit"),
        (
            ":class-prior=gated:refit-tol=0.01:refit-exact-until=0:refit-exact-growth=0",
            "needs full refits",
        ),
    ],
)
def test_class_prior_is_validated(suffix: str, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        make_policy("opt-kg:posterior=one-coin" + suffix)
    with pytest.raises(InvalidParameterError, match="class-prior"):
        make_policy("opt-kg:posterior=one-coin:class-prior=learned")


def _imbalanced() -> ReplayEnvironment:
    cell = StressCell("t-90-10", (0.9, 0.1), 6, 30, accuracy=(2.5, 2.0), n_items=150)
    return ReplayEnvironment.from_label_data(make_crowd(cell, 0))


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_fast_path_decides_as_reference_with_a_moving_prior(mode: str) -> None:
    env = _imbalanced()
    for seed in (0, 1):
        runs = []
        for reference in (False, True):
            policy = make_policy(GATED)
            policy.reference = reference  # type: ignore[attr-defined]
            log, acc = run_recorded(policy, env, [150.0, 300.0], seed, mode)
            runs.append((log, acc, policy))
        (fast_log, fast_acc, fast), (ref_log, ref_acc, ref) = runs
        assert fast_log == ref_log
        assert fast_acc == ref_acc
        assert fast._lazy and not ref._fast  # type: ignore[attr-defined]
        # the prior moved off Beta(1, 1) (else this test would test nothing)
        assert fast._shared_row != (1.0, 1.0)  # type: ignore[attr-defined]
        if fast._lazy:  # type: ignore[attr-defined]
            fast._flush(None)  # type: ignore[attr-defined]
        live = ref._remaining > 0  # type: ignore[attr-defined]
        np.testing.assert_array_equal(fast._scores[live], ref._scores[live])  # type: ignore[attr-defined]


#: the prior with the incremental refit: full refits up to 60 labels, then incremental ones
#: with a full one whenever the labels grew by 30 % (the prior moves at those only)
INCREMENTAL = GATED + ":refit-tol=0.01:refit-exact-until=60:refit-exact-growth=0.3"


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_fast_path_decides_as_reference_with_the_incremental_refit(mode: str) -> None:
    env = _imbalanced()
    # pull seed 1 never opens the gate (the prior never moves: nothing to compare); seed 2 does
    for seed in (0, 1) if mode == "push" else (0, 2):
        runs = []
        for reference in (False, True):
            policy = make_policy(INCREMENTAL)
            policy.reference = reference  # type: ignore[attr-defined]
            moves: list[int] = []
            update = policy._update_class_prior  # type: ignore[attr-defined]

            def watch(policy=policy, update=update, moves=moves):  # type: ignore[no-untyped-def]
                row = policy._shared_row
                update()
                if policy._shared_row != row:
                    moves.append(policy._n_log)

            policy._update_class_prior = watch  # type: ignore[attr-defined]
            log, acc = run_recorded(policy, env, [150.0, 300.0], seed, mode)
            runs.append((log, acc, policy, moves))
        (fast_log, fast_acc, fast, fast_moves), (ref_log, ref_acc, ref, ref_moves) = runs
        assert fast_log == ref_log
        assert fast_acc == ref_acc
        assert fast_moves == ref_moves
        # incremental refits ran, and the prior moved at a full refit past refit_exact_until
        assert fast._incremental is not None  # type: ignore[attr-defined]
        assert any(n > 60 for n in fast_moves), fast_moves
        if fast._lazy:  # type: ignore[attr-defined]
            fast._flush(None)  # type: ignore[attr-defined]
        live = ref._remaining > 0  # type: ignore[attr-defined]
        np.testing.assert_array_equal(fast._scores[live], ref._scores[live])  # type: ignore[attr-defined]


def test_prior_moves_at_full_refits_only_with_the_incremental_refit() -> None:
    env = _imbalanced()
    policy = make_policy(INCREMENTAL)
    full: list[int] = []
    update = policy._update_class_prior  # type: ignore[attr-defined]

    def watch() -> None:
        full.append(policy._n_log)  # type: ignore[attr-defined]
        update()

    policy._update_class_prior = watch  # type: ignore[attr-defined]
    run_recorded(policy, env, [300.0], 0)
    # every refit up to the first past 60 labels is a full one; after it, only those at
    # 1.3 times the last full one's labels
    past = [n for n in full if n > 70]
    assert past and all(b >= 1.3 * a for a, b in itertools.pairwise([70, *past]))


def test_a_shut_gate_fits_again_only_after_the_labels_grew() -> None:
    # balanced: the gate stays shut, and the fit runs at the refits 10, 20, ..., then at
    # those past 1.1 times the last fit's labels
    cell = StressCell("t-50-50", (0.5, 0.5), 6, 30, n_items=150)
    env = ReplayEnvironment.from_label_data(make_crowd(cell, 0))
    fits: list[int] = []
    original = _class_prior.gated_class_prior

    def counted(items, *args, **kwargs):  # type: ignore[no-untyped-def]
        fits.append(items.shape[0])
        return original(items, *args, **kwargs)

    _class_prior.gated_class_prior = counted  # type: ignore[assignment]
    try:
        policy = make_policy(GATED)
        run_recorded(policy, env, [600.0], 0)
    finally:
        _class_prior.gated_class_prior = original  # type: ignore[assignment]
    assert policy._shared_row == (1.0, 1.0)  # type: ignore[attr-defined]
    assert fits[:10] == list(range(10, 110, 10))
    assert all(b >= 1.1 * a for a, b in itertools.pairwise(fits))
    assert len(fits) < 40  # 60 refits


def test_gated_prior_leaves_items_unlabelled_on_an_imbalanced_weak_crowd() -> None:
    # the mechanism: a first label cannot overturn the prior, so the budget goes to second
    # labels and some items keep the common class (docs/stress-bed.md)
    env = _imbalanced()
    plain, gated = make_policy(PLAIN), make_policy(GATED)
    logs = [run_recorded(p, env, [150.0], 0)[0] for p in (plain, gated)]
    labelled = [len({i for i, _, _ in log}) for log in logs]
    assert labelled[0] == 150
    assert labelled[1] < 150


def test_refit_final_leaves_the_policy_prior_alone() -> None:
    env = _imbalanced()
    policy = make_policy(GATED + ":refit-final=true")
    run_recorded(policy, env, [155.0], 0)
    kept = (policy._shared_row, policy._known_prior.copy())  # type: ignore[attr-defined]
    policy._final_posterior()  # type: ignore[attr-defined]
    assert policy._shared_row == kept[0]  # type: ignore[attr-defined]
    np.testing.assert_array_equal(policy._known_prior, kept[1])  # type: ignore[attr-defined]


def test_more_classes_keep_the_problem_prior() -> None:
    # the categorical delegate has no class prior: the same campaign as the default
    cell = StressCell("t-3", (0.8, 0.15, 0.05), 4, 20, n_items=60)
    env = ReplayEnvironment.from_label_data(make_crowd(cell, 0))
    logs = [run_recorded(make_policy(pid), env, [120.0], 0)[0] for pid in (PLAIN, GATED)]
    assert len(logs[0]) == 120
    assert logs[0] == logs[1]


def test_the_default_class_prior_is_set_in_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    from crowdbudget.policies import _refit_schedule

    def prior_of(pid: str) -> str:
        return make_policy(pid).class_prior  # type: ignore[attr-defined,no-any-return]

    assert prior_of("opt-kg:posterior=one-coin") == _refit_schedule.DEFAULT_CLASS_PRIOR
    assert prior_of("opt-kg:posterior=one-coin") == "gated-checked"
    monkeypatch.setattr(_refit_schedule, "DEFAULT_CLASS_PRIOR", "none")
    assert prior_of("opt-kg:posterior=one-coin") == "none"
    monkeypatch.setattr(_refit_schedule, "DEFAULT_CLASS_PRIOR", "gated-checked")
    # with the incremental refit's defaults, and with the full refit named
    policy = make_policy("opt-kg:posterior=one-coin")
    assert policy.refit_tol == _refit_schedule.DEFAULT_REFIT_TOL  # type: ignore[attr-defined]
    assert prior_of("opt-kg:posterior=one-coin:refit-tol=0") == "gated-checked"
    # named, KG and CVaR-KG, and the exact item step keep their own
    assert prior_of("opt-kg:posterior=one-coin:class-prior=none") == "none"
    assert prior_of("kg:posterior=one-coin") == "none"
    assert prior_of("opt-kg:posterior=one-coin:refit-items=exact") == "none"


def test_the_default_class_prior_steps_aside_without_full_refits() -> None:
    # an id asking for incremental refits only is run, with the problem's prior, not refused
    policy = make_policy(
        "opt-kg:posterior=one-coin:refit-tol=0.01:refit-exact-until=0:refit-exact-growth=0"
    )
    assert policy.class_prior == "none"  # type: ignore[attr-defined]
    with pytest.raises(InvalidParameterError, match="needs full refits"):
        make_policy(GATED + ":refit-tol=0.01:refit-exact-until=0:refit-exact-growth=0")


def test_the_compiled_em_is_the_numpy_em() -> None:
    from crowdbudget.policies._class_prior import share_and_accuracy
    from reference.two_coin_em import share_and_accuracy_numpy

    rng = np.random.default_rng(3)
    for trial in range(60):
        n, n_items, n_workers = (int(rng.integers(1, k)) for k in (2000, 500, 40))
        items, workers = rng.integers(0, n_items, n), rng.integers(0, n_workers, n)
        labels = (rng.random(n) < rng.random()).astype(np.int64)
        prior = [(16.0, 4.0), (4.0, 1.0), (1.0, 1.0), (0.5, 0.7)][trial % 4]
        got = share_and_accuracy(items, workers, labels, n_items, prior)
        want = share_and_accuracy_numpy(items, workers, labels, n_items, prior)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_the_grouping_in_the_kernel_is_np_unique_bit_for_bit() -> None:
    """The compiled fit groups the ids itself (``_dense_ranks``): the EM then reads the
    arrays ``np.unique`` gave before, so every result has the same bits."""
    from crowdbudget.policies._class_prior import _dense_ranks, _share_fit, _two_coin_em

    rng = np.random.default_rng(11)
    for trial in range(40):
        n, n_items, n_workers = (int(rng.integers(1, k)) for k in (3000, 900, 60))
        items, workers = rng.integers(0, n_items, n), rng.integers(0, n_workers, n)
        labels = (rng.random(n) < rng.random()).astype(np.int64)
        _, item, counts = np.unique(items, return_inverse=True, return_counts=True)
        _, worker = np.unique(workers, return_inverse=True)
        dense, got_counts = _dense_ranks(items)
        np.testing.assert_array_equal(dense, item.reshape(-1))
        np.testing.assert_array_equal(got_counts, counts)
        c0, d0 = [(16.0, 4.0), (4.0, 1.0), (0.5, 0.7)][trial % 3]
        shift = 1.0 if (c0 > 1.0 and d0 > 1.0) else 0.0
        want = _two_coin_em(
            item.reshape(-1).astype(np.int64),
            worker.reshape(-1).astype(np.int64),
            labels == 1,
            counts.astype(np.int64),
            c0,
            d0,
            shift,
            100,
            1e-7,
        )
        got = _share_fit(items, workers, labels, (c0, d0))
        assert got[:4] == tuple(float(x) for x in want[:4])  # the same bits
        assert got[4] == float(counts.shape[0])
