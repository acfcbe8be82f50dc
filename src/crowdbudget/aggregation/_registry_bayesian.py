"""The Bayesian Dawid–Skene family's registry entries (``bds`` and every ``bds-*`` id).

Registered by :mod:`.registry` after the other built-in ids, in this order; the ids, their
readings and their papers are tabled in :mod:`.registry`'s docstring.
"""

from __future__ import annotations

from crowdbudget.aggregation._registry_rows import (
    EM,
    AggregatorSpec,
    aggregator_entry,
    parameter_row,
    read_positive_pair,
    read_temperature,
)
from crowdbudget.aggregation.bayesian_dawid_skene import (
    LONE_LABELS,
    PRIOR_FITS,
    PRIOR_FORMS,
    BayesianDawidSkene,
)
from crowdbudget.aggregation.item_difficulty import DIFFICULTIES, ItemDifficultyDawidSkene
from crowdbudget.aggregation.prior_refit import (
    REFITS,
    PriorRefitDawidSkene,
    PriorRefitItemDifficulty,
)
from crowdbudget.aggregation.worker_asymmetry import ASYMMETRY

#: the parameter rows of ``bds`` and ``bds-oc``
BDS_ROWS = (
    *EM,
    parameter_row(
        "class-prior", float, "Dirichlet pseudo-count of every class", low=0, low_open=True
    ),
    parameter_row(
        "confusion-prior",
        read_positive_pair,
        "fixed confusion pseudo-counts (diagonal, off-diagonal); default: empirical Bayes",
        type_label="pair of positive numbers",
    ),
    parameter_row("pool-below", int, "workers with fewer labels share one confusion matrix", low=0),
    parameter_row(
        "prior-fit",
        str,
        "empirical-Bayes prior fitted once on the majority-vote start (start) or at every "
        "iteration (every, the first build's rule)",
        choices=PRIOR_FITS,
    ),
    parameter_row(
        "temperature",
        read_temperature,
        "posterior tempering in (0, 1], or auto",
        low=0,
        high=1,
        low_open=True,
        type_label="number or auto",
    ),
    parameter_row(
        "prior-form",
        str,
        "empirical-Bayes prior rows fitted each on its own (confusion) or one crowd accuracy "
        "for every row (one-coin)",
        choices=PRIOR_FORMS,
    ),
    parameter_row(
        "prior-floor", float, "lower bound of every empirical-Bayes prior pseudo-count", low=0
    ),
    parameter_row(
        "lone-labels",
        str,
        "a label alone on its item counts in its worker's model (count), or not when two "
        "workers have a label with a partner (skip; skip-prior: nor in the prior's fit; "
        "skip-predictive: never, read through the worker's predictive E[e])",
        choices=LONE_LABELS,
    ),
    parameter_row(
        "asymmetry",
        str,
        "each worker's confusion matrix free, symmetric (none: one accuracy) or either as its "
        "marginal likelihood decides (evidence)",
        choices=ASYMMETRY,
    ),
)

DIFFICULTY_ROW = parameter_row(
    "difficulty",
    str,
    "each item easy or hard when the labels' likelihood says so (evidence: the "
    "mixture fitted only past a cheap gate; evidence-full: always both fits), always "
    "(mixture), or every item easy (none: the workers' model alone, bds-ev for bds-hard)",
    choices=DIFFICULTIES,
)

REFIT_ROW = parameter_row(
    "refit",
    str,
    "which stage is read: the prior re-fitted on the first fit's posterior (always), or the "
    "stage whose fit has the larger evidence lower bound (evidence)",
    choices=REFITS,
)

