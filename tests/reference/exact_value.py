"""The exact expected accuracy of a deterministic binary policy on a tiny problem, by
enumerating every label outcome (Xie & Frazier's MDP; the bound the exact DP attains), and the
tiny problems on which the tests compare policies with the exact DP."""

from __future__ import annotations

import copy

import numpy as np

from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.registry import make_policy
from crowdbudget.types import CampaignState, LabelEvent, Problem

#: problems small enough to enumerate every label path (2–3 items, budgets 5–8)
TINY = [
    Problem(n_items=2, budget=5),
    Problem(n_items=3, budget=6),
    Problem(n_items=3, budget=8, prior=np.array([[1.0, 1.0], [2.0, 1.0], [0.7, 1.6]])),
    Problem(n_items=2, budget=7, prior=np.array([1.5, 2.5]), thresholds=np.array([0.4, 0.6])),
]


def exact_policy_value(policy_id: str, problem: Problem) -> float:
    """Expected number of correct Bayes-rule labels under a deterministic policy, by
    enumerating every label outcome (the predictive of the prior, as in the MDP)."""
    policy = make_policy(policy_id)
    policy.reset(problem, np.random.default_rng(0))
    prior, d = problem.prior_array, problem.threshold_array

    def recurse(pol: object, state: CampaignState) -> float:
        assignment = pol.select(state)  # type: ignore[attr-defined]
        if assignment is None:
            a = prior[:, 1] + state.label_counts[:, 1]
            b = prior[:, 0] + state.label_counts[:, 0]
            return float(np.sum(1 - error_probability(a, b, d)))
        i = assignment.item
        a = prior[i, 1] + state.label_counts[i, 1]
        b = prior[i, 0] + state.label_counts[i, 0]
        total = 0.0
        for label, prob in ((1, a / (a + b)), (0, b / (a + b))):
            p2, s2 = copy.deepcopy(pol), copy.deepcopy(state)
            s2.record_assignment(assignment)
            event = LabelEvent(item=i, worker=0, label=label)
            s2.record_label(event, assignment)
            p2.observe(event)  # type: ignore[attr-defined]
            total += prob * recurse(p2, s2)
        return total

    return recurse(policy, CampaignState.initial(problem))
