"""Posteriors: what we believe about items (and workers) given the labels so far."""

from crowdbudget.posteriors.base import LabelPosterior, Lookahead
from crowdbudget.posteriors.beta_bernoulli import (
    BetaBernoulliPosterior,
    cvar_reward,
    decide_positive,
    error_probability,
    h,
    kg_reward,
    optimistic_reward,
    positive_probability,
    stage_rewards,
)

__all__ = [
    "BetaBernoulliPosterior",
    "LabelPosterior",
    "Lookahead",
    "cvar_reward",
    "decide_positive",
    "error_probability",
    "h",
    "kg_reward",
    "optimistic_reward",
    "positive_probability",
    "stage_rewards",
]
