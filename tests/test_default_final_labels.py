"""The default verdict of every policy: Bayes rule on Beta (binary) or Dirichlet (C > 2)."""

from __future__ import annotations

import numpy as np

from crowdbudget.datasets import load_dataset
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.registry import make_policy
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import Assignment, CampaignState, LabelEvent, Problem


def test_multiclass_default_is_the_most_voted_class_under_a_flat_prior() -> None:
    problem = Problem(n_items=3, budget=9, n_classes=3)
    policy = make_policy("uniform")
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState.initial(problem)
    for item, label in [(0, 2), (0, 2), (0, 1), (1, 0), (1, 1), (1, 1), (2, 0), (2, 0), (2, 2)]:
        assignment = Assignment(item=item)
        state.record_assignment(assignment)
        event = LabelEvent(item=item, worker=0, label=label)
        state.record_label(event, assignment)
    assert policy.final_labels(state).tolist() == [2, 1, 0]


def test_item_only_policies_replay_a_multiclass_data_set() -> None:
    data = load_dataset("wsd")  # 3 classes, bundled
    env = ReplayEnvironment.from_label_data(data)
    [row] = run_campaign(
        make_policy("round-robin"),
        env,
        [data.items.size],
        world_seed=0,
        policy_rng=np.random.default_rng(0),
    )
    # every label used: the Dirichlet Bayes rule with a flat prior is majority vote
    assert row["labels_used"] == data.items.size
    assert row["accuracy"] > 0.98  # WSD majority vote: 0.9944 (data README)


def test_dirichlet_predict_is_the_argmax_of_the_largest_class_probabilities() -> None:
    from crowdbudget.posteriors.dirichlet import DirichletPosterior

    rng = np.random.default_rng(4)
    alpha = rng.integers(1, 6, size=(400, 4)).astype(float) + rng.choice([0.0, 0.5], (400, 4))
    posterior = DirichletPosterior(alpha)
    probabilities = posterior.class_probabilities()
    expected = np.argmax(probabilities, axis=1)
    # equal pseudo-counts give equal probabilities up to quadrature rounding: compare where the
    # most probable class is clear
    top2 = np.sort(probabilities, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-9
    assert clear.sum() > 200
    assert np.array_equal(posterior.predict()[clear], expected[clear])
