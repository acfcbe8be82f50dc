"""The spread refit of the live worker-aware policy (policies/worker_aware_refit.py): the
slices give the full refit's bits, the beliefs after a spread refit are those of the refit at
its due label followed by the labels since, a verdict mid-refit reads them without moving
the policy, a control answer completes it, and a live campaign stays deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.policies import worker_aware_refit as war
from crowdbudget.policies._one_coin_kernel import reestimate
from crowdbudget.policies.worker_aware_refit import SpreadRefit
from crowdbudget.posteriors.one_coin import OneCoinPosterior
from crowdbudget.registry import make_policy
from crowdbudget.types import CampaignState, LabelEvent, Problem

DEFAULT = "opt-kg:posterior=one-coin"


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=float).view(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_slices_give_the_full_refit_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_items, n_workers = 60, 7
    n = int(rng.integers(0, 400))
    log = np.column_stack(
        [rng.integers(0, n_items, n), rng.integers(0, n_workers, n), rng.integers(0, 2, n)]
    ).astype(np.int64)
    prior = np.column_stack([rng.uniform(0.5, 3, n_items), rng.uniform(0.5, 3, n_items)])
    post = OneCoinPosterior(prior, (4.0, 16.0), n_items, n_workers, np.full(n_items, 0.5))
    post.c, post.d = rng.uniform(2, 20, n_workers), rng.uniform(1, 5, n_workers)
    first = np.sort(np.unique(log[:, 0], return_index=True)[1]) if n else np.empty(0, int)
    labeled = np.ascontiguousarray(log[first, 0], dtype=np.int64)
    want = reestimate(
        log[:, 0].copy(),
        log[:, 1].copy(),
        log[:, 2].copy(),
        prior[:, 1].copy(),
        prior[:, 0].copy(),
        post.c.copy(),
        post.d.copy(),
        16.0,
        4.0,
        3,
    )
    job = SpreadRefit(n, log, labeled, prior, post, (16.0, 4.0), 3)
    budget, steps = int(rng.integers(1, 300)), 0
    while not job.step(budget):
        steps += 1
    assert n < 50 or steps > 1  # it was spread
    for x, y in zip(want, job.beliefs, strict=True):
        np.testing.assert_array_equal(_bits(x), _bits(y))


def _twins(spread: int, n_items: int = 40, n_workers: int = 6):
    """The default policy twice on one problem: at once, and spread (``spread`` units)."""
    problem = Problem(n_items=n_items, budget=10_000, n_workers=n_workers)
    out = []
    for units in (0, spread):
        policy = make_policy(DEFAULT)
        policy.refit_spread = units
        policy.reset(problem, np.random.default_rng(0))
        out.append(policy)
    return problem, out


def _labels(n: int, n_items: int, n_workers: int, seed: int = 1) -> list[LabelEvent]:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_items)
    good = rng.uniform(0.55, 0.95, n_workers)
    out = []
    for _ in range(n):
        i, j = int(rng.integers(n_items)), int(rng.integers(n_workers))
        label = int(truth[i]) if rng.random() < good[j] else 1 - int(truth[i])
        out.append(LabelEvent(item=i, worker=j, label=label))
    return out


@pytest.mark.parametrize("build_pairs", [False, True])
def test_a_spread_refit_ends_on_the_refit_beliefs(build_pairs: bool) -> None:
    problem, (at_once, spread) = _twins(spread=600)
    state = CampaignState.initial(problem)
    spread_seen = compared = 0
    for k, event in enumerate(_labels(250, problem.n_items, problem.n_workers)):
        if build_pairs and k == 3:
            for policy in (at_once, spread):
                policy.select(state, worker=0)  # the fast path's arrays from here on
        at_once.observe(event)
        spread.observe(event)
        if spread._spread is not None:
            spread_seen += 1
            continue
        compared += 1
        for name in ("a", "b", "c", "d"):
            np.testing.assert_array_equal(
                _bits(getattr(at_once.posterior_, name)), _bits(getattr(spread.posterior_, name))
            )
        if build_pairs and k >= 3:
            np.testing.assert_array_equal(_bits(at_once._moments), _bits(spread._moments))
            np.testing.assert_array_equal(_bits(at_once._item_error), _bits(spread._item_error))
            np.testing.assert_array_equal(_bits(at_once._reliability), _bits(spread._reliability))
    assert spread_seen > 50 and compared > 50  # both states were met


def test_a_verdict_mid_refit_reads_it_completed_and_moves_nothing() -> None:
    problem, (at_once, spread) = _twins(spread=600)
    _, (_, twin) = _twins(spread=600)
    state = CampaignState.initial(problem)
    asked = 0
    for event in _labels(200, problem.n_items, problem.n_workers, seed=2):
        for policy in (at_once, spread, twin):
            policy.observe(event)
        if spread._spread is not None and not spread._spread.applied:
            asked += 1
            got = spread.final_probabilities(state)
            np.testing.assert_array_equal(_bits(got), _bits(at_once.final_probabilities(state)))
    assert asked > 20
    for name in ("a", "b", "c", "d"):  # the twin was never asked
        np.testing.assert_array_equal(
            _bits(getattr(twin.posterior_, name)), _bits(getattr(spread.posterior_, name))
        )


def test_a_control_answer_completes_the_refit_first() -> None:
    problem, (at_once, spread) = _twins(spread=600)
    events = _labels(120, problem.n_items, problem.n_workers, seed=3)
    for event in events:
        at_once.observe(event)
        spread.observe(event)
        if spread._spread is not None and spread._spread.started:
            break
    assert spread._spread is not None
    known = LabelEvent(item=5, worker=2, label=1)
    at_once.observe_known(known, 1)
    spread.observe_known(known, 1)
    assert spread._spread is None
    for name in ("a", "b", "c", "d"):
        np.testing.assert_array_equal(
            _bits(getattr(at_once.posterior_, name)), _bits(getattr(spread.posterior_, name))
        )


def _live_run(store: EventStore, n_steps: int) -> list[str]:
    rng = np.random.default_rng(5)
    items = [f"i{k}" for k in range(1000)]  # beyond one label's refit budget: spread
    workers = [f"w{j}" for j in range(12)]
    campaign = Campaign.create(items, budget=10_000, policy=DEFAULT, seed=4, store=store)
    campaign.add_workers(workers)
    given, spread = [], False
    for _ in range(n_steps):
        worker = workers[int(rng.integers(len(workers)))]
        assignment = campaign.next_assignment(worker)
        assert assignment is not None
        given.append(assignment.item_id)
        campaign.record_label(assignment.assignment_id, str(int(rng.integers(2))))
        spread |= campaign.policy._spread is not None
    assert campaign.policy.refit_spread == war.LIVE_REFIT_SPREAD
    assert spread  # a refit was spread
    return given


def test_a_live_campaign_spreads_its_refits_deterministically() -> None:
    first = _live_run(EventStore("sqlite://"), 600)
    assert _live_run(EventStore("sqlite://"), 600) == first  # the same seed, the same run


@pytest.mark.parametrize("policy_id", [DEFAULT, f"{DEFAULT}:refit-exact-until=60"])
def test_pull_labels_with_every_worker_stale_make_the_same_choices(policy_id: str) -> None:
    """A label on the pull path while every worker is stale rescores no pair
    (``_observe_all_stale``) and a refit past the exact phase marks none; the choices are
    those of the full bookkeeping, pair for pair, and of the eager path, and the arrays the
    choices read are the full bookkeeping's bit for bit after every label."""
    problem = Problem(n_items=30, budget=10_000, n_workers=5)
    policies = []
    for variant in ("shortcut", "full", "eager"):
        policy = make_policy(policy_id)
        if variant == "full":
            policy._observe_all_stale = lambda i, j: False  # type: ignore[method-assign]
        if variant == "eager":
            policy.lazy_workers = False
        policy.reset(problem, np.random.default_rng(0))
        policies.append(policy)
    state = CampaignState.initial(problem)
    rng = np.random.default_rng(9)
    truth = rng.integers(0, 2, problem.n_items)
    for step in range(300):
        worker = int(rng.integers(problem.n_workers))
        chosen = {policy.select(state, worker=worker) for policy in policies}
        assert len(chosen) == 1
        (assignment,) = chosen
        assert assignment is not None
        right = rng.random() < 0.6 + 0.07 * worker
        label = int(truth[assignment.item]) if right else 1 - int(truth[assignment.item])
        for policy in policies:
            policy.observe(LabelEvent(item=assignment.item, worker=worker, label=label))
        shortcut, full = policies[0], policies[1]
        for name in ("_moments", "_item_error", "_reliability", "_state_ids"):
            np.testing.assert_array_equal(getattr(shortcut, name), getattr(full, name), name)
        assert shortcut._n_states == full._n_states, step
