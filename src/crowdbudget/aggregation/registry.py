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
| ``bds-hard-blind-recheck-tempered`` | ``bds-hard-blind-recheck``, | as ``bds-hard`` |
|  | ``temperature="auto"`` (τ read on the model fitted: :mod:`._tempering`) | |
| ``bds-hard-blind-recheck-lone`` | ``bds-hard-blind-recheck``, | as ``bds-hard`` |
|  | ``lone_labels="skip-predictive"`` (a lone label read through | |
|  | ``E[e]``: :mod:`._lone_predictive`) | |
| ``bds-ev-blind-own-refit`` | :class:`PriorRefitDawidSkene`: ``bds-ev-blind-own`` | as ``bds``, |
|  | whose crowd prior is re-fitted once on its first fit's posterior | ``refit`` |
|  | (:mod:`.prior_refit`) | |
| ``bds-ev-blind-recheck-refit-ev`` | :class:`PriorRefitDawidSkene`: | as ``bds``, |
|  | ``bds-ev-blind-recheck``, its prior re-fitted on that fit's | ``refit`` |
|  | posterior; the stage with the larger evidence bound read | |
| ``bds-hard-blind-recheck-refit-ev`` | :class:`PriorRefitItemDifficulty`: | as ``bds-hard``, |
|  | ``bds-hard-blind-recheck`` whose workers' model alone is | ``refit`` |
|  | ``bds-ev-blind-recheck-refit-ev``'s (:mod:`.prior_refit`) | |
| ``bds-hard-blind-recheck-refit-ev-tempered`` | ``bds-hard-blind-recheck-refit-ev``, | as |
|  | ``temperature="auto"`` (the default verdict) | ``bds-hard``, ``refit`` |

Every id also takes ``seed`` (tie-breaking, and KOS's random start; the class's ``rng``).
Aliases with crowd-kit's long names: ``majority-vote``, ``weighted-majority-vote``,
``dawid-skene``, ``one-coin-dawid-skene``, ``belief-propagation``, ``zero-based-skill``,
``bayesian-dawid-skene``.

Ranges the closed intervals of :class:`~crowdbudget.registry.Param` cannot say (``alpha > 0``,
``damping < 1``) use :class:`AggregatorParam`, whose refusal also says what is allowed in the
words of the class's own check (``aggregator 'ds': n-iter=0 is out of range (n_iter must be
an integer >= 1)``).

The parameter rows and the entry builder are in :mod:`._registry_rows`; the Bayesian
Dawid–Skene family's entries (``bds`` and every ``bds-*``) in :mod:`._registry_bayesian`,
registered here after the others.

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

from dataclasses import fields

from crowdbudget.aggregation._registry_bayesian import BAYESIAN_DAWID_SKENE
from crowdbudget.aggregation._registry_rows import (
    EM,
    N_ITER,
    NETWORK_MAX_INNER_ITERATIONS,
    NETWORK_MAX_RESTARTS,
    NETWORK_MIN_TOLERANCE,
    AggregatorParam,
    AggregatorSpec,
    aggregator_entry,
    parameter_row,
    parameter_table,
    read_candidate_ids,
    read_positive_numbers,
)
from crowdbudget.aggregation.base import Aggregator
from crowdbudget.aggregation.belief_propagation import BeliefPropagation
from crowdbudget.aggregation.dawid_skene import DawidSkene
from crowdbudget.aggregation.defaults import DEFAULT_VERDICT as DEFAULT_VERDICT
from crowdbudget.aggregation.glad import GLAD
from crowdbudget.aggregation.kos import KOS
from crowdbudget.aggregation.mace import CLASS_PRIORS, MACE, METHODS
from crowdbudget.aggregation.mace import PRIOR_FITS as MACE_PRIOR_FITS
from crowdbudget.aggregation.majority_vote import BayesRuleAggregator, MajorityVote
from crowdbudget.aggregation.mmsr import MMSR
from crowdbudget.aggregation.model_choice import HeldOutLabelChoice
from crowdbudget.aggregation.one_coin_em import OneCoinDawidSkene
from crowdbudget.aggregation.weighted_majority_vote import WeightedMajorityVote
from crowdbudget.aggregation.zero_based_skill import TIES, Wawa, ZeroBasedSkill
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.registry import AGGREGATORS, ComponentSpec, Spec, parse

