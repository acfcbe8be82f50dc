"""Issue 15: ties among items in ``select`` are random by default; the papers' smallest-index
rule stays available (``tie-break=first``) and is what every reproduction pins."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.experiments.runner import run_experiment
from crowdbudget.policies._index import DEFAULT_TIE_BREAK, PAPER_TIE_BREAK, ScoreBuckets
from crowdbudget.registry import (
    describe_entry,
    make_policy,
    parse_policy,
    pin_paper_ties,
    registered_policies,
)
from crowdbudget.simulation import SyntheticBernoulliEnvironment
from crowdbudget.types import CampaignState, Problem

RANDOM_BY_DEFAULT = [
    "opt-kg",
    "cvar-kg",
    "gittins",
    "gittins-inf",
    "label-uncertainty",
    "requallo",
    "opt-kg:features=logistic",
    "kg-random",
    "opt-kg:posterior=one-coin",
    "ucb1-tuned",
    "opt-kg-per-context",
    "bbta",
]


def test_defaults() -> None:
    assert DEFAULT_TIE_BREAK == "random" and PAPER_TIE_BREAK == "first"
    for policy_id in RANDOM_BY_DEFAULT:
        assert make_policy(policy_id).tie_break == "random", policy_id  # type: ignore[attr-defined]
    # the paper's deterministic KG (Prop. 3.1) keeps the smallest index
    assert make_policy("kg").tie_break == "first"  # type: ignore[attr-defined]
    assert make_policy("kg:features=logistic").tie_break == "first"  # type: ignore[attr-defined]
    assert make_policy("opt-kg:tie-break=first").tie_break == "first"  # type: ignore[attr-defined]


def test_the_policies_listing_shows_the_default() -> None:
    entries = registered_policies()
    for policy_id, default in [("opt-kg", "random"), ("gittins", "random"), ("kg", "first")]:
        rows = {r["name"]: r for r in describe_entry(entries[policy_id])["parameters"]}
        assert rows["tie-break"]["default"] == default, policy_id


@pytest.mark.parametrize(
    ("policy_id", "pinned"),
    [
        ("opt-kg", True),
        ("cvar-kg:alpha=0.3", True),
        ("gittins-inf", True),
        ("label-uncertainty", True),
        ("requallo:fisher=0.2:max-labels=14", True),
        ("opt-kg:features=logistic:reward=local", True),
        ("kg", False),  # deterministic already
        ("kg-random", False),  # randomized KG by definition
        ("opt-kg:tie-break=random", False),  # the id names its rule
        ("opt-kg:posterior=one-coin:refit=0", False),  # worker-aware: random, as the papers'
        ("uniform", False),
        ("lagrangian-index", False),
        ("ucb1-tuned", True),
        ("opt-kg-per-context", True),
        ("bbta:n-explore=1", True),
    ],
)
def test_pin_paper_ties(policy_id: str, pinned: bool) -> None:
    spec = pin_paper_ties(parse_policy(policy_id))
    assert str(spec) == policy_id  # rows keep the id's label
    policy = make_policy(spec)
    if pinned:
        assert dict(spec.params)["tie-break"] == "first"
        assert policy.tie_break == "first"  # type: ignore[attr-defined]
    else:
        assert spec.params == parse_policy(policy_id).params


def test_ties_paper_is_the_first_rule_under_the_ids_label() -> None:
    env = SyntheticBernoulliEnvironment(12)
    kwargs = {"seed": 3, "n_jobs": 1, "progress": False}
    paper = run_experiment(["opt-kg"], env, [6, 20], 2, ties="paper", **kwargs).summary
    first = run_experiment(["opt-kg:tie-break=first"], env, [6, 20], 2, **kwargs).summary
    assert list(paper["policy"]) == ["opt-kg", "opt-kg"]
    np.testing.assert_array_equal(paper["accuracy_mean"], first["accuracy_mean"])


def test_random_ties_pick_uniformly_and_first_ties_the_smallest() -> None:
    problem = Problem(n_items=4, budget=1000)
    state = CampaignState.initial(problem)
    counts = np.zeros(4, dtype=int)
    policy = make_policy("opt-kg")
    for seed in range(400):
        policy.reset(problem, np.random.default_rng(seed))
        chosen = policy.select(state)
        assert chosen is not None
        counts[chosen.item] += 1
    assert counts.min() > 60  # each about 100
    first = make_policy("opt-kg:tie-break=first")
    first.reset(problem, np.random.default_rng(0))
    chosen = first.select(state)
    assert chosen is not None and chosen.item == 0


def test_score_buckets_keep_a_given_member_order() -> None:
    scores = np.array([1.0, 2.0, 2.0, 1.0, 2.0])
    order = np.array([4, 3, 2, 1, 0])
    buckets = ScoreBuckets(scores, "random", order)
    # the top group's members in the given order: a draw of k picks the k-th of [4, 2, 1]
    picks = [buckets.best(np.random.default_rng(s)) for s in range(3)]
    draws = [int(np.random.default_rng(s).integers(3)) for s in range(3)]
    assert picks == [[4, 2, 1][d] for d in draws]
    assert ScoreBuckets(scores, "first", order).best() == 1


@pytest.mark.parametrize("policy_id", ["ucb1-tuned", "opt-kg-per-context", "bbta:n-explore=0"])
def test_the_bandit_policies_pick_among_tied_tasks_at_random(policy_id: str) -> None:
    """At the start every task ties (no labels); ``tie-break=first`` takes task 0, the default
    any of them."""
    n_workers = 2
    problem = Problem(n_items=5, budget=100, n_workers=n_workers)
    state = CampaignState.initial(problem)
    picks = set()
    for seed in range(60):
        policy = make_policy(policy_id)
        policy.reset(problem, np.random.default_rng(seed))
        chosen = policy.select(state)
        assert chosen is not None
        picks.add(chosen.item)
    assert picks == set(range(5))
    first = make_policy(f"{policy_id}:tie-break=first")
    first.reset(problem, np.random.default_rng(0))
    chosen = first.select(state)
    assert chosen is not None and chosen.item == 0
