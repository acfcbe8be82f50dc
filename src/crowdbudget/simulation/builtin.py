"""Registration of the built-in synthetic worlds under versioned ids (DESIGN §11; Gymnasium's
``register(id="...-v0", entry_point=...)``): one parameter table per id
(:data:`crowdbudget.registry.ENVIRONMENTS`, imported on first use).

A version suffix names a world's random draws: the same id, parameters and seed give the same
world in every release; a change of what a world draws gets a new version (``-v1``), the old
one staying as it was. ``n-items`` is every world's size (``crowdbudget simulate --items``).

Example:
    >>> from crowdbudget.registry import make_environment
    >>> env = make_environment("priced-workers-v0:worker-set=B:n-items=50")
    >>> env.problem(100.0).workers.n_workers
    20
"""

from __future__ import annotations

from dataclasses import replace

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.registry import ENVIRONMENTS, Capabilities, ComponentSpec, Param, read_pair
from crowdbudget.simulation.contextual import WORKER_MODELS
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.simulation.synthetic_worlds import (
    WORKER_SETS,
    PricedWorkerEnvironment,
    SyntheticContextualEnvironment,
    SyntheticFeatureEnvironment,
)
from crowdbudget.simulation.workers import WorkerPrior

CHEN2013 = (
    "Chen, Lin, Zhou (2013) Optimistic Knowledge Gradient Policy for Optimal Budget Allocation "
    "in Crowdsourcing"
)
ZHANG2015 = (
    "Zhang, Ma, Sugiyama (2015) Bandit-Based Task Assignment for Heterogeneous Crowdsourcing"
)
RANGI2018 = (
    "Rangi, Franceschetti (2018) Multi-Armed Bandit Algorithms for Crowdsourcing Systems with "
    "Online Estimation of Workers' Ability"
)

#: the default size of a world (``crowdbudget simulate`` always sets it from ``--items``)
DEFAULT_ITEMS = 100

N_ITEMS = Param("n-items", int, "number of items K", DEFAULT_ITEMS, low=1, network_settable=False)
PRIOR = Param("prior", read_pair, "Beta prior a,b of theta (a: class 1 count)", (1.0, 1.0))
THRESHOLD = Param("threshold", float, "threshold d: the truth is 1{theta >= d}", 0.5, low=0, high=1)
RELIABILITY = Param(
    "reliability",
    read_pair,
    "Beta prior c,d each worker's accuracy is drawn from (per world)",
    (4.0, 1.0),
)
_BERNOULLI_PARAMS = {"n-items": N_ITEMS, "prior": PRIOR, "threshold": THRESHOLD}


def _positive_pair(pair: tuple[float, float], name: str) -> tuple[float, float]:
    if min(pair) <= 0:
        raise InvalidParameterError(f"{name} takes two numbers > 0, got {pair[0]:g},{pair[1]:g}")
    return pair


def bernoulli(
    n_items: int = DEFAULT_ITEMS,
    prior: tuple[float, float] = (1.0, 1.0),
    threshold: float = 0.5,
    worker_model: str | None = None,
    n_workers: int = 10,
    reliability: tuple[float, float] = (4.0, 1.0),
) -> SyntheticBernoulliEnvironment:
    """θ_i ~ Beta(a, b) (``prior`` = a, b), truth 1{θ_i >= d}; anonymous noiseless workers, or
    a pool of ``n_workers`` ``worker_model`` workers drawn per world from Beta(``reliability``)."""
    a, b = _positive_pair(prior, "prior")
    workers = None
    if worker_model is not None:
        c, d = _positive_pair(reliability, "reliability")
        workers = WorkerPrior(n_workers, reliability_prior=(c, d), model=worker_model)
    # columns of a Problem's prior: class 0 (b), class 1 (a)
    return SyntheticBernoulliEnvironment(
        n_items, prior=(b, a), thresholds=threshold, workers=workers
    )


def _register(entry: ComponentSpec) -> None:
    # every world's size defaults to the table's n-items (the classes take it positionally)
    ENVIRONMENTS.register(replace(entry, defaults={"n_items": DEFAULT_ITEMS, **entry.defaults}))


_register(
    ComponentSpec(
        "bernoulli-v0",
        bernoulli,
        "soft labels theta ~ Beta(a, b), anonymous noiseless workers (label ~ Bernoulli(theta)), "
        "truth 1{theta >= d} (simulate's default world)",
        params=_BERNOULLI_PARAMS,
        paper=CHEN2013 + ", §2",
    )
)

_WORKER_PARAMS = {
    **_BERNOULLI_PARAMS,
    "n-workers": Param("n-workers", int, "number of workers", 10, low=1),
    "reliability": RELIABILITY,
}

_register(
    ComponentSpec(
        "one-coin-workers-v0",
        bernoulli,
        "bernoulli-v0 answered by a pool of one-coin workers (accuracy rho_j ~ Beta(c, d), "
        "drawn per world)",
        params=_WORKER_PARAMS,
        defaults={"worker_model": "one-coin"},
        paper=CHEN2013 + ", §4 and §7.1",
    )
)

_register(
    ComponentSpec(
        "two-coin-workers-v0",
        bernoulli,
        "bernoulli-v0 answered by a pool of two-coin workers (sensitivity and specificity each "
        "~ Beta(c, d), drawn per world)",
        params=_WORKER_PARAMS,
        defaults={"worker_model": "two-coin"},
        paper=CHEN2013 + ", §4",
    )
)

_register(
    ComponentSpec(
        "contextual-workers-v0",
        SyntheticContextualEnvironment,
        "binary tasks with a context each (uniform), workers good on one context: spammer-hammer, "
        "one-coin or malicious; each worker labels a task at most once",
        params={
            "n-items": N_ITEMS,
            "n-contexts": Param("n-contexts", int, "number of contexts S", 3, low=1),
            "n-workers": Param("n-workers", int, "number of workers K", 30, low=1),
            "workers": Param(
                "workers", str, "the worker model of §5.1", "one-coin", choices=WORKER_MODELS
            ),
        },
        paper=ZHANG2015 + ", §5.1",
    )
)

_register(
    ComponentSpec(
        "logistic-features-v0",
        SyntheticFeatureEnvironment,
        "items with features x ~ N(0, I), theta = sigmoid(w.x) with w ~ N(0, weight-var I), "
        "anonymous workers, truth 1{theta >= 1/2}",
        params={
            "n-items": N_ITEMS,
            "n-features": Param("n-features", int, "number of features", 5, low=1),
            "weight-var": Param(
                "weight-var", float, "prior variance of the world's weights w", 1.0, low=0
            ),
        },
        paper=CHEN2013 + ", §5",
    )
)

_register(
    ComponentSpec(
        "priced-workers-v0",
        PricedWorkerEnvironment,
        "binary tasks, workers with prices and capacities (p_k ~ U[0.5, 1], c_k ~ U[v_k, 1+v_k], "
        "M_k = floor(0.6 n-items)): set A, or set B with spammers; the budget is money",
        params={
            "n-items": N_ITEMS,
            "worker-set": Param(
                "worker-set",
                str,
                "A (all drawn workers) or B (the last n-spammers are spammers, p = 0.5)",
                "A",
                choices=WORKER_SETS,
            ),
            "n-workers": Param("n-workers", int, "number of workers", 20, low=1),
            "n-spammers": Param("n-spammers", int, "spammers in set B", 5, low=0),
        },
        capabilities=Capabilities(supports_pull=False),
        paper=RANGI2018 + ", §6",
    )
)
