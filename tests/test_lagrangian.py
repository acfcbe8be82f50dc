"""The Lagrangian bound of Hu & Frazier: a true upper bound (vs brute force), convex in λ,
compiled DP = NumPy reference, index tables = bisection on the DP."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest

from crowdbudget.bounds.exact_dp import ExactDPSolution
from crowdbudget.bounds.lagrangian import (
    StateSpace,
    index_by_bisection,
    index_table,
    lagrangian_bound,
    relaxed_value,
    solve_single_task_reference,
)
from crowdbudget.bounds.single_task import backward_induction
from crowdbudget.posteriors.beta_bernoulli import error_probability


def brute_force_optimum(
    n_items: int,
    budget: int,
    r: float,
    mu: float,
    prior: tuple[float, float] = (1.0, 1.0),
    threshold: float = 0.5,
) -> float:
    """The Bayes-optimal value (4) of the full K-task problem with T = ∞, by memoised
    recursion on the embedded chain: state = ((n⁺, n⁻, w) per task, ℓ). An arriving worker
    may be given any task or none (Π_0)."""
    a0, b0 = prior

    def reward(npos: int, nneg: int) -> float:
        return 1.0 - float(error_probability(a0 + npos, b0 + nneg, threshold))

    @cache
    def value(tasks: tuple[tuple[int, int, int], ...], arrivals: int) -> float:
        in_flight = sum(t[2] for t in tasks)
        if arrivals >= budget and in_flight == 0:
            return sum(reward(t[0], t[1]) for t in tasks)
        rate_arrival = r if arrivals < budget else 0.0
        q = rate_arrival + mu * in_flight
        total = 0.0
        if rate_arrival > 0:
            options = [value(tasks, arrivals + 1)]  # the worker is not given a task
            for x in range(n_items):
                npos, nneg, w = tasks[x]
                new = (*tasks[:x], (npos, nneg, w + 1), *tasks[x + 1 :])
                options.append(value(tuple(sorted(new)), arrivals + 1))
            total += rate_arrival / q * max(options)
        for x in range(n_items):
            npos, nneg, w = tasks[x]
            if w == 0:
                continue
            p = (a0 + npos) / (a0 + b0 + npos + nneg)
            up = tuple(sorted((*tasks[:x], (npos + 1, nneg, w - 1), *tasks[x + 1 :])))
            down = tuple(sorted((*tasks[:x], (npos, nneg + 1, w - 1), *tasks[x + 1 :])))
            total += mu * w / q * (p * value(up, arrivals) + (1 - p) * value(down, arrivals))
        return total

    return value(tuple((0, 0, 0) for _ in range(n_items)), 0)


def test_brute_force_matches_chen_exact_dp_when_work_is_instant() -> None:
    # μ >> r: every label is back before the next worker arrives, which is the sequential
    # model of Chen et al. solved by bounds/exact_dp.py
    ours = brute_force_optimum(2, 4, r=1.0, mu=1e7)
    chen = ExactDPSolution(np.ones((2, 2)), np.full(2, 0.5), 4).value
    assert ours == pytest.approx(chen, abs=1e-5)


@pytest.mark.parametrize(
    "n_items, budget, r, mu, prior",
    [
        (1, 3, 0.1, 0.4, (1.0, 1.0)),
        (2, 3, 0.1, 0.4, (1.0, 1.0)),
        (2, 4, 1.0, 0.3, (2.0, 1.0)),
        (3, 4, 0.1, 0.4, (1.0, 1.0)),
        (3, 3, 0.5, 5.0, (0.7, 1.3)),
    ],
)
def test_bound_is_at_least_the_exact_optimum(
    n_items: int, budget: int, r: float, mu: float, prior: tuple[float, float]
) -> None:
    optimum = brute_force_optimum(n_items, budget, r, mu, prior)
    result = lagrangian_bound(
        n_items=n_items,
        budget=budget,
        arrival_rate=r,
        completion_rate=mu,
        prior=(prior[1], prior[0]),  # Problem layout: (b, a)
        label_cap=budget,
        vector=True,
        subgradient_steps=40,
    )
    assert result.bound >= optimum - 1e-9
    assert result.bound_vector is not None and result.bound_vector <= result.bound_scalar + 1e-12
    if n_items == 1:
        # one task: every worker goes to it in both problems, the relaxation is exact
        assert result.bound == pytest.approx(optimum, abs=1e-7)


def test_a_small_cap_is_detected_and_the_optimistic_bound_stays_valid() -> None:
    optimum = brute_force_optimum(2, 4, 1.0, 1.0)
    capped = lagrangian_bound(
        n_items=2, budget=4, arrival_rate=1.0, completion_rate=1.0, label_cap=1
    )
    assert capped.cap_binds
    assert capped.bound >= optimum - 1e-9  # optimistic treatment of the cap: still a bound
    assert capped.bound_forbid <= capped.bound + 1e-12
    roomy = lagrangian_bound(
        n_items=2, budget=4, arrival_rate=1.0, completion_rate=1.0, label_cap=4
    )
    assert not roomy.cap_binds


def test_bound_is_convex_in_lambda_and_the_search_finds_the_minimum() -> None:
    kwargs = dict(n_items=20, budget=24, arrival_rate=0.1, completion_rate=0.4, label_cap=10)
    grid = np.linspace(0.0, 0.5, 41)
    values = np.array([relaxed_value(lam, **kwargs) for lam in grid])  # type: ignore[arg-type]
    assert np.all(np.diff(values, 2) >= -1e-9)
    best = lagrangian_bound(**kwargs)  # type: ignore[arg-type]
    assert best.bound <= values.min() + 1e-9
    assert best.bound == pytest.approx(relaxed_value(best.lambda_scalar, **kwargs), abs=1e-9)  # type: ignore[arg-type]


def test_bound_with_heterogeneous_priors_sums_the_groups() -> None:
    prior = np.array([[1.0, 1.0], [1.0, 1.0], [2.0, 1.0]])
    thresholds = np.array([0.5, 0.5, 0.4])
    lam = 0.03
    total = relaxed_value(
        lam,
        n_items=3,
        budget=4,
        arrival_rate=0.2,
        completion_rate=0.5,
        prior=prior,
        thresholds=thresholds,
        label_cap=4,
    )
    # B(λ) = Σ_x V_x(λ) + Uλ: the groups' single-task values, added by hand
    parts = []
    for (b, a), d in zip(prior, thresholds, strict=True):
        space = StateSpace.build(a, b, d, 4)
        values, _ = solve_single_task_reference(space, np.full(4, lam), 0.2, 0.5)
        parts.append(values[-1, space.start])
    assert total == pytest.approx(sum(parts) + 4 * lam, abs=1e-12)


@pytest.mark.parametrize("cap_mode", ["optimistic", "forbid"])
def test_compiled_dp_equals_the_numpy_reference(cap_mode: str) -> None:
    rng = np.random.default_rng(5)
    space = StateSpace.build(1.3, 0.8, 0.45, 6)
    penalties = rng.uniform(0, 0.2, size=9)
    values, decisions = solve_single_task_reference(
        space,
        penalties,
        0.3,
        0.7,
        cap_mode=cap_mode,  # type: ignore[arg-type]
    )
    fast, fast_decisions = backward_induction(
        penalties,
        0.3,
        0.7,
        space.p_pos,
        space.reward,
        space.in_flight,
        space.pos_next,
        space.neg_next,
        space.hire,
        cap_mode == "optimistic",
        True,
    )
    np.testing.assert_allclose(fast, values[-1], rtol=0, atol=1e-13)
    assert np.array_equal(fast_decisions[1:], decisions[1:])


def test_index_table_matches_bisection() -> None:
    r, mu, cap, budget = 0.1, 0.4, 6, 8
    space = StateSpace.build(1.0, 1.0, 0.5, cap)
    table = index_table(
        prior_a=1.0,
        prior_b=1.0,
        threshold=0.5,
        budget=budget,
        arrival_rate=r,
        completion_rate=mu,
        label_cap=cap,
    )
    for state in [(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 0, 1), (2, 1, 0), (1, 0, 1), (0, 1, 2)]:
        for m in (1, 3, 8):
            exact = index_by_bisection(
                space, state, m, arrival_rate=r, completion_rate=mu, scan_points=120
            )
            assert table.index[m - 1, space.lookup[state]] == pytest.approx(exact, abs=1e-5)
    at_cap = space.lookup[3, 3, 0]
    assert table.index[0, at_cap] == -math.inf


def test_index_tables_are_cached_on_disk(tmp_path) -> None:  # type: ignore[no-untyped-def]
    kwargs = dict(
        prior_a=1.5,
        prior_b=0.5,
        threshold=0.5,
        budget=5,
        arrival_rate=0.2,
        completion_rate=0.3,
        label_cap=4,
        cache_dir=str(tmp_path),
    )
    first = index_table(**kwargs)  # type: ignore[arg-type]
    files = list(tmp_path.glob("*.npz"))
    assert len(files) == 1
    from crowdbudget.bounds import index_tables

    index_tables._TABLES.clear()  # force the disk path
    second = index_table(**kwargs)  # type: ignore[arg-type]
    assert np.array_equal(first.index, second.index)


def test_bad_rates_are_refused() -> None:
    from crowdbudget.exceptions import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="arrival rate"):
        lagrangian_bound(n_items=2, budget=2, arrival_rate=0.0, completion_rate=1.0)