BAYESIAN_DAWID_SKENE: tuple[AggregatorSpec, ...] = (
    aggregator_entry(
        "bds",
        BayesianDawidSkene,
        "Bayesian Dawid-Skene (IBCC), variational, empirical-Bayes Dirichlet priors",
        *BDS_ROWS,
        paper="Kim & Ghahramani 2012, Bayesian classifier combination",
        aliases=("bayesian-dawid-skene",),
    ),
    aggregator_entry(
        "bds-oc",
        BayesianDawidSkene,
        "Bayesian Dawid-Skene whose empirical-Bayes prior is one-coin (one crowd accuracy "
        "for every class), prior pseudo-counts at least 0.1, workers judged by partnered labels",
        *BDS_ROWS,
        paper="Kim & Ghahramani 2012, Bayesian classifier combination; prior by type-II ML",
        defaults={"prior_form": "one-coin", "prior_floor": 0.1, "lone_labels": "skip"},
    ),
    aggregator_entry(
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
    aggregator_entry(
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
    aggregator_entry(
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
    aggregator_entry(
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
    aggregator_entry(
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
    aggregator_entry(
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
    aggregator_entry(
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
        aggregator_entry(
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
    aggregator_entry(
        "bds-hard-blind-recheck-tempered",
        ItemDifficultyDawidSkene,
        "bds-hard-blind-recheck reported tempered: the power posterior whose temperature "
        "maximises the leave-one-label-out predictive likelihood of the model fitted (the "
        "mixture's own where it is taken); every item's most probable class kept",
        *BDS_ROWS,
        DIFFICULTY_ROW,
        paper="Kim & Ghahramani 2012; Whitehill et al. 2009 (item difficulty); Grünwald 2012 "
        "(the safe-Bayesian tempered posterior)",
        defaults={
            "asymmetry": "evidence-blind-own",
            "prior_form": "evidence-one-class",
            "temperature": "auto",
        },
    ),
    aggregator_entry(
        "bds-hard-blind-recheck-lone",
        ItemDifficultyDawidSkene,
        "bds-hard-blind-recheck whose lone labels (alone on their item) are read through their "
        "worker's predictive E[e] instead of exp E[log e], and never counted in its model",
        *BDS_ROWS,
        DIFFICULTY_ROW,
        paper="Kim & Ghahramani 2012; Whitehill et al. 2009 (item difficulty); Plummer 2015 "
        "(cut models: the lone label's exact predictive)",
        defaults={
            "asymmetry": "evidence-blind-own",
            "prior_form": "evidence-one-class",
            "lone_labels": "skip-predictive",
        },
    ),
    aggregator_entry(
        "bds-ev-blind-own-refit",
        PriorRefitDawidSkene,
        "bds-ev-blind-own whose crowd prior is re-fitted once on its own first fit's class "
        "posterior (instead of the majority vote's), the verdict fitted again under it",
        *BDS_ROWS,
        REFIT_ROW,
        paper="Kim & Ghahramani 2012, Bayesian classifier combination; a second "
        "empirical-Bayes stage",
        defaults={
            "prior_form": "one-coin",
            "prior_floor": 0.1,
            "lone_labels": "skip",
            "asymmetry": "evidence-blind-own",
        },
    ),
    aggregator_entry(
        "bds-ev-blind-recheck-refit-ev",
        PriorRefitDawidSkene,
        "bds-ev-blind-recheck whose crowd prior is also re-fitted on that fit's class posterior "
        "and the fit under it read when its evidence lower bound is the larger",
        *BDS_ROWS,
        REFIT_ROW,
        paper="Kim & Ghahramani 2012, Bayesian classifier combination; the crowd prior by "
        "variational type-II ML between the vote's and the posterior's",
        defaults={
            "prior_form": "evidence-one-class",
            "prior_floor": 0.1,
            "lone_labels": "skip",
            "asymmetry": "evidence-blind-own",
            "refit": "evidence",
        },
    ),
    aggregator_entry(
        "bds-hard-blind-recheck-refit-ev",
        PriorRefitItemDifficulty,
        "bds-hard-blind-recheck whose workers' model alone is bds-ev-blind-recheck-refit-ev's "
        "(the crowd prior re-fitted on the posterior where the evidence bound prefers it)",
        *BDS_ROWS,
        DIFFICULTY_ROW,
        REFIT_ROW,
        paper="Kim & Ghahramani 2012; Whitehill et al. 2009 (item difficulty); the crowd prior "
        "by variational type-II ML between the vote's and the posterior's",
        defaults={"asymmetry": "evidence-blind-own", "prior_form": "evidence-one-class"},
    ),
    aggregator_entry(
        "bds-hard-blind-recheck-refit-ev-tempered",
        PriorRefitItemDifficulty,
        "bds-hard-blind-recheck-refit-ev reported tempered as bds-hard-blind-recheck-tempered "
        "is (every item's most probable class kept): the default verdict",
        *BDS_ROWS,
        DIFFICULTY_ROW,
        REFIT_ROW,
        paper="Kim & Ghahramani 2012; Whitehill et al. 2009 (item difficulty); the crowd prior "
        "by variational type-II ML; Grünwald 2012 (the safe-Bayesian tempered posterior)",
        defaults={
            "asymmetry": "evidence-blind-own",
            "prior_form": "evidence-one-class",
            "temperature": "auto",
        },
    ),
)
