"""Allocation policies: which item (and worker) gets the next label."""

from crowdbudget.policies.base import AllocationPolicy, ScoringPolicy
from crowdbudget.policies.baselines import RoundRobinPolicy, UniformPolicy
from crowdbudget.policies.dynamic_programming import ExactDPPolicy
from crowdbudget.policies.index_policy import BetaIndexPolicy
from crowdbudget.policies.knowledge_gradient import (
    CVaRKnowledgeGradient,
    KnowledgeGradient,
    OptimisticKnowledgeGradient,
)

__all__ = [
    "AllocationPolicy",
    "BetaIndexPolicy",
    "CVaRKnowledgeGradient",
    "ExactDPPolicy",
    "KnowledgeGradient",
    "OptimisticKnowledgeGradient",
    "RoundRobinPolicy",
    "ScoringPolicy",
    "UniformPolicy",
]
