"""Registration of the built-in policies under their ids (DESIGN §6): one parameter table per
id (:mod:`crowdbudget.registry`); the capabilities are the policy classes' flags."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, get_args

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies._class_prior import BINARY_CLASS_PRIORS, CLASS_PRIORS
from crowdbudget.policies._index import DEFAULT_TIE_BREAK, PAPER_TIE_BREAK, TieBreak
from crowdbudget.policies._refit_schedule import refit_tol_defaults
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.policies.baselines import RoundRobinPolicy, UniformPolicy
from crowdbudget.policies.dynamic_programming import ExactDPPolicy
from crowdbudget.policies.feature_kg import FeatureKnowledgeGradient
from crowdbudget.policies.knowledge_gradient import (
    CVaRKnowledgeGradient,
    KnowledgeGradient,
    OptimisticKnowledgeGradient,
)
from crowdbudget.policies.worker_aware import TwoCoinKnowledgeGradient
from crowdbudget.policies.worker_aware_multiclass import (
    CategoricalWorkerKnowledgeGradient,
    OneCoinAnyClassKnowledgeGradient,
)
from crowdbudget.registry import (
    POLICIES,
    Param,
    PolicySpec,
    ProblemSize,
    items_by_classes,
    read_flag,
    read_pair,
    register_policy,
)

CHEN2013 = "Chen, Lin, Zhou (2013) Optimistic Knowledge Gradient Policy ..."

#: posteriors the KG family (kg, opt-kg, cvar-kg) is parametrised by (DESIGN §11): ``beta``
#: (anonymous workers, the Beta fast path), ``one-coin`` and ``two-coin`` (named workers, §4 of
#: Chen et al.: the policy then picks (item, worker) pairs), ``confusion`` (a Dirichlet
#: confusion matrix per worker); one-coin and confusion take any number of classes
#: (crowdbudget.policies.worker_aware_multiclass), two-coin is binary
POSTERIORS = ("beta", "one-coin", "two-coin", "confusion")

#: ``workers=`` is the old spelling of ``posterior=`` (``none`` is ``beta``)
WORKER_MODELS = ("none", "one-coin", "two-coin")

#: old spellings already reported (each once per process)
_OLD_SPELLING_NOTICES: set[str] = set()


def _posterior_of(posterior: str | None, workers: str | None) -> str:
    """``posterior=``, or its old spelling ``workers=`` (printing the new one once)."""
    if workers is None:
        return posterior or "beta"
    if posterior is not None:
        raise InvalidParameterError("give posterior= or its old spelling workers=, not both")
    if workers not in WORKER_MODELS:
        raise InvalidParameterError(
            f"workers must be one of {', '.join(WORKER_MODELS)}, got {workers!r}"
        )
    new = "beta" if workers == "none" else workers
    if workers not in _OLD_SPELLING_NOTICES:
        _OLD_SPELLING_NOTICES.add(workers)
        warnings.warn(
            f"workers={workers} is an old spelling; write posterior={new}",
            FutureWarning,
            stacklevel=2,
        )
    return new


#: ``refit`` of ``posterior=one-coin`` when none is given, on any number of classes (the binary
#: Beta-item refit on two, the categorical one on more; ``refit=0``: the paper's rule)
DEFAULT_ONE_COIN_REFIT = 10

#: the workers' Beta prior of Chen, Lin, Zhou (2013) §4 (mean 0.8, worth 5 labels): the
#: default of the paper's sequential rule (``refit=0``) and of the other worker models
PAPER_WORKER_PRIOR = (4.0, 1.0)
#: the default of ``posterior=one-coin`` with a refit (``refit`` > 0, the default) on two
#: classes: the paper's mean 0.8, worth 20 labels; more classes keep the paper's prior
#: (:data:`PAPER_WORKER_PRIOR`). A refit re-reads every worker from all labels as
#: ``c0 + agreements, d0 + disagreements``; with the paper's prior, worth 5 labels, a worker's
#: first few labels already move them far (three agreements: 0.875, three disagreements: 0.5),
#: so Opt-KG asks the workers that started lucky and learns little about the others. Worth 20
#: labels, a worker stays near the crowd's mean until about 20 of their labels say otherwise
#: (measurements: docs/decisions.md; docs/reproductions.md, "A stronger worker prior for the
#: refit").
REFIT_WORKER_PRIOR = (16.0, 4.0)

#: item models the KG family can be given with ``features=`` (§5 of Chen et al.)
FEATURE_MODELS = ("none", "logistic")

#: parameters that only the feature model (``features=logistic``) takes
_FEATURE_PARAMS = ("prior_var", "reward", "standardize", "intercept")


#: refit variants of the binary one-coin policy, passed only when given
_ONE_COIN_REFIT_PARAMS: tuple[str, ...] = ("refit_items", "refit_rounds", "refit_final")
_ONE_COIN_REFIT_PARAMS += ("refit_tol", "refit_exact_until", "refit_exact_growth", "class_prior")
_ONE_COIN_REFIT_PARAMS += ("multiclass_class_prior", "refit_exact_items")
#: the worker models whose refit takes ``refit-growth``
GROWING_REFITS = ("one-coin", "confusion")


def _with_workers(
    optimistic: bool,
    workers: str,
    worker_prior: tuple[float, float] | None,
    features: str = "none",
    alpha: float | None = None,
    **kwargs: Any,
) -> AllocationPolicy:
    if features not in FEATURE_MODELS:
        raise InvalidParameterError(
            f"features must be one of {', '.join(FEATURE_MODELS)}, got {features!r}"
        )
    if "refit_growth" in kwargs and (features != "none" or workers not in GROWING_REFITS):
        # the growing schedule is the worker-aware policies' (one-coin: binary and, through
        # OneCoinAnyClassKnowledgeGradient, multi-class; confusion), not the feature model's
        raise InvalidParameterError("refit-growth needs posterior=one-coin or posterior=confusion")
    for key in _ONE_COIN_REFIT_PARAMS:
        if key in kwargs and (features != "none" or workers != "one-coin"):
            raise InvalidParameterError(f"{key.replace('_', '-')} needs posterior=one-coin")
    if features == "logistic":
        if workers != "none" or worker_prior is not None:
            raise InvalidParameterError(
                "features=logistic models anonymous workers; it cannot be combined with workers="
            )
        return FeatureKnowledgeGradient(optimistic=optimistic, **kwargs)
    unused = [name.replace("_", "-") for name in _FEATURE_PARAMS if name in kwargs]
    if unused:
        raise InvalidParameterError(f"{', '.join(unused)} needs features=logistic")
    if workers not in WORKER_MODELS and workers != "confusion":
        raise InvalidParameterError(
            f"workers must be one of {', '.join(WORKER_MODELS)}, got {workers!r}"
        )
    if workers == "confusion":
        # a Dirichlet confusion matrix per worker, any K >= 2; refit=N re-reads
        # all labels (variational Dawid–Skene rounds), off by default
        return CategoricalWorkerKnowledgeGradient(
            "confusion",
            optimistic=optimistic,
            worker_prior=worker_prior or PAPER_WORKER_PRIOR,
            tie_break=kwargs.get("tie_break", "random"),
            alpha=alpha,
            refit=kwargs.get("refit", 0),
            refit_growth=kwargs.get("refit_growth", 0.0),
        )
    if workers in ("one-coin", "two-coin"):
        # Worker-aware KG picks (item, worker) pairs. Opt-KG breaks ties at random by default
        # (the paper's Fig. 3(b) error bars need a randomised policy;
        # crowdbudget.policies.worker_aware); ``kg`` keeps its deterministic "first" default,
        # ``kg:workers=...:tie-break=random`` is the randomised one.
        # The one-coin default re-reads all labels every 10 (refit=10), on any number of
        # classes: the paper's sequential moment matching (refit=0, what the reproductions
        # name) can lock onto a worker after a lucky start (measurements: docs/decisions.md;
        # docs/reproductions.md, "The worker-aware default" and "Worker-aware allocation for
        # any number of classes").
        # one-coin: the binary policy on two classes, the categorical one on more
        aware = (
            OneCoinAnyClassKnowledgeGradient if workers == "one-coin" else TwoCoinKnowledgeGradient
        )
        default_refit = DEFAULT_ONE_COIN_REFIT if workers == "one-coin" else 0
        refit = kwargs.get("refit", default_refit)
        extra: dict[str, Any] = {}
        if workers == "one-coin" and refit > 0:
            # the incremental refit by default for Opt-KG, the measured one (KG and CVaR-KG
            # keep the full refit unless refit-tol is named)
            extra.update(refit_tol_defaults(kwargs, default_tol=optimistic and alpha is None))
        if worker_prior is None:
            worker_prior = PAPER_WORKER_PRIOR
            if workers == "one-coin" and refit > 0:
                # the binary refit's prior; more classes keep the paper's
                worker_prior = REFIT_WORKER_PRIOR
                extra["multiclass_worker_prior"] = PAPER_WORKER_PRIOR
        return aware(
            optimistic=optimistic,
            worker_prior=worker_prior,
            tie_break=kwargs.get("tie_break", "random"),
            refit=refit,
            alpha=alpha,
            refit_growth=kwargs.get("refit_growth", 0.0),
            **{key: kwargs[key] for key in _ONE_COIN_REFIT_PARAMS if key in kwargs},
            **extra,
        )
    if worker_prior is not None:
        raise InvalidParameterError(
            "worker-prior needs posterior=one-coin, posterior=two-coin or posterior=confusion"
        )
    if "refit" in kwargs:
        raise InvalidParameterError(
            "refit needs posterior=one-coin, posterior=confusion or features=logistic"
        )
    if alpha is not None:
        return CVaRKnowledgeGradient(alpha=alpha, **kwargs)
    cls = OptimisticKnowledgeGradient if optimistic else KnowledgeGradient
    return cls(**kwargs)


def _optimistic_knowledge_gradient(
    posterior: str | None = None,
    worker_prior: tuple[float, float] | None = None,
    workers: str | None = None,
    **kwargs: Any,
) -> AllocationPolicy:
    """``opt-kg``: homogeneous Opt-KG; with ``posterior=one-coin`` the worker-aware one (§4);
    with ``features=logistic`` the feature-based one (§5)."""
    return _with_workers(True, _kg_posterior(posterior, workers), worker_prior, **kwargs)


def _knowledge_gradient(
    posterior: str | None = None,
    worker_prior: tuple[float, float] | None = None,
    workers: str | None = None,
    **kwargs: Any,
) -> AllocationPolicy:
    """``kg``: deterministic KG; ``posterior=one-coin`` over (item, worker) pairs (§4);
    ``features=logistic`` on the feature model (§5)."""
    return _with_workers(False, _kg_posterior(posterior, workers), worker_prior, **kwargs)


def _cvar_knowledge_gradient(
    posterior: str | None = None,
    worker_prior: tuple[float, float] | None = None,
    alpha: float = 0.5,
    **kwargs: Any,
) -> AllocationPolicy:
    """``cvar-kg``: CVaR-α KG (§3.2); ``posterior=one-coin|two-coin`` over (item, worker)
    pairs."""
    return _with_workers(False, _kg_posterior(posterior, None), worker_prior, alpha=alpha, **kwargs)


def _kg_posterior(posterior: str | None, workers: str | None) -> str:
    """The worker model of the KG family's factory: ``none`` for the Beta posterior."""
    chosen = _posterior_of(posterior, workers)
    return "none" if chosen == "beta" else chosen


