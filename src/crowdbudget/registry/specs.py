"""The component grammar and its declarative tables (DESIGN §6, §11): how an id such as
``opt-kg:posterior=one-coin`` is parsed (:func:`parse`, :class:`Spec`), how one parameter is
read, bounded and documented (:class:`Param`), what a component needs and does
(:class:`Capabilities`, read from the component's class: :class:`DeclaredByClass`), what it
costs (:class:`ProblemSize`, ``CostRule``) and the entry that ties them together
(:class:`ComponentSpec`). :mod:`crowdbudget.registry` holds the tables of entries and
re-exports every name here; this module imports no component.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from crowdbudget.exceptions import InvalidParameterError

if TYPE_CHECKING:
    from crowdbudget.registry import (
        Registry,  # types only: the registry imports no component at run time
    )
    from crowdbudget.types import Problem


#: every registry by the kind of component it holds (a :class:`Spec` finds its table here)
_REGISTRIES: dict[str, Registry] = {}


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
#: what a refusal says is needed, by reader
_TYPE_PHRASES: dict[Any, str] = {
    int: "an integer",
    float: "a number",
    str: "text",
    read_flag: "true or false",
    read_pair: "two numbers a;b",
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
                f"{owner}: cannot read {self.name}={value!r} "
                f"({_TYPE_PHRASES.get(self.read, 'a ' + self.type_name)} is needed)"
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

    def live_modes(self) -> tuple[str, ...]:
        """The live campaign modes it runs in: ``"pull"`` where it answers an arriving worker,
        ``"push"`` where it picks the worker of each pair (``chooses_workers``)."""
        return (
            *(("pull",) if self.supports_pull else ()),
            *(("push",) if self.chooses_workers else ()),
        )

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
