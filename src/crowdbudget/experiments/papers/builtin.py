"""The paper reproductions on the one registry (DESIGN §11).

Every figure or table is an entry of :data:`crowdbudget.registry.REPRODUCTIONS` (this module
registers them; the registry imports it on first use): a :class:`ReproductionSpec` — a
:class:`~crowdbudget.registry.ComponentSpec` whose factory is the paper module's function
``f(*, seed, quick, n_jobs, progress) -> ReproductionResult`` — with its :class:`Paper` (title,
authors, venue), the figure, the replications of the full and the ``--quick`` run, the typical
times, and the parameter table (``seed``, ``quick``, ``jobs``, ``progress``, and ``reps`` where
the function takes it). ``crowdbudget reproduce --list [--json]`` is this table; so is
``crowdbudget reproduce --all``'s order (slowest first).

Example:
    >>> from crowdbudget.registry import REPRODUCTIONS
    >>> entry = REPRODUCTIONS.entry("chen2013-fig2a")
    >>> entry.source.venue, entry.reps
    ('ICML 2013', (5, 20))
    >>> sorted(entry.params)
    ['jobs', 'progress', 'quick', 'seed']

To add a reproduction: write the function in a paper module and add one :class:`ReproductionSpec`
below (or register one from your own module with ``REPRODUCTIONS.register``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from crowdbudget.experiments.papers import chen2013, hu_frazier, li2016, rangi2018, zhang2015
from crowdbudget.experiments.papers.base import ReproductionResult
from crowdbudget.registry import REPRODUCTIONS, ComponentSpec, Param, read_flag

#: replications of a run: one number, or one per size (``{"K=10": 40, ...}``)
RepCount = int | Mapping[str, int]


@dataclass(frozen=True)
class Paper:
    """A reproduced paper: ``key`` (the module's name), authors, title, venue, year, link."""

    key: str
    authors: tuple[str, ...]
    title: str
    venue: str
    year: int
    url: str = ""

    @property
    def short(self) -> str:
        """``"Chen, Lin, Zhou (2013)"``."""
        return f"{', '.join(self.authors)} ({self.year})"

    @property
    def citation(self) -> str:
        """``"Chen, Lin, Zhou. Optimistic Knowledge Gradient Policy ... ICML 2013."``"""
        return f"{', '.join(self.authors)}. {self.title}. {self.venue}."

    def describe(self) -> dict[str, Any]:
        """As JSON (``reproduce --list --json``)."""
        return {
            "key": self.key,
            "authors": list(self.authors),
            "title": self.title,
            "venue": self.venue,
            "year": self.year,
            "url": self.url,
            "citation": self.citation,
        }


def seconds_of(text: str) -> float | None:
    """A typical time as written in the table (``"13 s"``, ``"3 min"``, ``"> 15 min"``) in
    seconds; None for ``"-"`` (not recorded)."""
    found = re.fullmatch(r"\s*>?\s*([0-9.]+)\s*(s|min|h)\s*", text)
    if found is None:
        return None
    scale = {"s": 1.0, "min": 60.0, "h": 3600.0}[found.group(2)]
    return float(found.group(1)) * scale


def reps_text(reps: RepCount) -> str:
    """``20`` → ``"20"``; ``{"K=10": 40, "K=100": 20}`` → ``"40/20"`` (one per size)."""
    if isinstance(reps, int):
        return str(reps)
    values = list(reps.values())
    return str(values[0]) if len(set(values)) == 1 else "/".join(str(v) for v in values)


@dataclass(frozen=True)
class ReproductionSpec(ComponentSpec):
    """A registered reproduction: a :class:`~crowdbudget.registry.ComponentSpec` (``summary``
    is the title printed above its tables and on its plot; ``factory`` runs it) and its facts.

    Attributes:
        source: the paper.
        figure: the figure or table, as the paper names it (``"Fig. 2(a)"``).
        reps: replications of the ``--quick`` and of the full run (per size where they differ).
        times: the typical time of the ``--quick`` and of the full run (see
            :data:`crowdbudget.experiments.papers.TYPICAL_TIMES`; ``"-"``: not recorded).
    """

    source: Paper | None = None
    figure: str = ""
    reps: tuple[RepCount, RepCount] = (0, 0)
    times: tuple[str, str] = ("?", "?")

    @property
    def reproduction_id(self) -> str:
        return self.component_id

    @property
    def title(self) -> str:
        return self.summary

    @property
    def run(self) -> Callable[..., ReproductionResult]:
        """``run(*, seed, quick, n_jobs, progress) -> ReproductionResult``."""
        return self.factory

    def typical_seconds(self, quick: bool) -> float | None:
        """The typical time in seconds (the full run's, when not recorded, is unknown)."""
        return seconds_of(self.times[0 if quick else 1])

    def describe(self) -> dict[str, Any]:
        """The entry as JSON (``reproduce --list --json``): the listing's keys of old (``id``,
        ``title``, ``quick_time``, ``full_time``), the paper, the figure, the replications
        and the parameter table."""
        from crowdbudget.registry import describe_entry

        table = describe_entry(self)
        quick, full = self.reps
        return {
            "id": self.component_id,
            "title": self.summary,
            "quick_time": self.times[0],
            "full_time": self.times[1],
            "paper": self.source.describe() if self.source is not None else None,
            "figure": self.figure,
            "reps": {
                "quick": quick if isinstance(quick, int) else dict(quick),
                "full": full if isinstance(full, int) else dict(full),
            },
            "parameters": table["parameters"],
            "aliases": table["aliases"],
        }


# --------------------------------------------------------------------------- the papers

CHEN2013 = Paper(
    "chen2013",
    ("Chen", "Lin", "Zhou"),
    "Optimistic Knowledge Gradient Policy for Optimal Budget Allocation in Crowdsourcing",
    "ICML 2013",
    2013,
    "https://arxiv.org/abs/1110.3564",
)
HU_FRAZIER = Paper(
    "hu_frazier",
    ("Hu", "Frazier"),
    "Bayes-Optimal Effort Allocation in Crowdsourcing: Bounds and Index Policies",
    "AISTATS 2016, PMLR 51:324-332",
    2016,
    "http://proceedings.mlr.press/v51/hu16a.html",
)
LI2016 = Paper(
    "li2016",
    ("Li", "Ma", "Gao", "Su", "Quinn"),
    "Crowdsourcing High Quality Labels with a Tight Budget",
    "WSDM 2016",
    2016,
    "https://doi.org/10.1145/2835776.2835797",
)
RANGI2018 = Paper(
    "rangi2018",
    ("Rangi", "Franceschetti"),
    "Multi-Armed Bandit Algorithms for Crowdsourcing Systems with Online Estimation of "
    "Workers' Ability",
    "AAMAS 2018",
    2018,
)
ZHANG2015 = Paper(
    "zhang2015",
    ("Zhang", "Ma", "Sugiyama"),
    "Bandit-Based Task Assignment for Heterogeneous Crowdsourcing",
    "Neural Computation 27(11):2447-2475, 2015",
    2015,
    "https://arxiv.org/abs/1507.05800",
)

#: every reproduction takes these (the ``reproduce`` command's --seed, --quick, --jobs and
#: --no-progress)
_COMMON = {
    "seed": Param("seed", int, "root random seed", default=0),
    "quick": Param("quick", read_flag, "the small, fast version (--quick)", default=False),
    "jobs": Param(
        "jobs",
        int,
        "worker processes (default: all cores); the numbers do not depend on it",
        low=1,
        network_settable=False,
        argument="n_jobs",
    ),
    "progress": Param(
        "progress", read_flag, "a progress bar on stderr", default=True, network_settable=False
    ),
}


def _register(
    reproduction_id: str,
    title: str,
    run: Callable[..., ReproductionResult],
    source: Paper,
    figure: str,
    reps: tuple[RepCount, RepCount],
    times: tuple[str, str],
    *,
    reps_param: bool = False,
) -> None:
    params: dict[str, Param] = dict(_COMMON)
    if reps_param:
        quick, full = (reps_text(r) for r in reps)
        params["reps"] = Param(
            "reps", int, f"replications (default {full}; --quick {quick})", low=1
        )
    REPRODUCTIONS.register(
        ReproductionSpec(
            reproduction_id,
            run,
            title,
            params=params,
            paper=source.citation,
            source=source,
            figure=figure,
            reps=reps,
            times=times,
        )
    )


# Typical times (--quick, full) on a 2-core machine, seed 0, default jobs. Quick: CPU seconds
# (user + sys, workers included) of `/usr/bin/time crowdbudget reproduce ID --quick`, measured
# on the project's first machine — the wall time of a run that has the machine to itself is at
# most about that. Full: wall time of `/usr/bin/time crowdbudget reproduce ID` (both cores) on
# the current machine kind (AMD EPYC, 2 cores), one id at a time, nothing else running —
# except chen2013-features, bkube-fig1, bbta-fig2 and bbta-fig3, whose full runs were measured
# (or extrapolated from one replication: bbta-fig2 and bbta-fig3, benchmarks/bench_paper_suite.py)
# in CPU time on one core (47.6, 11.0, 31.7 and 8.1 min; benchmarks/README.md) and are given
# here halved.
# Where each time was measured: docs/decisions.md.

_register(
    "chen2013-fig2a",
    "Chen, Lin, Zhou (2013) Fig. 2(a): simulated K=50, noiseless workers, T = 2K..10K",
    chen2013.fig2a,
    CHEN2013,
    "Fig. 2(a)",
    (5, 20),
    ("3 s", "1 min"),
)
_register(
    "chen2013-fig2b",
    "Chen, Lin, Zhou (2013) Fig. 2(b): simulated K=50, 10 one-coin workers "
    "rho ~ Beta(4,1), T = 2K..10K",
    chen2013.fig2b,
    CHEN2013,
    "Fig. 2(b)",
    (5, 20),
    ("4 s", "9 s"),
)
_register(
    "chen2013-fig3a",
    "Chen, Lin, Zhou (2013) Fig. 3(a): RTE replay, majority vote, T = K..10K",
    chen2013.fig3a,
    CHEN2013,
    "Fig. 3(a)",
    (2, 20),
    ("5 s", "1.5 min"),
)
_register(
    "chen2013-fig3b",
    "Chen, Lin, Zhou (2013) Fig. 3(b): RTE replay with worker reliability, T = K..10K",
    chen2013.fig3b,
    CHEN2013,
    "Fig. 3(b)",
    (2, 20),
    ("14 s", "2.5 min"),
    reps_param=True,
)
_register(
    "chen2013-features",
    "Chen, Lin, Zhou (2013) §5: instance features (theta = sigmoid(w.x), Laplace) on "
    "ionosphere, breast_cancer, pima; logistic and gold-label worlds",
    chen2013.features,
    CHEN2013,
    "§5",
    (2, 3),
    # full: 10.4 core-min measured before (three sets, 3 reps, per set); re-measured whole
    # 2026-12-06 after the look-ahead's tail cut: 727 s CPU, 13 min 21 s wall with --jobs 2 at
    # load 3-9 on the 2-core machine kind (/usr/bin/time), halved
    ("4 s", "6 min"),
    reps_param=True,
)
_register(
    "hu-frazier-fig1",
    "Hu, Frazier Fig. 1: per-task reward vs the Lagrangian bound, K=10,100,1000, U=1.2K",
    hu_frazier.fig1,
    HU_FRAZIER,
    "Fig. 1",
    (
        {"K=10": 40, "K=100": 20, "K=1000": 4},
        {"K=10": 5000, "K=100": 5000, "K=1000": 5000},
    ),
    # full: 3 min 58 s with --jobs 1 (the index policy's campaign compiled), about half of it
    # Opt-KG's
    ("5 s", "2.5 min"),
)
_register(
    "hu-frazier-fig2",
    "Hu, Frazier Fig. 2: RTE accuracy, prior from 50 held-back tasks, K=10,100,750",
    hu_frazier.fig2,
    HU_FRAZIER,
    "Fig. 2",
    (
        {"K=10": 20, "K=100": 10, "K=750": 2},
        {"K=10": 5000, "K=100": 2000, "K=750": 500},
    ),
    ("5 s", "3.5 min"),
)
_register(
    "requallo-fig1",
    "Li et al. (2016) Fig. 1: RTE, quantity / correct / accuracy of labeled items, "
    "budgets up to 4,000",
    li2016.fig1,
    LI2016,
    "Fig. 1",
    (3, 20),
    ("4 s", "16 s"),
)
_register(
    "requallo-fig2",
    "Li et al. (2016) Fig. 2: the Game data (millionaire), budgets up to 15,000",
    li2016.fig2,
    LI2016,
    "Fig. 2",
    (2, 10),
    ("6 s", "25 s"),
)
_register(
    "requallo-table3",
    "Li et al. (2016) Table 3: six Requallo requirements on the Game data, to completion",
    li2016.table3,
    LI2016,
    "Table 3",
    (2, 10),
    ("8 s", "34 s"),
)
_register(
    "requallo-fig3",
    "Li et al. (2016) Fig. 3: Splice, SVM-simulated workers, F1 of the retrained SVM",
    li2016.fig3,
    LI2016,
    "Fig. 3",
    (2, 10),
    ("6 s", "31 s"),
)
_register(
    "bkube-fig1",
    "Rangi, Franceschetti (2018) Fig. 1: B-KUBE vs bounded eps-first, eps-first, "
    "trailsourcing; 20 priced workers, sets A/B, T = 50; B-KUBE regret vs log B",
    rangi2018.fig1,
    RANGI2018,
    "Fig. 1",
    (2, 100),
    # full: 161 s of CPU with --jobs 1 (2026-12-06, load 13-17 on the 2-core machine kind,
    # /usr/bin/time: user + sys), halved; --quick: 6.9 s of CPU (load 8)
    ("7 s", "1.3 min"),
)
_register(
    "bkube-fig2",
    "Rangi, Franceschetti (2018) Fig. 2: the same with T = 100 tasks",
    rangi2018.fig2,
    RANGI2018,
    "Fig. 2",
    (2, 100),
    # full: 129 s of CPU with --jobs 1 (2026-12-06, load 16-20 on the 2-core machine kind,
    # /usr/bin/time: user + sys), halved; --quick: 6.3 s of CPU (load 8)
    ("6 s", "1.1 min"),
)
_register(
    "bbta-fig2",
    "Zhang, Ma, Sugiyama (2015) Fig. 2: BBTA vs OptKG, OptKG per context, IEThresh, "
    "CrowdSense, random; UCI sets x 3 heterogeneous worker models",
    zhang2015.fig2,
    ZHANG2015,
    "Fig. 2",
    (1, 30),
    # full: 19.6 core-min extrapolated from one replication (bench_paper_suite.py), halved;
    # likewise bbta-fig3 (9.2 core-min) and bbta-rte (2.5; benchmarks/README.md)
    ("13 s", "10 min"),
    reps_param=True,
)
_register(
    "bbta-fig3",
    "Zhang, Ma, Sugiyama (2015) Fig. 3: BBTA with N' = 0, 1, 5, 10",
    zhang2015.fig3,
    ZHANG2015,
    "Fig. 3",
    (1, 30),
    ("6 s", "4.5 min"),
    reps_param=True,
)
_register(
    "bbta-rte",
    "Zhang, Ma, Sugiyama (2015) Fig. 5(a): RTE replay, one context and RTE-1 task types",
    zhang2015.rte,
    ZHANG2015,
    "Fig. 5(a)",
    (2, 30),
    ("5 s", "1.5 min"),
)
