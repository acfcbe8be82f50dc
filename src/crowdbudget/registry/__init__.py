"""Component ids: one grammar, one declarative parameter table per component (DESIGN §6, §11).

**Grammar.** ``name[:key=value]*`` — a kebab-case name, then parameters after colons (colons,
so that commas can separate several ids on the command line). :func:`parse` splits a text into
a :class:`Spec` without consulting any table: the name is every leading part without ``=``
(``opt-kg:per-context`` is the two-word name of an alias), the rest must be ``key=value``.

**Tables.** A component (a policy today; aggregators, requirements, environments and
reproductions are the other kinds of DESIGN §11) registers a :class:`ComponentSpec`: its id,
its factory, a one-line summary, a parameter table of :class:`Param` (how to read the value,
allowed range or choices, default, doc, and whether a network client may set it — scikit-learn's
``_parameter_constraints`` in spirit) and its :class:`Capabilities` (what problem it needs and
what it does: ``binary_only``, ``needs_workers``, ``needs_features``, ``needs_contexts``,
``unit_prices_only``, ``chooses_workers``, ``supports_pull``, ``budget_aware``). The table
drives validation (:meth:`Registry.spec`), ``crowdbudget policies [--json]`` and
:meth:`Spec.check`, which answers whether a problem suits the component with one line naming
the id the user typed.

**Layering.** This module imports no component: a :class:`Registry` is told the name of the
module that registers its built-in entries (``crowdbudget.policies.builtin``) and imports it on
first use, as a plugin (Gymnasium's ``register(id=..., entry_point=...)``). Policies import
this module, never the reverse.

Example:
    >>> make_policy("cvar-kg:alpha=0.3")
    CVaRKnowledgeGradient(alpha=0.3, tie_break='first')
    >>> spec = parse_policy("opt-kg:posterior=one-coin")
    >>> spec.capabilities.chooses_workers
    True
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError, UnknownPolicyError

if TYPE_CHECKING:  # types only: the registry imports no component at run time
    from crowdbudget.policies.base import AllocationPolicy
    from crowdbudget.simulation.environment import LabelingEnvironment
    from crowdbudget.types import Problem


from crowdbudget.registry.specs import (  # noqa: F401  (re-exported)
    _REGISTRIES,
    Capabilities,
    CapabilityRule,
    ComponentSpec,
    CostRule,
    DeclaredByClass,
    Param,
    PolicySpec,
    ProblemSize,
    Spec,
    items_by_classes,
    parse,
    read_flag,
    read_pair,
)

# --------------------------------------------------------------------------- registries


class Registry:
    """The entries of one kind of component, the one place that reads their ids.

    Args:
        kind: ``"policy"``, ``"aggregator"``, ... (used in messages and by :class:`Spec`).
        builtin: the module that registers the built-in entries, imported on first use.
        common: parameters every entry takes (e.g. a policy's ``final=``), read by the
            registry and handed to ``finish``.
        unknown_error: the exception class for an unknown id.
        plural: the kind's plural in messages (default: kind + "s").
    """

    def __init__(
        self,
        kind: str,
        builtin: str | None = None,
        *,
        common: Iterable[Param] = (),
        unknown_error: type[CrowdBudgetError] = InvalidParameterError,
        plural: str | None = None,
    ) -> None:
        self.kind = kind
        self.plural = plural or f"{kind}s"
        self._builtin = builtin
        self._loaded = builtin is None
        self._entries: dict[str, ComponentSpec] = {}
        self._aliases: dict[str, str] = {}
        self.common: dict[str, Param] = {p.name: p for p in common}
        self.unknown_error = unknown_error
        #: called as ``finish(component, common_values)`` after the factory (set by the module
        #: that registers the entries, e.g. to apply a policy's ``final=`` aggregator)
        self.finish: Callable[[Any, Mapping[str, Any]], Any] | None = None
        #: extra capability rule for the common parameters (e.g. ``final=kos`` is binary)
        self.common_capabilities: Callable[[Capabilities, Mapping[str, Any]], Capabilities]
        self.common_capabilities = lambda caps, values: caps
        #: parameters typed under an old name (old → new): still read, the new spelling
        #: printed once per text (e.g. a policy's ``final=`` is now ``verdict=``)
        self.renamed: dict[str, str] = {}
        #: functions the plugin module installs for this registry's callers (the policies'
        #: plugin installs ``make_verdict`` and ``verdict_refusal``): reached through
        #: :meth:`hook`, so the registry calls upward only through its declared plugin
        self.hooks: dict[str, Callable[..., Any]] = {}
        _REGISTRIES[kind] = self

    def hook(self, name: str) -> Callable[..., Any]:
        """The function the plugin module installed under ``name`` (the plugin is loaded
        first, as for an entry)."""
        if self._builtin is not None:
            self._load()
        return self.hooks[name]

    def _load(self) -> None:
        if self._loaded:
            return
        assert self._builtin is not None
        # thread-safe: while another thread imports the module, the import system makes this
        # one wait for it; loaded means the module's import has *finished* — a lookup made
        # while it runs (in its own thread) sees the entries registered so far, as before,
        # but must not tell other threads the registry is complete (they would find ids
        # missing: seen with ``reproduce --all``'s threads)
        module = importlib.import_module(self._builtin)
        self._loaded = not getattr(getattr(module, "__spec__", None), "_initializing", False)

    def register(self, entry: ComponentSpec) -> ComponentSpec:
        """Add ``entry`` (its id and aliases must be new)."""
        for name in (entry.component_id, *entry.aliases):
            if name in self._entries or name in self._aliases:
                raise ValueError(f"{self.kind} id {name!r} is already registered")
        self._entries[entry.component_id] = entry
        for alias in entry.aliases:
            self._aliases[alias] = entry.component_id
        return entry

    def entries(self) -> dict[str, ComponentSpec]:
        """Every registered entry, by id."""
        self._load()
        return dict(self._entries)

    def aliases(self) -> dict[str, str]:
        """Every alias and the id it names."""
        self._load()
        return dict(self._aliases)

    def entry(self, name: str) -> ComponentSpec:
        self._load()
        entry = self._entries.get(self._aliases.get(name, name))
        if entry is None:
            allowed = ", ".join(sorted(self._entries))
            raise self.unknown_error(
                f"unknown {self.kind} {name!r}; registered {self.plural}: {allowed}"
            )
        return entry

    def spec(self, text: str | Spec) -> Spec:
        """``text`` parsed, its id resolved and every parameter checked against the table."""
        if isinstance(text, Spec) and text.kind == self.kind:
            return text
        parsed = text if isinstance(text, Spec) else parse(text)
        self._load()
        if ":" in parsed.id and parsed.id not in self._aliases:
            first, _, rest = parsed.id.partition(":")
            if first in self._entries or first in self._aliases:
                raise InvalidParameterError(
                    f"parameter {rest!r} in {str(parsed)!r} must look like key=value"
                )
        entry = self.entry(parsed.id)
        params = parsed.params
        if any(key in self.renamed for key, _ in params):
            params = self._rename(parsed)
        spec = Spec(id=entry.component_id, params=params, text=str(parsed), kind=self.kind)
        self.values(spec)
        return spec

    def _rename(self, parsed: Spec) -> tuple[tuple[str, str], ...]:
        """``parsed``'s parameters under their new names; prints the new spelling once."""
        params = tuple((self.renamed.get(key, key), value) for key, value in parsed.params)
        keys = [key for key, _ in params]
        if len(set(keys)) < len(keys):
            raise InvalidParameterError(
                f"{str(parsed)!r} gives a parameter under its old and its new name"
            )
        text = str(parsed)
        if text not in _RENAME_NOTICES:
            _RENAME_NOTICES.add(text)
            new = ":".join([parsed.id, *(f"{k}={v}" for k, v in params)])
            typed = {k for k, _ in parsed.params} & set(self.renamed)
            old = ", ".join(f"{o}=" for o in sorted(typed))
            warnings.warn(
                f"{text!r}: {old} is an old spelling; write {new!r}", FutureWarning, stacklevel=4
            )
        return params

    def values(self, spec: Spec) -> dict[str, Any]:
        """Every parameter of ``spec`` read through its row (common ones included)."""
        entry = self.entry(spec.id)
        owner = f"{self.kind} {_typed_name(spec)!r}"
        out: dict[str, Any] = {}
        for key, value in spec.params:
            row = entry.params.get(key) or self.common.get(key)
            if row is None:
                allowed = ", ".join(sorted(entry.params)) or "none"
                raise InvalidParameterError(
                    f"{owner} has no parameter {key!r}; its parameters: {allowed}"
                )
            out[key] = row.convert(value, owner)
        return out

    def cost(self, spec: Spec, size: ProblemSize) -> float:
        """The declared cost of ``spec`` on a problem of ``size`` (:attr:`ComponentSpec.cost`)."""
        values = self.values(spec)
        own = {k: v for k, v in values.items() if k not in self.common}
        return float(self.entry(spec.id).cost(own, size))

    def capabilities(self, spec: Spec) -> Capabilities:
        values = self.values(spec)
        own = {k: v for k, v in values.items() if k not in self.common}
        caps = self.entry(spec.id).capabilities_for(own)
        return self.common_capabilities(caps, values)

    def build(self, text: str | Spec) -> Any:
        """The component named by ``text``: the factory called with the entry's defaults and
        the converted parameters (snake_case), then ``finish`` with the common ones."""
        spec = self.spec(text)
        entry = self.entry(spec.id)
        values = self.values(spec)
        own, common = {}, {}
        for key, value in values.items():
            if key in self.common and key not in entry.params:
                common[key] = value
            else:
                own[key] = value
        component = entry.construct(own)
        if self.finish is not None:
            component = self.finish(component, common)
        return component

    def check_network(self, text: str | Spec) -> None:
        """Refuse ``text`` from a network client if it sets a parameter whose row says
        ``network_settable=False``, or one beyond its row's network range (one line naming
        the parameter, the value and the limit); otherwise it must be valid."""
        spec = self.spec(text)
        entry = self.entry(spec.id)
        values = self.values(spec)
        for key, _ in spec.params:
            row = entry.params.get(key)
            reason = None if row is None else row.network_refusal(values[key])
            if reason is None:
                continue
            if row is not None and not row.network_settable:
                allowed = sorted(n for n, r in entry.params.items() if r.network_settable)
                reason += f" (allowed here: {', '.join(allowed) or 'none'})"
            raise InvalidParameterError(f"{self.kind} parameter {key!r} of {spec.id!r} {reason}")


def _typed_name(spec: Spec) -> str:
    """The name of ``spec`` as the user typed it (an alias stays an alias)."""
    return parse(spec.text).id if spec.text else spec.id


#: texts whose old parameter names were already reported (each is reported once)
_RENAME_NOTICES: set[str] = set()


def _factory_default(entry: ComponentSpec, name: str) -> Any:
    """The default the factory applies to parameter ``name`` (snake_case), if it shows one."""
    key = name.replace("-", "_")
    if key in entry.defaults:
        return entry.defaults[key]
    try:
        parameter = inspect.signature(entry.factory).parameters.get(key)
    except (TypeError, ValueError):
        return None
    if parameter is None or parameter.default is inspect.Parameter.empty:
        return None
    return parameter.default


def _capabilities_vary(entry: ComponentSpec) -> bool:
    """Whether some parameter changes ``entry``'s capabilities: a rule that is a function
    (for a policy: a factory that picks among classes)."""
    rule = entry.capabilities
    if isinstance(rule, DeclaredByClass):
        return rule.varies
    return rule is not None and not isinstance(rule, Capabilities)


def describe_entry(entry: ComponentSpec) -> dict[str, Any]:
    """An entry as JSON: id, summary, paper, aliases, the parameter table (defaults from the
    table, else from the factory's signature) and the capabilities it has without parameters
    (``capabilities_vary``: some parameters change them, e.g. ``workers=`` of ``opt-kg``)."""
    rows = []
    for name, row in sorted(entry.params.items()):
        described = row.describe()
        if "default" not in described:
            default = _factory_default(entry, name)
            if isinstance(default, (bool, int, float, str)):
                described["default"] = default
            elif isinstance(default, tuple):
                described["default"] = list(default)
        rows.append(described)
    return {
        "id": entry.component_id,
        "summary": entry.summary,
        "paper": entry.paper,
        "aliases": list(entry.aliases),
        "parameters": rows,
        "capabilities": entry.capabilities_for({}).names(),
        "capabilities_vary": _capabilities_vary(entry),
    }


#: The policies (``crowdbudget.policies.builtin`` registers the built-in ones). ``verdict=`` and
#: ``verdict-workers=`` may follow any policy id: they are not the policy's parameters but the
#: verdict run beside it (:func:`split_verdict`; ``crowdbudget.policies.verdict``). The first
#: build's ``final=`` / ``final-workers=`` are read as them.
POLICIES = Registry(
    "policy",
    "crowdbudget.policies.builtin",
    common=(
        Param(
            "verdict",
            str,
            "the verdict run beside the policy: posterior (its own model) or an aggregator id "
            "fitted on the labels (e.g. ds, one-coin-em, mace)",
        ),
        Param(
            "verdict-workers",
            str,
            "which worker ids an aggregator verdict sees",
            choices=("as-given", "per-context"),
            default="as-given",
        ),
    ),
    unknown_error=UnknownPolicyError,
    plural="policies",
)
POLICIES.renamed = {"final": "verdict", "final-workers": "verdict-workers"}

#: the parameters of a policy id that name its verdict (:func:`split_verdict`)
VERDICT_PARAMS = ("verdict", "verdict-workers")


@dataclass(frozen=True)
class VerdictSpec:
    """Which verdict gives a campaign's final labels and confidence: ``name`` is
    ``"posterior"`` (the policy's own model) or an aggregator id; ``workers`` is
    ``"as-given"`` or ``"per-context"`` (``crowdbudget.policies.verdict``). Picklable: it
    crosses process boundaries beside the policy's :class:`Spec`."""

    name: str = "posterior"
    workers: str = "as-given"

    def __str__(self) -> str:
        if self.workers == "as-given":
            return self.name
        return f"{self.name} (verdict-workers={self.workers})"

    @property
    def is_posterior(self) -> bool:
        """Whether the verdict is the policy's own model (``posterior`` or ``paper``)."""
        return self.name in ("posterior", "paper")

    def build(self) -> Any:
        """The verdict component (``crowdbudget.policies.verdict.make_verdict``, installed by
        the policies' plugin: :meth:`Registry.hook`)."""
        return POLICIES.hook("make_verdict")(self.name, self.workers)

    def refusal(self, problem: Problem) -> str | None:
        """Why ``problem`` does not suit this verdict (one line), or None."""
        reason: str | None = POLICIES.hook("verdict_refusal")(self.name, problem.n_classes)
        return reason


def split_verdict(
    text: str | Spec, verdict: str | VerdictSpec | None = None
) -> tuple[Spec, VerdictSpec]:
    """A policy id with its verdict parameters (``verdict=``, ``verdict-workers=``; old
    spelling ``final=``) split into the policy's :class:`Spec` (without them) and the
    :class:`VerdictSpec` (``verdict``, e.g. a ``--verdict`` option, applies where ``text``
    names none; where neither names one, the policy's ``default_verdict``: its own model,
    ``posterior``, for most policies — :class:`~crowdbudget.policies.base.AllocationPolicy`).
    Parse once at the edge; hand both on."""
    spec = POLICIES.spec(text)
    own = tuple((k, v) for k, v in spec.params if k not in VERDICT_PARAMS)
    given = {k: v for k, v in spec.params if k in VERDICT_PARAMS}
    policy_spec = spec if len(own) == len(spec.params) else Spec(spec.id, own, "", spec.kind)
    if "verdict" in given:
        chosen = VerdictSpec(given["verdict"], given.get("verdict-workers", "as-given"))
    elif "verdict-workers" in given:
        raise InvalidParameterError(
            f"{str(spec)!r}: verdict-workers=... needs verdict=<aggregator> "
            "(e.g. verdict=one-coin-em)"
        )
    elif isinstance(verdict, VerdictSpec):
        chosen = verdict
    elif verdict:
        chosen = VerdictSpec(verdict)
    else:
        chosen = VerdictSpec(
            str(getattr(POLICIES.build(policy_spec), "default_verdict", "posterior"))
        )
    chosen.build()  # an unknown aggregator fails here, with the allowed ones
    return policy_spec, chosen


def pin_paper_ties(spec: Spec) -> Spec:
    """``spec`` (a policy's, without verdict) with the papers' rule among tied items pinned.

    The item-selecting policies (``opt-kg``, ``cvar-kg``, ``gittins``,
    ``gittins-inf``, ``label-uncertainty``, ``requallo``, ``opt-kg:features=logistic``) break
    a tie among items at random by default; the papers take the smallest index
    (``tie-break=first``). This adds ``tie-break=<the class's paper_tie_break>`` where the id
    names no rule, its entry fixes none (``kg``, ``kg-random``) and the policy's default
    differs from the paper's (worker-aware variants, random by design, stay as they are).
    ``str()`` of the result is that of ``spec``: rows keep the id's label. The faithful
    reproductions run every id through it (``ties="paper"`` of ``run_experiment``)."""
    spec = POLICIES.spec(spec)
    entry = POLICIES.entry(spec.id)
    if "tie-break" not in entry.params or "tie-break" in spec.raw or "tie_break" in entry.defaults:
        return spec
    policy = POLICIES.build(spec)
    paper = getattr(policy, "paper_tie_break", None)
    if paper is None or getattr(policy, "tie_break", paper) == paper:
        return spec
    return Spec(spec.id, (*spec.params, ("tie-break", str(paper))), str(spec), spec.kind)


#: The aggregators (``crowdbudget.aggregation.registry`` registers the built-in ones and keeps
#: ``make_aggregator``): ``ds:n-iter=50:seed=3``; the table of every id:
#: ``crowdbudget aggregators [--json]``.
AGGREGATORS = Registry("aggregator", "crowdbudget.aggregation.registry")


# --------------------------------------------------------------------------- policy functions


def register_policy(spec: ComponentSpec) -> ComponentSpec:
    """Add a policy (its id must be new). Its capabilities are its class's flags
    (``binary_only``, ``chooses_workers``, ``needs_workers``, … on
    :class:`~crowdbudget.policies.base.AllocationPolicy`), read by :class:`DeclaredByClass`;
    the entry declares none."""
    if spec.capabilities is not None:
        raise InvalidParameterError(
            f"policy {spec.component_id!r}: declare its capabilities as class flags of the "
            "policy (binary_only, chooses_workers, needs_workers, ...), not in the entry"
        )
    varies = not isinstance(spec.factory, type)
    return POLICIES.register(replace(spec, capabilities=DeclaredByClass(spec.construct, varies)))


def registered_policies() -> dict[str, ComponentSpec]:
    """Every registered policy, by id."""
    return POLICIES.entries()


def policies_for(problem: Problem) -> list[str]:
    """The registered policy ids whose declared needs ``problem`` meets (two classes, named
    workers, features, contexts, unit prices), sorted: what a refusal suggests instead."""
    return sorted(
        name
        for name in POLICIES.entries()
        if POLICIES.capabilities(POLICIES.spec(name)).refusal(problem, name) is None
    )


def parse_policy(text: str | Spec) -> Spec:
    """``text`` as a checked policy :class:`Spec` (unknown ids and bad values raise)."""
    return POLICIES.spec(text)


def parse_policy_id(text: str) -> tuple[str, dict[str, str]]:
    """The registered name of ``text`` (aliases resolved) and its raw parameter strings."""
    parsed = parse(text)
    POLICIES._load()
    return POLICIES._aliases.get(parsed.id, parsed.id), dict(parsed.params)


def make_policy(text: str | Spec) -> AllocationPolicy:
    """Build the policy named by ``text`` (an id with optional ``:key=value`` parameters, or
    a :class:`Spec`)."""
    spec = POLICIES.spec(text)
    verdict = [k for k, _ in spec.params if k in VERDICT_PARAMS]
    if verdict:
        raise InvalidParameterError(
            f"{str(spec)!r}: {verdict[0]}= names the verdict, not a parameter of the policy; "
            "build them apart (split_verdict, make_verdict) or hand the id to run_experiment "
            "or a Campaign"
        )
    policy: AllocationPolicy = POLICIES.build(spec)
    policy.validate_params()
    return policy


def check_network_verdict(text: str) -> None:
    """Refuse a verdict from a network client (``posterior``, ``paper`` or an aggregator id)
    whose parameters set more work than a server allows (``n-iter``, ``n-restarts`` beyond
    their rows' ``network_high``, a ``tol`` under its ``network_low``): one line naming the
    parameter, the value and the limit. Unknown ids and bad values raise as in
    :func:`~crowdbudget.aggregation.registry.make_aggregator`."""
    if text.strip() in ("posterior", "paper"):
        return
    AGGREGATORS.check_network(text)


def check_network_policy(text: str) -> None:
    """Refuse a policy id from a network client that sets a server-only parameter.

    A network client (the HTTP service) may choose a policy and its statistical parameters,
    never the server's configuration: parameters whose row says ``network_settable=False``
    (cache directories, grid sizes, state-space limits) keep their defaults. Raises
    :class:`InvalidParameterError` naming the first such parameter; the id must otherwise be
    valid (unknown ids and bad values raise as in :func:`make_policy`)."""
    POLICIES.check_network(text)


# --------------------------------------------------------------------------- environments

#: The synthetic worlds, under versioned ids (``bernoulli-v0``, ``priced-workers-v0``, ...;
#: ``crowdbudget.simulation.builtin`` registers them): the same id, parameters and seed give
#: the same world in every release.
ENVIRONMENTS = Registry("environment", "crowdbudget.simulation.builtin")


def registered_environments() -> dict[str, ComponentSpec]:
    """Every registered environment, by id."""
    return ENVIRONMENTS.entries()


def make_environment(text: str | Spec) -> LabelingEnvironment:
    """Build the environment named by ``text`` (a versioned id with optional ``:key=value``
    parameters, e.g. ``"priced-workers-v0:worker-set=B:n-items=50"``, or a :class:`Spec`)."""
    spec = ENVIRONMENTS.spec(text)
    try:
        env: LabelingEnvironment = ENVIRONMENTS.build(spec)
    except InvalidParameterError as error:  # the world's own checks: name the id as typed
        raise InvalidParameterError(f"environment {str(spec)!r}: {error}") from None
    return env


# --------------------------------------------------------------------------- reproductions

#: The paper reproductions (``crowdbudget.experiments.papers.builtin`` registers them): one
#: entry per figure or table with its paper, figure, replications and typical times
#: (``crowdbudget reproduce --list [--json]``); its factory runs it:
#: ``REPRODUCTIONS.build("chen2013-fig2a:quick=true:progress=false")`` → ``ReproductionResult``.
REPRODUCTIONS = Registry("reproduction", "crowdbudget.experiments.papers.builtin")


def registered_reproductions() -> dict[str, ComponentSpec]:
    """Every registered reproduction, by id (in the order of ``reproduce --list``)."""
    return REPRODUCTIONS.entries()
