"""Registration of the built-in policies under their ids (DESIGN §6)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.policies.baselines import RoundRobinPolicy, UniformPolicy
from crowdbudget.policies.dynamic_programming import ExactDPPolicy
from crowdbudget.policies.feature_kg import FeatureKnowledgeGradient
from crowdbudget.policies.knowledge_gradient import (
    CVaRKnowledgeGradient,
    KnowledgeGradient,
    OptimisticKnowledgeGradient,
)
from crowdbudget.policies.worker_aware import OneCoinKnowledgeGradient, TwoCoinKnowledgeGradient
from crowdbudget.registry import PolicySpec, register_policy

CHEN2013 = "Chen, Lin, Zhou (2013) Optimistic Knowledge Gradient Policy ..."

#: worker models the KG family can be given with ``workers=`` (§4 of Chen et al.)
WORKER_MODELS = ("none", "one-coin", "two-coin")


def _pair(text: str) -> tuple[float, float]:
    """``"4;1"`` or ``"4,1"`` → (4.0, 1.0) (a Beta prior's two parameters)."""
    parts = [float(v) for v in text.replace(";", ",").split(",") if v.strip()]
    if len(parts) != 2:
        raise ValueError(text)
    return parts[0], parts[1]


#: item models the KG family can be given with ``features=`` (§5 of Chen et al.)
FEATURE_MODELS = ("none", "logistic")

#: parameters that only the feature model (``features=logistic``) takes
_FEATURE_PARAMS = ("prior_var", "reward", "standardize", "intercept")


def _with_workers(
    optimistic: bool,
    workers: str,
    worker_prior: tuple[float, float] | None,
    features: str = "none",
    **kwargs: Any,
) -> AllocationPolicy:
    if features not in FEATURE_MODELS:
        raise InvalidParameterError(
            f"features must be one of {', '.join(FEATURE_MODELS)}, got {features!r}"
        )
    if features == "logistic":
        if workers != "none" or worker_prior is not None:
            raise InvalidParameterError(
                "features=logistic models anonymous workers; it cannot be combined with workers="
            )
        return FeatureKnowledgeGradient(optimistic=optimistic, **kwargs)
    unused = [name.replace("_", "-") for name in _FEATURE_PARAMS if name in kwargs]
    if unused:
        raise InvalidParameterError(f"{', '.join(unused)} needs features=logistic")
    if workers not in WORKER_MODELS:
        raise InvalidParameterError(
            f"workers must be one of {', '.join(WORKER_MODELS)}, got {workers!r}"
        )
    if workers in ("one-coin", "two-coin"):
        # Worker-aware KG picks (item, worker) pairs. Opt-KG breaks ties at random by default
        # (the paper's Fig. 3(b) error bars need a randomised policy; measured on RTE at 3,200
        # labels: random 0.917, first 0.909 — see crowdbudget.policies.worker_aware); ``kg``
        # keeps its deterministic "first" default, ``kg:workers=...:tie-break=random`` is the
        # randomised one.
        aware = OneCoinKnowledgeGradient if workers == "one-coin" else TwoCoinKnowledgeGradient
        return aware(
            optimistic=optimistic,
            worker_prior=worker_prior or (4.0, 1.0),
            tie_break=kwargs.get("tie_break", "random"),
            refit=kwargs.get("refit", 0),
        )
    if worker_prior is not None:
        raise InvalidParameterError("worker-prior needs workers=one-coin or workers=two-coin")
    if "refit" in kwargs:
        raise InvalidParameterError("refit needs workers=one-coin or features=logistic")
    cls = OptimisticKnowledgeGradient if optimistic else KnowledgeGradient
    return cls(**kwargs)


def _optimistic_knowledge_gradient(
    workers: str = "none", worker_prior: tuple[float, float] | None = None, **kwargs: Any
) -> AllocationPolicy:
    """``opt-kg``: homogeneous Opt-KG; with ``workers=one-coin`` the worker-aware one (§4);
    with ``features=logistic`` the feature-based one (§5)."""
    return _with_workers(True, workers, worker_prior, **kwargs)


def _knowledge_gradient(
    workers: str = "none", worker_prior: tuple[float, float] | None = None, **kwargs: Any
) -> AllocationPolicy:
    """``kg``: deterministic KG; ``workers=one-coin`` over (item, worker) pairs (§4);
    ``features=logistic`` on the feature model (§5)."""
    return _with_workers(False, workers, worker_prior, **kwargs)


def _flag(text: str) -> bool:
    """``"true"``/``"1"``/``"yes"`` → True, ``"false"``/``"0"``/``"no"`` → False."""
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ValueError(text)


_KG_PARAMS: dict[str, Callable[[str], Any]] = {
    "tie-break": str,
    "workers": str,
    "worker-prior": _pair,
    "features": str,
    "prior-var": float,
    "reward": str,
    "standardize": _flag,
    "intercept": _flag,
    "refit": int,
}


register_policy(
    PolicySpec("uniform", UniformPolicy, "uniform sampling: a random eligible item", paper=CHEN2013)
)
register_policy(
    PolicySpec(
        "round-robin", RoundRobinPolicy, "items in order, cycling ('looping')", paper=CHEN2013
    )
)
register_policy(
    PolicySpec(
        "kg",
        _knowledge_gradient,
        "deterministic knowledge gradient (smallest index on ties); workers=one-coin|two-coin: "
        "KG over (item, worker) pairs with worker reliability (§4); features=logistic: "
        "theta = sigmoid(w.x), Laplace updates (§5)",
        params=_KG_PARAMS,
        defaults={"tie_break": "first"},
        paper=CHEN2013,
    )
)
register_policy(
    PolicySpec(
        "kg-random",
        KnowledgeGradient,
        "randomized knowledge gradient (uniform on ties)",
        defaults={"tie_break": "random"},
        paper=CHEN2013,
    )
)
register_policy(
    PolicySpec(
        "opt-kg",
        _optimistic_knowledge_gradient,
        "optimistic knowledge gradient (Algorithm 1); workers=one-coin|two-coin: over (item, "
        "worker) pairs with worker reliability ~ Beta(4,1), random ties (§4); "
        "features=logistic: theta = sigmoid(w.x), Laplace updates (§5)",
        params=_KG_PARAMS,
        paper=CHEN2013,
    )
)
register_policy(
    PolicySpec(
        "cvar-kg",
        CVaRKnowledgeGradient,
        "CVaR-alpha knowledge gradient (alpha=1: KG, alpha=0: Opt-KG)",
        params={"alpha": float, "tie-break": str},
        defaults={"alpha": 0.5},
        paper=CHEN2013,
    )
)

register_policy(
    PolicySpec(
        "dp",
        ExactDPPolicy,
        "Bayes-optimal policy by exact dynamic programming (tiny problems only)",
        paper=CHEN2013,
    )
)

# ---- Hu & Frazier: index policy, Thompson sampling, UCB1-tuned (continuous time) ------------
from crowdbudget.policies.lagrangian_index import LagrangianIndexPolicy  # noqa: E402
from crowdbudget.policies.thompson import ThompsonSamplingPolicy  # noqa: E402
from crowdbudget.policies.ucb import UCB1TunedPolicy  # noqa: E402

HU_FRAZIER = "Hu, Frazier. Bayes-Optimal Effort Allocation in Crowdsourcing: Bounds and Index ..."

register_policy(
    PolicySpec(
        "lagrangian-index",
        LagrangianIndexPolicy,
        "Hu-Frazier index policy (Algorithm 1): largest Lagrangian index of the task's state",
        params={
            "arrival-rate": float,
            "completion-rate": float,
            "label-cap": int,
            "max-lookahead": int,
            "grid-points": int,
            "cache-dir": str,
        },
        # the cache's place on disk and the sizes of the index tables: server settings
        server_only=frozenset({"cache-dir", "grid-points", "label-cap", "max-lookahead"}),
        paper=HU_FRAZIER,
    )
)
register_policy(
    PolicySpec(
        "thompson",
        ThompsonSamplingPolicy,
        "Thompson sampling: the task whose posterior draw is closest to its threshold",
        paper=HU_FRAZIER,
    )
)
register_policy(
    PolicySpec(
        "ucb1-tuned",
        UCB1TunedPolicy,
        "UCB1-tuned: the task whose confidence interval reaches deepest across its threshold",
        paper=HU_FRAZIER,
    )
)

# ---- Gittins baselines of Chen et al. (2013) §3.1, §7 (policies/gittins.py) ----------------
from crowdbudget.policies.gittins import FiniteHorizonGittins, GittinsInf  # noqa: E402

register_policy(
    PolicySpec(
        "gittins",
        FiniteHorizonGittins,
        "finite-horizon Gittins index rule, horizon = labels left (calibration, Nino-Mora 2011)",
        params={"solver": str, "tie-break": str},
        paper=CHEN2013,
    )
)
register_policy(
    PolicySpec(
        "gittins-inf",
        GittinsInf,
        "infinite-horizon discounted Gittins index, alpha = 1 - 1/T (Xie & Frazier 2013)",
        params={
            "truncation": float,
            "truncation-rule": str,
            "max-levels": int,
            "solver": str,
            "tie-break": str,
        },
        # the truncation depth sets the size of the index computation
        server_only=frozenset({"truncation", "max-levels"}),
        paper=CHEN2013,
    )
)

# ---- Zhang, Ma, Sugiyama (2015): BBTA and its baselines (policies/bandits/) ----------------
from crowdbudget.policies.bandits import (  # noqa: E402
    BanditTaskAssignment,
    CrowdSense,
    IEThresh,
    PerContextOptKG,
    RandomPairPolicy,
)

ZHANG2015 = "Zhang, Ma, Sugiyama (2015) Bandit-Based Task Assignment for Heterogeneous ..."

register_policy(
    PolicySpec(
        "bbta",
        BanditTaskAssignment,
        "BBTA (Algorithm 1): pure exploration, per-context Exp3 worker choice, weighted vote",
        params={"n-explore": int, "contexts": str},
        paper=ZHANG2015,
    )
)
register_policy(
    PolicySpec(
        "random-pair",
        RandomPairPolicy,
        "naive baseline: a random task, then a random worker who has not labeled it; majority vote",
        paper=ZHANG2015,
    )
)
register_policy(
    PolicySpec(
        "iethresh",
        IEThresh,
        "IEThresh: each task to the workers whose Student-t upper interval >= eps * max (spend "
        "set by eps)",
        params={"eps": float, "alpha": float},
        paper=ZHANG2015,
    )
)
register_policy(
    PolicySpec(
        "crowdsense",
        CrowdSense,
        "CrowdSense: 2 best + 1 random worker, more while the score test holds (spend set by eps)",
        params={"eps": float, "smoothing": float},
        paper=ZHANG2015,
    )
)
register_policy(
    PolicySpec(
        "opt-kg-per-context",
        PerContextOptKG,
        "OptKG with one-coin workers, one instance per task context, sub-budgets by context size",
        params={"contexts": str},
        paper=ZHANG2015,
    )
)
# the name the BBTA reproductions report ("OptKG (Multi.)" of §5.1): the same policy under the
# variant id of the issue, so that `--policies opt-kg:per-context` runs what the report shows
register_policy(
    PolicySpec(
        "opt-kg:per-context",
        PerContextOptKG,
        "OptKG (Multi.) of Zhang et al. 2015: one-coin OptKG per task context, sub-budgets by "
        "context size (= opt-kg-per-context)",
        params={"contexts": str},
        paper=ZHANG2015,
    )
)

# ---- Chen et al. (2013) §7 baselines ending with an aggregator (policies/aggregating.py) ------
from crowdbudget.policies.aggregating import KOSAllocation, RandomBP  # noqa: E402

register_policy(
    PolicySpec(
        "kos",
        KOSAllocation,
        "random (l, r)-regular item-worker graph for the budget + KOS inference (Karger et al.)",
        params={"labels-per-worker": int, "n-iter": int, "inference": str},
        server_only=frozenset({"n-iter"}),
        paper=CHEN2013,
    )
)
register_policy(
    PolicySpec(
        "random-bp",
        RandomBP,
        "uniformly random items + belief propagation (Liu, Peng, Ihler 2012)",
        params={"alpha": float, "beta": float, "n-nodes": int},
        server_only=frozenset({"n-nodes"}),
        paper=CHEN2013,
    )
)

# ---- Li, Ma, Gao, Su, Quinn (2016): Requallo and label uncertainty --------------------------
from crowdbudget.policies.label_uncertainty import LabelUncertainty  # noqa: E402
from crowdbudget.policies.requallo import RequalloPolicy  # noqa: E402

LI2016 = "Li, Ma, Gao, Su, Quinn (2016) Crowdsourcing High Quality Labels with a Tight Budget"

register_policy(
    PolicySpec(
        "requallo",
        RequalloPolicy,
        "Requallo: largest optimistic completeness reward under a quality requirement, stops "
        "when no item gains (default fisher=0.2:max-labels=14)",
        params={
            "ratio": float,
            "fisher": float,
            "min-labels": int,
            "max-labels": int,
            "max-total": int,
            "pseudo-labels": float,
            "workers": str,
            "spammer-alpha": float,
            "spammer-min-labels": int,
            "tie-break": str,
        },
        paper=LI2016,
    )
)
register_policy(
    PolicySpec(
        "label-uncertainty",
        LabelUncertainty,
        "label uncertainty LU (Sheng, Provost, Ipeirotis 2008 eq. 4): largest Beta tail "
        "probability of the minority class",
        params={"tie-break": str},
        paper=LI2016,
    )
)
