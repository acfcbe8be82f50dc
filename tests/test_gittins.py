"""Gittins baselines of Chen, Lin, Zhou (2013) §3.1/§7: the calibrated index against a
brute-force enumeration of stopping rules, its monotonicity, the Gittins-Inf truncation, the
lazy argmax, no policy above the exact DP, and the on-disk cache."""

from __future__ import annotations

import itertools
import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest

from crowdbudget import _cache
from crowdbudget.bounds import gittins_index, solve_exact_dp
from crowdbudget.bounds.gittins_index import (
    RewardLattice,
    _sweep,
    adaptive_gittins_inf_index,
    calibration_sweep_numpy,
    discount_for_budget,
    finite_horizon_gittins_index,
    gittins_inf_index,
    truncation_levels,
)
from crowdbudget.experiments import run_experiment
from crowdbudget.policies.gittins import FiniteHorizonGittins
from crowdbudget.posteriors.beta_bernoulli import error_probability, kg_reward
from crowdbudget.registry import make_policy
from crowdbudget.simulation import SyntheticBernoulliEnvironment
from crowdbudget.types import CampaignState, LabelEvent, Problem
from reference.exact_value import TINY, exact_policy_value


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_cache.ENV_VAR, str(tmp_path / "cache"))


def brute_force_index(a: float, b: float, n: int, d: float = 0.5, beta: float = 1.0) -> float:
    """max over every deterministic stopping rule (a set of lattice nodes where one continues,
    the root forced) of E[Σ β^t R] / E[Σ β^t], at most n pulls — no calibration involved."""
    nodes = [(i, k - i) for k in range(1, n) for i in range(k + 1)]  # root (0, 0) excluded
    best = -np.inf
    for chosen in itertools.product((False, True), repeat=len(nodes)):
        go = dict(zip(nodes, chosen, strict=True))
        go[(0, 0)] = True

        def value(i: int, j: int, go: dict[tuple[int, int], bool] = go) -> tuple[float, float]:
            if i + j >= n or not go[(i, j)]:
                return 0.0, 0.0
            x, y = a + i, b + j
            p = x / (x + y)
            r_up, t_up = value(i + 1, j, go)
            r_dn, t_dn = value(i, j + 1, go)
            reward = float(kg_reward(x, y, d)) + beta * (p * r_up + (1 - p) * r_dn)
            return reward, 1.0 + beta * (p * t_up + (1 - p) * t_dn)

        reward, duration = value(0, 0)
        best = max(best, reward / duration)
    return best


STATES = [(1.0, 1.0), (3.0, 1.0), (2.0, 5.0), (4.0, 2.0), (1.5, 0.7), (6.0, 1.0)]


@pytest.mark.parametrize("solver", ["dinkelbach", "bisection"])
@pytest.mark.parametrize("state", STATES)
def test_finite_horizon_index_equals_brute_force(state: tuple[float, float], solver: str) -> None:
    a, b = state
    for n in (1, 2, 3, 4):
        expected = brute_force_index(a, b, n)
        got = finite_horizon_gittins_index(a, b, n, solver=solver)  # type: ignore[arg-type]
        assert got == pytest.approx(expected, rel=1e-10, abs=1e-14), (n, got, expected)


def test_index_equals_brute_force_with_threshold_and_discount() -> None:
    for (a, b), d, beta in [
        ((2.0, 1.0), 0.3, 0.9),
        ((1.0, 3.0), 0.6, 0.8),
        ((5.0, 1.0), 0.5, 0.95),
    ]:
        expected = brute_force_index(a, b, 4, d, beta)
        # the truncated discounted index with L levels is the discounted index with horizon L
        got = gittins_inf_index(a, b, beta, 4, d)
        assert got == pytest.approx(expected, rel=1e-10, abs=1e-14)


def test_numpy_reference_sweep_equals_compiled_sweep() -> None:
    lattice = RewardLattice(1.0, 1.0, 0.5)
    rewards = lattice.ensure(80)
    work = [np.zeros(81) for _ in range(3)]
    for i0, j0, levels, lam, beta in [(0, 0, 60, 0.05, 1.0), (7, 2, 40, 1e-3, 0.97)]:
        compiled = _sweep(rewards, 1.0, 1.0, i0, j0, levels, lam, beta, *work)
        reference = calibration_sweep_numpy(rewards, 1.0, 1.0, i0, j0, levels, lam, beta)
        np.testing.assert_allclose(compiled, reference, rtol=1e-12, atol=1e-18)


