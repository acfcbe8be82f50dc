"""The built-in aggregators, on the one component registry (``registry.AGGREGATORS``).

Aggregator ids follow the grammar of every id (:func:`crowdbudget.registry.parse`):
``make_aggregator("ds:n-iter=50")`` is ``DawidSkene(n_iter=50)``. Each id registers a
:class:`~crowdbudget.registry.ComponentSpec` (an :class:`AggregatorSpec`) with a parameter table
— type, allowed range or choices, default (the class's own), one-line doc — and its
capabilities (``binary_only`` for the KOS pair). The table drives the validation (a bad value is
refused in one line naming the id typed, before anything is built), ``crowdbudget aggregators
[--json]`` and ``crowdbudget aggregate --help``. Ids:

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
| ``wawa`` | :class:`Wawa` (crowd-kit's; = ``wmv``) | ``ties`` |
| ``zbs`` | :class:`ZeroBasedSkill` | ``n-iter``, ``lr-init``, ``lr-steps-to-reduce``, |
|  |  | ``lr-reduce-factor``, ``eps``, ``ties`` |
| ``glad`` | :class:`GLAD` (Whitehill et al. 2009) | ``n-iter``, ``tol``, ``alpha-prior-mean``, |
|  |  | ``beta-prior-mean``, ``m-step-max-iter``, ``m-step-tol`` |
| ``mace`` | :class:`MACE` (Hovy et al. 2013) | ``n-restarts``, ``n-iter``, ``method``, ``alpha``, |
|  |  | ``beta``, ``strategy-prior``, ``default-noise``, ``prior-fit``, |
|  |  | ``class-prior`` |
| ``mace-eb`` | :class:`MACE`, ``prior_fit="competence"`` | as ``mace`` |
| ``mace-eb-cp`` | :class:`MACE`, ``prior_fit="competence"``, | as ``mace`` |
|  | ``class_prior="learned"`` |  |
| ``auto`` | :class:`HeldOutLabelChoice` (the candidate that best predicts held-out | |
|  | labels) | ``candidates``, ``n-folds``, ``shrinkage``, ``level-within``, |
|  |  | ``together-up-to``, ``min-partnered`` |
| ``mmsr`` | :class:`MMSR` (Ma & Olshevsky 2020) | ``n-iter``, ``tol`` |
| ``bds`` | :class:`BayesianDawidSkene` (Kim & Ghahramani 2012, VB, empirical-Bayes prior) | |
|  |  | ``n-iter``, ``tol``, ``class-prior``, ``confusion-prior``, ``pool-below``, |
|  |  | ``prior-fit``, ``temperature``, ``prior-form``, ``prior-floor``, |
|  |  | ``lone-labels``, ``asymmetry`` |
| ``bds-oc`` | :class:`BayesianDawidSkene`, ``prior_form="one-coin"``, | as ``bds`` |
|  | ``prior_floor=0.1``, ``lone_labels="skip"`` (one crowd accuracy at the prior's | |
|  | level, workers judged by partnered labels) | |
| ``bds-ev`` | ``bds-oc``, ``asymmetry="evidence"`` (each worker symmetric or free | as ``bds`` |
|  | as its marginal likelihood decides: :mod:`.worker_asymmetry`; the default | |
|  | verdict) | |
| ``bds-ev-blind`` | ``bds-ev`` whose workers may also be class-blind (spammers, | as ``bds`` |
|  | one-class workers: :mod:`.worker_blind`) | |
| ``bds-ev-blind-own`` | ``bds-ev-blind`` whose workers are read blind only on their | as ``bds`` |
|  | own strong evidence (log Bayes factor above 3 nats: :mod:`.worker_blind`) | |
| ``bds-ev-blind-form`` | ``bds-ev-blind-own``, ``prior_form="evidence"``: the | as ``bds`` |
|  | one-coin and the confusion prior's fits, the one with the larger evidence | |
|  | bound read (:mod:`.bayesian_dawid_skene`, "Form chosen by the | |
|  | evidence") | |
| ``bds-ev-blind-recheck`` | ``bds-ev-blind-form`` whose second fit is made only when | as ``bds`` |
|  | the first reads every item as one class | |
| ``bds-sym`` | ``bds-oc`` with ``asymmetry="none"`` (every worker one accuracy) | as ``bds`` |
| ``bds-hard`` | :class:`ItemDifficultyDawidSkene`: ``bds-ev`` whose items are each | as ``bds``, |
|  | easy or hard (a hard item's labels follow one crowd confusion: | ``difficulty`` |
|  | :mod:`.item_difficulty`) | |
| ``bds-hard-blind-own`` | ``bds-hard`` whose easy items' workers are | as ``bds-hard`` |
|  | ``bds-ev-blind-own``'s (``asymmetry="evidence-blind-own"``) | |
| ``bds-hard-blind-recheck`` | ``bds-hard-blind-own`` on the default's reading: | as ``bds-hard`` |
|  | ``prior_form="evidence-one-class"`` (``bds-ev-blind-recheck``'s re-check) | |
| ``bds-ev-blind-own-refit`` | :class:`PriorRefitDawidSkene`: ``bds-ev-blind-own`` | as ``bds`` |
|  | whose crowd prior is re-fitted once on its first fit's posterior | |
|  | (:mod:`.prior_refit`) | |

Every id also takes ``seed`` (tie-breaking, and KOS's random start; the class's ``rng``).
Aliases with crowd-kit's long names: ``majority-vote``, ``weighted-majority-vote``,
``dawid-skene``, ``one-coin-dawid-skene``, ``belief-propagation``, ``zero-based-skill``,
``bayesian-dawid-skene``.

Ranges the closed intervals of :class:`~crowdbudget.registry.Param` cannot say (``alpha > 0``,
``damping < 1``) use :class:`AggregatorParam`, whose refusal also says what is allowed in the
words of the class's own check (``aggregator 'ds': n-iter=0 is out of range (n_iter must be
an integer >= 1)``).

:data:`DEFAULT_VERDICT` is the id of the default verdict (``aggregate``'s default method,
``compare``'s ``verdict=`` policy, the worker-aware default policy's verdict and ``auto``'s
first candidate), chosen by the worst-case rule on the stress bed (docs/stress-bed.md,
``crowdbudget stress``); it is set in :mod:`~crowdbudget.aggregation.defaults`.

Example:
    >>> make_aggregator("ds:n-iter=50")
    DawidSkene(rng=0, n_iter=50, tol=1e-05)
    >>> AGGREGATORS.spec("kos").capabilities.binary_only
    True
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from crowdbudget.aggregation.base import Aggregator
from crowdbudget.aggregation.bayesian_dawid_skene import (
    LONE_LABELS,
    PRIOR_FITS,
    PRIOR_FORMS,
    BayesianDawidSkene,
)
from crowdbudget.aggregation.belief_propagation import BeliefPropagation
from crowdbudget.aggregation.dawid_skene import DawidSkene
from crowdbudget.aggregation.defaults import DEFAULT_VERDICT as DEFAULT_VERDICT
from crowdbudget.aggregation.glad import GLAD
from crowdbudget.aggregation.item_difficulty import DIFFICULTIES, ItemDifficultyDawidSkene
from crowdbudget.aggregation.kos import KOS
from crowdbudget.aggregation.mace import CLASS_PRIORS, MACE, METHODS
from crowdbudget.aggregation.mace import PRIOR_FITS as MACE_PRIOR_FITS
from crowdbudget.aggregation.majority_vote import BayesRuleAggregator, MajorityVote
from crowdbudget.aggregation.mmsr import MMSR
from crowdbudget.aggregation.model_choice import HeldOutLabelChoice
from crowdbudget.aggregation.one_coin_em import OneCoinDawidSkene
from crowdbudget.aggregation.prior_refit import PriorRefitDawidSkene
from crowdbudget.aggregation.weighted_majority_vote import WeightedMajorityVote
from crowdbudget.aggregation.worker_asymmetry import ASYMMETRY
from crowdbudget.aggregation.zero_based_skill import TIES, Wawa, ZeroBasedSkill
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.registry import AGGREGATORS, Capabilities, ComponentSpec, Param, Spec, parse

# --------------------------------------------------------------------------- parameter rows


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


def _row(name: str, read: Callable[[str], Any], doc: str, **rest: Any) -> AggregatorParam:
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

SEED = _row("seed", int, "seed of tie-breaking (and of a random start)", low=0, argument="rng")
N_ITER = _row("n-iter", int, "most iterations", low=1, network_high=NETWORK_MAX_ITERATIONS)
TOL = _row(
    "tol",
    float,
    "stop once an iteration changes the estimates by less than this",
    low=0,
    network_low=NETWORK_MIN_TOLERANCE,
)
EM = (N_ITER, TOL)
KOS_ROWS = (
    *EM,
    _row("init", str, "start of the worker messages", choices=("random", "ones")),
)
TIES_ROW = _row("ties", str, "how a tied vote is broken", choices=TIES)
DIFFICULTY_ROW = _row(
    "difficulty",
    str,
    "each item easy or hard when the labels' likelihood says so (evidence: the "
    "mixture fitted only past a cheap gate; evidence-full: always both fits), always "
    "(mixture), or every item easy (none: the workers' model alone, bds-ev for bds-hard)",
    choices=DIFFICULTIES,
)


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


def _aggregator(
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


def register_aggregator(spec: ComponentSpec) -> AggregatorSpec:
    """Add ``spec`` to :data:`~crowdbudget.registry.AGGREGATORS` (its id and aliases must be
    new)."""
    entry = _as_aggregator_spec(spec)
    AGGREGATORS.register(entry)
    return entry


def _as_aggregator_spec(entry: ComponentSpec) -> AggregatorSpec:
    if isinstance(entry, AggregatorSpec):
        return entry
    return AggregatorSpec(**{f.name: getattr(entry, f.name) for f in fields(entry)})


def registered_aggregators() -> dict[str, AggregatorSpec]:
    """Every registered aggregator, by id (aliases not repeated), in registration order."""
    return {name: _as_aggregator_spec(e) for name, e in AGGREGATORS.entries().items()}


def parse_aggregator(text: str | Spec) -> Spec:
    """``text`` as a checked aggregator :class:`~crowdbudget.registry.Spec`: the id resolved
    (aliases too) and every parameter read through its row. An unknown id is refused with the
    registered ids and aliases."""
    parsed = text if isinstance(text, Spec) else parse(text)
    if parsed.kind != AGGREGATORS.kind:
        name = parsed.id.partition(":")[0]
        entries, aliases = AGGREGATORS.entries(), AGGREGATORS.aliases()
        if name not in entries and name not in aliases:
            raise InvalidParameterError(
                f"unknown aggregator {name!r}; registered aggregators: {', '.join(entries)} "
                f"(aliases: {', '.join(aliases)})"
            )
    return AGGREGATORS.spec(parsed)


def make_aggregator(text: str | Spec) -> Aggregator:
    """Build the aggregator named by ``text`` (an id with optional ``:key=value`` params, or
    a :class:`~crowdbudget.registry.Spec`)."""
    aggregator: Aggregator = AGGREGATORS.build(parse_aggregator(text))
    return aggregator


# --------------------------------------------------------------------------- the built-in ids

MACE_ROWS = (
    _row(
        "n-restarts",
        int,
        "random restarts (the best likelihood is kept)",
        low=1,
        network_high=NETWORK_MAX_RESTARTS,
    ),
    N_ITER,
    _row("method", str, "variational Bayes or plain EM", choices=METHODS),
    _row("alpha", float, "Beta prior a of a worker's spamming", low=0, low_open=True),
    _row("beta", float, "Beta prior b of a worker's spamming", low=0, low_open=True),
    _row("strategy-prior", float, "Dirichlet prior of a spammer's labels", low=0, low_open=True),
    _row("default-noise", float, "width of the random start", low=0),
)
MACE_PRIOR_FIT = _row(
    "prior-fit",
    str,
    "priors fitted to the crowd on the majority-vote start: none (hand-set alpha, beta, "
    "strategy-prior), competence (alpha, beta) or all (the strategy prior too)",
    choices=MACE_PRIOR_FITS,
)
MACE_CLASS_PRIOR = _row(
    "class-prior",
    str,
    "prior of the true class: uniform (Hovy et al.) or learned from the data",
    choices=CLASS_PRIORS,
)

EM_PAPER = "Dawid & Skene 1979, Maximum likelihood estimation of observer error-rates"
KOS_PAPER = "Karger, Oh & Shah 2011, Iterative learning for reliable crowdsourcing systems"

#: the parameter rows of ``bds`` and ``bds-oc``
BDS_ROWS = (
    *EM,
    _row("class-prior", float, "Dirichlet pseudo-count of every class", low=0, low_open=True),
    _row(
        "confusion-prior",
        read_positive_pair,
        "fixed confusion pseudo-counts (diagonal, off-diagonal); default: empirical Bayes",
        type_label="pair of positive numbers",
    ),
    _row("pool-below", int, "workers with fewer labels share one confusion matrix", low=0),
    _row(
        "prior-fit",
        str,
        "empirical-Bayes prior fitted once on the majority-vote start (start) or at every "
        "iteration (every, the first build's rule)",
        choices=PRIOR_FITS,
    ),
    _row(
        "temperature",
        read_temperature,
        "posterior tempering in (0, 1], or auto",
        low=0,
        high=1,
        low_open=True,
        type_label="number or auto",
    ),
    _row(
        "prior-form",
        str,
        "empirical-Bayes prior rows fitted each on its own (confusion) or one crowd accuracy "
        "for every row (one-coin)",
        choices=PRIOR_FORMS,
    ),
    _row("prior-floor", float, "lower bound of every empirical-Bayes prior pseudo-count", low=0),
    _row(
        "lone-labels",
        str,
        "a label alone on its item counts in its worker's model (count), or not when two "
        "workers have a label with a partner (skip; skip-prior: nor in the prior's fit)",
        choices=LONE_LABELS,
    ),
    _row(
        "asymmetry",
        str,
        "each worker's confusion matrix free, symmetric (none: one accuracy) or either as its "
        "marginal likelihood decides (evidence)",
        choices=ASYMMETRY,
    ),
)


for _spec in (
    _aggregator("mv", MajorityVote, "majority vote, ties at random", aliases=("majority-vote",)),
    _aggregator(
        "wmv",
        WeightedMajorityVote,
        "majority vote weighted by agreement with the majority",
        aliases=("weighted-majority-vote",),
    ),
    _aggregator(
        "ds",
        DawidSkene,
        "Dawid-Skene EM, full confusion matrices",
        *EM,
        paper=EM_PAPER,
        aliases=("dawid-skene",),
    ),
    _aggregator(
        "one-coin-em",
        OneCoinDawidSkene,
        "one-coin Dawid-Skene EM (one accuracy)",
        *EM,
        paper=EM_PAPER,
        aliases=("one-coin-dawid-skene",),
    ),
    _aggregator(
        "kos",
        KOS,
        "Karger-Oh-Shah iterative inference, normalised messages (binary)",
        *KOS_ROWS,
        paper=KOS_PAPER,
        binary_only=True,
    ),
    _aggregator(
        "kos-mean",
        KOS,
        "KOS with worker messages divided by the worker's degree (binary)",
        *KOS_ROWS,
        paper=KOS_PAPER,
        defaults={"worker_messages": "mean"},
        binary_only=True,
    ),
    _aggregator(
        "bp",
        BeliefPropagation,
        "belief propagation, Beta(alpha, beta) worker reliability (Liu, Peng, Ihler 2012)",
        *EM,
        _row("alpha", float, "Beta prior a of a worker's reliability", low=0, low_open=True),
        _row("beta", float, "Beta prior b of a worker's reliability", low=0, low_open=True),
        _row("n-nodes", int, "grid nodes of the reliability messages", low=2, high=4096),
        _row(
            "damping",
            float,
            "share of the old message kept at each update",
            low=0,
            high=1,
            high_open=True,
        ),
        paper="Liu, Peng & Ihler 2012, Variational inference for crowdsourcing",
        aliases=("belief-propagation",),
    ),
    _aggregator(
        "bayes",
        BayesRuleAggregator,
        "Bayes rule on the Beta/Dirichlet posterior of the vote counts (Chen et al. Prop. 2.1)",
        _row(
            "prior",
            read_positive_numbers,
            "Dirichlet pseudo-count of every class, or one per class (2,1)",
            type_label="positive number or list",
        ),
        _row(
            "threshold",
            float,
            "two classes: label 1 iff P(theta >= threshold) >= 1/2",
            low=0,
            high=1,
            low_open=True,
            high_open=True,
        ),
        paper="Chen, Lin & Zhou 2013, Optimistic knowledge gradient policy (Prop. 2.1)",
    ),
    _aggregator("wawa", Wawa, "worker agreement with aggregate (crowd-kit's Wawa)", TIES_ROW),
    _aggregator(
        "zbs",
        ZeroBasedSkill,
        "zero-based skill: weighted vote, skills by gradient steps (crowd-kit's ZBS)",
        N_ITER,
        _row("lr-init", float, "first gradient step size", low=0, low_open=True),
        _row("lr-steps-to-reduce", int, "iterations between step-size reductions", low=1),
        _row(
            "lr-reduce-factor",
            float,
            "factor of each step-size reduction",
            low=0,
            high=1,
            low_open=True,
        ),
        _row("eps", float, "added to every initial skill 1/C", low=0),
        TIES_ROW,
        aliases=("zero-based-skill",),
    ),
    _aggregator(
        "glad",
        GLAD,
        "GLAD: worker expertise and item difficulty (Whitehill et al. 2009)",
        *EM,
        _row("alpha-prior-mean", float, "prior mean of a worker's expertise"),
        _row("beta-prior-mean", float, "prior mean of an item's log inverse difficulty"),
        _row(
            "m-step-max-iter",
            int,
            "most gradient iterations of an M-step",
            low=1,
            network_high=NETWORK_MAX_INNER_ITERATIONS,
        ),
        _row(
            "m-step-tol",
            float,
            "gradient tolerance of an M-step",
            low=0,
            network_low=NETWORK_MIN_TOLERANCE,
        ),
        paper="Whitehill et al. 2009, Whose vote should count more",
    ),
    _aggregator(
        "mace",
        MACE,
        "MACE: spamming workers, variational Bayes (Hovy et al. 2013)",
        *MACE_ROWS,
        MACE_PRIOR_FIT,
        MACE_CLASS_PRIOR,
        paper="Hovy et al. 2013, Learning whom to trust with MACE",
    ),
    _aggregator(
        "mace-eb",
        MACE,
        "MACE whose competence prior is fitted to the crowd (empirical Bayes)",
        *MACE_ROWS,
        MACE_PRIOR_FIT,
        MACE_CLASS_PRIOR,
        paper="Hovy et al. 2013, Learning whom to trust with MACE; priors by type-II ML",
        defaults={"prior_fit": "competence"},
    ),
    _aggregator(
        "mace-eb-cp",
        MACE,
        "MACE with the empirical-Bayes competence prior and a class prior learned from the data",
        *MACE_ROWS,
        MACE_PRIOR_FIT,
        MACE_CLASS_PRIOR,
        paper="Hovy et al. 2013, Learning whom to trust with MACE; priors by type-II ML",
        defaults={"prior_fit": "competence", "class_prior": "learned"},
    ),
    _aggregator(
        "auto",
        HeldOutLabelChoice,
        "the candidate whose posterior best predicts held-out labels (K-fold over labels)",
        _row(
            "candidates",
            read_candidate_ids,
            "aggregator ids to choose among, in order of preference (bds,ds)",
            type_label="list of registered aggregator ids other than auto",
        ),
        _row("n-folds", int, "folds of the labels", low=2, high=20),
        _row(
            "shrinkage", float, "labels' worth of the pooled confusion matrix", low=0, low_open=True
        ),
        _row(
            "level-within",
            float,
            "standard errors of the score difference within which candidates are level",
            low=0,
        ),
        _row(
            "together-up-to",
            int,
            "an item with at most this many labels keeps them in one fold (not scored)",
            low=0,
        ),
        _row(
            "min-partnered",
            int,
            "fewer labels with a partner on their item than this: the first candidate",
            low=0,
        ),
    ),
    _aggregator(
        "mmsr",
        MMSR,
        "M-MSR: one-coin skills by robust rank-one completion (Ma & Olshevsky 2020)",
        *EM,
        paper="Ma & Olshevsky 2020, Adversarial crowdsourcing through robust rank-one matrix "
        "completion",
    ),
    _aggregator(
        "bds",
        BayesianDawidSkene,
        "Bayesian Dawid-Skene (IBCC), variational, empirical-Bayes Dirichlet priors",
        *BDS_ROWS,
        paper="Kim & Ghahramani 2012, Bayesian classifier combination",
        aliases=("bayesian-dawid-skene",),
    ),
    _aggregator(
        "bds-oc",
        BayesianDawidSkene,
        "Bayesian Dawid-Skene whose empirical-Bayes prior is one-coin (one crowd accuracy "
        "for every class), prior pseudo-counts at least 0.1, workers judged by partnered labels",
        *BDS_ROWS,
        paper="Kim & Ghahramani 2012, Bayesian classifier combination; prior by type-II ML",
        defaults={"prior_form": "one-coin", "prior_floor": 0.1, "lone_labels": "skip"},
    ),
    _aggregator(
        "bds-ev",
        BayesianDawidSkene,
        "bds-oc whose workers are each symmetric (one accuracy) or free (a full confusion "
        "matrix) as their marginal likelihood decides, the crowd's share fitted by type-II ML",
        *BDS_ROWS,
        paper="Kim & Ghahramani 2012, Bayesian classifier combination; a one-coin / confusion "
        "mixture of workers by variational Bayes",
        defaults={
            "prior_form": "one-coin",
            "prior_floor": 0.1,
            "lone_labels": "skip",
            "asymmetry": "evidence",
        },
    ),
    _aggregator(
        "bds-ev-blind",
        BayesianDawidSkene,
        "bds-ev whose workers may also be class-blind (answers independent of the class: "
        "spammers, one-class workers), the crowd's three shares by type-II ML",
        *BDS_ROWS,
        paper="Kim & Ghahramani 2012; Hovy et al. 2013 (MACE's spammer as a worker kind)",
        defaults={
            "prior_form": "one-coin",
            "prior_floor": 0.1,
            "lone_labels": "skip",
            "asymmetry": "evidence-blind",
        },
    ),
    _aggregator(
        "bds-ev-blind-own",
        BayesianDawidSkene,
        "bds-ev-blind whose workers are read blind only on their own strong evidence (log "
        "Bayes factor for the blind kind above 3 nats), never on the crowd's share alone",
        *BDS_ROWS,
        paper="Kim & Ghahramani 2012; Hovy et al. 2013; Kass & Raftery 1995 (Bayes factors)",
        defaults={
            "prior_form": "one-coin",
            "prior_floor": 0.1,
            "lone_labels": "skip",
            "asymmetry": "evidence-blind-own",
        },
    ),
    _aggregator(
        "bds-ev-blind-form",
        BayesianDawidSkene,
        "bds-ev-blind-own whose prior's form (one-coin or a confusion matrix) is the one whose "
        "fit has the larger evidence lower bound",
        *BDS_ROWS,
        paper="Kim & Ghahramani 2012; Hovy et al. 2013; prior form by the variational evidence",
        defaults={
            "prior_form": "evidence",
            "prior_floor": 0.1,
            "lone_labels": "skip",
            "asymmetry": "evidence-blind-own",
        },
    ),
    _aggregator(
        "bds-ev-blind-recheck",
        BayesianDawidSkene,
        "bds-ev-blind-own whose reading of every item as one class is checked against bds's "
        "reading (confusion prior, every label counted) by the fits' evidence lower bound",
        *BDS_ROWS,
        paper="Kim & Ghahramani 2012; Hovy et al. 2013; the reading by the variational evidence",
        defaults={
            "prior_form": "evidence-one-class",
            "prior_floor": 0.1,
            "lone_labels": "skip",
            "asymmetry": "evidence-blind-own",
        },
    ),
    _aggregator(
        "bds-sym",
        BayesianDawidSkene,
        "bds-oc whose workers are symmetric: one accuracy each, errors spread evenly",
        *BDS_ROWS,
        paper="Kim & Ghahramani 2012, Bayesian classifier combination; one-coin workers",
        defaults={
            "prior_form": "one-coin",
            "prior_floor": 0.1,
            "lone_labels": "skip",
            "asymmetry": "none",
        },
    ),
    _aggregator(
        "bds-hard",
        ItemDifficultyDawidSkene,
        "bds-ev whose items are each easy (labels by each worker's confusion) or hard (labels "
        "by one crowd confusion: errors correlated across workers), the hard share learned",
        *BDS_ROWS,
        DIFFICULTY_ROW,
        paper="Kim & Ghahramani 2012, Bayesian classifier combination; an easy / hard mixture "
        "of items (Whitehill et al. 2009, GLAD) by variational Bayes",
    ),
    *(
        _aggregator(
            f"bds-hard-blind-{name}",
            ItemDifficultyDawidSkene,
            f"bds-hard whose easy items' workers are bds-ev-blind-{name}'s{what}",
            *BDS_ROWS,
            DIFFICULTY_ROW,
            paper="Kim & Ghahramani 2012; Whitehill et al. 2009 (item difficulty); Hovy et al. "
            "2013; Kass & Raftery 1995",
            defaults={"asymmetry": "evidence-blind-own", **form},
        )
        for name, form, what in (
            ("own", {}, " (symmetric, free or, on their own strong evidence, class-blind)"),
            (
                "recheck",
                {"prior_form": "evidence-one-class"},
                ", a reading of every item as one class re-checked as it does",
            ),
        )
    ),
    _aggregator(
        "bds-ev-blind-own-refit",
        PriorRefitDawidSkene,
        "bds-ev-blind-own whose crowd prior is re-fitted once on its own first fit's class "
        "posterior (instead of the majority vote's), the verdict fitted again under it",
        *BDS_ROWS,
        paper="Kim & Ghahramani 2012, Bayesian classifier combination; a second "
        "empirical-Bayes stage",
        defaults={
            "prior_form": "one-coin",
            "prior_floor": 0.1,
            "lone_labels": "skip",
            "asymmetry": "evidence-blind-own",
        },
    ),
):
    register_aggregator(_spec)
