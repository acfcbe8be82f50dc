"""Per-item quality requirements of Requallo (Li, Ma, Gao, Su, Quinn. *Crowdsourcing High
Quality Labels with a Tight Budget.* WSDM 2016, §3.1 "Requirement Examples", Table 2).

A requirement says when an item is *complete* ("confident"): its votes are good enough and
it needs no more labels. Each requirement gives

- ``r(x)`` (:meth:`Requirement.min_total`): the minimum **total** vote count an item needs when
  the class it is *not* labeled with (the "wrong" class, §3.1) has ``x`` votes — Table 2 of the
  paper;
- :meth:`Requirement.is_complete`: whether vote counts ``(a, b)`` meet it, which is exactly
  ``a + b >= r(min(a, b))``.

Rules (text syntax in brackets; combine with ``:``, e.g. ``fisher=0.2:max-labels=14``):

- :class:`MinimumRatio` [``ratio=c``]: majority : minority >= c (§3.1, Example 1). With x
  minority votes the majority needs ``c·x`` votes (rounded up for whole vote counts; at least
  one vote when ``x = 0``), so ``r(x) = x + ⌈c x⌉``: c = 4 gives 5, 10, 15, 20, 25.
- :class:`FisherTest` [``fisher=α``]: the paper's one-sided exact binomial test against random
  guessing (Example 2): with ``n`` votes of which ``x`` for the minority, the p-value is
  ``P(Binomial(n, 1/2) <= x) = Σ_{k<=x} C(n, k) / 2^n`` and the item is complete when
  ``p < α``. ``r(x)`` is the smallest such ``n``, computed in exact rational arithmetic
  (``α`` is read as the decimal it is written as, so no float rounding can move a cell of
  Table 2). Non-integer ``x`` (weighted votes) interpolate linearly between neighbours.
- :class:`MinLabels` [``min-labels=m``]: at least ``m`` labels (§3.1: ``a_i + b_i > δ_min``;
  the paper's ``Requallo-m3`` is this rule alone).
- :class:`MaxLabels` [``max-labels=M``]: a *cap*: the item stops once either class has ``M``
  votes (§4.1: "neither class can receive more than 14 labels"), ``r(x) = x + M``.
- :class:`MaxTotalLabels` [``max-total=N``]: a cap on ``a + b`` (§3.1: ``a_i + b_i < δ_max``).

Quality rules are conjunctive (all must hold: ``r`` is their maximum); caps are disjunctive (an
item that reaches a cap stops whatever its quality: ``r = min(r_quality, r_caps)``).
:meth:`Requirement.quality_met` ignores the caps ("# Instances" of Table 3: "the instances that
achieve the corresponding requirement except for the maximum label count requirement").

Pseudo-labels. Requallo starts every item with pseudo-votes (§3.3: "we use one pseudo-label
for each class as the initial label"); the vote-based rules (ratio, Fisher) see them as votes,
while the label-count rules count real labels only (Table 3: ``Requallo-m3`` costs exactly
3 × 1709 labels). Every method therefore takes ``pseudo`` (pseudo-votes per class, default 0)
and the label-count rules shift by it: ``min-labels=m`` needs ``a + b >= m + 2·pseudo``,
``max-labels=M`` stops at ``max(a, b) >= M + pseudo``.

All methods are vectorised: ``a``, ``b``, ``x`` are arrays of any common shape.

Why a requirement is not a registry id. Every component id has one grammar,
``name[:key=value]*`` (:func:`crowdbudget.registry.parse`, DESIGN §11). A requirement text has
no name: ``fisher=0.2:max-labels=14`` is a conjunction of rules, each ``key=value`` — it is the
*parameter part* of that grammar, and where a user types it inside an id it is exactly that:
``requallo:fisher=0.2:max-labels=14``, each rule a row (type, range, doc) of requallo's table in
the policy registry. A :class:`~crowdbudget.registry.Registry` of requirements would need a
name in front (``all:fisher=0.2``), changing the texts the API takes today (:func:`as_requirement`,
``RequalloPolicy(requirement=...)``), and its entries (five rules, no component to build, no
capabilities) would not be components. So :func:`parse_requirement` keeps its syntax
(separators ``:``, ``,`` and ``+``), and :func:`make_rule` its rules; what it shares with the
ids is the ``key=value`` part.

Example:
    >>> req = parse_requirement("fisher=0.2:max-labels=14")
    >>> req.min_total([1, 2, 3, 4, 5]).tolist()
    [5.0, 8.0, 10.0, 12.0, 15.0]
    >>> bool(req.is_complete(4, 1)), bool(req.is_complete(3, 1))
    (True, False)
    >>> str(req)
    'fisher=0.2:max-labels=14'
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.types import BoolArray, FloatArray

_EPS = 1e-9


def _as_float(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=float)


class Requirement(ABC):
    """A per-item quality requirement (see the module docstring).

    Subclasses define :meth:`min_total` and say whether they are a quality rule or a cap.
    """

    #: "quality" (conjunctive) or "cap" (disjunctive stopping rule)
    role: ClassVar[str] = "quality"
    #: text key of the rule (``ratio``, ``fisher``, ...)
    key: ClassVar[str] = ""

    @abstractmethod
    def min_total(self, minority: ArrayLike, pseudo: float = 0.0) -> FloatArray:
        """``r(x)``: minimum total votes when the wrong class has ``x`` votes (elementwise)."""

    @property
    def parts(self) -> tuple[Requirement, ...]:
        """The single rules this requirement is made of."""
        return (self,)

    def quality_total(self, minority: ArrayLike, pseudo: float = 0.0) -> FloatArray:
        """``r(x)`` of the quality rules only (``inf`` when there is none)."""
        x = _as_float(minority)
        out = np.full(x.shape, -np.inf)
        has_quality = False
        for part in self.parts:
            if part.role == "quality":
                out = np.maximum(out, part.min_total(x, pseudo))
                has_quality = True
        return out if has_quality else np.full(x.shape, np.inf)

    def is_complete(self, a: ArrayLike, b: ArrayLike, pseudo: float = 0.0) -> BoolArray:
        """Whether vote counts ``(a, b)`` (pseudo-votes included) meet the requirement."""
        a, b = np.broadcast_arrays(_as_float(a), _as_float(b))
        return np.asarray(a + b >= self.min_total(np.minimum(a, b), pseudo) - _EPS)

    def quality_met(self, a: ArrayLike, b: ArrayLike, pseudo: float = 0.0) -> BoolArray:
        """Whether ``(a, b)`` meets the quality rules, ignoring the caps (Table 3's
        "# Instances")."""
        a, b = np.broadcast_arrays(_as_float(a), _as_float(b))
        return np.asarray(a + b >= self.quality_total(np.minimum(a, b), pseudo) - _EPS)

    def completeness(
        self, a: ArrayLike, b: ArrayLike, z_positive: bool, pseudo: float = 0.0
    ) -> FloatArray:
        """Completeness given the true class (§3.1, Example 3): ``(a + b) / r(wrong votes)``,
        1 once complete."""
        a, b = np.broadcast_arrays(_as_float(a), _as_float(b))
        wrong = b if z_positive else a
        ratio = np.minimum(1.0, (a + b) / self.min_total(wrong, pseudo))
        return np.asarray(np.where(self.is_complete(a, b, pseudo), 1.0, ratio), dtype=float)

    def __and__(self, other: Requirement) -> Requirement:
        return AllOf((*self.parts, *other.parts))

    def __str__(self) -> str:
        return ":".join(part._text() for part in self.parts)

    def _text(self) -> str:
        return f"{self.key}={self._value_text()}"

    def _value_text(self) -> str:
        return ""


def _format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclass(frozen=True)
class MinimumRatio(Requirement):
    """Majority votes : minority votes >= ``ratio`` (c > 1), §3.1 and Example 1.

    ``r(x) = x + ⌈c·x⌉`` for whole ``x`` (``r(0) = 1``: one vote and none against); for
    weighted (non-integer) counts the majority needs exactly ``c·x``.
    """

    ratio: float
    key: ClassVar[str] = "ratio"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.ratio) and self.ratio > 1):
            raise InvalidParameterError(f"ratio must be a number > 1, got {self.ratio!r}")

    def min_total(self, minority: ArrayLike, pseudo: float = 0.0) -> FloatArray:
        x = _as_float(minority)
        need = self.ratio * x
        whole = np.abs(x - np.round(x)) < _EPS
        need = np.where(whole, np.ceil(need - _EPS), need)
        need = np.where(x <= _EPS, 1.0, need)
        return np.asarray(x + need, dtype=float)

    def _value_text(self) -> str:
        return _format_number(self.ratio)


@dataclass(frozen=True)
class FisherTest(Requirement):
    """One-sided exact binomial test against random guessing at level ``alpha`` (Example 2).

    Complete when ``Σ_{k<=x} C(n, k) / 2^n < alpha`` (n = total votes, x = minority votes).
    ``r(x)`` comes from a table built in exact rational arithmetic and extended on demand.
    """

    alpha: float
    key: ClassVar[str] = "fisher"
    _table: list[int] = field(default_factory=list, init=False, repr=False, compare=False)
    _cursor: list[int] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (0 < self.alpha < 1):
            raise InvalidParameterError(f"fisher level must be in (0, 1), got {self.alpha!r}")

    def _level(self) -> Fraction:
        return Fraction(repr(float(self.alpha)))

    def _extend(self, upto: int) -> None:
        """Extend ``r`` to ``x = upto`` by walking ``(x, n)`` with exact integers: the binomial
        tail ``T(n, x) = Σ_{k<=x} C(n, k)`` obeys ``T(n+1, x) = 2 T(n, x) − C(n, x)`` and
        ``T(n, x+1) = T(n, x) + C(n, x+1)``; ``r`` is strictly increasing (``T(n, x+1) >=
        T(n−1, x)``), so each ``n`` is visited once — O(r(upto)) big-integer steps."""
        table = self._table
        if len(table) > upto:
            return
        level = self._level()
        num, den = level.numerator, level.denominator
        cursor = self._cursor
        if not cursor:  # x = 0 at n = 1: T = C(1, 0) = 1
            cursor.extend([0, 1, 1, 1])
        x, n, tail, cnx = cursor
        while len(table) <= upto:
            while x < len(table):  # move to the next x at the same n
                cnx = cnx * (n - x) // (x + 1)
                x += 1
                tail += cnx
            while n < 2 * x + 1 or tail * den >= num << n:  # a minority, significant
                tail = 2 * tail - cnx
                cnx = cnx * (n + 1) // (n + 1 - x)
                n += 1
            table.append(n)
        cursor[:] = [x, n, tail, cnx]

    def p_value(self, a: ArrayLike, b: ArrayLike) -> FloatArray:
        """``P(Binomial(a + b, 1/2) <= min(a, b))``, elementwise (floats)."""
        from scipy import stats

        a, b = np.broadcast_arrays(_as_float(a), _as_float(b))
        return np.asarray(stats.binom.cdf(np.minimum(a, b), a + b, 0.5), dtype=float)

    def min_total(self, minority: ArrayLike, pseudo: float = 0.0) -> FloatArray:
        x = np.maximum(_as_float(minority), 0.0)
        top = int(np.ceil(x.max())) if x.size else 0
        self._extend(top + 1)
        table = np.asarray(self._table, dtype=float)
        low = np.floor(x + _EPS).astype(np.int64)
        low = np.minimum(low, top)
        frac = np.clip(x - low, 0.0, 1.0)
        high = np.minimum(low + 1, len(self._table) - 1)
        return np.asarray(table[low] + frac * (table[high] - table[low]), dtype=float)

    def _value_text(self) -> str:
        return _format_number(self.alpha)


@dataclass(frozen=True)
class _LabelCount(Requirement):
    """A rule on real label counts (pseudo-votes excluded) with a whole ``count`` >= 1: the
    shared part of :class:`MinLabels`, :class:`MaxLabels` and :class:`MaxTotalLabels`."""

    count: int

    def __post_init__(self) -> None:
        if int(self.count) != self.count or self.count < 1:
            raise InvalidParameterError(f"{self.key} must be an integer >= 1, got {self.count!r}")

    def _value_text(self) -> str:
        return str(int(self.count))


@dataclass(frozen=True)
class MinLabels(_LabelCount):
    """At least ``count`` real labels (§3.1 δ_min; Requallo-m3)."""

    key: ClassVar[str] = "min-labels"

    def min_total(self, minority: ArrayLike, pseudo: float = 0.0) -> FloatArray:
        x = _as_float(minority)
        return np.full(x.shape, float(self.count) + 2.0 * pseudo)


@dataclass(frozen=True)
class MaxLabels(_LabelCount):
    """Cap: stop once either class has ``count`` real votes (§4.1: "neither class can
    receive more than 14 labels"); ``r(x) = x + count``."""

    role: ClassVar[str] = "cap"
    key: ClassVar[str] = "max-labels"

    def min_total(self, minority: ArrayLike, pseudo: float = 0.0) -> FloatArray:
        return np.asarray(_as_float(minority) + float(self.count) + pseudo, dtype=float)


@dataclass(frozen=True)
class MaxTotalLabels(_LabelCount):
    """Cap: stop once the item has ``count`` real labels (§3.1 δ_max on ``a_i + b_i``)."""

    role: ClassVar[str] = "cap"
    key: ClassVar[str] = "max-total"

    def min_total(self, minority: ArrayLike, pseudo: float = 0.0) -> FloatArray:
        x = _as_float(minority)
        return np.full(x.shape, float(self.count) + 2.0 * pseudo)


@dataclass(frozen=True)
class AllOf(Requirement):
    """A combination: all quality rules must hold; any cap stops the item."""

    rules: tuple[Requirement, ...]

    def __post_init__(self) -> None:
        if not self.rules:
            raise InvalidParameterError("a requirement needs at least one rule")
        keys = [rule.key for rule in self.rules]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise InvalidParameterError(
                f"requirement rule given twice: {', '.join(duplicates)}; give each rule once"
            )

    @property
    def parts(self) -> tuple[Requirement, ...]:
        return self.rules

    def min_total(self, minority: ArrayLike, pseudo: float = 0.0) -> FloatArray:
        x = _as_float(minority)
        out = self.quality_total(x, pseudo)
        for part in self.rules:
            if part.role == "cap":
                out = np.minimum(out, part.min_total(x, pseudo))
        return np.asarray(out, dtype=float)


_RULES: dict[str, type[Requirement]] = {
    "ratio": MinimumRatio,
    "fisher": FisherTest,
    "min-labels": MinLabels,
    "max-labels": MaxLabels,
    "max-total": MaxTotalLabels,
}
_INT_RULES = {"min-labels", "max-labels", "max-total"}


def make_rule(key: str, value: str | float) -> Requirement:
    """One rule from its text key and value (``make_rule("fisher", "0.2")``)."""
    cls = _RULES.get(key)
    if cls is None:
        raise InvalidParameterError(
            f"unknown requirement {key!r}; allowed: {', '.join(_RULES)} (e.g. fisher=0.2)"
        )
    try:
        number: float = float(value)
        if key in _INT_RULES:
            if not float(number).is_integer():
                raise ValueError
            number = int(number)
    except (TypeError, ValueError):
        kind = "an integer" if key in _INT_RULES else "a number"
        raise InvalidParameterError(f"requirement {key}={value!r}: value must be {kind}") from None
    return cls(number)  # type: ignore[call-arg]


def combine(rules: Iterable[Requirement]) -> Requirement:
    """One requirement from rules (a single rule stays itself)."""
    flat = tuple(part for rule in rules for part in rule.parts)
    if len(flat) == 1:
        return flat[0]
    return AllOf(flat)


def parse_requirement(text: str) -> Requirement:
    """Parse ``"fisher=0.2:max-labels=14"`` (separators ``:``, ``,`` or ``+``).

    Raises:
        InvalidParameterError: empty text, unknown rule, bad value, or a rule given twice.
    """
    parts = [p.strip() for p in text.replace(",", ":").replace("+", ":").split(":") if p.strip()]
    if not parts:
        raise InvalidParameterError(
            f"empty requirement {text!r}; give rules like fisher=0.2:max-labels=14"
        )
    rules = []
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep:
            raise InvalidParameterError(
                f"requirement part {part!r} must look like key=value (e.g. ratio=4)"
            )
        rules.append(make_rule(key.strip(), value.strip()))
    return combine(rules)


def as_requirement(value: Requirement | str) -> Requirement:
    """A :class:`Requirement` from itself or its text."""
    if isinstance(value, Requirement):
        return value
    if isinstance(value, str):
        return parse_requirement(value)
    raise InvalidParameterError(
        f"requirement must be a Requirement or text like 'fisher=0.2', got {value!r}"
    )


__all__ = [
    "AllOf",
    "FisherTest",
    "MaxLabels",
    "MaxTotalLabels",
    "MinLabels",
    "MinimumRatio",
    "Requirement",
    "as_requirement",
    "combine",
    "make_rule",
    "parse_requirement",
]
