"""Policy ids: kebab-case names with parameters after colons (DESIGN §6).

``cvar-kg:alpha=0.3`` is the CVaR-α KG policy with α = 0.3; ``kg-random`` is randomized KG.
Parameters are separated by colons so that commas can separate policies on the command line.
Later modules register their policies with :func:`register_policy`.

A registered id may itself contain a colon when it names a variant the papers report under its
own name (``opt-kg:per-context``, Zhang, Ma, Sugiyama 2015 §5.1 "OptKG (Multi.)"): the longest
colon-prefix of the text that is a registered id is the name, the rest are ``key=value``
parameters (``opt-kg:per-context:contexts=single``). Plain ids keep the old meaning, since a
``key=value`` part is never a registered id.

Example:
    >>> make_policy("cvar-kg:alpha=0.3")
    CVaRKnowledgeGradient(alpha=0.3, tie_break='first')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from crowdbudget.exceptions import InvalidParameterError, UnknownPolicyError
from crowdbudget.policies.base import AllocationPolicy


@dataclass(frozen=True)
class PolicySpec:
    """A registered policy: its id, how to build it, which parameters it takes."""

    policy_id: str
    factory: Callable[..., AllocationPolicy]
    summary: str
    params: Mapping[str, Callable[[str], Any]] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    paper: str = ""
    #: parameters a network client may not set (file-system paths, cache locations, grid and
    #: state-space sizes: anything that names a place on the server or scales its work); the
    #: service refuses them (:func:`check_network_policy`), the CLI and library take them
    server_only: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = self.server_only - set(self.params)
        if unknown:
            raise ValueError(f"{self.policy_id}: server_only names no parameter: {sorted(unknown)}")


_REGISTRY: dict[str, PolicySpec] = {}


def register_policy(spec: PolicySpec) -> PolicySpec:
    """Add ``spec`` to the registry (its id must be new)."""
    if spec.policy_id in _REGISTRY:
        raise ValueError(f"policy id {spec.policy_id!r} is already registered")
    _REGISTRY[spec.policy_id] = spec
    return spec


def registered_policies() -> dict[str, PolicySpec]:
    """Every registered policy, by id."""
    _load_builtin_policies()
    return dict(_REGISTRY)


def parse_policy_id(text: str) -> tuple[str, dict[str, str]]:
    """Split ``name:key=value:...`` into the name and the raw parameter strings.

    The name is the longest colon-prefix of ``text`` that is a registered id (a variant id such
    as ``opt-kg:per-context``), else the part before the first colon.
    """
    _load_builtin_policies()
    parts = [part.strip() for part in text.strip().split(":")]
    if not parts[0]:
        raise UnknownPolicyError(f"empty policy id in {text!r}")
    n_name = 1
    for end in range(len(parts), 1, -1):
        if ":".join(parts[:end]) in _REGISTRY:
            n_name = end
            break
    name = ":".join(parts[:n_name])
    params: dict[str, str] = {}
    for part in parts[n_name:]:
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise InvalidParameterError(
                f"policy parameter {part!r} in {text!r} must look like key=value"
            )
        params[key.strip()] = value.strip()
    return name, params


def make_policy(text: str) -> AllocationPolicy:
    """Build the policy named by ``text`` (an id with optional ``:key=value`` parameters)."""
    _load_builtin_policies()
    name, raw = parse_policy_id(text)
    spec = _REGISTRY.get(name)
    if spec is None:
        allowed = ", ".join(sorted(_REGISTRY))
        raise UnknownPolicyError(f"unknown policy {name!r}; registered policies: {allowed}")
    # ``final=<aggregator>`` works on every policy: allocate as usual, label by the aggregator
    # at the end (crowdbudget.policies.final_aggregation)
    final = raw.pop("final", None)
    final_workers = raw.pop("final-workers", None)
    if final_workers is not None and final is None:
        raise InvalidParameterError(
            "final-workers=... needs final=<aggregator> (e.g. final=one-coin-em)"
        )
    kwargs = dict(spec.defaults)
    for key, value in raw.items():
        convert = spec.params.get(key)
        if convert is None:
            allowed = ", ".join(sorted(spec.params)) or "none"
            raise InvalidParameterError(
                f"policy {name!r} has no parameter {key!r}; its parameters: {allowed}"
            )
        try:
            kwargs[key.replace("-", "_")] = convert(value)
        except (TypeError, ValueError):
            raise InvalidParameterError(f"policy {name!r}: cannot read {key}={value!r}") from None
    policy = spec.factory(**kwargs)
    if final is not None:
        from crowdbudget.policies.final_aggregation import FinalAggregation

        policy = FinalAggregation(policy, final, final_workers or "as-given")
    policy.validate_params()
    return policy


def check_network_policy(text: str) -> None:
    """Refuse a policy id from a network client that sets a server-only parameter.

    A network client (the HTTP service) may choose a policy and its statistical parameters,
    never the server's configuration: parameters declared ``server_only`` (cache
    directories, grid sizes, state-space limits) keep their defaults. Raises
    :class:`InvalidParameterError` naming the first such parameter; the id must otherwise be
    valid (unknown ids and bad values raise as in :func:`make_policy`)."""
    name, raw = parse_policy_id(text)
    spec = _REGISTRY.get(name)
    if spec is None:
        make_policy(text)  # raises the usual unknown-policy error
        return
    for key in raw:
        if key in spec.server_only:
            raise InvalidParameterError(
                f"policy parameter {key!r} of {name!r} is a server setting; an API client "
                f"may not set it (allowed here: "
                + (", ".join(sorted(set(spec.params) - spec.server_only)) or "none")
                + ")"
            )


_LOADED = False


def _load_builtin_policies() -> None:
    """Register the built-in policies once (imported lazily to avoid import cycles)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    from crowdbudget.policies import builtin  # noqa: F401  (registers on import)
