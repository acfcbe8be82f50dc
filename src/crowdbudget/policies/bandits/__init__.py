"""Bandit policies that choose workers: B-KUBE family (Rangi, Franceschetti 2018) and BBTA with
its baselines (Zhang, Ma, Sugiyama 2015)."""

# ---- BBTA family (Zhang, Ma, Sugiyama 2015) ----
from crowdbudget.policies.bandits.bbta import BanditTaskAssignment as BanditTaskAssignment
from crowdbudget.policies.bandits.bbta import RandomPairPolicy as RandomPairPolicy
from crowdbudget.policies.bandits.crowdsense import CrowdSense as CrowdSense
from crowdbudget.policies.bandits.iethresh import IEThresh as IEThresh
from crowdbudget.policies.bandits.per_context import PerContextOptKG as PerContextOptKG
