"""Bounded knapsack (Rangi, Franceschetti 2018, eq. 3 / Algorithm 2): greedy vs brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.bandits.knapsack import (
    exact_bounded_knapsack,
    greedy_bounded_knapsack,
    ucb_values,
)


def brute_force(values, costs, capacities, budget):  # type: ignore[no-untyped-def]
    best = 0.0
    for x in itertools.product(*(range(int(m) + 1) for m in capacities)):
        x_arr = np.array(x)
        if x_arr @ costs <= budget + 1e-12:
            best = max(best, float(x_arr @ values))
    return best


def lp_bound(values, costs, capacities, budget):  # type: ignore[no-untyped-def]
    """Lemma 4.1: the LP optimum fills workers by efficiency, the splitting one fractionally."""
    total, left = 0.0, budget
    for k in np.argsort(-values / costs, kind="stable"):
        take = min(capacities[k], left / costs[k])
        total += take * values[k]
        left -= take * costs[k]
    return total


@pytest.mark.parametrize("seed", range(40))
def test_greedy_and_exact_against_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5))
    values = rng.uniform(0, 1, n)
    costs = rng.uniform(0.2, 1.5, n)
    capacities = rng.integers(0, 4, n)
    budget = float(rng.uniform(0, 4))
    optimum = brute_force(values, costs, capacities, budget)
    greedy = greedy_bounded_knapsack(values, costs, capacities, budget)
    assert np.all(greedy <= capacities) and np.all(greedy >= 0)
    assert greedy @ costs <= budget + 1e-9
    # eq. (6): the greedy keeps at least floor(x*) of the LP solution, hence within v_s
    assert greedy @ values <= optimum + 1e-9
    assert greedy @ values >= optimum - values.max() - 1e-9
    assert optimum <= lp_bound(values, costs, capacities, budget) + 1e-9
    x, value = exact_bounded_knapsack(values, costs, capacities, budget)
    assert value == pytest.approx(optimum, abs=1e-7)
    assert x @ costs <= budget + 1e-7 and np.all(x <= capacities)


def test_greedy_follows_density_order() -> None:
    values = np.array([0.2, 0.9, 0.5])
    costs = np.array([1.0, 1.0, 0.5])  # densities 0.2, 0.9, 1.0
    counts = greedy_bounded_knapsack(values, costs, np.array([5, 2, 3]), 3.0)
    # worker 2 first (3 x 0.5 = 1.5), then worker 1 (min(2, floor(1.5/1)) = 1), nothing left
    np.testing.assert_array_equal(counts, [0, 1, 3])


def test_ucb_term_and_untried_workers_first() -> None:
    w = ucb_values(np.array([0.5, 0.5]), np.array([10, 10]), np.array([8, 10]), 4)
    assert w[0] == pytest.approx(0.5 + np.sqrt(2 * np.log(4) / 2))
    assert np.isinf(w[1])
    counts = greedy_bounded_knapsack(w, np.array([1.0, 1.0]), np.array([8, 10]), 3.0)
    np.testing.assert_array_equal(counts, [0, 3])


def test_bad_input_is_one_line_error() -> None:
    with pytest.raises(InvalidParameterError, match="costs"):
        greedy_bounded_knapsack(np.ones(2), np.array([1.0, 0.0]), np.ones(2, int), 1.0)
    with pytest.raises(InvalidParameterError, match="budget"):
        greedy_bounded_knapsack(np.ones(2), np.ones(2), np.ones(2, int), -1.0)
    with pytest.raises(InvalidParameterError, match="equal length"):
        exact_bounded_knapsack(np.ones(2), np.ones(3), np.ones(2, int), 1.0)
