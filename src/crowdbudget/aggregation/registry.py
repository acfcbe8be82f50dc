"""Aggregator ids: kebab-case names with parameters after colons, like policy ids.

``make_aggregator("ds:n-iter=50")`` is ``DawidSkene(n_iter=50)``. Ids:

| id | aggregator | parameters |
|---|---|---|
| ``mv`` | :class:`MajorityVote` | — |
| ``wmv`` | :class:`WeightedMajorityVote` (agreement-with-majority weights) | — |
| ``ds`` | :class:`DawidSkene` | ``n-iter``, ``tol`` |
| ``one-coin-em`` | :class:`OneCoinDawidSkene` | ``n-iter``, ``tol`` |
| ``kos`` | :class:`KOS` (the paper's sum messages) | ``n-iter``, ``tol``, ``init`` |
| ``kos-mean`` | :class:`KOS` with degree-normalised worker messages | as ``kos`` |
| ``bp`` | :class:`BeliefPropagation` | ``alpha``, ``beta``, ``n-nodes``, ``n-iter``, ``tol``, |
|  |  | ``damping`` |
| ``bayes`` | :class:`BayesRuleAggregator` (uniform Dirichlet prior) | ``prior``, ``threshold`` |

Every id also takes ``seed`` (tie-breaking, and KOS's random start). Aliases with crowd-kit's
long names: ``majority-vote``, ``weighted-majority-vote``, ``dawid-skene``,
``one-coin-dawid-skene``, ``belief-propagation``.

Example:
    >>> make_aggregator("ds:n-iter=50")
    DawidSkene(rng=0, n_iter=50, tol=1e-05)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from crowdbudget.aggregation.base import Aggregator
from crowdbudget.aggregation.belief_propagation import BeliefPropagation
from crowdbudget.aggregation.dawid_skene import DawidSkene
from crowdbudget.aggregation.kos import KOS
from crowdbudget.aggregation.majority_vote import BayesRuleAggregator, MajorityVote
from crowdbudget.aggregation.one_coin_em import OneCoinDawidSkene
from crowdbudget.aggregation.weighted_majority_vote import WeightedMajorityVote
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.registry import parse


@dataclass(frozen=True)
class AggregatorSpec:
    """A registered aggregator: id, factory, parameter converters, fixed keyword arguments."""

    aggregator_id: str
    factory: Callable[..., Aggregator]
    summary: str
    params: Mapping[str, Callable[[str], Any]] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    binary_only: bool = False


_EM = {"n-iter": int, "tol": float}

_REGISTRY: dict[str, AggregatorSpec] = {}
_ALIASES = {
    "majority-vote": "mv",
    "weighted-majority-vote": "wmv",
    "dawid-skene": "ds",
    "one-coin-dawid-skene": "one-coin-em",
    "belief-propagation": "bp",
}


def register_aggregator(spec: AggregatorSpec) -> AggregatorSpec:
    """Add ``spec`` to the registry (its id must be new)."""
    if spec.aggregator_id in _REGISTRY or spec.aggregator_id in _ALIASES:
        raise ValueError(f"aggregator id {spec.aggregator_id!r} is already registered")
    _REGISTRY[spec.aggregator_id] = spec
    return spec


def registered_aggregators() -> dict[str, AggregatorSpec]:
    """Every registered aggregator, by id (aliases not repeated)."""
    return dict(_REGISTRY)


def _parse(text: str) -> tuple[str, dict[str, str]]:
    """The name and raw parameters of ``text``, by the one id grammar of
    :func:`crowdbudget.registry.parse` (aggregator names have no colon)."""
    spec = parse(text)
    name, _, rest = spec.id.partition(":")
    if rest:
        raise InvalidParameterError(
            f"aggregator parameter {rest!r} in {text!r} must look like key=value"
        )
    return name, spec.raw


def make_aggregator(text: str) -> Aggregator:
    """Build the aggregator named by ``text`` (an id with optional ``:key=value`` params)."""
    name, raw = _parse(text)
    spec = _REGISTRY.get(_ALIASES.get(name, name))
    if spec is None:
        allowed = ", ".join([*_REGISTRY, *_ALIASES])
        raise InvalidParameterError(f"unknown aggregator {name!r}; aggregators: {allowed}")
    kwargs = dict(spec.defaults)
    converters: dict[str, Callable[[str], Any]] = {**spec.params, "seed": int}
    for key, value in raw.items():
        convert = converters.get(key)
        if convert is None:
            allowed = ", ".join(sorted(converters))
            raise InvalidParameterError(
                f"aggregator {name!r} has no parameter {key!r}; its parameters: {allowed}"
            )
        try:
            converted = convert(value)
        except (TypeError, ValueError):
            raise InvalidParameterError(
                f"aggregator {name!r}: cannot read {key}={value!r}"
            ) from None
        kwargs["rng" if key == "seed" else key.replace("-", "_")] = converted
    return spec.factory(**kwargs)


def _prior(value: str) -> float | list[float]:
    parts = [float(v) for v in value.replace(";", ",").split(",") if v.strip()]
    return parts[0] if len(parts) == 1 else parts


for _spec in (
    AggregatorSpec("mv", MajorityVote, "majority vote, ties at random"),
    AggregatorSpec(
        "wmv", WeightedMajorityVote, "majority vote weighted by agreement with the majority"
    ),
    AggregatorSpec("ds", DawidSkene, "Dawid-Skene EM, full confusion matrices", _EM),
    AggregatorSpec("one-coin-em", OneCoinDawidSkene, "one-coin Dawid-Skene EM (one accuracy)", _EM),
    AggregatorSpec(
        "kos",
        KOS,
        "Karger-Oh-Shah iterative inference, normalised messages (binary)",
        {**_EM, "init": str},
        binary_only=True,
    ),
    AggregatorSpec(
        "kos-mean",
        KOS,
        "KOS with worker messages divided by the worker's degree (binary)",
        {**_EM, "init": str},
        defaults={"worker_messages": "mean"},
        binary_only=True,
    ),
    AggregatorSpec(
        "bp",
        BeliefPropagation,
        "belief propagation, Beta(alpha, beta) worker reliability (Liu, Peng, Ihler 2012)",
        {
            **_EM,
            "alpha": float,
            "beta": float,
            "n-nodes": int,
            "damping": float,
        },
    ),
    AggregatorSpec(
        "bayes",
        BayesRuleAggregator,
        "Bayes rule on the Beta/Dirichlet posterior of the vote counts (Chen et al. Prop. 2.1)",
        {"prior": _prior, "threshold": float},
    ),
):
    register_aggregator(_spec)
