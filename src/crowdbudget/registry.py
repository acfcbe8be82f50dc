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
import math
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError, UnknownPolicyError

if TYPE_CHECKING:  # types only: the registry imports no component at run time
    from crowdbudget.policies.base import AllocationPolicy
    from crowdbudget.simulation.environment import LabelingEnvironment
    from crowdbudget.types import Problem


# --------------------------------------------------------------------------- parameters


def read_flag(text: str) -> bool:
    """``"true"``/``"1"``/``"yes"`` → True, ``"false"``/``"0"``/``"no"`` → False."""
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ValueError(text)


def read_pair(text: str) -> tuple[float, float]:
    """``"4;1"`` or ``"4,1"`` → (4.0, 1.0) (e.g. a Beta prior's two parameters)."""
    parts = [float(v) for v in text.replace(";", ",").split(",") if v.strip()]
    if len(parts) != 2:
        raise ValueError(text)
    return parts[0], parts[1]


_TYPE_NAMES: dict[Any, str] = {
    int: "int",
    float: "float",
    str: "str",
    read_flag: "bool",
    read_pair: "pair",
}


@dataclass(frozen=True)
class Param:
    """One row of a component's parameter table.

    Attributes:
        name: the key as typed (kebab-case, ``tie-break``); the factory receives it in
            snake_case (``tie_break``).
        read: reads the text value (``int``, ``float``, ``str``, :func:`read_flag`,
            :func:`read_pair`, ...); a ``ValueError`` becomes a one-line refusal.
        doc: what it sets, one line.
        default: the value used when it is not given, for the docs (None: the component's own
            default, described in ``doc``; listings then show the factory's default).
        choices: the allowed text values, if only some are.
        low, high: the allowed closed range of a number, if bounded.
        network_settable: whether a network client (the HTTP service) may set it; False for
            server settings — file-system paths, cache places, grid and state-space sizes.
        argument: the keyword the factory receives, when it is not the snake_case name
            (an aggregator's ``seed`` is its ``rng``).
        network_low, network_high: the closed range a network client may choose within, for a
            parameter that sets work (iterations, restarts; a tolerance's floor): the server
            refuses beyond it (:meth:`Registry.check_network`), a local caller may go further.
    """

    name: str
    read: Callable[[str], Any] = str
    doc: str = ""
    default: Any = None
    choices: tuple[str, ...] | None = None
    low: float | None = None
    high: float | None = None
    network_settable: bool = True
    argument: str | None = None
    network_low: float | None = None
    network_high: float | None = None

    def convert(self, value: str, owner: str) -> Any:
        """The value of ``value`` (text), checked against the table; ``owner`` names the
        component in the one-line refusal."""
        if self.choices is not None and value not in self.choices:
            raise InvalidParameterError(
                f"{owner}: {self.name} must be one of {', '.join(self.choices)}, got {value!r}"
            )
        try:
            result = self.read(value)
        except (TypeError, ValueError):
            raise InvalidParameterError(
                f"{owner}: cannot read {self.name}={value!r} (a {self.type_name} is needed)"
            ) from None
        bounded = self.low is not None or self.high is not None
        if bounded and isinstance(result, (int, float)) and not isinstance(result, bool):
            below = self.low is not None and not result >= self.low  # NaN is out of range
            above = self.high is not None and not result <= self.high
            if below or above or not math.isfinite(result):
                raise InvalidParameterError(
                    f"{owner}: {self.name} must be in {self.range_text}, got {value}"
                )
        return result

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES.get(self.read, getattr(self.read, "__name__", "value"))

    @property
    def range_text(self) -> str:
        """The interval the value must lie in: an open side is unbounded, and infinity itself
        is refused (``[0, inf)``), so the refusal of ``inf`` reads right."""
        low = "(-inf" if self.low is None else f"[{self.low:g}"
        high = "inf)" if self.high is None else f"{self.high:g}]"
        return f"{low}, {high}"

    def describe(self) -> dict[str, Any]:
        """The row as JSON (``crowdbudget policies --json``)."""
        row: dict[str, Any] = {"name": self.name, "type": self.type_name, "doc": self.doc}
        if self.default is not None:
            row["default"] = list(self.default) if isinstance(self.default, tuple) else self.default
        if self.choices is not None:
            row["choices"] = list(self.choices)
        if self.low is not None or self.high is not None:
            row["range"] = [self.low, self.high]
        row["network_settable"] = self.network_settable
        if self.network_low is not None or self.network_high is not None:
            row["network_range"] = [self.network_low, self.network_high]
        return row

    def network_refusal(self, value: Any) -> str | None:
        """Why a network client may not give ``value`` (already converted), or None: a server
        setting, or a value beyond the network range."""
        if not self.network_settable:
            return "is a server setting; an API client may not set it"
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        shown = str(value) if isinstance(value, int) else f"{value:g}"
        if self.network_high is not None and value > self.network_high:
            return f"is {shown}; this server allows at most {self.network_high:g}"
        if self.network_low is not None and value < self.network_low:
            return f"is {shown}; this server allows at least {self.network_low:g}"
        return None


