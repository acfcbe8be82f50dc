"""The parameter rows and entry builder of the aggregator registry (:mod:`.registry`).

A row (:class:`AggregatorParam`, made by :func:`parameter_row`) types, bounds and documents one
``key=value`` of an id; :func:`aggregator_entry` builds an id's :class:`AggregatorSpec` from its
factory, its rows and the keyword arguments it fixes. The ids themselves are registered in
:mod:`.registry` (and, for the Bayesian Dawid–Skene family, :mod:`._registry_bayesian`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from crowdbudget.aggregation.base import Aggregator
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.registry import AGGREGATORS, Capabilities, ComponentSpec, Param


@dataclass(frozen=True)
class AggregatorParam(Param):
    """A :class:`~crowdbudget.registry.Param` whose bounds may be open (``low_open``:
    ``> low``; ``high_open``: ``< high``) and whose type may carry a label for listings
    (``type_label``, for readers such as :func:`read_temperature`). An out-of-range value is
    refused in one line naming the id typed, the parameter as typed and, in the words of the
    class's own check, what is allowed (``n_iter must be an integer >= 1``)."""

    low_open: bool = False
    high_open: bool = False
    type_label: str | None = None

    @property
    def keyword(self) -> str:
        """The keyword the class takes (``n_iter``; ``rng`` for ``seed``)."""
        return self.argument or self.name.replace("-", "_")

    @property
    def type_name(self) -> str:
        return self.type_label or super().type_name

    @property
    def range_text(self) -> str:
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        left = "(" if self.low is None or self.low_open else "["
        right = ")" if self.high is None or self.high_open else "]"
        return f"{left}{low}, {high}{right}"

    @property
    def constraint(self) -> str:
        """The allowed values in words (``an integer >= 1``, ``a number in (0, 1]``)."""
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        noun = "an integer" if self.read is int else "a number"
        if self.type_label is not None and self.low is None and self.high is None:
            return f"a {self.type_label}"
        if self.low is None and self.high is None:
            return noun
        if self.high is None:
            return f"{noun} {'>' if self.low_open else '>='} {self.low:g}"
        if self.low is None:
            return f"{noun} {'<' if self.high_open else '<='} {self.high:g}"
        if self.read is int and not (self.low_open or self.high_open):
            return f"{noun} in {self.low:g}..{self.high:g}"
        return f"{noun} in {self.range_text}"

    def _inside(self, value: float) -> bool:
        if not math.isfinite(value):  # NaN and infinities are out of any bounded range
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def convert(self, value: str, owner: str) -> Any:
        result = Param.convert(replace(self, low=None, high=None), value, owner)
        bounded = self.low is not None or self.high is not None
        number = isinstance(result, (int, float)) and not isinstance(result, bool)
        if bounded and number and not self._inside(result):
            raise InvalidParameterError(
                f"{owner}: {self.name}={value} is out of range "
                f"({self.name.replace('-', '_')} must be {self.constraint})"
            )
        return result

    def describe(self) -> dict[str, Any]:
        row = super().describe()
        if self.low_open or self.high_open:
            row["range_open"] = [self.low_open, self.high_open]
        row["allowed"] = self.constraint
        return row


def read_positive_numbers(text: str) -> float | list[float]:
    """``"1"`` → 1.0, ``"2,1"`` (or ``"2;1"``) → [2.0, 1.0]: pseudo-counts, each > 0."""
    parts = [float(v) for v in text.replace(";", ",").split(",") if v.strip()]
    if not parts or not all(math.isfinite(v) and v > 0 for v in parts):
        raise ValueError(text)
    return parts[0] if len(parts) == 1 else parts


def read_positive_pair(text: str) -> list[float]:
    """``"2,1"`` (or ``"2;1"``) → [2.0, 1.0]: two pseudo-counts, each > 0."""
    parts = read_positive_numbers(text)
    if not isinstance(parts, list) or len(parts) != 2:
        raise ValueError(text)
    return parts


