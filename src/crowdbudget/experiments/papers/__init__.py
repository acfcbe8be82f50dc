"""One module per reproduced paper; ``REPRODUCTIONS`` maps ids to them.

To add a reproduction: write ``f(*, seed, quick, n_jobs, progress) -> ReproductionResult`` in a
paper module and add one :class:`Reproduction` line below.
"""

from __future__ import annotations

from crowdbudget.experiments.papers import chen2013, hu_frazier, li2016, rangi2018, zhang2015
from crowdbudget.experiments.papers.base import Reproduction, ReproductionResult

REPRODUCTIONS: dict[str, Reproduction] = {
    r.reproduction_id: r
    for r in [
        Reproduction(
            "chen2013-fig2a",
            "Chen, Lin, Zhou (2013) Fig. 2(a): simulated K=50, noiseless workers, T = 2K..10K",
            chen2013.fig2a,
        ),
        Reproduction(
            "chen2013-fig2b",
            "Chen, Lin, Zhou (2013) Fig. 2(b): simulated K=50, 10 one-coin workers "
            "rho ~ Beta(4,1), T = 2K..10K",
            chen2013.fig2b,
        ),
        Reproduction(
            "chen2013-fig3a",
            "Chen, Lin, Zhou (2013) Fig. 3(a): RTE replay, majority vote, T = K..10K",
            chen2013.fig3a,
        ),
        Reproduction(
            "chen2013-fig3b",
            "Chen, Lin, Zhou (2013) Fig. 3(b): RTE replay with worker reliability, T = K..10K",
            chen2013.fig3b,
        ),
        Reproduction(
            "chen2013-features",
            "Chen, Lin, Zhou (2013) §5: instance features (theta = sigmoid(w.x), Laplace) on "
            "ionosphere, breast_cancer, pima; logistic and gold-label worlds",
            chen2013.features,
        ),
        Reproduction(
            "hu-frazier-fig1",
            "Hu, Frazier Fig. 1: per-task reward vs the Lagrangian bound, K=10,100,1000, U=1.2K",
            hu_frazier.fig1,
        ),
        Reproduction(
            "hu-frazier-fig2",
            "Hu, Frazier Fig. 2: RTE accuracy, prior from 50 held-back tasks, K=10,100,750",
            hu_frazier.fig2,
        ),
        Reproduction(
            "requallo-fig1",
            "Li et al. (2016) Fig. 1: RTE, quantity / correct / accuracy of labeled items, "
            "budgets up to 4,000",
            li2016.fig1,
        ),
        Reproduction(
            "requallo-fig2",
            "Li et al. (2016) Fig. 2: the Game data (millionaire), budgets up to 15,000",
            li2016.fig2,
        ),
        Reproduction(
            "requallo-table3",
            "Li et al. (2016) Table 3: six Requallo requirements on the Game data, to completion",
            li2016.table3,
        ),
        Reproduction(
            "requallo-fig3",
            "Li et al. (2016) Fig. 3: Splice, SVM-simulated workers, F1 of the retrained SVM",
            li2016.fig3,
        ),
        Reproduction(
            "bkube-fig1",
            "Rangi, Franceschetti (2018) Fig. 1: B-KUBE vs bounded eps-first, eps-first, "
            "trailsourcing; 20 priced workers, sets A/B, T = 50; B-KUBE regret vs log B",
            rangi2018.fig1,
        ),
        Reproduction(
            "bkube-fig2",
            "Rangi, Franceschetti (2018) Fig. 2: the same with T = 100 tasks",
            rangi2018.fig2,
        ),
        Reproduction(
            "bbta-fig2",
            "Zhang, Ma, Sugiyama (2015) Fig. 2: BBTA vs OptKG, OptKG per context, IEThresh, "
            "CrowdSense, random; UCI sets x 3 heterogeneous worker models",
            zhang2015.fig2,
        ),
        Reproduction(
            "bbta-fig3",
            "Zhang, Ma, Sugiyama (2015) Fig. 3: BBTA with N' = 0, 1, 5, 10",
            zhang2015.fig3,
        ),
        Reproduction(
            "bbta-rte",
            "Zhang, Ma, Sugiyama (2015) Fig. 5(a): RTE replay, one context and RTE-1 task types",
            zhang2015.rte,
        ),
    ]
}

#: Typical time of each reproduction (``--quick``, full run) on the project's 2-core machine,
#: seed 0, default jobs. Quick: CPU seconds (user + sys, workers included) of
#: ``/usr/bin/time crowdbudget reproduce ID --quick`` — the wall time of a run that has the
#: machine to itself is at most about that; with the cores shared by other jobs (load 10 on 2
#: cores when measured) the wall time was 2-4 times longer. Full: the wall times recorded in
#: docs/reproductions.md ("-": not recorded).
TYPICAL_TIMES: dict[str, tuple[str, str]] = {
    "chen2013-fig2a": ("3 s", "3 min"),
    "chen2013-fig2b": ("4 s", "43 s"),
    "chen2013-fig3a": ("5 s", "-"),
    "chen2013-fig3b": ("14 s", "3 min"),
    "chen2013-features": ("4 s", "> 15 min"),
    "hu-frazier-fig1": ("5 s", "6 min"),
    "hu-frazier-fig2": ("5 s", "4 min"),
    "requallo-fig1": ("4 s", "10 s"),
    "requallo-fig2": ("6 s", "16 s"),
    "requallo-table3": ("8 s", "22 s"),
    "requallo-fig3": ("6 s", "8 s"),
    "bkube-fig1": ("11 s", "12 min"),
    "bkube-fig2": ("6 s", "3 min"),
    "bbta-fig2": ("13 s", "45 min"),
    "bbta-fig3": ("6 s", "7 min"),
    "bbta-rte": ("5 s", "10 min"),
}

__all__ = ["REPRODUCTIONS", "TYPICAL_TIMES", "Reproduction", "ReproductionResult"]