def _as_param(name: str, value: Param | Callable[[str], Any]) -> Param:
    if isinstance(value, Param):
        if value.name != name:
            raise ValueError(f"parameter table key {name!r} holds Param {value.name!r}")
        return value
    return Param(name, value)


# --------------------------------------------------------------------------- capabilities


@dataclass(frozen=True)
class Capabilities:
    """What a component needs of a problem and what it does (DESIGN §11).

    Attributes:
        binary_only: two classes only.
        needs_workers: the problem must name its workers (``Problem.n_workers``).
        needs_features: the problem must carry instance features (``Problem.features``).
        needs_contexts: the problem must give every task a context (``contexts``).
        unit_prices_only: every label costs one budget unit (no ``worker_prices``).
        chooses_workers: it picks (item, worker) pairs, not only items.
        supports_pull: it can answer an arriving worker (pull mode).
        budget_aware: its decisions depend on the total budget (the runner then runs it once
            per budget instead of once up to the largest).
    """

    binary_only: bool = False
    needs_workers: bool = False
    needs_features: bool = False
    needs_contexts: bool = False
    unit_prices_only: bool = False
    chooses_workers: bool = False
    supports_pull: bool = True
    budget_aware: bool = False

    @classmethod
    def of(cls, component: Any) -> Capabilities:
        """The capabilities ``component`` declares as attributes of the same names (a policy's
        class flags: :class:`~crowdbudget.policies.base.AllocationPolicy`); a name it lacks
        keeps its default."""
        return cls(**{f.name: bool(getattr(component, f.name, f.default)) for f in fields(cls)})

    def names(self) -> list[str]:
        """The capabilities that are set (the defaults' opposite for ``supports_pull``)."""
        out = [f.name for f in fields(self) if f.name != "supports_pull" and getattr(self, f.name)]
        if not self.supports_pull:
            out.append("push_only")
        return out

    def refusal(self, problem: Problem, who: str) -> str | None:
        """Why ``problem`` does not suit a component with these needs (one line naming
        ``who``), or None."""
        if self.binary_only and problem.n_classes != 2:
            return f"{who} handles binary labels only; this problem has {problem.n_classes} classes"
        if self.needs_workers and problem.n_workers is None:
            return (
                f"{who} chooses among named workers; this problem has anonymous workers "
                "(give it n_workers: a world with a worker pool, or a replay)"
            )
        if self.needs_features and problem.features is None:
            return f"{who} needs instance features; this problem has none (Problem.features)"
        if self.needs_contexts and getattr(problem, "contexts", None) is None:
            return f"{who} needs a context per task; this problem has none"
        if self.unit_prices_only and problem.worker_prices is not None:
            return (
                f"{who} spends one budget unit per label; this problem has workers with "
                "different prices"
            )
        return None


CapabilityRule = Capabilities | Callable[[Mapping[str, Any]], Capabilities]


