"""Exact DP: hand-derived values, the §2.1 toy example, KG = one-step DP, and no policy beats
the DP on tiny problems (Chen, Lin, Zhou 2013, §2–3)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from crowdbudget.bounds import ExactDPSolution, solve_exact_dp
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments import run_experiment
from crowdbudget.posteriors.beta_bernoulli import error_probability, kg_reward
from crowdbudget.simulation import SyntheticBernoulliEnvironment
from crowdbudget.types import Problem
from reference.exact_value import TINY, exact_policy_value


def test_hand_derived_values() -> None:
    # K=1, Beta(1,1): no label → 1/2; one label → I = 3/4 or 1/4 → 3/4; a second label from
    # (2,1) cannot flip the decision on average (KG(2,1) = 0) → still 3/4.
    assert solve_exact_dp(Problem(n_items=1, budget=1)).value == pytest.approx(0.75, abs=1e-15)
    assert solve_exact_dp(Problem(n_items=1, budget=2)).value == pytest.approx(0.75, abs=1e-15)
    # three labels: from (2,2) [prob 1/3 after (2,1)] a label gives I(3,2) = 11/16.
    # V = 2/3·[(3/4)·7/8 + (1/4)·... ] — computed by enumeration of Beta-binomial paths:
    # with T = 3 the final counts (a, b) = (1+k, 1+3−k), k ~ BetaBinomial(3, 1, 1) uniform on 0..3
    expected = np.mean([1 - float(error_probability(1 + k, 4 - k)) for k in range(4)])
    assert solve_exact_dp(Problem(n_items=1, budget=3)).value == pytest.approx(expected, abs=1e-14)
    # two identical items, one label: 1/2 + 3/4 (label either)
    assert solve_exact_dp(Problem(n_items=2, budget=1)).value == pytest.approx(1.25, abs=1e-15)


def test_toy_example_section_2_1() -> None:
    # Fig. 1 / Table 1 of the paper: three instances, five labels. Instance 1 is decided
    # (two positive labels: one more cannot change it), instance 2 is tied (one of each),
    # instance 3 has a single positive label. With the uniform prior the Bayesian choice of
    # the last label is instance 2, never instance 1.
    counts = np.array([[0, 2], [1, 1], [0, 1]])  # (negatives, positives)
    sol = ExactDPSolution(np.ones((3, 2)), np.full(3, 0.5), budget=6)
    assert sol.optimal_actions(counts, 1).tolist() == [1]
    a = 1 + counts[:, 1]
    b = 1 + counts[:, 0]
    rewards = kg_reward(a, b)
    assert int(np.argmax(rewards)) == 1 and rewards[0] == 0.0


@pytest.mark.parametrize("d", [0.5, 0.3, 0.72])
def test_kg_reward_is_one_step_dp_gain(d: float) -> None:
    rng = np.random.default_rng(1)
    for _ in range(40):
        a, b = rng.uniform(0.3, 8.0, size=2)
        sol = ExactDPSolution(np.array([[b, a]]), np.array([d]), budget=1)
        gain = sol.value - (1 - float(error_probability(a, b, d)))
        assert gain == pytest.approx(float(kg_reward(a, b, d)), abs=1e-13)


def test_kg_is_dp_optimal_with_one_label_left() -> None:
    rng = np.random.default_rng(2)
    for _ in range(30):
        k = int(rng.integers(2, 5))
        prior = rng.uniform(0.5, 3.0, size=(k, 2))
        thresholds = rng.choice([0.5, 0.4, 0.6], size=k)
        counts = rng.integers(0, 4, size=(k, 2))
        sol = ExactDPSolution(prior, thresholds, budget=1)
        a = prior[:, 1] + counts[:, 1]
        b = prior[:, 0] + counts[:, 0]
        kg_choice = int(np.argmax(kg_reward(a, b, thresholds)))
        assert kg_choice in sol.optimal_actions(counts, 1).tolist()


@pytest.mark.parametrize("problem", TINY, ids=lambda p: f"K{p.n_items}T{p.budget:g}")
@pytest.mark.parametrize("policy_id", ["round-robin", "kg", "opt-kg", "cvar-kg:alpha=0.3"])
def test_no_deterministic_policy_beats_dp(problem: Problem, policy_id: str) -> None:
    value = exact_policy_value(policy_id, problem)
    assert value <= solve_exact_dp(problem).value + 1e-12


def test_dp_policy_attains_dp_value_exactly() -> None:
    for problem in TINY:
        assert exact_policy_value("dp", problem) == pytest.approx(
            solve_exact_dp(problem).value, abs=1e-12
        )


@pytest.mark.parametrize("policy_id", ["uniform", "kg-random"])
def test_no_randomized_policy_beats_dp(policy_id: str) -> None:
    problem = Problem(n_items=3, budget=6)
    env = SyntheticBernoulliEnvironment(3)
    result = run_experiment([policy_id], env, [6], 3000, seed=5, n_jobs=2, progress=False)
    acc = result.runs["accuracy"].to_numpy() * 3
    upper = acc.mean() - 3 * acc.std(ddof=1) / np.sqrt(acc.size)
    assert upper <= solve_exact_dp(problem).value


def test_simulated_dp_policy_reaches_dp_value() -> None:
    env = SyntheticBernoulliEnvironment(3, prior=(1.0, 2.0))
    problem = env.problem(6)
    result = run_experiment(["dp"], env, [4, 6], 4000, seed=11, n_jobs=2, progress=False)
    for budget in (4, 6):
        acc = result.runs.loc[result.runs["budget"] == budget, "accuracy"].to_numpy() * 3
        se = acc.std(ddof=1) / np.sqrt(acc.size)
        target = solve_exact_dp(problem.with_budget(budget)).value
        assert abs(acc.mean() - target) < 3.5 * se, (budget, acc.mean(), target, se)


def test_exchangeable_items_share_states_and_match_unsorted_enumeration() -> None:
    # brute force over all label sequences for K=2, T=3 (no memo, no symmetry)
    prior = np.array([[1.0, 1.0], [1.0, 1.0]])

    def brute(counts: tuple[tuple[int, int], ...], steps: int) -> float:
        a = prior[:, 1] + np.array([c[1] for c in counts])
        b = prior[:, 0] + np.array([c[0] for c in counts])
        if steps == 0:
            return float(np.sum(1 - error_probability(a, b)))
        best = -1.0
        for i in range(2):
            p = a[i] / (a[i] + b[i])
            up = tuple((c[0], c[1] + (j == i)) for j, c in enumerate(counts))
            down = tuple((c[0] + (j == i), c[1]) for j, c in enumerate(counts))
            best = max(best, p * brute(up, steps - 1) + (1 - p) * brute(down, steps - 1))
        return best

    sol = ExactDPSolution(prior, np.full(2, 0.5), budget=4)
    for steps, c in itertools.product(range(4), [((0, 0), (0, 0)), ((1, 0), (0, 2))]):
        assert sol.value_of(np.array(c), steps) == pytest.approx(brute(c, steps), abs=1e-13)


def test_too_large_problem_is_refused_with_a_clear_message() -> None:
    with pytest.raises(InvalidParameterError, match="states"):
        solve_exact_dp(Problem(n_items=10, budget=30))