__all__ = [
    "DEFAULT_VERDICT",
    "AggregatorParam",
    "AggregatorSpec",
    "make_aggregator",
    "parameter_table",
    "parse_aggregator",
    "register_aggregator",
    "registered_aggregators",
]

# --------------------------------------------------------------------------- parameter rows
# --------------------------------------------------------------------------- parameter rows

KOS_ROWS = (
    *EM,
    parameter_row("init", str, "start of the worker messages", choices=("random", "ones")),
)
TIES_ROW = parameter_row("ties", str, "how a tied vote is broken", choices=TIES)


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
    parameter_row(
        "n-restarts",
        int,
        "random restarts (the best likelihood is kept)",
        low=1,
        network_high=NETWORK_MAX_RESTARTS,
    ),
    N_ITER,
    parameter_row("method", str, "variational Bayes or plain EM", choices=METHODS),
    parameter_row("alpha", float, "Beta prior a of a worker's spamming", low=0, low_open=True),
    parameter_row("beta", float, "Beta prior b of a worker's spamming", low=0, low_open=True),
    parameter_row(
        "strategy-prior", float, "Dirichlet prior of a spammer's labels", low=0, low_open=True
    ),
    parameter_row("default-noise", float, "width of the random start", low=0),
)
MACE_PRIOR_FIT = parameter_row(
    "prior-fit",
    str,
    "priors fitted to the crowd on the majority-vote start: none (hand-set alpha, beta, "
    "strategy-prior), competence (alpha, beta) or all (the strategy prior too)",
    choices=MACE_PRIOR_FITS,
)
MACE_CLASS_PRIOR = parameter_row(
    "class-prior",
    str,
    "prior of the true class: uniform (Hovy et al.) or learned from the data",
    choices=CLASS_PRIORS,
)

EM_PAPER = "Dawid & Skene 1979, Maximum likelihood estimation of observer error-rates"
KOS_PAPER = "Karger, Oh & Shah 2011, Iterative learning for reliable crowdsourcing systems"


