"""Multi-class Opt-KG (Chen et al. §5): Dirichlet posterior, the 1-D integral, the policy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from crowdbudget.datasets import load_dataset
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.knowledge_gradient import OptimisticKnowledgeGradient
from crowdbudget.posteriors.beta_bernoulli import positive_probability
from crowdbudget.posteriors.dirichlet import dirichlet_rewards, largest_class_probabilities
from crowdbudget.registry import make_policy
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import CampaignState, LabelEvent, Problem


@pytest.mark.parametrize(
    "alpha", [[1.0, 1.0, 1.0], [3.0, 1.0, 2.0], [0.5, 4.0, 4.5, 1.0], [12.0, 10.0, 3.0]]
)
def test_largest_class_probability_matches_monte_carlo(alpha: list[float]) -> None:
    rng = np.random.default_rng(11)
    draws = rng.dirichlet(alpha, size=400_000)
    empirical = np.bincount(draws.argmax(axis=1), minlength=len(alpha)) / draws.shape[0]
    exact = largest_class_probabilities(np.array(alpha))
    # 4 standard errors of a proportion estimated from 400,000 draws
    assert np.all(np.abs(exact - empirical) < 4 * np.sqrt(0.25 / draws.shape[0]))


def test_two_classes_equal_the_beta_tail() -> None:
    a = np.array([1.0, 2.0, 5.5, 30.0])
    b = np.array([1.0, 7.0, 5.0, 28.0])
    two = largest_class_probabilities(np.column_stack([b, a]))
    # the stated quadrature accuracy at 64 nodes (module docstring): 2e-5 at worst
    assert np.allclose(two[:, 1], positive_probability(a, b), atol=3e-5)
    assert np.allclose(two[:, 1], special.betaincc(a, b, 0.5), atol=3e-5)
    finer = largest_class_probabilities(np.column_stack([b, a]), n_nodes=256)
    assert np.allclose(finer[:, 1], special.betaincc(a, b, 0.5), atol=2e-6)


def test_multiclass_optimistic_reward_reduces_to_the_binary_one() -> None:
    rewards, _ = dirichlet_rewards(np.array([[2.0, 3.0], [4.0, 4.0]]))
    policy = OptimisticKnowledgeGradient()
    binary = policy.score_states(np.array([3.0, 4.0]), np.array([2.0, 4.0]), np.full(2, 0.5))
    assert np.allclose(rewards.max(axis=1), binary, atol=1e-8)


def test_opt_kg_runs_a_three_class_campaign_and_learns() -> None:
    """Noiseless labels (§5): every label is the item's class; Opt-KG must first label every
    item once (all start tied), then use the rest on the still uncertain ones."""
    problem = Problem(n_items=6, budget=18, n_classes=3)
    policy = make_policy("opt-kg")
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState.initial(problem)
    truth = np.array([0, 1, 2, 2, 1, 0])
    chosen = []
    while (assignment := policy.select(state)) is not None:
        state.record_assignment(assignment)
        event = LabelEvent(item=assignment.item, worker=0, label=int(truth[assignment.item]))
        state.record_label(event, assignment)
        policy.observe(event)
        chosen.append(assignment.item)
    assert sorted(chosen[:6]) == list(range(6))
    assert np.array_equal(policy.final_labels(state), truth)


def test_opt_kg_beats_uniform_on_wsd() -> None:
    data = load_dataset("wsd")  # 3 classes, bundled
    env = ReplayEnvironment.from_label_data(data)
    accuracy = {}
    for policy_id in ["uniform", "opt-kg"]:
        rows = run_campaign(
            make_policy(policy_id),
            env,
            [2 * data.n_items],
            world_seed=0,
            policy_rng=np.random.default_rng(0),
        )
        accuracy[policy_id] = rows[0]["accuracy"]
    assert accuracy["opt-kg"] > accuracy["uniform"] + 0.01