#: ``tie-break``: the smallest index or a uniformly random one among equal scores. Random is
#: the default of every item-selecting policy but deterministic KG: with "first" a result
#: depends on the order of the items in the file; ``first`` is the papers' rule, which every
#: faithful reproduction pins (crowdbudget.registry.pin_paper_ties)
TIE_BREAK = Param(
    "tie-break",
    str,
    "on equal scores among items: a random one (so results do not depend on the item order) "
    "or the smallest index (first: the papers' rule, what the reproductions use)",
    default=DEFAULT_TIE_BREAK,
    choices=get_args(TieBreak),
)
#: ``kg``'s row: deterministic KG (Prop. 3.1) keeps the smallest index
_KG_TIE_BREAK = Param(
    "tie-break",
    str,
    "on equal scores among items: the smallest index (first: deterministic KG, Prop. 3.1) or "
    "a random one (kg-random)",
    default=PAPER_TIE_BREAK,
    choices=get_args(TieBreak),
)


_POSTERIOR = Param(
    "posterior",
    str,
    "the posterior: beta (anonymous workers), or one-coin/two-coin reliability per worker (§4; "
    "two-coin binary), or confusion: a Dirichlet confusion matrix per worker",
    "beta",
    choices=POSTERIORS,
)
_WORKER_PRIOR = Param(
    "worker-prior",
    read_pair,
    "Beta prior a,b of a worker's reliability (posterior=one-coin|two-coin; confusion: rows "
    "Dirichlet with a(K-1) on the diagonal, b off it); default 16,4 for posterior=one-coin "
    "with a refit (its default) on two classes, else the paper's 4,1",
)

