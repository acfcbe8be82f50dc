"""Label uncertainty (LU) of Sheng, Provost, Ipeirotis (2008), "Get Another Label? Improving
Data Quality and Data Mining Using Multiple, Noisy Labelers", KDD 2008, §5 eq. 4 — the
baseline ``LU`` of Li et al. (WSDM 2016, §4.1: "we only adopt the label uncertainty component
(Eq. (4) in [24]) ... LU will choose the instance that has the highest label uncertainty").

Model. With ``p`` positive and ``n`` negative labels, the item's positive rate has the
posterior Beta(p + 1, n + 1) under a uniform prior; the label uncertainty is the tail
probability of the less likely class,

    S_LU = min(I_{0.5}(p + 1, n + 1), 1 − I_{0.5}(p + 1, n + 1)),

with ``I_x`` the regularized incomplete beta function. The policy labels the eligible item of
largest ``S_LU``. With the problem's prior in place of Beta(1, 1) (default: uniform, as in
Sheng et al.), ``S_LU`` is :func:`~crowdbudget.posteriors.beta_bernoulli.error_probability`
of the item's Beta state (thresholds d other than 1/2 are honoured the same way).

Every item starts at 1/2, the largest possible value, so LU first gives each item one label
(Li et al. §4.2: "both Opt-KG and LU will query one label for each instance at the initial
stage"). It depends only on the item's state, so it is a :class:`BetaIndexPolicy`
(memoised per state, O(log n_distinct) per decision, the compiled engine applies).
Final labels: the Bayes rule on the Beta posterior (majority vote under a symmetric prior).

Example:
    >>> import numpy as np
    >>> LabelUncertainty().score_states(np.array([1.0, 2.0, 4.0]), np.array([1.0, 1.0, 1.0]),
    ...     np.full(3, 0.5)).round(4).tolist()
    [0.5, 0.25, 0.0625]
"""

from __future__ import annotations

from crowdbudget.policies._index import DEFAULT_TIE_BREAK, TieBreak
from crowdbudget.policies.index_policy import BetaIndexPolicy
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.types import FloatArray


class LabelUncertainty(BetaIndexPolicy):
    """Label the item of largest label uncertainty ``min(I, 1 − I)`` (Sheng et al. 2008 eq. 4).

    Args:
        tie_break: ``"random"`` (default: with a shared prior every unlabeled item ties,
            and the smallest index would make a result depend on the item order) or
            ``"first"`` (smallest index among the most uncertain: the rule the ``requallo-*``
            reproductions pin, ``tie-break=first``).
    """

    def __init__(self, tie_break: TieBreak = DEFAULT_TIE_BREAK) -> None:
        super().__init__(tie_break=tie_break)

    def score_states(self, a: FloatArray, b: FloatArray, threshold: FloatArray) -> FloatArray:
        return error_probability(a, b, threshold)