for _spec in (
    aggregator_entry(
        "mv", MajorityVote, "majority vote, ties at random", aliases=("majority-vote",)
    ),
    aggregator_entry(
        "wmv",
        WeightedMajorityVote,
        "majority vote weighted by agreement with the majority",
        aliases=("weighted-majority-vote",),
    ),
    aggregator_entry(
        "ds",
        DawidSkene,
        "Dawid-Skene EM, full confusion matrices",
        *EM,
        paper=EM_PAPER,
        aliases=("dawid-skene",),
    ),
    aggregator_entry(
        "one-coin-em",
        OneCoinDawidSkene,
        "one-coin Dawid-Skene EM (one accuracy)",
        *EM,
        paper=EM_PAPER,
        aliases=("one-coin-dawid-skene",),
    ),
    aggregator_entry(
        "kos",
        KOS,
        "Karger-Oh-Shah iterative inference, normalised messages (binary)",
        *KOS_ROWS,
        paper=KOS_PAPER,
        binary_only=True,
    ),
    aggregator_entry(
        "kos-mean",
        KOS,
        "KOS with worker messages divided by the worker's degree (binary)",
        *KOS_ROWS,
        paper=KOS_PAPER,
        defaults={"worker_messages": "mean"},
        binary_only=True,
    ),
    aggregator_entry(
        "bp",
        BeliefPropagation,
        "belief propagation, Beta(alpha, beta) worker reliability (Liu, Peng, Ihler 2012)",
        *EM,
        parameter_row(
            "alpha", float, "Beta prior a of a worker's reliability", low=0, low_open=True
        ),
        parameter_row(
            "beta", float, "Beta prior b of a worker's reliability", low=0, low_open=True
        ),
        parameter_row("n-nodes", int, "grid nodes of the reliability messages", low=2, high=4096),
        parameter_row(
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
    aggregator_entry(
        "bayes",
        BayesRuleAggregator,
        "Bayes rule on the Beta/Dirichlet posterior of the vote counts (Chen et al. Prop. 2.1)",
        parameter_row(
            "prior",
            read_positive_numbers,
            "Dirichlet pseudo-count of every class, or one per class (2,1)",
            type_label="positive number or list",
        ),
        parameter_row(
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
    aggregator_entry("wawa", Wawa, "worker agreement with aggregate (crowd-kit's Wawa)", TIES_ROW),
    aggregator_entry(
        "zbs",
        ZeroBasedSkill,
        "zero-based skill: weighted vote, skills by gradient steps (crowd-kit's ZBS)",
        N_ITER,
        parameter_row("lr-init", float, "first gradient step size", low=0, low_open=True),
        parameter_row("lr-steps-to-reduce", int, "iterations between step-size reductions", low=1),
        parameter_row(
            "lr-reduce-factor",
            float,
            "factor of each step-size reduction",
            low=0,
            high=1,
            low_open=True,
        ),
        parameter_row("eps", float, "added to every initial skill 1/C", low=0),
        TIES_ROW,
        aliases=("zero-based-skill",),
    ),
    aggregator_entry(
        "glad",
        GLAD,
        "GLAD: worker expertise and item difficulty (Whitehill et al. 2009)",
        *EM,
        parameter_row("alpha-prior-mean", float, "prior mean of a worker's expertise"),
        parameter_row("beta-prior-mean", float, "prior mean of an item's log inverse difficulty"),
        parameter_row(
            "m-step-max-iter",
            int,
            "most gradient iterations of an M-step",
            low=1,
            network_high=NETWORK_MAX_INNER_ITERATIONS,
        ),
        parameter_row(
            "m-step-tol",
            float,
            "gradient tolerance of an M-step",
            low=0,
            network_low=NETWORK_MIN_TOLERANCE,
        ),
        paper="Whitehill et al. 2009, Whose vote should count more",
    ),
    aggregator_entry(
        "mace",
        MACE,
        "MACE: spamming workers, variational Bayes (Hovy et al. 2013)",
        *MACE_ROWS,
        MACE_PRIOR_FIT,
        MACE_CLASS_PRIOR,
        paper="Hovy et al. 2013, Learning whom to trust with MACE",
    ),
    aggregator_entry(
        "mace-eb",
        MACE,
        "MACE whose competence prior is fitted to the crowd (empirical Bayes)",
        *MACE_ROWS,
        MACE_PRIOR_FIT,
        MACE_CLASS_PRIOR,
        paper="Hovy et al. 2013, Learning whom to trust with MACE; priors by type-II ML",
        defaults={"prior_fit": "competence"},
    ),
    aggregator_entry(
        "mace-eb-cp",
        MACE,
        "MACE with the empirical-Bayes competence prior and a class prior learned from the data",
        *MACE_ROWS,
        MACE_PRIOR_FIT,
        MACE_CLASS_PRIOR,
        paper="Hovy et al. 2013, Learning whom to trust with MACE; priors by type-II ML",
        defaults={"prior_fit": "competence", "class_prior": "learned"},
    ),
    aggregator_entry(
        "auto",
        HeldOutLabelChoice,
        "the candidate whose posterior best predicts held-out labels (K-fold over labels)",
        parameter_row(
            "candidates",
            read_candidate_ids,
            "aggregator ids to choose among, in order of preference (bds,ds)",
            type_label="list of registered aggregator ids other than auto",
        ),
        parameter_row("n-folds", int, "folds of the labels", low=2, high=20),
        parameter_row(
            "shrinkage", float, "labels' worth of the pooled confusion matrix", low=0, low_open=True
        ),
        parameter_row(
            "level-within",
            float,
            "standard errors of the score difference within which candidates are level",
            low=0,
        ),
        parameter_row(
            "together-up-to",
            int,
            "an item with at most this many labels keeps them in one fold (not scored)",
            low=0,
        ),
        parameter_row(
            "min-partnered",
            int,
            "fewer labels with a partner on their item than this: the first candidate",
            low=0,
        ),
    ),
    aggregator_entry(
        "mmsr",
        MMSR,
        "M-MSR: one-coin skills by robust rank-one completion (Ma & Olshevsky 2020)",
        *EM,
        paper="Ma & Olshevsky 2020, Adversarial crowdsourcing through robust rank-one matrix "
        "completion",
    ),
    *BAYESIAN_DAWID_SKENE,
):
    register_aggregator(_spec)