_KG_PARAMS = {
    "tie-break": TIE_BREAK,
    "posterior": _POSTERIOR,
    "workers": Param(
        "workers", str, "old spelling of posterior= (none: beta)", "none", choices=WORKER_MODELS
    ),
    "worker-prior": _WORKER_PRIOR,
    "features": Param(
        "features", str, "item model: none, or theta = sigmoid(w.x) (§5)", choices=FEATURE_MODELS
    ),
    "prior-var": Param("prior-var", float, "prior variance of w (features=logistic)", low=0.0),
    "reward": Param(
        "reward",
        str,
        "features=logistic: the paper's global reward or a local one",
        choices=("global", "local"),
    ),
    "standardize": Param("standardize", read_flag, "standardize the features (features=logistic)"),
    "intercept": Param("intercept", read_flag, "add an intercept feature (features=logistic)"),
    "refit": Param(
        "refit",
        int,
        "re-read all labels every this many labels (0: never, the paper's sequential rule): "
        "posterior=one-coin (any number of classes; default 10), posterior=confusion "
        "(default 0), features=logistic (default 0)",
        low=0,
    ),
    "refit-growth": Param(
        "refit-growth",
        float,
        "posterior=one-coin: after a refit at n labels the next is at n + max(refit, "
        "ceil(g*n)) labels (0: every refit labels; g > 0: a few refits per doubling of the "
        "labels, so their total cost no longer grows quadratically)",
        low=0.0,
    ),
    "refit-items": Param(
        "refit-items",
        str,
        "posterior=one-coin, two classes: a refit's item step — sequential (the paper's moment "
        "matching label by label) or exact (all an item's labels at once, matched once)",
        choices=("sequential", "exact"),
    ),
    "refit-final": Param(
        "refit-final",
        read_flag,
        "posterior=one-coin, two classes: the verdict reads a refit of all labels (of a copy; "
        "the allocation's beliefs unchanged) when labels arrived since the last refit",
    ),
    "refit-rounds": Param(
        "refit-rounds", int, "posterior=one-coin, two classes: rounds of a refit (default 3)", low=1
    ),
    "refit-tol": Param(
        "refit-tol",
        float,
        "one-coin, two classes: 0 (every refit a full one) or incremental refits re-reading the "
        "new labels' items and those of workers whose reliability moved more (opt-kg: 0.01)",
        low=0.0,
    ),
    "refit-exact-until": Param(
        "refit-exact-until",
        int,
        "refit-tol > 0: refits are full ones up to the first past this many labels (10000)",
        low=0,
    ),
    "refit-exact-items": Param(
        "refit-exact-items",
        float,
        "refit-tol > 0: the exact phase per item, within [2000, refit-exact-until] (default 1)",
        low=0.0,
    ),
    "refit-exact-growth": Param(
        "refit-exact-growth",
        float,
        "refit-tol > 0: a full refit whenever the labels grew by this share (0.1; 0: none)",
        low=0.0,
    ),
    "class-prior": Param(
        "class-prior",
        str,
        "posterior=one-coin, two classes: the items' prior — none (uniform), gated (learned "
        "where a lone label cannot overturn the common class; KG, CVaR-KG: none), gated-runaway16 "
        "(lock at odds x16), gated-checked (Opt-KG's default: also locked if first labels refute)",
        choices=BINARY_CLASS_PRIORS,
    ),
    "multiclass-class-prior": Param(
        "multiclass-class-prior",
        str,
        "posterior=one-coin, more than two classes: the items' prior — none (the problem's) or "
        "gated (class shares fitted from the labels at every refit, where a lone label cannot "
        "decide an item; Opt-KG's default; KG and CVaR-KG: none)",
        choices=CLASS_PRIORS,
    ),
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
        "deterministic knowledge gradient (smallest index on ties, as Prop. 3.1; kg-random: "
        "random ties); posterior=one-coin|two-coin: KG over (item, worker) pairs with worker "
        "reliability (§4); features=logistic: theta = sigmoid(w.x), Laplace updates (§5)",
        params={**_KG_PARAMS, "tie-break": _KG_TIE_BREAK},
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
        "optimistic knowledge gradient (Algorithm 1), random ties among items (tie-break=first: "
        "the paper's smallest index); posterior=one-coin|two-coin: over (item, worker) pairs "
        "with worker reliability ~ Beta(4,1) (§4); features=logistic: theta = sigmoid(w.x), "
        "Laplace updates (§5)",
        params=_KG_PARAMS,
        paper=CHEN2013,
    )
)
register_policy(
    PolicySpec(
        "cvar-kg",
        _cvar_knowledge_gradient,
        "CVaR-alpha knowledge gradient (alpha=1: KG, alpha=0: Opt-KG), random ties among items "
        "(tie-break=first: smallest index); posterior=one-coin|two-coin: over (item, worker) "
        "pairs with worker reliability (§4)",
        params={
            "alpha": Param("alpha", float, "CVaR level (1: KG, 0: Opt-KG)", 0.5, low=0.0, high=1.0),
            "tie-break": TIE_BREAK,
            "posterior": _POSTERIOR,
            "worker-prior": _WORKER_PRIOR,
        },
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
            "arrival-rate": Param("arrival-rate", float, "worker arrival rate (§6)", low=0.0),
            "completion-rate": Param(
                "completion-rate", float, "rate at which a worker finishes a task (§6)", low=0.0
            ),
            "label-cap": Param("label-cap", int, "most labels per task in the index tables", low=1),
            "max-lookahead": Param("max-lookahead", int, "longest look-ahead of the index", low=1),
            "grid-points": Param("grid-points", int, "points of the multiplier grid", low=2),
            "cache-dir": Param("cache-dir", str, "directory of the index-table cache"),
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
        "UCB1-tuned: the task whose confidence interval reaches deepest across its threshold; "
        "random ties (tie-break=first: smallest index)",
        params={"tie-break": TIE_BREAK},
        paper=HU_FRAZIER,
    )
)