def test_monotonicity_and_bounds() -> None:
    """Derived properties: (i) λ*(x, 1) = R(x) (one pull: the ratio of τ = 1); (ii) λ* is
    non-decreasing in the horizon — a longer horizon allows more stopping times — so the index
    falls as the budget runs out; (iii) R(x) <= λ* <= the largest reward reachable (a ratio of
    expected sums is a weighted mean of rewards); (iv) at d = 1/2 mirrored states have equal
    indices; (v) the truncated Gittins-Inf index is non-decreasing in the truncation depth."""
    horizons = [1, 2, 3, 5, 8, 13, 21, 40, 80, 150]
    for a, b in [(1.0, 1.0), (4.0, 1.0), (9.0, 2.0), (3.0, 7.0), (12.0, 10.0), (0.5, 2.5)]:
        values = [finite_horizon_gittins_index(a, b, n) for n in horizons]
        assert values[0] == pytest.approx(float(kg_reward(a, b)), abs=1e-16)
        assert all(y >= x - 1e-15 for x, y in itertools.pairwise(values)), values
        reach = max(horizons)
        i, j = np.meshgrid(np.arange(reach), np.arange(reach), indexing="ij")
        keep = i + j < reach
        top = float(kg_reward(a + i[keep], b + j[keep]).max())
        assert all(float(kg_reward(a, b)) - 1e-16 <= v <= top + 1e-15 for v in values)
        bisect = [finite_horizon_gittins_index(a, b, n, solver="bisection") for n in horizons]
        np.testing.assert_allclose(bisect, values, rtol=1e-9, atol=1e-14)
    for a, b, n in [(4.0, 1.0, 30), (2.0, 3.0, 25), (8.0, 3.0, 60)]:
        assert finite_horizon_gittins_index(a, b, n) == pytest.approx(
            finite_horizon_gittins_index(b, a, n), rel=1e-12, abs=1e-16
        )
    depths = [10, 20, 40, 80, 160]
    values = [gittins_inf_index(8.0, 2.0, 0.98, L) for L in depths]
    assert all(y >= x - 1e-15 for x, y in itertools.pairwise(values)), values


@pytest.mark.parametrize("budget", [10, 30])
def test_gittins_inf_truncation_converges(budget: int) -> None:
    """The default truncation L = 4T + 200 is within the stated 1e-7 of 2L (and the
    truncated index only grows with L: test_monotonicity_and_bounds)."""
    alpha = discount_for_budget(budget)
    levels = truncation_levels(budget)
    for a, b in [(1.0, 1.0), (4.0, 4.0), (6.0, 1.0), (9.0, 3.0), (2.0, 11.0), (15.0, 2.0)]:
        values = [gittins_inf_index(a, b, alpha, m * levels) for m in (1, 2)]
        assert 0.0 <= values[1] - values[0] <= 1e-7, values


@pytest.mark.parametrize("budget", [10, 30])
def test_adaptive_truncation_agrees_with_the_fixed_rule(budget: int) -> None:
    """The adaptive depth (doubling from 100 until two depths agree) gives the fixed rule's
    index (L = 4T + 200) to its stated 1e-7, from below (the index grows with L)."""
    alpha = discount_for_budget(budget)
    levels = truncation_levels(budget)
    for a, b in [(1.0, 1.0), (4.0, 4.0), (6.0, 1.0), (9.0, 3.0), (2.0, 11.0), (15.0, 2.0)]:
        adaptive, used = adaptive_gittins_inf_index(a, b, alpha, levels)
        fixed = gittins_inf_index(a, b, alpha, levels)
        assert used <= levels
        assert -1e-15 <= fixed - adaptive <= 1e-7, (a, b, adaptive, fixed)


def test_adaptive_truncation_stops_early_at_a_large_budget() -> None:
    """T = 8,000 (RTE's full budget): the fixed rule would need 32,200 levels; the adaptive
    rule stops at a few hundred for (1, 1), and a deeper lattice does not change the index;
    a lopsided state stops at the policy's cap with a lower bound of the deeper index."""
    alpha = discount_for_budget(8000)
    value, used = adaptive_gittins_inf_index(1.0, 1.0, alpha, truncation_levels(8000))
    assert used <= 400
    assert gittins_inf_index(1.0, 1.0, alpha, 800) == pytest.approx(value, abs=1e-12)
    capped, used = adaptive_gittins_inf_index(1.0, 9.0, alpha, 200)
    assert used == 200
    assert capped <= gittins_inf_index(1.0, 9.0, alpha, 400)
    policy = make_policy("gittins-inf")
    policy.reset(Problem(n_items=800, budget=8000), np.random.default_rng(0))
    assert policy.select(CampaignState.initial(Problem(n_items=800, budget=8000))) is not None


