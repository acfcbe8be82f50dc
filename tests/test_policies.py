"""Policies of Chen, Lin, Zhou (2013): score buckets, Prop. 3.1, Thm. 3.2, registry errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crowdbudget.exceptions import InvalidParameterError, UnknownPolicyError
from crowdbudget.experiments.runner import run_experiment
from crowdbudget.policies._index import ScoreBuckets, canonical_scores
from crowdbudget.registry import make_policy, parse_policy_id
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.types import CampaignState, LabelEvent, Problem


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=40),
    st.lists(st.tuples(st.integers(0, 39), st.integers(0, 6) | st.just(-1)), max_size=60),
)
def test_score_buckets_agree_with_argmax(
    initial: list[int], changes: list[tuple[int, int]]
) -> None:
    """After any sequence of updates and removals, ``best`` is np.argmax over present items."""
    scores = np.array(initial, dtype=float)
    buckets = ScoreBuckets(scores.copy(), "first")
    present = np.ones(scores.shape[0], dtype=bool)
    for item, value in changes:
        item %= scores.shape[0]
        if not present[item]:
            continue
        if value < 0:
            buckets.remove(item)
            present[item] = False
        else:
            buckets.update(item, float(value))
            scores[item] = value
        masked = np.where(present, scores, -np.inf)
        expected = int(np.argmax(masked)) if present.any() else None
        assert buckets.best() == expected


def test_random_tie_break_is_uniform_over_the_tied_items() -> None:
    buckets = ScoreBuckets(np.array([1.0, 3.0, 3.0, 0.0, 3.0]), "random")
    rng = np.random.default_rng(0)
    picks = np.array([buckets.best(rng) for _ in range(6000)])
    assert set(picks.tolist()) == {1, 2, 4}
    counts = np.bincount(picks, minlength=5)[[1, 2, 4]]
    assert np.all(np.abs(counts / 6000 - 1 / 3) < 0.03)  # ~5 standard errors


def test_canonical_scores_make_symmetric_states_tie() -> None:
    from crowdbudget.posteriors.beta_bernoulli import kg_reward

    a = np.array([3.0, 7.0, 12.0])
    b = np.array([7.0, 3.0, 5.0])
    s = canonical_scores(kg_reward(a, b))
    assert s[0] == s[1]


def _drive(policy_id: str, n_items: int, labels: list[int]) -> list[int]:
    """Feed a policy fixed answers (the k-th label asked is labels[k]); return its choices."""
    problem = Problem(n_items=n_items, budget=len(labels))
    policy = make_policy(policy_id)
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState.initial(problem)
    chosen = []
    for label in labels:
        assignment = policy.select(state)
        assert assignment is not None
        state.record_assignment(assignment)
        event = LabelEvent(item=assignment.item, worker=0, label=label)
        state.record_label(event, assignment)
        policy.observe(event)
        chosen.append(assignment.item)
    return chosen


def test_proposition_3_1_deterministic_kg_sticks_to_the_first_item() -> None:
    """Prop. 3.1: with a shared uniform prior, once every item has one label, deterministic KG
    keeps labeling item 0 whatever it answers (every tied item has the same reward and
    item 0's reward never drops below the others')."""
    rng = np.random.default_rng(3)
    n_items = 5
    answers = rng.integers(0, 2, size=60).tolist()
    chosen = _drive("kg", n_items, answers)
    assert sorted(chosen[:n_items]) == list(range(n_items))  # one label each first
    assert all(item == 0 for item in chosen[n_items:])


def test_randomized_kg_spreads_labels() -> None:
    rng = np.random.default_rng(3)
    chosen = _drive("kg-random", 5, rng.integers(0, 2, size=60).tolist())
    assert len(set(chosen[5:])) >= 3


@pytest.mark.parametrize("policy_id", ["opt-kg", "cvar-kg:alpha=0.5"])
def test_theorem_3_2_accuracy_goes_to_one(policy_id: str) -> None:
    """Thm. 3.2 (consistency): with θ bounded away from 0.5 the accuracy of Opt-KG tends to 1
    as T grows. 200 items with θ in [0.2, 0.35] ∪ [0.65, 0.8], 5 label streams: accuracy must
    rise with T and reach >= 0.99 at 200 labels per item."""
    n_items = 200
    rng = np.random.default_rng(7)
    theta = rng.uniform(0.2, 0.35, n_items)
    theta = np.where(rng.random(n_items) < 0.5, 1 - theta, theta)
    env = SyntheticBernoulliEnvironment(n_items, theta=theta)
    per_item = [20, 60, 200]
    result = run_experiment(
        [policy_id], env, [r * n_items for r in per_item], 5, seed=0, progress=False, n_jobs=1
    )
    means = result.summary["accuracy_mean"].to_numpy()
    assert means[0] < means[2] and means[1] <= means[2]
    assert means[2] >= 0.99
    if policy_id == "opt-kg":
        # negative control: deterministic KG is not consistent (Prop. 3.1) and stays far below
        stuck = run_experiment(["kg"], env, [200 * n_items], 2, seed=0, progress=False, n_jobs=1)
        assert stuck.summary["accuracy_mean"].iloc[0] < 0.9


def test_opt_kg_beats_uniform_as_in_figure_2a() -> None:
    """Fig. 2(a) shape at 10 labels per item: Opt-KG above uniform over 40 worlds."""
    env = SyntheticBernoulliEnvironment(50)
    result = run_experiment(["uniform", "opt-kg"], env, [500], 40, seed=0, progress=False)
    acc = result.runs.pivot(index="replication", columns="policy", values="accuracy")
    diff = acc["opt-kg"] - acc["uniform"]
    assert diff.mean() > 2 * diff.std(ddof=1) / np.sqrt(len(diff))  # paired, > 2 s.e.


def test_registry_errors_are_one_line() -> None:
    with pytest.raises(UnknownPolicyError, match="unknown policy 'optkg'; registered policies"):
        make_policy("optkg")
    with pytest.raises(InvalidParameterError, match="has no parameter 'beta'"):
        make_policy("cvar-kg:beta=1")
    with pytest.raises(InvalidParameterError, match="cannot read alpha='x'"):
        make_policy("cvar-kg:alpha=x")
    with pytest.raises(InvalidParameterError, match="must look like key=value"):
        make_policy("cvar-kg:alpha")
    with pytest.raises(InvalidParameterError, match="alpha"):
        make_policy("cvar-kg:alpha=1.5")
    assert parse_policy_id("requallo:fisher=0.2:max-labels=14") == (
        "requallo",
        {"fisher": "0.2", "max-labels": "14"},
    )


def test_cvar_endpoints_match_kg_and_opt_kg_choices() -> None:
    """α = 1 is KG, α → 0 is Opt-KG (§3.2): same choices on the same answers."""
    answers = np.random.default_rng(5).integers(0, 2, size=40).tolist()
    # with the same tie rule: kg's is the smallest index, cvar-kg's and opt-kg's random
    assert _drive("cvar-kg:alpha=1:tie-break=first", 6, answers) == _drive("kg", 6, answers)
    assert _drive("cvar-kg:alpha=0", 6, answers) == _drive("opt-kg", 6, answers)


@pytest.mark.parametrize("tie_break", ["first", "random"])
@settings(max_examples=40, deadline=None)
@given(
    scores=st.lists(st.integers(0, 4), min_size=1, max_size=30),
    excluded=st.sets(st.integers(0, 29), max_size=10),
    ineligible=st.sets(st.integers(0, 29), max_size=10),
)
def test_best_excluding_is_argmax_outside_the_excluded(
    tie_break: str, scores: list[int], excluded: set[int], ineligible: set[int]
) -> None:
    values = np.array(scores, dtype=float)
    buckets = ScoreBuckets(values.copy(), tie_break)  # type: ignore[arg-type]
    allowed = np.array(
        [i not in excluded and i not in ineligible for i in range(len(scores))], dtype=bool
    )
    got = buckets.best_excluding(excluded, lambda i: i not in ineligible, np.random.default_rng(0))
    if not allowed.any():
        assert got is None
    else:
        assert got is not None and allowed[got]
        assert values[got] == values[allowed].max()
        if tie_break == "first":
            assert got == int(np.flatnonzero(allowed & (values == values[allowed].max()))[0])
    assert buckets.best(np.random.default_rng(0)) is not None  # nothing was removed


@pytest.mark.parametrize(
    "policy_id", ["opt-kg", "kg-random", "uniform", "ucb1-tuned", "gittins", "requallo"]
)
def test_select_never_returns_an_excluded_item(policy_id: str) -> None:
    problem = Problem(n_items=6, budget=30)
    policy = make_policy(policy_id)
    policy.reset(problem, np.random.default_rng(1))
    state = CampaignState.initial(problem)
    for excluded in ({0, 1, 2}, {3}, set(range(5))):
        with state.availability.question(excluded):
            assignment = policy.select(state)
        assert assignment is not None and assignment.item not in excluded
        assert not state.availability.closed  # one question only
    with state.availability.question(set(range(6))):
        assert policy.select(state) is None
    assert state.eligible.all()  # nothing was made ineligible for good


def test_round_robin_names_the_next_open_item_and_an_excluded_one_keeps_its_place() -> None:
    """Round-robin searches past the excluded items (a live worker's own): it names the next
    open item of its cycle, and an excluded item is not moved, so the next question without
    exclusions gets it; without exclusions the cycle is the papers' (0, 1, 2, …)."""
    problem = Problem(n_items=4, budget=30)
    policy = make_policy("round-robin")
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState.initial(problem)
    with state.availability.question({0, 1}):
        first = policy.select(state)
    assert first is not None and first.item == 2
    assert [policy.select(state).item for _ in range(3)] == [0, 1, 3]  # type: ignore[union-attr]
    with state.availability.question({0, 1, 2, 3}):
        assert policy.select(state) is None
    assert [policy.select(state).item for _ in range(4)] == [2, 0, 1, 3]  # type: ignore[union-attr]


def test_variant_id_with_a_colon_is_an_alias() -> None:
    """``opt-kg:per-context`` (Zhang et al. 2015's "OptKG (Multi.)", the spelling of the BBTA
    reports) is an alias of ``opt-kg-per-context``: one registered policy, two names; the
    name is every leading part without ``=``, the rest are parameters."""
    from crowdbudget.policies.bandits.per_context import PerContextOptKG
    from crowdbudget.registry import POLICIES, registered_policies

    assert "opt-kg:per-context" not in registered_policies()
    assert POLICIES.aliases()["opt-kg:per-context"] == "opt-kg-per-context"
    assert parse_policy_id("opt-kg:per-context") == ("opt-kg-per-context", {})
    assert parse_policy_id("opt-kg:per-context:contexts=single") == (
        "opt-kg-per-context",
        {"contexts": "single"},
    )
    assert parse_policy_id("opt-kg:posterior=one-coin") == ("opt-kg", {"posterior": "one-coin"})
    policy = make_policy("opt-kg:per-context")
    assert isinstance(policy, PerContextOptKG) and policy.contexts == "given"
    assert make_policy("opt-kg:per-context:contexts=single").contexts == "single"
    with pytest.raises(InvalidParameterError, match="key=value"):
        make_policy("opt-kg:per-contexts")
