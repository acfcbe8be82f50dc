"""Knowledge-gradient policies of the Beta–Bernoulli MDP.

Chen, Lin, Zhou (2013), "Optimistic Knowledge Gradient Policy for Optimal Budget Allocation in
Crowdsourcing": KG (eq. 12; deterministic = smallest index on ties, randomized = uniform on
ties), optimistic KG (Algorithm 1) and the CVaR-α family of §3.2 that joins them.

Ties among items. Opt-KG and CVaR-α KG break a tie uniformly at random by default:
with a shared prior every unlabeled item ties, and so does every pair of items in the same
state, so "the smallest index" would make the labels — and a replay's accuracy — depend on
the order of the items in the file. The paper does not say how Algorithm 1 breaks ties; its
``argmax`` (smallest index) is ``tie-break=first``, which every faithful reproduction pins.
:class:`KnowledgeGradient` keeps ``"first"``: ``kg`` is the paper's *deterministic* KG of
Prop. 3.1 (smallest index on ties, the rule the proposition is about); ``kg-random`` is the
randomized KG.
"""

from __future__ import annotations

import numpy as np

from crowdbudget._validation import check_probability
from crowdbudget.policies._index import DEFAULT_TIE_BREAK, PAPER_TIE_BREAK, TieBreak
from crowdbudget.policies.index_policy import BetaIndexPolicy
from crowdbudget.posteriors.beta_bernoulli import cvar_reward, kg_reward, optimistic_reward
from crowdbudget.posteriors.dirichlet import dirichlet_rewards
from crowdbudget.types import FloatArray


class KnowledgeGradient(BetaIndexPolicy):
    """Knowledge gradient: label the item of largest expected accuracy gain ``R(a, b)`` (eq. 12).

    KG is the optimal policy when one label is left (it is the first step of the DP). With
    ``tie_break="first"`` it is the deterministic KG of Prop. 3.1, which is not consistent
    (after one label on each tied item it keeps labeling the first one); ``"random"`` is
    randomized KG.

    Example:
        >>> import numpy as np
        >>> from crowdbudget.types import Problem, CampaignState
        >>> policy = KnowledgeGradient()
        >>> problem = Problem(n_items=3, budget=5)
        >>> policy.reset(problem, np.random.default_rng(0))
        >>> policy.select(CampaignState.initial(problem)).item
        0
    """

    def __init__(self, tie_break: TieBreak = PAPER_TIE_BREAK) -> None:
        super().__init__(tie_break=tie_break)

    def score_states(self, a: FloatArray, b: FloatArray, threshold: FloatArray) -> FloatArray:
        return kg_reward(a, b, threshold)


class OptimisticKnowledgeGradient(BetaIndexPolicy):
    """Optimistic KG (Algorithm 1): label the item of largest ``R+(a, b) = max(R1, R2)``.

    Consistent (Thm. 3.2): accuracy → 1 as the budget grows. Ties among items are broken
    uniformly at random by default (the smallest index would make a result depend on the
    item order); the paper does not say how it breaks ties, and with the consistent
    optimistic reward the choice does not matter for consistency. ``tie_break="first"``
    (``opt-kg:tie-break=first``) is the ``argmax`` of Algorithm 1, the rule the faithful
    reproductions pin.
    """

    binary_only = False

    def __init__(self, tie_break: TieBreak = DEFAULT_TIE_BREAK) -> None:
        super().__init__(tie_break=tie_break)

    def score_states(self, a: FloatArray, b: FloatArray, threshold: FloatArray) -> FloatArray:
        return optimistic_reward(a, b, threshold)

    def score_dirichlet_states(self, alpha: FloatArray) -> FloatArray:
        """Multi-class Opt-KG (§5): ``max_l R_l`` with ``R_l = h(α + e_l) − h(α)``,
        ``h(α) = max_c P(θ_c is the largest | Dir(α))`` (:func:`dirichlet_rewards`). With two
        classes this is exactly the Beta form (same h, same states)."""
        rewards, _ = dirichlet_rewards(alpha)
        return np.asarray(rewards.max(axis=1), dtype=float)


class CVaRKnowledgeGradient(BetaIndexPolicy):
    """CVaR-α knowledge gradient (§3.2): largest CVaR_α of the two-point stage reward.

    Args:
        alpha: in [0, 1]; 1 is KG, 0 is optimistic KG. Consistent for every α < 1.
        tie_break: ``"random"`` (default: a result does not depend on the item order) or
            ``"first"`` (smallest index, the papers' rule, ``tie-break=first``).
    """

    def __init__(self, alpha: float = 0.5, tie_break: TieBreak = DEFAULT_TIE_BREAK) -> None:
        super().__init__(tie_break=tie_break)
        self.alpha = alpha

    def validate_params(self) -> None:
        super().validate_params()
        check_probability(self.alpha, "alpha")

    def score_states(self, a: FloatArray, b: FloatArray, threshold: FloatArray) -> FloatArray:
        return cvar_reward(a, b, threshold, alpha=self.alpha)
