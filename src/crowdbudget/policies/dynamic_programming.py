"""The Bayes-optimal policy of a small problem, by exact dynamic programming."""

from __future__ import annotations

import math

import numpy as np

from crowdbudget.bounds.exact_dp import ExactDPSolution, solve_exact_dp
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.types import Assignment, CampaignState, FloatArray, Problem


class ExactDPPolicy(AllocationPolicy):
    """Play an optimal action of the exact DP (Chen et al. 2013, §2.4, eq. 8).

    The DP is solved for ``problem.budget`` at reset (cached per problem), so the policy is
    budget-aware: the experiment runner runs it once per budget. Ties between optimal items go
    to the smallest index. Pending assignments are not part of the DP state: with labels still
    out, the policy acts as if they were not asked (a live campaign should not use it).

    Fitted attributes:
        solution_: the :class:`~crowdbudget.bounds.exact_dp.ExactDPSolution`.
    """

    budget_aware = True
    unit_prices_only = True

    def __init__(self) -> None:
        pass

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        self.solution_: ExactDPSolution = solve_exact_dp(problem)

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        price = self._price(state, worker)
        steps_left = math.floor(state.remaining + 1e-9)
        if steps_left <= 0 or not state.can_afford(price):
            return None
        q = self.solution_.q_values(state.label_counts, steps_left)
        return state.availability.search(lambda: self._best(state, q, worker, price))

    def _best(
        self, state: CampaignState, q: FloatArray, worker: int | None, price: float
    ) -> Assignment | None:
        """The open item of largest Q-value (the first on a tie)."""
        q = np.where(state.availability.open_mask(), q, -np.inf)
        if not np.isfinite(q.max()):
            return None
        item = int(np.flatnonzero(q >= q.max() - 1e-12)[0])
        return Assignment(item=item, worker=worker, price=price)
