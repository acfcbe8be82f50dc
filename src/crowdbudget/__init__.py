"""crowdbudget: budget-optimal crowdsourced labeling.

Given items to label, a crowd of noisy workers and a fixed budget, crowdbudget decides which
item to send next and to which worker, learns from every label as it arrives, knows when to
stop, and produces final labels with calibrated confidence.

Example:
    >>> from crowdbudget import Problem, SyntheticBernoulliEnvironment, make_policy
    >>> from crowdbudget.experiments import run_campaign
    >>> import numpy as np
    >>> env = SyntheticBernoulliEnvironment(n_items=50)
    >>> rows = run_campaign(make_policy("opt-kg"), env, [500], world_seed=0,
    ...                     policy_rng=np.random.default_rng(0))
    >>> 0.5 < rows[0]["accuracy"] <= 1.0
    True
"""

from typing import TYPE_CHECKING, Any

from crowdbudget.exceptions import (
    BudgetError,
    CrowdBudgetError,
    DataFormatError,
    IneligibleAssignmentError,
    InvalidParameterError,
    UnknownPolicyError,
)
from crowdbudget.policies import (
    AllocationPolicy,
    CVaRKnowledgeGradient,
    KnowledgeGradient,
    OptimisticKnowledgeGradient,
    RoundRobinPolicy,
    UniformPolicy,
)
from crowdbudget.posteriors import BetaBernoulliPosterior
from crowdbudget.registry import (
    make_environment,
    make_policy,
    register_policy,
    registered_environments,
    registered_policies,
)
from crowdbudget.simulation import LabelingEnvironment, SyntheticBernoulliEnvironment
from crowdbudget.types import (
    Assignment,
    CampaignState,
    LabelEvent,
    Problem,
    StepResult,
    WorkerSpec,
)

if TYPE_CHECKING:
    from crowdbudget.aggregation.registry import make_aggregator
    from crowdbudget.campaign import Campaign
    from crowdbudget.datasets import load_dataset
    from crowdbudget.experiments.runner import run_experiment

__version__ = "0.1.0"


#: exports imported on first use (module, name): ``Campaign`` pulls in SQLAlchemy, the others
#: pandas, the aggregators and the runner, which ``import crowdbudget`` does not need
_LAZY = {
    "Campaign": ("crowdbudget.campaign", "Campaign"),
    "load_dataset": ("crowdbudget.datasets", "load_dataset"),
    "make_aggregator": ("crowdbudget.aggregation.registry", "make_aggregator"),
    "run_experiment": ("crowdbudget.experiments.runner", "run_experiment"),
}


def __getattr__(name: str) -> Any:
    """The exports of ``_LAZY``, imported on first use."""
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'crowdbudget' has no attribute {name!r}")


__all__ = [
    "AllocationPolicy",
    "Assignment",
    "BetaBernoulliPosterior",
    "BudgetError",
    "CVaRKnowledgeGradient",
    "Campaign",
    "CampaignState",
    "CrowdBudgetError",
    "DataFormatError",
    "IneligibleAssignmentError",
    "InvalidParameterError",
    "KnowledgeGradient",
    "LabelEvent",
    "LabelingEnvironment",
    "OptimisticKnowledgeGradient",
    "Problem",
    "RoundRobinPolicy",
    "StepResult",
    "SyntheticBernoulliEnvironment",
    "UniformPolicy",
    "UnknownPolicyError",
    "WorkerSpec",
    "__version__",
    "load_dataset",
    "make_aggregator",
    "make_environment",
    "make_policy",
    "register_policy",
    "registered_environments",
    "registered_policies",
    "run_experiment",
]