# ---- Gittins baselines of Chen et al. (2013) §3.1, §7 (policies/gittins.py) ----------------
from crowdbudget.policies.gittins import (  # noqa: E402
    SOLVERS,
    FiniteHorizonGittins,
    GittinsInf,
)

_SOLVER = Param("solver", str, "root finder of the index (calibration)", choices=SOLVERS)
#: root-finding steps per cell of a Gittins index table (the calibration's bisection to
#: double precision takes about this many)
GITTINS_STEPS_PER_CELL = 50


def _gittins_cost(values: Mapping[str, Any], size: ProblemSize) -> float:
    """The finite-horizon index table: one cell per (labels, positives) pair within the
    horizon (the budget in labels), about T²/2 cells, each a root finding."""
    horizon = size.budget_labels
    return items_by_classes(values, size) + GITTINS_STEPS_PER_CELL * horizon * horizon / 2


register_policy(
    PolicySpec(
        "gittins",
        FiniteHorizonGittins,
        "finite-horizon Gittins index rule, horizon = labels left (calibration, Nino-Mora 2011); "
        "random ties (tie-break=first: smallest index)",
        params={"solver": _SOLVER, "tie-break": TIE_BREAK},
        paper=CHEN2013,
        cost=_gittins_cost,
    )
)
register_policy(
    PolicySpec(
        "gittins-inf",
        GittinsInf,
        "infinite-horizon discounted Gittins index, alpha = 1 - 1/T (Xie & Frazier 2013); random "
        "ties (tie-break=first: smallest index)",
        params={
            "truncation": Param(
                "truncation", float, "truncation depth of the index, per budget unit", low=0.0
            ),
            "truncation-rule": Param(
                "truncation-rule", str, "truncation depth rule", choices=("adaptive", "fixed")
            ),
            "max-levels": Param("max-levels", int, "largest truncation depth", low=1),
            "solver": _SOLVER,
            "tie-break": TIE_BREAK,
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
from crowdbudget.policies.bandits.bbta import CONTEXT_MODES  # noqa: E402

ZHANG2015 = "Zhang, Ma, Sugiyama (2015) Bandit-Based Task Assignment for Heterogeneous ..."
_CONTEXTS = Param(
    "contexts", str, "the problem's task contexts, or one context for all", choices=CONTEXT_MODES
)

register_policy(
    PolicySpec(
        "bbta",
        BanditTaskAssignment,
        "BBTA (Algorithm 1): pure exploration, per-context Exp3 worker choice, weighted vote; "
        "random ties among the least confident tasks (tie-break=first: smallest index)",
        params={
            "n-explore": Param("n-explore", int, "exploration labels per worker (N')", low=0),
            "contexts": _CONTEXTS,
            "tie-break": TIE_BREAK,
        },
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
        params={
            "eps": Param("eps", float, "fraction of the best upper interval a worker must reach"),
            "alpha": Param("alpha", float, "level of the Student-t interval"),
        },
        paper=ZHANG2015,
    )
)
register_policy(
    PolicySpec(
        "crowdsense",
        CrowdSense,
        "CrowdSense: 2 best + 1 random worker, more while the score test holds (spend set by eps)",
        params={
            "eps": Param("eps", float, "score-test threshold (sets the spend)"),
            "smoothing": Param("smoothing", float, "smoothing of the worker-quality estimates"),
        },
        paper=ZHANG2015,
    )
)
# "OptKG (Multi.)" of §5.1; ``opt-kg:per-context`` is the spelling the BBTA reports use
register_policy(
    PolicySpec(
        "opt-kg-per-context",
        PerContextOptKG,
        "OptKG (Multi.) of Zhang et al. 2015: one-coin OptKG per task context, sub-budgets by "
        "context size; random ties among pairs (tie-break=first: smallest pair index)",
        params={"contexts": _CONTEXTS, "tie-break": TIE_BREAK},
        paper=ZHANG2015,
        aliases=("opt-kg:per-context",),
    )
)

# ---- Chen et al. (2013) §7 baselines ending with an aggregator (policies/aggregating.py) ------
from crowdbudget.policies.aggregating import (  # noqa: E402
    KOS_REWIRING_PASSES,
    KOSAllocation,
    RandomBP,
)


def _kos_cost(values: Mapping[str, Any], size: ProblemSize) -> float:
    """The (l, r)-regular graph built at the first decision: one edge per label of the
    budget, rewired in at most ``KOS_REWIRING_PASSES`` passes over every edge."""
    return items_by_classes(values, size) + KOS_REWIRING_PASSES * size.budget_labels


register_policy(
    PolicySpec(
        "kos",
        KOSAllocation,
        "random (l, r)-regular item-worker graph for the budget + KOS inference (Karger et al.)",
        params={
            "labels-per-worker": Param("labels-per-worker", int, "r: labels per worker", low=1),
            "n-iter": Param("n-iter", int, "message-passing iterations", low=1),
            "inference": Param(
                "inference",
                str,
                "KOS worker messages: sum (the paper) or mean",
                choices=("sum", "mean"),
            ),
        },
        server_only=frozenset({"n-iter"}),
        paper=CHEN2013,
        cost=_kos_cost,
    )
)
register_policy(
    PolicySpec(
        "random-bp",
        RandomBP,
        "uniformly random items + belief propagation (Liu, Peng, Ihler 2012)",
        params={
            "alpha": Param("alpha", float, "Beta prior a of a worker's reliability", low=0.0),
            "beta": Param("beta", float, "Beta prior b of a worker's reliability", low=0.0),
            "n-nodes": Param("n-nodes", int, "grid nodes of the reliability messages", low=2),
        },
        server_only=frozenset({"n-nodes"}),
        paper=CHEN2013,
    )
)

# ---- Li, Ma, Gao, Su, Quinn (2016): Requallo and label uncertainty --------------------------
from crowdbudget.policies.label_uncertainty import LabelUncertainty  # noqa: E402
from crowdbudget.policies.requallo import WORKER_MODES, RequalloPolicy  # noqa: E402

LI2016 = "Li, Ma, Gao, Su, Quinn (2016) Crowdsourcing High Quality Labels with a Tight Budget"

register_policy(
    PolicySpec(
        "requallo",
        RequalloPolicy,
        "Requallo: largest optimistic completeness reward under a quality requirement, stops "
        "when no item gains (default fisher=0.2:max-labels=14); random ties (tie-break=first: "
        "Algorithm 1's argmax)",
        params={
            "ratio": Param("ratio", float, "requirement: majority-to-minority vote ratio"),
            "fisher": Param("fisher", float, "requirement: Fisher exact test p-value"),
            "min-labels": Param("min-labels", int, "requirement: fewest labels per item", low=0),
            "max-labels": Param("max-labels", int, "most labels per item", low=1),
            "max-total": Param("max-total", int, "most labels in all", low=1),
            "pseudo-labels": Param("pseudo-labels", float, "pseudo-votes per class", low=0.0),
            "workers": Param(
                "workers",
                str,
                "worker handling: none, spammer filter, weighted votes",
                choices=WORKER_MODES,
            ),
            "spammer-alpha": Param("spammer-alpha", float, "spammer test level", low=0.0, high=1.0),
            "spammer-min-labels": Param(
                "spammer-min-labels", int, "labels before a worker is tested", low=0
            ),
            "tie-break": TIE_BREAK,
        },
        paper=LI2016,
    )
)
register_policy(
    PolicySpec(
        "label-uncertainty",
        LabelUncertainty,
        "label uncertainty LU (Sheng, Provost, Ipeirotis 2008 eq. 4): largest Beta tail "
        "probability of the minority class; random ties (tie-break=first: smallest index)",
        params={"tie-break": TIE_BREAK},
        paper=LI2016,
    )
)


# ---- Rangi & Franceschetti (2018): workers with prices and capacities ----------------------
from crowdbudget.policies.bandits.kube import PACES, BKubePolicy  # noqa: E402
from crowdbudget.policies.bandits.per_task import FEEDBACKS  # noqa: E402

_FEEDBACK = Param(
    "feedback", str, "p_hat from agreement with the estimate, or leave-one-out", choices=FEEDBACKS
)

RANGI2018 = (
    "Rangi, Franceschetti (2018) Multi-Armed Bandit Algorithms for Crowdsourcing Systems with "
    "Online Estimation of Workers' Ability"
)
register_policy(
    PolicySpec(
        "b-kube",
        BKubePolicy,
        "B-KUBE (Algorithm 1): one task at a time, worker by a UCB bounded knapsack on price "
        "and capacity, majority vote, next task once confident (§6)",
        params={
            "stop-constant": Param(
                "stop-constant", float, "C of the move-to-next-task rule", low=0.0
            ),
            "max-labels": Param(
                "max-labels", int, "most labels per task (default: the stop rule alone)", low=1
            ),
            "pace": Param(
                "pace", str, "none (the paper) or budget (our paced variant)", choices=PACES
            ),
            "feedback": _FEEDBACK,
        },
        defaults={},
        paper=RANGI2018,
    )
)


from crowdbudget.policies.bandits.epsilon_first import (  # noqa: E402
    LAYOUTS,
    EpsilonFirstPolicy,
)

_STOP = Param("stop-constant", float, "C of the move-to-next-task rule (exploration)", low=0.0)
_LAYOUT = Param("layout", str, "exploitation layout: spread (faithful) or queue", choices=LAYOUTS)
_EPSILON = Param("epsilon", float, "share of the budget for exploration", low=0.0, high=1.0)
for _id, _summary, _defaults, _params in (
    (
        "bounded-eps-first",
        "bounded ε-first (Tran-Thanh et al.): ε·B round-robin exploration, then the greedy "
        "bounded knapsack on v_hat in one step (§6 benchmark)",
        {"exploitation": "knapsack", "exploration": "budget"},
        {"epsilon": _EPSILON, "stop-constant": _STOP, "layout": _LAYOUT, "feedback": _FEEDBACK},
    ),
    (
        "eps-first",
        "budget-limited ε-first: ε·B round-robin exploration, then everything to the best "
        "v_hat / price in one step (§6 benchmark)",
        {"exploitation": "best", "exploration": "budget"},
        {"epsilon": _EPSILON, "stop-constant": _STOP, "layout": _LAYOUT, "feedback": _FEEDBACK},
    ),
    (
        "trailsourcing",
        "trailsourcing: one evaluation per worker, then the greedy bounded knapsack in one "
        "step (§6 benchmark)",
        {"exploitation": "knapsack", "exploration": "one-round"},
        {"stop-constant": _STOP, "layout": _LAYOUT, "feedback": _FEEDBACK},
    ),
):
    register_policy(
        PolicySpec(
            _id,
            EpsilonFirstPolicy,
            _summary,
            params=_params,
            defaults=_defaults,
            paper=RANGI2018,
        )
    )


# ---- every policy: verdict=<aggregator> is not the policy's: registry.split_verdict and
# policies/verdict.py build the verdict beside it (DESIGN §11) -------------------------------
from crowdbudget.policies.verdict import make_verdict, verdict_refusal  # noqa: E402

# the registry builds and checks verdicts through these (it imports no component itself)
POLICIES.hooks.update(make_verdict=make_verdict, verdict_refusal=verdict_refusal)
