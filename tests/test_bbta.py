"""BBTA: Exp3 arithmetic by hand, the algorithm's bookkeeping, and that it learns per context."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.bandits.bbta import (
    BanditTaskAssignment,
    exp3_learning_rate,
    exp3_probabilities,
    exp3_weights,
)
from crowdbudget.policies.bandits.per_context import _half_error
from crowdbudget.registry import make_policy
from crowdbudget.simulation.contextual import (
    ContextualWorkerEnvironment,
    ContextualWorkers,
)
from crowdbudget.types import CampaignState, LabelEvent, Problem


def test_exp3_hand_computed_sequence() -> None:
    # K = 3: eta_t = sqrt(ln 3 / (3 t)); losses 1/p added to the chosen worker
    k = 3
    loss = np.zeros(k)
    eta1 = math.sqrt(math.log(3) / 3)
    assert float(exp3_learning_rate(1, k)) == pytest.approx(eta1)
    p1 = exp3_probabilities(loss, eta1)
    np.testing.assert_allclose(p1, [1 / 3, 1 / 3, 1 / 3])
    loss[0] += 1 / p1[0]  # worker 0 chosen and wrong: L = (3, 0, 0)
    eta2 = math.sqrt(math.log(3) / 6)
    w = np.array([math.exp(-eta2 * 3), 1.0, 1.0])
    np.testing.assert_allclose(exp3_probabilities(loss, eta2), w / w.sum())
    p2 = w / w.sum()
    loss[2] += 1 / p2[2]  # worker 2 chosen and wrong
    eta3 = math.sqrt(math.log(3) / 9)
    w3 = np.exp(-eta3 * np.array([3.0, 0.0, 1 / p2[2]]))
    np.testing.assert_allclose(exp3_probabilities(loss, eta3), w3 / w3.sum())
    # the min-shift leaves probabilities unchanged and avoids underflow
    big = np.array([1e6, 1e6 + 1.0, 1e6 + 2.0])
    np.testing.assert_allclose(
        exp3_probabilities(big, 1.0), np.exp([0, -1, -2]) / np.exp([0, -1, -2]).sum()
    )
    assert exp3_weights(big, 1.0)[0] == 1.0


def _drive(policy: BanditTaskAssignment, problem: Problem, answers: np.ndarray) -> None:
    state = CampaignState.initial(problem)
    while (a := policy.select(state)) is not None:
        state.record_assignment(a)
        event = LabelEvent(item=a.item, worker=int(a.worker), label=int(answers[a.item, a.worker]))
        state.record_label(event, a)
        policy.observe(event)


def test_exploration_losses_and_adaptive_update_by_hand() -> None:
    # 1 context, 3 workers, N' = 1: the exploration task gets labels (1, 1, 0) from workers
    # 0, 1, 2 -> majority 1 -> L_0 = (0, 0, 1); then one adaptive step.
    problem = Problem(n_items=2, budget=4, n_workers=3, contexts=[0, 0])
    policy = BanditTaskAssignment(n_explore=1)
    policy.reset(problem, np.random.default_rng(5))
    explore = int(policy.explore_items_[0])
    other = 1 - explore
    state = CampaignState.initial(problem)
    for j, y in enumerate((1, 1, 0)):
        a = policy.select(state)
        assert a is not None and (a.item, a.worker) == (explore, j)
        state.record_assignment(a)
        event = LabelEvent(item=explore, worker=j, label=y)
        state.record_label(event, a)
        policy.observe(event)
    np.testing.assert_allclose(policy.cumulative_loss_[0], [0.0, 0.0, 1.0])
    a = policy.select(state)
    assert a is not None and a.item == other  # exploration tasks leave
    eta = math.sqrt(math.log(3) / 3)
    p = exp3_probabilities(np.array([0.0, 0.0, 1.0]), eta)[a.worker]
    assert policy.eta_[0] == pytest.approx(eta)
    state.record_assignment(a)
    event = LabelEvent(item=other, worker=int(a.worker), label=1)
    state.record_label(event, a)
    policy.observe(event)
    # first label of a task always agrees with the weighted vote: no loss
    np.testing.assert_allclose(policy.cumulative_loss_[0], [0.0, 0.0, 1.0])
    w = policy.weights_[0]
    assert policy.confidence_()[other] == pytest.approx(w[a.worker] / w.sum())
    assert 0 < p < 1
    assert policy.final_labels(state)[other] == 1


def test_every_pair_at_most_once_and_tasks_leave() -> None:
    problem = Problem(n_items=4, budget=12, n_workers=3, contexts=[0, 1, 0, 1])
    policy = BanditTaskAssignment(n_explore=0)
    policy.reset(problem, np.random.default_rng(1))
    answers = np.ones((4, 3), dtype=np.int64)
    _drive(policy, problem, answers)
    assert policy.asked_.all() and int(policy.n_asked_.sum()) == 12
    assert policy.select(CampaignState.initial(problem)) is None or True


def test_bbta_learns_the_reliable_workers_per_context() -> None:
    # workers 0-2 are reliable (0.95) on context 0 and coin flips on context 1; 3-5 the reverse.
    # Losses are measured against the weighted vote, so (as the paper assumes) the reliable
    # workers must be able to carry the vote: here half the pool per context.
    acc = np.array([[0.95, 0.5]] * 3 + [[0.5, 0.95]] * 3)
    n = 400
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, n)
    contexts = np.arange(n) % 2
    env = ContextualWorkerEnvironment(truth, contexts, ContextualWorkers(acc))
    policy = BanditTaskAssignment(n_explore=2)
    run_campaign(policy, env, [5 * n], world_seed=7, policy_rng=np.random.default_rng(3))
    eta = float(policy.eta_[0])
    p0 = exp3_probabilities(policy.cumulative_loss_[0], eta)
    p1 = exp3_probabilities(policy.cumulative_loss_[1], float(policy.eta_[1]))
    assert p0[:3].sum() > 0.6 and p1[3:].sum() > 0.6, (p0, p1)
    final = policy.final_labels(CampaignState.initial(env.problem(5 * n)))
    assert np.mean(final == truth) > 0.9


def test_bbta_beats_random_pairs_on_spammer_hammer() -> None:
    rng = np.random.default_rng(11)
    truth = rng.integers(0, 2, 300)
    contexts = rng.integers(0, 3, 300)
    env = ContextualWorkerEnvironment(truth, contexts, "spammer-hammer", n_workers=15)
    acc = {}
    for pid in ("bbta:n-explore=1", "random-pair"):
        rows = [
            run_campaign(
                make_policy(pid), env, [1500], world_seed=r, policy_rng=np.random.default_rng(r)
            )[0]["accuracy"]
            for r in range(3)
        ]
        acc[pid] = np.mean(rows)
    assert acc["bbta:n-explore=1"] > acc["random-pair"] + 0.03


def test_bad_parameters() -> None:
    with pytest.raises(InvalidParameterError, match="n-explore"):
        make_policy("bbta:n-explore=-1")
    with pytest.raises(InvalidParameterError, match="contexts"):
        make_policy("bbta:contexts=some")
    with pytest.raises(InvalidParameterError, match="n_workers"):
        BanditTaskAssignment().reset(
            Problem(n_items=3, budget=3, contexts=[0, 0, 0]), np.random.default_rng(0)
        )


def test_optkg_half_error_is_the_smaller_tail_and_exact_at_ties() -> None:
    """per_context._half_error: min(P(θ < 1/2), P(θ > 1/2)) under Beta(a, b), computed through
    betainc(hi, lo, 1/2) (the fast path); exactly 1/2 when a == b; symmetric in (a, b)."""
    from scipy import special

    rng = np.random.default_rng(0)
    a = rng.uniform(0.2, 80.0, 500)
    b = rng.uniform(0.2, 80.0, 500)
    # both tails computed directly (no 1 - x cancellation), the smaller one is the error
    tails = np.minimum(special.betainc(a, b, 0.5), special.betaincc(a, b, 0.5))
    np.testing.assert_allclose(_half_error(a, b), tails, rtol=1e-10)
    np.testing.assert_array_equal(_half_error(a, b), _half_error(b, a))
    same = np.array([0.85, 1.2195121951219507, 7.0])
    np.testing.assert_array_equal(_half_error(same, same), 0.5)


def test_optkg_per_context_symmetric_states_tie_exactly() -> None:
    """Mirrored task states (a, b) and (b, a) have mathematically equal scores; moment matching
    leaves last-bit noise in them (the states below are from a pima run), and the scores must
    still be bit-equal so that the smallest pair index, not the noise, breaks the tie."""
    env = ContextualWorkerEnvironment(
        np.array([0, 1, 0, 1]), np.array([0, 0, 0, 0]), "one-coin", n_workers=3, name="tiny"
    )
    policy = make_policy("opt-kg:per-context")
    run_campaign(policy, env, [1.0], world_seed=0, policy_rng=np.random.default_rng(0))
    post = policy.posterior_
    post.a[:2] = [0.9090909090909085, 1.3636363636363642]
    post.b[:2] = [1.3636363636363626, 0.9090909090909096]
    post.c[:], post.d[:] = 4.394217453411416, 0.9750482514966168
    policy._now = _half_error(post.a, post.b)
    scores = policy._score(np.arange(policy._items.shape[0])).reshape(4, 3)
    np.testing.assert_array_equal(scores[0], scores[1])
    assert scores[0, 0] > 0.1


def test_candidates_far_behind_the_best_worker_draw_without_nan() -> None:
    # the context's best worker (0) already labelled the task; the two candidates are so far
    # behind that exp(−η (L_j − min L)) underflows to 0 for both: the draw must still give
    # them the Exp3 probabilities among themselves (it was 0/0: a NaN loss from then on)
    import warnings

    problem = Problem(n_items=3, budget=9, n_workers=3, contexts=[0, 0, 0])
    policy = BanditTaskAssignment(n_explore=0)
    policy.reset(problem, np.random.default_rng(1))
    state = CampaignState.initial(problem)
    for item in range(3):
        policy._mark_asked(item, 0)
    policy.cumulative_loss_[0] = [0.0, 1e6, 1e6 + 2.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pick = policy.select(state)
    assert pick is not None and pick.worker in (1, 2)
    eta = float(policy.eta_[0])
    expected = exp3_probabilities(np.array([0.0, 2.0]), eta)[pick.worker - 1]
    assert policy._pending[(pick.item, pick.worker)] == pytest.approx(expected)
    assert np.isfinite(policy._pending[(pick.item, pick.worker)])


def test_compiled_context_passes_match_numpy() -> None:
    """BBTA's compiled passes give NumPy's answers bit for bit: the weighted sums are
    ``np.bincount(items, w[workers] * signs)`` and the first lowest available member is
    ``np.argmin(np.where(available, |num|, inf))`` (first of equals; NaN counts as least;
    −1 when nothing is available)."""
    from crowdbudget.policies.bandits.bbta import _first_lowest, _weighted_sums

    rng = np.random.default_rng(4)
    members = np.sort(rng.choice(200, size=60, replace=False)).astype(np.int64)
    size = 500
    items = rng.integers(0, 60, size + 20).astype(np.int64)  # the log's spare capacity
    workers = rng.integers(0, 7, size + 20).astype(np.int64)
    signs = rng.choice([-1.0, 1.0], size + 20)
    weights = np.exp(-rng.random(7) * 3.0)
    num = np.zeros(200)
    _weighted_sums(items, workers, signs, size, weights, members, num)
    expected = np.bincount(
        items[:size], weights=weights[workers[:size]] * signs[:size], minlength=60
    )
    np.testing.assert_array_equal(num[members].view(np.int64), expected.view(np.int64))

    for trial in range(200):
        values = rng.integers(-3, 4, 200).astype(float)  # many equal |num|
        if trial % 7 == 0:
            values[rng.integers(0, 200)] = np.nan
        available = rng.random(200) < (0.0 if trial % 11 == 0 else 0.6)
        ok = available[members]
        got = _first_lowest(values, members, available)
        if not ok.any():
            assert got == -1
        else:
            assert got == int(np.argmin(np.where(ok, np.abs(values[members]), np.inf)))


def test_lowest_context_is_lexsort() -> None:
    """The context of least cached score, ties by task index then context, NaN last: the
    first entry of ``np.lexsort((item, score))``."""
    from crowdbudget.policies.bandits.bbta import _lowest_context

    rng = np.random.default_rng(8)
    for trial in range(500):
        size = int(rng.integers(1, 7))
        score = rng.integers(0, 3, size).astype(float)
        score[rng.random(size) < 0.2] = np.inf
        if trial % 4 == 0:
            score[rng.random(size) < 0.3] = np.nan
        item = rng.integers(-1, 4, size).astype(np.int64)
        assert _lowest_context(score, item) == int(np.lexsort((item, score))[0])


def test_dense_pair_index_answers_as_the_search() -> None:
    """On a full grid of pairs (a simulated world) the pair index reads a pair by its index;
    its candidates and permissions are those of the general search over sorted pairs."""
    from crowdbudget.policies.bandits.bbta import _PairIndex
    from crowdbudget.simulation.contextual import ContextualWorkerEnvironment

    env = ContextualWorkerEnvironment(np.arange(12) % 2, np.arange(12) % 3, "one-coin", n_workers=5)
    env.reset(seed=3)
    problem = env.problem(40.0)
    state = CampaignState.initial(problem)
    state.pairs = env.pairs
    dense = _PairIndex(state, 5)
    assert dense.dense
    general = _PairIndex(state, 5)
    general.dense = False
    rng = np.random.default_rng(2)
    env.pairs.remaining[rng.random(60) < 0.4] = 0
    for item in range(12):
        asked = rng.random(5) < 0.3
        np.testing.assert_array_equal(
            dense.candidates(item, asked), general.candidates(item, asked)
        )
        for worker in range(5):
            assert dense.allows(item, worker) == general.allows(item, worker)