def read_temperature(text: str) -> float | str:
    """``"auto"`` stays ``"auto"``; anything else is a number (checked against the row)."""
    return text if text == "auto" else float(text)


def read_candidate_ids(text: str) -> str:
    """``"bds,ds"`` or ``"bds;ds"`` → ``"bds,ds"``: aggregator ids, each registered and not
    ``auto``, as one comma-separated string (the form :class:`HeldOutLabelChoice` stores)."""
    ids = [v.strip() for v in text.replace(";", ",").split(",") if v.strip()]
    known = {*AGGREGATORS.entries(), *AGGREGATORS.aliases()}
    if not ids or any(i not in known or i == "auto" for i in ids):
        raise ValueError(text)
    return ",".join(ids)


def parameter_row(name: str, read: Callable[[str], Any], doc: str, **rest: Any) -> AggregatorParam:
    return AggregatorParam(name, read, doc, **rest)


#: the work a network client may ask of one fit (``network_high`` / ``network_low`` of the
#: rows; a local caller may go beyond): the largest iteration count any id uses by default
#: (``mmsr``'s 10,000), restarts and inner iterations a few times their defaults, and a
#: tolerance no finer than double precision resolves (1e-15; ``tol=0``, "never stop early",
#: is refused: every fit would run to its iteration ceiling). Whatever the parameters, the fit
#: also runs under the server's deadline and memory ceiling (docs/service.md).
NETWORK_MAX_ITERATIONS = 10_000
NETWORK_MAX_RESTARTS = 20
NETWORK_MAX_INNER_ITERATIONS = 1_000
NETWORK_MIN_TOLERANCE = 1e-15

SEED = parameter_row(
    "seed", int, "seed of tie-breaking (and of a random start)", low=0, argument="rng"
)
N_ITER = parameter_row("n-iter", int, "most iterations", low=1, network_high=NETWORK_MAX_ITERATIONS)
TOL = parameter_row(
    "tol",
    float,
    "stop once an iteration changes the estimates by less than this",
    low=0,
    network_low=NETWORK_MIN_TOLERANCE,
)
EM = (N_ITER, TOL)


def parameter_table(
    factory: Callable[..., Any], *rows: AggregatorParam, **fixed: Any
) -> dict[str, AggregatorParam]:
    """The rows by name, plus ``seed``, each with the factory's own default (``fixed``: the
    keyword arguments the entry always passes). A row naming no keyword of the factory is a
    programming error (ValueError)."""
    signature = inspect.signature(factory).parameters
    table: dict[str, AggregatorParam] = {}
    for row in (*rows, SEED):
        if row.keyword not in signature:
            raise ValueError(f"{factory.__name__} takes no {row.keyword!r} (row {row.name!r})")
        default = fixed.get(row.keyword, signature[row.keyword].default)
        if row.default is None and default is not inspect.Parameter.empty:
            row = replace(row, default=default)
        table[row.name] = row
    return table


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True)
class AggregatorSpec(ComponentSpec):
    """A registered aggregator: a :class:`~crowdbudget.registry.ComponentSpec` that also
    answers the first build's questions (``aggregator_id``, ``binary_only``)."""

    @property
    def aggregator_id(self) -> str:
        return self.component_id

    @property
    def binary_only(self) -> bool:
        """Whether it takes two classes only (its ``binary_only`` capability)."""
        return self.capabilities_for({}).binary_only


def aggregator_entry(
    component_id: str,
    factory: Callable[..., Aggregator],
    summary: str,
    *rows: AggregatorParam,
    paper: str = "",
    defaults: Mapping[str, Any] | None = None,
    binary_only: bool = False,
    aliases: tuple[str, ...] = (),
) -> AggregatorSpec:
    fixed = dict(defaults or {})
    return AggregatorSpec(
        component_id,
        factory,
        summary,
        params=parameter_table(factory, *rows, **fixed),
        defaults=fixed,
        paper=paper,
        capabilities=Capabilities(binary_only=binary_only),
        aliases=aliases,
    )
