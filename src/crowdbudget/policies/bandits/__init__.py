"""Bandit policies that choose workers: B-KUBE family (Rangi, Franceschetti 2018) and BBTA with
its baselines (Zhang, Ma, Sugiyama 2015)."""

# BBTA family (Zhang, Ma, Sugiyama 2015): bbta, crowdsense, iethresh, per_context.
# B-KUBE family (Rangi, Franceschetti 2018): epsilon_first (with trailsourcing), knapsack,
# kube, per_task, value; registered as b-kube, bounded-eps-first, eps-first, trailsourcing.
from crowdbudget.policies.bandits.bbta import BanditTaskAssignment as BanditTaskAssignment
from crowdbudget.policies.bandits.bbta import RandomPairPolicy as RandomPairPolicy
from crowdbudget.policies.bandits.crowdsense import CrowdSense as CrowdSense
from crowdbudget.policies.bandits.epsilon_first import EpsilonFirstPolicy as EpsilonFirstPolicy
from crowdbudget.policies.bandits.iethresh import IEThresh as IEThresh
from crowdbudget.policies.bandits.knapsack import (
    exact_bounded_knapsack as exact_bounded_knapsack,
)
from crowdbudget.policies.bandits.knapsack import (
    greedy_bounded_knapsack as greedy_bounded_knapsack,
)
from crowdbudget.policies.bandits.kube import BKubePolicy as BKubePolicy
from crowdbudget.policies.bandits.kube import BKubeSelector as BKubeSelector
from crowdbudget.policies.bandits.per_context import PerContextOptKG as PerContextOptKG
from crowdbudget.policies.bandits.value import OnlineValueEstimator as OnlineValueEstimator