@dataclass(frozen=True)
class DeclaredByClass:
    """The capability rule of every policy: build the component with the parameters (a
    constructor only stores them, scikit-learn style) and read its class flags
    (:meth:`Capabilities.of`) — so a policy's capabilities are declared once, on its class.

    ``construct``: the entry's factory with its defaults (:meth:`ComponentSpec.construct`).
    ``varies``: some parameter changes the capabilities (the factory picks a class by its
    parameters, e.g. ``opt-kg:posterior=one-coin``)."""

    construct: Callable[[Mapping[str, Any]], Any]
    varies: bool

    def __call__(self, values: Mapping[str, Any]) -> Capabilities:
        return Capabilities.of(self.construct(values))


@dataclass(frozen=True)
class ProblemSize:
    """The sizes a component's declared cost reads (:attr:`ComponentSpec.cost`).

    Attributes:
        n_items: items of the problem.
        budget_labels: the most labels the budget buys (budget / the lowest price).
        n_classes: classes.
    """

    n_items: int
    budget_labels: float
    n_classes: int


def items_by_classes(values: Mapping[str, Any], size: ProblemSize) -> float:
    """The cost every policy has at least: its state holds a number per item and class."""
    return float(size.n_items * size.n_classes)


#: a declared cost: the component's parameters (kebab-case, converted) and the problem's
#: sizes → elementary steps of its set-up and first decision (the units of
#: ``ServiceSettings.max_policy_cost``)
CostRule = Callable[[Mapping[str, Any], ProblemSize], float]


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True)
class ComponentSpec:
    """A registered component: its id, how to build it, its parameter table, its needs.

    Attributes:
        component_id: the id (kebab-case, e.g. ``opt-kg``).
        factory: called with the converted parameters in snake_case.
        summary: one line for listings.
        params: the parameter table, by name (a bare reader such as ``float`` is read as
            ``Param(name, float)``).
        defaults: keyword arguments the factory always receives (a variant of a class).
        paper: the paper it comes from.
        server_only: names of parameters a network client may not set (the same as
            ``network_settable=False`` in their rows; both spellings are merged).
        capabilities: :class:`Capabilities`, or a function of the converted parameters
            (``opt-kg:posterior=one-coin`` chooses workers, ``opt-kg`` does not); None: it
            needs nothing. A policy declares none here: :func:`register_policy` reads them
            from the policy's class flags (:class:`DeclaredByClass`), the one source.
        aliases: other ids that name it (old spellings).
        cost: its declared cost (:data:`CostRule`): the elementary steps of its set-up and
            first decision on a problem of a given size, in its own complexity (a graph with
            an edge per label, a table in the horizon); default :func:`items_by_classes`.
            A server refuses a campaign whose cost exceeds its limit before building it.
    """

    component_id: str
    factory: Callable[..., Any]
    summary: str
    params: Mapping[str, Any] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    paper: str = ""
    server_only: frozenset[str] = frozenset()
    capabilities: CapabilityRule | None = None
    aliases: tuple[str, ...] = ()
    cost: CostRule = items_by_classes

    def __post_init__(self) -> None:
        unknown = self.server_only - set(self.params)
        if unknown:
            raise ValueError(
                f"{self.component_id}: server_only names no parameter: {sorted(unknown)}"
            )
        table = {name: _as_param(name, value) for name, value in self.params.items()}
        table = {
            name: replace(row, network_settable=False) if name in self.server_only else row
            for name, row in table.items()
        }
        object.__setattr__(self, "params", table)
        object.__setattr__(
            self,
            "server_only",
            frozenset(name for name, row in table.items() if not row.network_settable),
        )

    @property
    def policy_id(self) -> str:
        """The id (the name this class had when only policies were registered)."""
        return self.component_id

    @property
    def table(self) -> Mapping[str, Param]:
        """The parameter table, by name."""
        return self.params

    def capabilities_for(self, values: Mapping[str, Any]) -> Capabilities:
        """The capabilities with the converted parameters ``values`` (kebab-case, the common
        ones left out)."""
        rule = self.capabilities
        if rule is None:
            return Capabilities()
        return rule if isinstance(rule, Capabilities) else rule(values)

    def construct(self, values: Mapping[str, Any]) -> Any:
        """The factory called with the defaults and the converted parameters ``values``
        (kebab-case names, passed as their rows' arguments or in snake_case)."""
        kwargs = dict(self.defaults)
        for key, value in values.items():
            row = self.params.get(key)
            argument = row.argument if row is not None else None
            kwargs[argument or key.replace("-", "_")] = value
        return self.factory(**kwargs)


