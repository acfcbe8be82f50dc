"""Thompson sampling for budget allocation, the baseline of Hu & Frazier, "Bayes-Optimal Effort
Allocation in Crowdsourcing: Bounds and Index Policies", §7.2 (citing Chapelle & Li, "An
Empirical Evaluation of Thompson Sampling").

The paper names the policy but does not define how a sample turns into a task choice. Our
decision: at each decision draw θ̃_x ~ Beta(α_x, β_x) from every eligible task's posterior and
label the task whose sample is closest to its threshold, argmin_x |θ̃_x − d_x| — the task that,
in a plausible world drawn from the posterior, is the hardest to classify. A task whose
posterior is concentrated far from d_x is rarely chosen; one whose posterior straddles d_x
often is. Pending assignments are not counted (the posterior changes only when labels come
back).

Cost: one Beta draw per eligible task per decision — O(n_items), vectorised; a fresh sample of
every posterior is what Thompson sampling is, so this is not avoidable without changing the
policy.
"""

from __future__ import annotations

import numpy as np

from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.types import Assignment, CampaignState, Problem


class ThompsonSamplingPolicy(AllocationPolicy):
    """Label argmin_x |θ̃_x − d_x| with θ̃_x drawn from each task's Beta posterior.

    Example:
        >>> policy = ThompsonSamplingPolicy()
        >>> problem = Problem(n_items=3, budget=4)
        >>> policy.reset(problem, np.random.default_rng(0))
        >>> policy.select(CampaignState.initial(problem)).item in (0, 1, 2)
        True
    """

    binary_only = True

    def __init__(self) -> None:
        pass

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        prior = problem.prior_array
        self._prior_a = prior[:, 1].copy()
        self._prior_b = prior[:, 0].copy()
        self._thresholds = problem.threshold_array

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        return state.availability.offer(worker, lambda price: self._sample(state, worker, price))

    def _sample(self, state: CampaignState, worker: int | None, price: float) -> Assignment | None:
        """One posterior draw per open item; the item whose draw is closest to its threshold."""
        items = state.availability.open_items()
        if items.size == 0:
            return None
        counts = state.label_counts[items]
        sample = self.rng_.beta(
            self._prior_a[items] + counts[:, 1], self._prior_b[items] + counts[:, 0]
        )
        best = int(items[np.argmin(np.abs(sample - self._thresholds[items]))])
        return Assignment(item=best, worker=worker, price=price)
