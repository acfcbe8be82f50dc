"""``<policy>:final=<aggregator>``: same allocation as the policy, labels from the aggregator."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.aggregation import make_aggregator
from crowdbudget.datasets import load_dataset
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.final_aggregation import FinalAggregation
from crowdbudget.registry import make_policy
from crowdbudget.simulation import SyntheticBernoulliEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import CampaignState, LabelEvent, Problem


def _assignments(policy_id: str, seed: int = 5) -> list[int]:
    """Items chosen by ``policy_id`` on a small noisy world, answers from a fixed generator."""
    problem = Problem(n_items=12, budget=60)
    policy = make_policy(policy_id)
    policy.reset(problem, np.random.default_rng(seed))
    state = CampaignState.initial(problem)
    answers = np.random.default_rng(99)
    chosen = []
    while (assignment := policy.select(state)) is not None:
        state.record_assignment(assignment)
        event = LabelEvent(item=assignment.item, worker=0, label=int(answers.integers(2)))
        state.record_label(event, assignment)
        policy.observe(event)
        chosen.append(assignment.item)
    return chosen


@pytest.mark.parametrize("policy_id", ["opt-kg", "kg-random", "uniform"])
def test_wrapper_allocates_exactly_as_the_policy(policy_id: str) -> None:
    plain = _assignments(policy_id)
    assert len(plain) == 60
    assert _assignments(f"{policy_id}:final=ds") == plain


def test_wrapper_is_built_by_the_registry_and_exposes_the_inner_posterior() -> None:
    policy = make_policy("opt-kg:final=mv")
    assert isinstance(policy, FinalAggregation) and policy.aggregator == "mv"
    policy.reset(Problem(n_items=3, budget=3), np.random.default_rng(0))
    assert policy.posterior_.a.shape == (3,)  # the wrapped Opt-KG's fitted posterior


def test_unknown_aggregator_is_a_one_line_error() -> None:
    with pytest.raises(InvalidParameterError, match="unknown aggregator 'nope'"):
        make_policy("opt-kg:final=nope")


def test_final_ds_on_full_rte_equals_dawid_skene_and_beats_the_bayes_rule() -> None:
    data = load_dataset("rte")
    env = ReplayEnvironment.from_label_data(data)
    rows = {}
    for policy_id in ["opt-kg", "opt-kg:final=ds"]:
        [rows[policy_id]] = run_campaign(
            make_policy(policy_id), env, [8000], world_seed=0, policy_rng=np.random.default_rng(0)
        )
    full_ds = data.accuracy(make_aggregator("ds").fit(data).labels_)
    assert rows["opt-kg:final=ds"]["accuracy"] == pytest.approx(full_ds)
    assert rows["opt-kg:final=ds"]["accuracy"] > rows["opt-kg"]["accuracy"] + 0.03


def test_checkpoints_in_a_synthetic_world_use_the_aggregator() -> None:
    env = SyntheticBernoulliEnvironment(30)
    rows = run_campaign(
        make_policy("uniform:final=mv"),
        env,
        [30, 90],
        world_seed=1,
        policy_rng=np.random.default_rng(1),
    )
    assert [r["labels_used"] for r in rows] == [30, 90]
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in rows)


def _contextual_run(policy_id: str) -> tuple[FinalAggregation, float]:
    """One BBTA-style campaign, 40 tasks in 2 contexts, 4 workers, every pair labeled once:
    worker 3 always wrong on context 0, worker 0 always wrong on context 1, every other
    (context, worker) always right."""
    from crowdbudget.simulation.contextual import ContextualProblem

    n, k = 40, 4
    contexts = np.repeat([0, 1], n // 2)
    truth = np.random.default_rng(3).integers(0, 2, size=n)
    inverted = {(0, 3), (1, 0)}  # (context, worker)
    problem = ContextualProblem(n_items=n, budget=n * k, n_workers=k, contexts=contexts)
    policy = make_policy(policy_id)
    policy.reset(problem, np.random.default_rng(0))
    state = CampaignState.initial(problem)
    while (assignment := policy.select(state)) is not None:
        state.record_assignment(assignment)
        item, worker = assignment.item, int(assignment.worker)
        wrong = (int(contexts[item]), worker) in inverted
        label = 1 - int(truth[item]) if wrong else int(truth[item])
        event = LabelEvent(item=item, worker=worker, label=label)
        state.record_label(event, assignment)
        policy.observe(event)
    assert isinstance(policy, FinalAggregation)
    return policy, float(np.mean(policy.final_labels(state) == truth))


def test_per_context_workers_give_the_aggregator_one_worker_per_context_and_worker() -> None:
    per_context, accuracy = _contextual_run(
        "bbta:n-explore=0:final=one-coin-em:final-workers=per-context"
    )
    data = per_context.label_data()
    # 2 contexts x 4 workers = 8 virtual workers s*K + j
    assert sorted(data.worker_ids.astype(int).tolist()) == list(range(8))
    # per (context, worker), one-coin EM learns who is inverted where: every label recovered
    assert accuracy == 1.0
    blind, _ = _contextual_run("bbta:n-explore=0:final=one-coin-em")
    assert sorted(blind.label_data().worker_ids.astype(int).tolist()) == list(range(4))


def test_per_context_workers_need_a_final_aggregator_and_a_known_mode() -> None:
    with pytest.raises(InvalidParameterError, match=r"final-workers=\.\.\. needs final="):
        make_policy("bbta:final-workers=per-context")
    with pytest.raises(InvalidParameterError, match="final-workers must be one of"):
        make_policy("bbta:final=mv:final-workers=nope")