def test_lazy_argmax_picks_the_largest_index() -> None:
    """At every step of a campaign the item chosen has the largest index at the remaining
    horizon, computed directly for every item (the lazy heap may not skip a better state)."""
    problem = Problem(n_items=9, budget=40, prior=np.array([[1.0, 1.0]] * 6 + [[2.0, 1.0]] * 3))
    policy = make_policy("gittins")
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState.initial(problem)
    rng = np.random.default_rng(3)
    theta = rng.uniform(size=problem.n_items)
    for step in range(int(problem.budget)):
        assignment = policy.select(state)
        assert assignment is not None
        left = int(problem.budget) - step
        a = problem.prior_array[:, 1] + state.label_counts[:, 1]
        b = problem.prior_array[:, 0] + state.label_counts[:, 0]
        direct = np.array(
            [finite_horizon_gittins_index(x, y, left) for x, y in zip(a, b, strict=True)]
        )
        assert direct[assignment.item] >= direct.max() * (1 - 1e-9) - 1e-15, step
        state.record_assignment(assignment)
        event = LabelEvent(assignment.item, 0, int(rng.uniform() < theta[assignment.item]))
        state.record_label(event, assignment)
        policy.observe(event)
    assert policy.select(state) is None


@pytest.mark.parametrize("problem", TINY, ids=lambda p: f"K{p.n_items}T{p.budget:g}")
@pytest.mark.parametrize("policy_id", ["gittins", "gittins-inf", "gittins:solver=bisection"])
def test_no_gittins_policy_beats_exact_dp(problem: Problem, policy_id: str) -> None:
    value = exact_policy_value(policy_id, problem)
    optimum = solve_exact_dp(problem).value
    assert value <= optimum + 1e-12
    # and they are sensible: at least as good as asking nothing more than one label per item
    assert value >= float(np.sum(1 - error_probability(*_prior_ab(problem)))) - 1e-12


def _prior_ab(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return problem.prior_array[:, 1], problem.prior_array[:, 0], problem.threshold_array


def test_gittins_inf_fast_engine_matches_reference() -> None:
    env = SyntheticBernoulliEnvironment(12, prior=(1.0, 1.0))
    runs = [
        run_experiment(
            ["gittins-inf"], env, [24, 48], 2, seed=4, n_jobs=1, progress=False, engine=engine
        ).runs
        for engine in ("reference", "auto")
    ]
    np.testing.assert_array_equal(runs[0]["accuracy"], runs[1]["accuracy"])


def test_random_tie_break_is_seeded_and_policies_validate() -> None:
    problem = Problem(n_items=6, budget=12)
    picks = []
    for _ in range(2):
        policy = FiniteHorizonGittins(tie_break="random")
        policy.reset(problem, np.random.default_rng(9))
        picks.append(policy.select(CampaignState.initial(problem)).item)  # type: ignore[union-attr]
    assert picks[0] == picks[1]
    from crowdbudget.exceptions import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="solver"):
        make_policy("gittins:solver=newton")
    with pytest.raises(InvalidParameterError, match="truncation"):
        make_policy("gittins-inf:truncation=0")


def test_index_tables_persist_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_cache.ENV_VAR, str(tmp_path / "persist"))
    monkeypatch.setattr(gittins_index, "_TABLES", {})
    monkeypatch.setattr(gittins_index, "_LATTICES", {})
    value = finite_horizon_gittins_index(5.0, 2.0, 30)
    gittins_index.flush_tables()
    assert list((tmp_path / "persist").glob("gittins-index-*.npz"))
    monkeypatch.setattr(gittins_index, "_TABLES", {})
    table = gittins_index.index_table(1.0, 1.0, 0.5, 1.0, None, "dinkelbach")
    assert table.entries[(4, 1, 30)] == value  # loaded, not recomputed


def test_cache_tolerates_an_unwritable_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(_cache.ENV_VAR, str(blocker / "cache"))
    assert _cache.save_table("k", {"x": np.ones(2)}) is False
    assert _cache.load_table("k") is None
    monkeypatch.setattr(gittins_index, "_TABLES", {})
    monkeypatch.setattr(gittins_index, "_LATTICES", {})
    assert finite_horizon_gittins_index(1.0, 1.0, 5) == pytest.approx(0.25)
    gittins_index.flush_tables()  # nothing raised


def _writer(directory: str, seed: int) -> None:
    os.environ[_cache.ENV_VAR] = directory
    rng = np.random.default_rng(seed)
    for _ in range(20):
        size = int(rng.integers(1, 5000))
        _cache.save_table("shared", {"x": np.full(size, float(seed)), "n": np.array([size])})


def test_concurrent_writers_never_leave_a_torn_file(tmp_path: Path) -> None:
    directory = str(tmp_path / "shared")
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_writer, args=(directory, s)) for s in (1, 2)]
    for p in procs:
        p.start()
    os.environ[_cache.ENV_VAR] = directory
    seen = 0
    while any(p.is_alive() for p in procs):
        table = _cache.load_table("shared")
        if table is not None:  # complete and self-consistent whenever it is there
            assert table["x"].shape[0] == int(table["n"][0])
            assert np.all(table["x"] == table["x"][0])
            seen += 1
    for p in procs:
        p.join()
        assert p.exitcode == 0
    final = _cache.load_table("shared")
    assert final is not None and final["x"].shape[0] == int(final["n"][0])
    assert not [f for f in os.listdir(directory) if f.endswith(".tmp")]