#: The name the policy registry has always used for its entries.
PolicySpec = ComponentSpec


@dataclass(frozen=True)
class Spec:
    """A parsed id: the registered ``id`` (aliases resolved) and the parameters as typed.

    Made by :func:`parse` (grammar only: ``kind`` empty, nothing checked) or by
    :meth:`Registry.spec` (every parameter checked against the table). Picklable and
    hashable: it is what crosses layers and processes, rather than the text; ``str(spec)``
    is the text exactly as given (results are labelled with it).
    """

    id: str
    params: tuple[tuple[str, str], ...] = ()
    text: str = ""
    kind: str = ""

    def __str__(self) -> str:
        return self.text or ":".join([self.id, *(f"{k}={v}" for k, v in self.params)])

    @property
    def raw(self) -> dict[str, str]:
        """The parameters as typed, by name."""
        return dict(self.params)

    def _registry(self) -> Registry:
        registry = _REGISTRIES.get(self.kind)
        if registry is None:
            raise InvalidParameterError(
                f"{self}: not checked against a registry (use parse_{{kind}})"
            )
        return registry

    @property
    def entry(self) -> ComponentSpec:
        """The registered entry."""
        return self._registry().entry(self.id)

    @property
    def values(self) -> dict[str, Any]:
        """The parameters read through the table, by name (kebab-case)."""
        return self._registry().values(self)

    @property
    def capabilities(self) -> Capabilities:
        return self._registry().capabilities(self)

    def refusal(self, problem: Problem) -> str | None:
        """Why ``problem`` does not suit this component (one line naming the id as typed),
        or None when it does."""
        return self.capabilities.refusal(problem, repr(str(self)))

    def check(self, problem: Problem) -> None:
        """Raise :class:`InvalidParameterError` with :meth:`refusal`'s line if ``problem``
        does not suit this component."""
        reason = self.refusal(problem)
        if reason is not None:
            raise InvalidParameterError(reason)

    def build(self) -> Any:
        """The component."""
        return self._registry().build(self)


def parse(text: str) -> Spec:
    """Split ``name[:key=value]*`` (the one grammar of every id) into a :class:`Spec`.

    The name is every leading part without ``=`` (so a two-word alias such as
    ``opt-kg:per-context`` stays a name); every later part must be ``key=value``. Nothing is
    looked up: :meth:`Registry.spec` resolves and checks.
    """
    parts = [part.strip() for part in str(text).strip().split(":")]
    n_name = 0
    while n_name < len(parts) and "=" not in parts[n_name]:
        n_name += 1
    name = ":".join(parts[:n_name])
    if not parts[0] or not name:
        raise InvalidParameterError(f"empty id in {text!r}")
    params: list[tuple[str, str]] = []
    seen: set[str] = set()
    for part in parts[n_name:]:
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidParameterError(f"parameter {part!r} in {text!r} must look like key=value")
        if key in seen:
            raise InvalidParameterError(f"parameter {key!r} is given twice in {text!r}")
        seen.add(key)
        params.append((key, value.strip()))
    return Spec(id=name, params=tuple(params), text=str(text))


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
        _REGISTRIES[kind] = self

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


_REGISTRIES: dict[str, Registry] = {}


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
        """The verdict component (:func:`crowdbudget.policies.verdict.make_verdict`)."""
        verdicts = importlib.import_module("crowdbudget.policies.verdict")
        return verdicts.make_verdict(self.name, self.workers)

    def refusal(self, problem: Problem) -> str | None:
        """Why ``problem`` does not suit this verdict (one line), or None."""
        verdicts = importlib.import_module("crowdbudget.policies.verdict")
        reason: str | None = verdicts.verdict_refusal(self.name, problem.n_classes)
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
