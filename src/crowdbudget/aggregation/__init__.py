"""Aggregators: final labels from collected labels (crowd-kit names, integer arrays inside)."""

from crowdbudget.aggregation.base import Aggregator, argmax_random_ties, as_label_data, vote_counts
from crowdbudget.aggregation.bayesian_dawid_skene import BayesianDawidSkene
from crowdbudget.aggregation.belief_propagation import BeliefPropagation
from crowdbudget.aggregation.dawid_skene import DawidSkene
from crowdbudget.aggregation.glad import GLAD
from crowdbudget.aggregation.kos import KOS
from crowdbudget.aggregation.mace import MACE
from crowdbudget.aggregation.majority_vote import BayesRuleAggregator, MajorityVote
from crowdbudget.aggregation.mmsr import MMSR
from crowdbudget.aggregation.one_coin_em import OneCoinDawidSkene
from crowdbudget.aggregation.registry import (
    DEFAULT_VERDICT,
    make_aggregator,
    registered_aggregators,
)
from crowdbudget.aggregation.weighted_majority_vote import WeightedMajorityVote
from crowdbudget.aggregation.zero_based_skill import Wawa, ZeroBasedSkill

__all__ = [
    "DEFAULT_VERDICT",
    "GLAD",
    "KOS",
    "MACE",
    "MMSR",
    "Aggregator",
    "BayesRuleAggregator",
    "BayesianDawidSkene",
    "BeliefPropagation",
    "DawidSkene",
    "MajorityVote",
    "OneCoinDawidSkene",
    "Wawa",
    "WeightedMajorityVote",
    "ZeroBasedSkill",
    "argmax_random_ties",
    "as_label_data",
    "make_aggregator",
    "registered_aggregators",
    "vote_counts",
]
