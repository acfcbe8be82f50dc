"""Item difficulty as a source of correlated errors: every item of the Bayesian Dawid–Skene
(:class:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene`, Kim & Ghahramani
2012 §3) is either **easy** — its labels follow each worker's own confusion matrix, as in
Dawid & Skene (1979) — or **hard** — its labels follow one confusion matrix ``H`` shared by the
whole crowd, so that on a hard item every worker errs in the same way (the item misleads
everyone). The share of hard items is learned from the labels.

Why. The Dawid–Skene family reads the labels as independent given the true class. Where
several workers err *together* on the same items (fact_eval: groups of class-1 items that two
or three of their five workers call 0), independence makes those items a real class-0 group
that the other workers miss: the workers' class-0 rows look poor (they "often" say 1 on class
0), saying 0 on a class-1 item looks rare, and an item split 2 / 3 goes to the two zeros
(docs/stress-bed.md, the ``bds-ev`` sections). A mixture over items is the simplest model in
which an item's labels are exchangeable but *not* independent given its class: marginally over
``h_i`` they are correlated, and an item whose labels disagree more than its workers'
accuracies allow is read as hard — with the crowd's confusion on such items — instead of as
evidence against the workers who disagree, and its labels leave the workers' counts. It is a
two-level case of the item-difficulty model of Whitehill et al. 2009 (GLAD, §3: an item's
difficulty scales every worker's reliability; here a hard item's labels ignore the workers'
skill), with the shared-confusion component of community models (Venanzi et al. 2014, §3:
labels from one confusion matrix of a group — here a group of items).

Model (shapes: N items, J workers, C classes)::

    π ~ Dir(ν₀ 1_C),  ρ ~ Beta(1, 1)                  class proportions (C,), hard share
    z_i | π ~ Cat(π),  h_i | ρ ~ Bernoulli(ρ)         true class; hard (1) or easy (0)
    e_jc ~ the workers of bds-ev (worker_asymmetry)   worker j's confusion row c, (C,)
    H (C, C) within its bounds (below)                the crowd's confusion on hard items
    l | z_i = c, h_i = 0, worker j ~ Cat(e_jc);   l | z_i = c, h_i = 1 ~ Cat(H_c)

Bounds. Left free, ``H`` is not "hard": a component whose labels follow one crowd confusion
explains unanimous items better than workers with a few errors each, or, with rows that do
not depend on the class, turns the hard items' class into a draw of the prior (both seen while
building this: a hard share of 0.49 on a crowd of independent workers, and slow drifts of it).
So ``H`` is the point estimate of ``Dir(η + M)`` (``η_cl = 1 + [c = l]``, ``M_cl`` the hard
items' expected votes) with each row's diagonal kept (i) at least its row's largest other
entry — a hard item's plurality is still most likely its class — and (ii) at most halfway
between chance (1/C) and the crowd's agreement rate on the easy items of that class
(:func:`bounded_confusion`) — a hard item's labels are at most half as informative; the rest
of the row is scaled to fill it. The rows stay class-dependent: on fact_eval a hard class-1
item draws about 38 % zeros, a hard class-0 item half (a one-coin ``H`` — one accuracy for
every row — was measured: fact_eval's hard share falls to 0 and its accuracy to ``bds-ev``'s).

Variational inference (Simpson et al. 2013 §2, the updates of ``bds``), with ``R_i,c+C·h =
q(z_i = c, h_i = h)`` (N, 2C): columns ``[0, C)`` easy ``E``, ``[C, 2C)`` hard ``D``, and
``T = E + D`` the class posterior that the verdict reports:

- ``q(e)``: the workers of ``bds-ev`` (:func:`~crowdbudget.aggregation.worker_asymmetry.
  worker_model`, symmetric or free by their evidence) on the *easy* expected counts
  ``N_jcl = Σ_{labels (i, j, l)} E_ic``;
- ``H`` from ``M_cl = Σ_{labels (i, j, l)} D_ic`` and the easy rates ``Σ_j N_jcc / Σ_jl N_jcl``;
- ``q(π) = Dir(ν₀ + Σ_i T_i)``, ``q(ρ) = Beta(1 + Σ_ic D_ic, 1 + Σ_ic E_ic)``;
- ``log R_ic = E[log π_c] + E[log(1 − ρ)] + Σ_{labels (i, j, l)} E[log e_jcl]`` (easy) and
  ``log R_i,c+C = E[log π_c] + E[log ρ] + Σ_l V_il log H_cl`` (hard; ``V`` (N, C) the item's
  votes), normalised over the 2C cells.

One hard share ``ρ`` for every class: measured with one share per class (``π`` over the 2C
(class, difficulty) cells), fact_eval's hard items drifted to the common class over hundreds of
updates (0.8976 at 80, 0.9045 at 400, still moving), the rich-get-richer of a prior, not the
labels' evidence.

Everything the workers' side of ``bds-ev`` does is kept: its one-coin empirical-Bayes prior
fitted once on the majority-vote start (``prior_fit="every"`` is refused), the floor, the lone
labels left out of the workers' counts (and, for the same reason, out of ``M``: a label alone
on its item agrees with itself), the evidence's share of symmetric workers. When nothing can be
checked (fewer than two workers with a partnered label: one label per item) no item can look
hard and the fit is ``bds-ev``'s, bit for bit; ``difficulty="none"`` is ``bds-ev`` too.

Evidence (``difficulty="evidence"``, the default). The variational mixture has optima that
read a crowd of independent workers worse than ``bds-ev``: where every disagreement is
common under the easy model (2–3 labels per item, ordinal or spamming crowds) it calls a third
to all of the items hard (ordinal5-k5 at 3 labels per item: 62 %) and reads them without their
workers' skill (docs/stress-bed.md: up to 0.13 of accuracy lost). So both are fitted, and the
mixture is kept only when the labels' log-likelihood under its posterior means,
:func:`label_log_likelihood` ``Σ_i log Σ_c π̄_c [(1 − ρ̄) Π ē_jcl + ρ̄ Π H_cl^V_il]``, beats
``bds-ev``'s ``Σ_i log Σ_c π̄_c Π ē_jcl`` by more than BIC's charge for its extra parameters,
``(C(C − 1) + 1) / 2 · log N`` (Schwarz 1978) — the data choosing the model, as ``bds-ev``'s
workers are chosen. Measured (gain minus charge): fact_eval at all / 5 labels per item
+1,746 / +1,683 nats, every other row of the verdict table below 0 (ordinal5-k5@3 −167,
millionaire −7,138), so there the fit is ``bds-ev``'s bit for bit. Cost of both fits
(``difficulty="evidence-full"``): 1.6–3.6× ``bds-ev`` on the bundled sets (starting the
mixture at ``bds-ev``'s posterior instead of the vote's was measured: no faster, the same
choices).

Why BIC's charge. BIC approximates ``log p(labels | model)`` by the maximised
log-likelihood minus ``d/2 · log n`` for ``d`` free parameters and ``n`` exchangeable units;
here the units are the items (an item's labels are not independent under the mixture) and
the mixture adds ``d = C(C − 1) + 1`` (``H``'s rows on the simplex, and ``ρ``). The plug-in
log-likelihoods compared pay nothing for any parameter, so the whole charge is owed once.
Comparing the two fits' variational bounds instead would owe none: the bound already pays
by its integrals — at ``q(h_i = 1) = 0`` for every item the mixture's bound is ``bds-ev``'s
minus ``log(N + 1)`` (``ρ``'s Beta integral) with ``H``'s Pólya integral 0 — so BIC's charge
on top would count the parameters twice. The plug-in comparison has one weakness BIC does
not: neither fit is the likelihood's maximum, so the nested mixture can show a negative gain
(its easy workers are fitted without the hard items' labels). Where it does, the
likelihood's own climb (the gate's EM with more worker re-fits) was measured to find no
gain either, and the criteria that would take such a mixture (the bound, held-out labels)
also take it where it reads worse (docs/stress-bed.md, 2026-12-07, "goldmix").

Gate (``difficulty="evidence"``). The mixture is refused on almost every crowd, so ``bds-ev``
is fitted first and the mixture only when a cheap statistic leaves the question open:

- *A lower bound on the gain.* With ρ = 0 the mixture is ``bds-ev``'s model. Hold
  ``bds-ev``'s workers ``ē`` fixed: the label log-likelihood
  ``L(π, ρ, H) = Σ_i log Σ_c π_c [(1 − ρ) A_ic + ρ B_ic]``, ``A_ic = Π_labels ē_jcl``,
  ``B_ic = Π_l H_cl^V_il``, is a finite mixture in ``(π, ρ, H)`` alone, and EM over these
  (:func:`frozen_mixture`: an (N, 2C) softmax and two (C, N)·(N, C) products a step, no worker
  update) is cheap. Every value it reaches is the likelihood of a member of the mixture
  family (frozen workers, ``H`` within its bounds), so its best gain ``G`` over ``bds-ev``'s
  ``Σ_i log Σ_c π̄_c A_ic`` is a lower bound on what that family attains. Whenever the gate
  does not refuse, the mixture is fitted and the evidence decides exactly as without it.
- *Refusing.* No bound goes the other way: the full fit re-fits the workers on the easy
  items (gain the frozen workers cannot show) and its variational optimum is not the
  likelihood's maximum. What holds locally: for a fixed ``H`` and ``π`` the gain in ρ,
  ``f(ρ) = Σ_i log(1 − ρ + ρ r_i)`` with ``r_i = Σ_c π_c B_ic / Σ_c π_c A_ic``, is concave,
  and ``f′(0) = Σ_i (r_i − 1)`` is the score test at ρ = 0: when it is ≤ 0 no hard share
  helps that ``H``, and EM's ρ shrinks geometrically towards 0 (on the refused crowds it
  settles at ρ's posterior-mean floor, ``G`` ≈ 0, −1 to 0 nats). So the gate refuses only
  when ``G`` ≤ 0 — the mixture with ``bds-ev``'s workers (re-fitted once, below) gains
  *nothing* — and leaves the whole BIC charge (9.6 nats for a binary crowd of 600 items) as
  the margin for what further re-fits of the workers add. Comparing ``G`` with the charge
  itself is not safe: on the correlated crowd of the tests (seed 0) the full evidence takes
  the mixture by 2.2 nats past its charge (gain 11.8, charge 9.6) while ``G`` is 1.2
  (re-fitting the workers is where the gain is; one re-fit raises it to 4.9, seven to 9.5,
  still below). A measured rule, not a theorem: on every one of the 778 samples of the
  verdict table and the full bed (625 with a label to check; the gate refused 606, every
  one with ``G`` = 0) its fit is the full evidence's, bit for bit (docs/stress-bed.md,
  "the evidence's gate"). Where it passes, the full evidence may still refuse (millionaire
  on all labels: ``G`` = 426 nats, the variational mixture −7,138): a lower bound cannot
  see that the variational fit lands on a poor optimum, so there both fits are paid.
- *One worker re-fit.* The frozen workers alone are not enough: on the full bed's
  ``binary-50-50-one-coin-spam0-k10`` (all labels) the full evidence takes the mixture
  (0.7 nats past the charge) while the frozen workers' ``G`` is 0 — they would have been
  refused. So after the frozen EM the workers are re-fitted once (``bds-ev``'s worker
  model on the easy responsibilities, its prior and share) and the EM runs again
  (:data:`GATE_REFITS`); every value is still a member's likelihood. ``G`` there: 2.8
  nats (4.3 / 4.6 after 2 / 4 re-fits).
- *Stops.* EM stops at ``G`` > 0 (go on to both fits), at 60 steps, at a step that gains less
  than 1e-3 nats, or when the gains shrink geometrically (ratio q < 1 between two steps)
  towards a limit ``value + gain · q / (1 − q)`` below 0 (Aitken's extrapolation of a
  linearly converging sequence) — the one stop that ends a still-rising trajectory.
- *Start.* ``H`` from one M-step on ``bds-ev``'s class posterior split by the items' vote
  disagreement (the mixture's own start), ρ from a tenth of that split (``START_SHARE``):
  started at the whole split (ρ ≈ 0.5) the refused crowds took 20–30 steps down
  (rte −273 nats at the first step).

``gate_gain_`` is ``G`` (as far as the gate ran); a refusal by the gate reports ``G`` minus
the charge as ``evidence_gain_`` (``evidence_gate_`` True). Cost on a refusal: ``bds-ev``
plus the gate; otherwise both fits plus the gate. The pieces the gate needs (which labels
have a partner, the items' votes) are read off label counts, not the incidence matrix,
which only the mixture's fit builds. With workers pooled (``pool_below``) the gate does
not run (its re-fit reads the unpooled workers): both fits, as ``"evidence-full"``.

Start: ``T`` = majority-vote shares, ``q(h_i = 1) = (1 − max_c T_ic) · C / (C − 1)`` (the
item's disagreement: 0 when its labels agree, 1 at an even split). Stop after ``n_iter``
updates or when no class share ``T_ic`` moves by more than ``mixture_tol`` in an update
(default 1e-4, :data:`MIXTURE_TOL`; ``tol``, 1e-6, stops the workers' model alone). The
stop reads one update's move, not the distance to the fixed point: where the hard share
drifts slowly (the updates converge linearly, ratio q near 1) the distance is about
``move · q / (1 − q)``, many times the move. At 1e-3 the fit stopped 0.15 from its fixed
point on a correlated crowd of the tests (9 of 600 labels changed); at 1e-4 it stopped within
0.004 (no label changed) in 50–70 % of the updates 1e-6 takes. So the stop is a cost
decision checked, not derived (docs/stress-bed.md, 2026-12-07, "goldmix").

Speed. The plain updates converge linearly and slowly (the hard share settles by a few items
per update: 141 updates on fact_eval, 114 on rte, against ``bds-ev``'s 39 / 26). Between
updates the fit takes a SQUAREM step (Varadhan & Roland 2008, "Simple and globally convergent
methods for accelerating the convergence of any EM algorithm", scheme SqS3): from ``R₀`` and
two updates ``R₁ = F(R₀)``, ``R₂ = F(R₁)``, ``R' = R₀ − 2αr + α²v`` with ``r = R₁ − R₀``,
``v = R₂ − 2R₁ + R₀``, ``α = −‖r‖ / ‖v‖`` kept in [−8, −1] (−1 is the plain double update),
clipped at 0 and renormalised per item; the next update starts from ``R'``. Every update is
counted in ``n_iter_``. The fixed point is the plain updates' (tested); on the bundled sets
it takes 10–101 updates (at a tolerance of 1e-6).

Cost per update: ``bds-ev``'s, plus the hard component's votes and the (N, 2C) softmax. The
passes over the labels — the workers' expected counts and the hard items' votes, the items'
2C scores, the normalisation with the update's stopping move — run compiled
(:mod:`~crowdbudget.aggregation._difficulty_kernel`; the exponential stays NumPy's), as does
the gate's E-step; the workers' model stays :func:`worker_model`'s. Equal to the NumPy update
up to the order of the sums (tested); ``_compiled_update = False`` runs the NumPy update.

The mixture starts at the vote's split even past the gate: started at the gate's own
responsibilities (the verdict's posterior split by the frozen mixture) it converges to other
optima, on which the evidence's choice changes (docs/stress-bed.md, 2026-12-07,
"``bds-hard-blind-recheck``").

What it cannot do. A hard item is read without its workers' skill. Where a few reliable
workers outvote a split crowd on hard items (millionaire: hundreds of audience votes per
question) that skill is what decides, the worker-weighted reading is better, and the
evidence keeps ``bds-ev`` (docs/stress-bed.md, "item difficulty and correlated errors").

On the default's reading (``prior_form`` ``"evidence-one-class"``, registered as
``bds-hard-blind-recheck`` with the default verdict's other settings; ``"evidence"`` alike).
The workers' model alone is then ``bds-ev-blind-recheck``: the one-coin fit, re-checked by the
evidence bound against ``bds``'s reading (a prior row per class, every label counted) only
when it reads every item as one class (:mod:`.bayesian_dawid_skene`, "Form chosen by the
evidence"). That fit is made as :class:`BayesianDawidSkene` makes it, and the gate, the
mixture and the evidence read the prior's form and lone-label rule it chose (``reading_``).
What this assumes: the re-check and the difficulty mixture answer different questions —
whether the crowd prior's one-coin form holds, and whether the labels are independent given
the class — so the form is chosen on the workers' model alone and the mixture is then fitted
under it, not the four combinations against each other; the mixture alone
(``difficulty="mixture"``) reads the one-coin form. Where the gate refuses, or with
``difficulty="none"``, the fit is ``bds-ev-blind-recheck``'s bit for bit.

Tempering (``temperature``) is ``bds``'s, applied once to the model the evidence chose (the
gate and the evidence read both fits untempered); where that is the mixture, τ's
leave-one-label-out criterion reads the mixture's own predictive (a hard item's label from
``H``; derived in :mod:`~crowdbudget.aggregation._tempering`). Known truth clamps ``z_i`` and
leaves ``h_i`` free.

Example:
    >>> from crowdbudget.datasets import load_dataset
    >>> fit = ItemDifficultyDawidSkene().fit(load_dataset("rte"))
    >>> fit.hard_.shape, fit.hard_confusion_.shape
    ((800,), (2, 2))
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma, logsumexp

from crowdbudget.aggregation import _difficulty_kernel
from crowdbudget.aggregation._difficulty_gate import (
    GATE_REFITS,
    START_SHARE,
    bounded_confusion,
    frozen_mixture,
    hard_prior,
    log_easy,
    row_max,
    row_sums,
)
from crowdbudget.aggregation.base import FloatArray, KnownTruth
from crowdbudget.aggregation.bayesian_dawid_skene import (
    BayesianDawidSkene,
    one_coin_polya_prior,
    polya_prior,
)
from crowdbudget.aggregation.dawid_skene import check_iterations, incidence, initial_shares
from crowdbudget.aggregation.worker_asymmetry import Evidence, worker_model
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError

__all__ = [
    "DIFFICULTIES",
    "FITTED",
    "GATE_REFITS",
    "MIXTURE_TOL",
    "START_SHARE",
    "ItemDifficultyDawidSkene",
    "bounded_confusion",
    "frozen_mixture",
    "hard_prior",
    "label_log_likelihood",
    "partnered_labels",
    "start_responsibilities",
]

#: the item model (``difficulty``): the mixture when the labels' evidence supports it, else
#: every item easy (``"evidence"``, behind the gate; ``"evidence-full"``: both models always
#: fitted), each item easy or hard (``"mixture"``), every item easy (``"none"``: the parent's
#: fit) — module docstring
DIFFICULTIES = ("evidence", "evidence-full", "mixture", "none")

#: the mixture's stopping tolerance (module docstring, "Start"), looser than the workers'
#: model's ``tol``
MIXTURE_TOL = 1e-4

#: the fitted attributes that the evidence's choice takes from the model it chose
FITTED = (*BayesianDawidSkene._FITTED, "hard_", "hard_share_", "hard_confusion_")

#: the prior's forms whose choice is the workers' model's (``bds-ev-blind-recheck``'s
#: re-check; module docstring, "On the default's reading")
FORM_CHOICES = ("evidence", "evidence-one-class")

#: the parameters of the workers' model alone, a
#: :class:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene`
EASY_PARAMETERS = tuple(inspect.signature(BayesianDawidSkene).parameters)


@dataclass
class _Fit:
    """The state of the mixture's variational fit (module docstring).

    Attributes:
        R: ``q(z_i = c, h_i = h)`` at column ``c + C·h``, shape (N, 2C).
        share: the crowd's share of symmetric workers (``bds-ev``'s ``w``).
        evidence: the workers' evidence terms of the last iteration (re-used when unmoved).
        hard_alpha: ``q(H)``'s Dirichlet rows ``η + M``, shape (C, C).
        hard: the bounded point estimate of ``H`` the items read, shape (C, C).
        moved: the last compiled update's largest move of a class share (None: not known).
    """

    R: FloatArray
    share: float = 0.5
    evidence: Evidence | None = None
    hard_alpha: FloatArray | None = None
    hard: FloatArray | None = None
    moved: float | None = None


@dataclass(frozen=True)
class _Design:
    """The fixed sparse designs of a fit.

    Attributes:
        matrix: ``bds``'s incidence (N, J·C): the items' update of the easy component.
        workers: the incidence whose labels feed the workers' counts (N, J·C).
        votes: every label's vote (N, C): the items' update of the hard component.
        checked: the votes that feed ``H``'s counts (N, C) (those of the workers' counts).
        dense_votes, dense_checked: the two as (N, C) arrays (the compiled update's).
    """

    matrix: sp.csr_matrix
    workers: sp.csr_matrix
    votes: sp.csr_matrix
    checked: sp.csr_matrix
    dense_votes: FloatArray
    dense_checked: FloatArray


def _csr(matrix: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A CSR matrix's ``indptr``, ``indices`` and float ``data`` (the compiled update's)."""
    return matrix.indptr, matrix.indices, np.asarray(matrix.data, dtype=np.float64)


def start_responsibilities(T: FloatArray) -> FloatArray:
    """``R`` (N, 2C) of the start — columns ``[0, C)`` easy, ``[C, 2C)`` hard — : the class
    shares ``T`` (N, C) split by the items' disagreement ``(1 − max_c T_ic) · C / (C − 1)``
    in [0, 1] (module docstring)."""
    C = T.shape[1]
    hard = (1.0 - row_max(T)) * (C / max(C - 1, 1))
    hard = np.clip(hard, 0.0, 1.0)[:, None]
    return np.ascontiguousarray(np.concatenate([T * (1.0 - hard), T * hard], axis=1))


def label_log_likelihood(data: LabelData, fitted: dict[str, Any]) -> float:
    """``Σ_i log p(labels of i)`` under a fit's posterior means (module docstring,
    "Evidence"): ``Σ_c π̄_c [(1 − ρ̄) Π_labels ē_jcl + ρ̄ Π_l H_cl^V_il]``, from ``fitted``'s
    ``priors_`` (C,), ``errors_`` (J, C, C), ``hard_share_`` and ``hard_confusion_`` (C, C)
    (``hard_share_`` 0 or absent: the easy model alone)."""
    N, C = data.n_items, data.n_classes
    # posterior means are > 0 (Dirichlet means; H bounded); the floor guards underflow only
    easy = log_easy(data, fitted["errors_"])  # (N, C): Σ_labels log ē_jcl
    log_pi = np.log(np.maximum(fitted["priors_"], 1e-300))
    share = float(fitted.get("hard_share_", 0.0))
    if share <= 0.0:
        return float(np.sum(logsumexp(easy + log_pi, axis=1)))
    votes = np.bincount(data.items * C + data.labels, minlength=N * C).reshape(N, C)
    hard = votes @ np.log(fitted["hard_confusion_"]).T
    both = np.concatenate([easy + log_pi + np.log1p(-share), hard + log_pi + np.log(share)], axis=1)
    return float(np.sum(logsumexp(both, axis=1)))


def partnered_labels(data: LabelData, known: KnownTruth | None) -> np.ndarray | None:
    """Which labels have a partner — another label of their item, or its known truth —
    (n_labels,), None when fewer than two workers have one: the parent's ``_partnered``
    read off the items' label counts instead of the incidence matrix (the same array)."""
    partnered_item = np.bincount(data.items, minlength=data.n_items) >= 2
    if known is not None:
        partnered_item |= known.mask(data.n_items)
    partnered = partnered_item[data.items]
    workers = data.workers[partnered]
    if workers.size == 0 or np.all(workers == workers[0]):
        return None
    return partnered


class ItemDifficultyDawidSkene(BayesianDawidSkene):
    """``bds-ev`` whose items are each easy or hard (see the module docstring).

    Args:
        difficulty: ``"evidence"`` (default: the mixture when the labels' likelihood under it
            beats ``bds-ev``'s by more than BIC's charge, else ``bds-ev``'s fit; behind the
            gate of the module docstring), ``"evidence-full"`` (the same choice with both
            models always fitted), ``"mixture"``
            (each item easy or hard, always) or ``"none"`` (every item easy: ``bds-ev``'s fit,
            bit for bit).
        accelerate: SQUAREM steps between the plain updates (default; module docstring,
            "Speed"); False runs the plain coordinate updates only.
        mixture_tol: the mixture's own stopping tolerance (default :data:`MIXTURE_TOL`):
            its fit stops when no class share moves by more than this in an update; ``tol``
            stops the workers' model alone (module docstring, "Start").
        n_iter, tol, class_prior, confusion_prior, pool_below, temperature, prior_fit,
        prior_form, prior_floor, lone_labels, asymmetry, rng: as
            :class:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene`
            (defaults: ``bds-ev``'s). ``asymmetry`` is the easy items' worker model in the
            mixture, its gate and the fit it is compared with: ``"evidence-blind-own"``
            (registered as ``bds-hard-blind-own``) puts the mixture on ``bds-ev-blind-own``,
            whose workers may also be class-blind on their own strong evidence. ``prior_form``
            ``"evidence-one-class"`` (``bds-hard-blind-recheck``) or ``"evidence"``: the
            workers' model alone chooses its form as the parent does, and the mixture reads
            the chosen one (module docstring, "On the default's reading").

    Fitted attributes (besides the parent's; ``errors_`` are the easy items' workers):
        hard_: ``q(h_i = 1)``, each item's probability of being hard, shape (n_items,).
        hard_share_: the posterior mean share of hard items.
        hard_confusion_: ``H``, the crowd's confusion on hard items, shape (C, C).
        difficulty_: the item model used: ``"mixture"`` or ``"none"``.
        evidence_gain_: the mixture's label log-likelihood minus ``bds-ev``'s minus BIC's
            charge, in nats (> 0: the mixture; 0 when not compared; the gate's
            ``gate_gain_`` when the gate refused).
        evidence_gate_: True when the gate refused the mixture without fitting it.
        reading_: ``(prior form, lone-label rule)`` the workers' model and the mixture read.
        gate_gain_: the gate's ``G``, the frozen workers' mixture's best gain in nats (NaN
            when the gate did not run: ``difficulty`` other than ``"evidence"``, or nothing
            to check).
    """

    def __init__(
        self,
        n_iter: int = 200,
        tol: float = 1e-6,
        class_prior: float = 1.0,
        confusion_prior: Sequence[float] | None = None,
        pool_below: int = 0,
        temperature: float | str = 1.0,
        prior_fit: str = "start",
        prior_form: str = "one-coin",
        prior_floor: float = 0.1,
        lone_labels: str = "skip",
        asymmetry: str = "evidence",
        difficulty: str = "evidence",
        accelerate: bool = True,
        mixture_tol: float = MIXTURE_TOL,
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(
            n_iter=n_iter,
            tol=tol,
            class_prior=class_prior,
            confusion_prior=confusion_prior,
            pool_below=pool_below,
            temperature=temperature,
            prior_fit=prior_fit,
            prior_form=prior_form,
            prior_floor=prior_floor,
            lone_labels=lone_labels,
            asymmetry=asymmetry,
            rng=rng,
        )
        self.difficulty = difficulty
        self.accelerate = accelerate
        self.mixture_tol = mixture_tol

    #: whether the mixture's passes over the labels run compiled
    #: (:mod:`~crowdbudget.aggregation._difficulty_kernel`; False: the NumPy update, which
    #: the tests compare them with)
    _compiled_update = True

    def _variational(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        self.reading_ = (self.prior_form, self.lone_labels)
        return self._difficulty_fit(
            data, known, lambda: BayesianDawidSkene._variational(self, data, known)
        )

    def _chosen_form(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        """With ``prior_form`` ``"evidence"`` or ``"evidence-one-class"`` (module docstring,
        "On the default's reading") the workers' model alone is
        :class:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene`'s fit with
        these parameters — its form chosen, or re-checked, by the evidence bound — and the
        mixture, its gate and the evidence read the prior's form and lone-label rule that fit
        read (``reading_``); any other form: the parent's."""
        if self.prior_form not in FORM_CHOICES or self.confusion_prior is not None:
            return super()._chosen_form(data, known)
        easy_model = BayesianDawidSkene(**{name: getattr(self, name) for name in EASY_PARAMETERS})

        def easy_fit() -> FloatArray:
            return self._read_easy_model(easy_model, data, known)

        # the mixture alone (never compared) reads the first form, as the recheck keeps it
        self.reading_, self.prior_form_ = ("one-coin", self.lone_labels), "one-coin"
        self.form_bounds_: dict[str, float] = {}
        return self._difficulty_fit(data, known, easy_fit)

    def _read_easy_model(
        self,
        easy_model: BayesianDawidSkene,
        data: LabelData,
        known: KnownTruth | None,
        kept: tuple[str, ...] = (),
    ) -> FloatArray:
        """Fit the workers' model alone (``easy_model``, these parameters), take its fitted
        attributes (``kept``: a subclass's own besides the parent's and the form choice's) and
        record the reading it read (``reading_``): the confusion prior counting every label
        where the form was chosen and the confusion fit read, else its form and this lone-label
        rule. Returns its class shares, shape (n_items, C)."""
        T = easy_model._chosen_form(data, known)
        for name in (*BayesianDawidSkene._FITTED, "prior_form_", "form_bounds_", *kept):
            setattr(self, name, getattr(easy_model, name))
        form = easy_model.prior_form_
        chosen = self.prior_form in FORM_CHOICES and form == "confusion"
        self.reading_ = ("confusion", "count") if chosen else (form, self.lone_labels)
        return T

    def _difficulty_fit(
        self, data: LabelData, known: KnownTruth | None, easy_fit: Callable[[], FloatArray]
    ) -> FloatArray:
        """The item model of ``difficulty`` (module docstring), ``easy_fit`` fitting the
        workers' model alone (setting its attributes and ``reading_``)."""
        if self.difficulty not in DIFFICULTIES:
            raise InvalidParameterError(
                f"ItemDifficultyDawidSkene: difficulty must be one of {', '.join(DIFFICULTIES)}, "
                f"got {self.difficulty!r}"
            )
        if self.prior_fit == "every" and self.difficulty == "mixture":
            raise InvalidParameterError(
                "ItemDifficultyDawidSkene: prior_fit='every' is not supported with "
                "difficulty='mixture' (the workers' prior is fitted once, on the start)"
            )
        model_data, mapping = self._pooled(data)
        self._check()
        partnered = partnered_labels(model_data, known)
        if self.difficulty == "none" or partnered is None:
            # nothing can be checked (or no mixture asked for): the workers' model alone
            T = easy_fit()
            self._no_mixture(data.n_items, data.n_classes)
            self.difficulty_, self.evidence_gain_, self.evidence_gate_ = "none", 0.0, False
            self.gate_gain_ = float("nan")
            return T
        self.evidence_gate_, self.gate_gain_ = False, float("nan")
        if self.difficulty == "mixture":
            T = self._mixture(model_data, mapping, incidence(model_data), partnered, known)
            self.difficulty_, self.evidence_gain_ = "mixture", 0.0
            return T
        C = data.n_classes
        # BIC's charge for the mixture's extra parameters: H's C(C − 1) and ρ
        charge = 0.5 * (C * (C - 1) + 1) * np.log(data.n_items)
        easy = easy_fit()
        self._no_mixture(data.n_items, C)
        chosen = {name: getattr(self, name) for name in FITTED}
        if self.difficulty == "evidence" and model_data is data:
            # (with workers pooled the gate does not run: its re-fit reads unpooled workers)
            # H's counts read the labels the workers' counts read (module docstring)
            lone = self.reading_[1]
            weights = partnered if lone != "count" else np.ones(data.n_labels, bool)
            frozen = frozen_mixture(data, chosen, weights, easy, 0.0, self.asymmetry).best
            self.gate_gain_ = frozen
            if frozen <= 0.0:
                # the gate (module docstring, "Gate"): the frozen workers' mixture gains
                # nothing at all; refused without the mixture's fit
                self.difficulty_, self.evidence_gain_ = "none", frozen - charge
                self.evidence_gate_ = True
                return easy
        T = self._mixture(model_data, mapping, incidence(model_data), partnered, known)
        mixture = {name: getattr(self, name) for name in FITTED}
        gain = label_log_likelihood(data, mixture) - label_log_likelihood(data, chosen)
        self.evidence_gain_ = gain - charge
        if self.evidence_gain_ <= 0:
            self.difficulty_ = "none"
            for name, value in chosen.items():
                setattr(self, name, value)
            return easy
        self.difficulty_ = "mixture"
        return T

    def _no_mixture(self, n_items: int, C: int) -> None:
        """The hard side's attributes of a fit without hard items."""
        self.hard_ = np.zeros(n_items)
        self.hard_share_ = 0.0
        self.hard_confusion_ = hard_prior(C) / (C + 1.0)

    def _start_prior(self, matrix: sp.csr_matrix, T: FloatArray, J: int, C: int) -> FloatArray:
        """The workers' prior ``α₀`` (C, C): fixed, or ``bds``'s two-stage empirical Bayes on
        the majority-vote start ``T`` (N, C), read through ``matrix`` (the labels it counts:
        every label, or the partnered ones with ``"skip-prior"``)."""
        fixed = self._fixed_prior(C)
        if fixed is not None:
            return fixed
        fit_prior = one_coin_polya_prior if self.reading_[0] == "one-coin" else polya_prior
        start = np.asarray(matrix.T @ T).reshape(J, C, C).transpose(0, 2, 1)
        first = np.where(np.eye(C, dtype=bool), 2.0, 1.0)
        return np.maximum(fit_prior(start, first, n_steps=20), float(self.prior_floor))

    def _design(self, data: LabelData, matrix: sp.csr_matrix, partnered: np.ndarray) -> _Design:
        """The sparse designs of :class:`_Design` for ``data``."""
        C, N, K = data.n_classes, data.n_items, data.n_labels
        lone = self.reading_[1]
        checked = (partnered if lone != "count" else np.ones(K, bool)).astype(float)
        votes = sp.csr_matrix((np.ones(K), (data.items, data.labels)), shape=(N, C))
        checks = sp.csr_matrix((checked, (data.items, data.labels)), shape=(N, C))
        return _Design(
            matrix=matrix,
            workers=self._worker_evidence(matrix, data, partnered, lone),
            votes=votes,
            checked=checks,
            dense_votes=np.ascontiguousarray(votes.toarray(), dtype=np.float64),
            dense_checked=np.ascontiguousarray(checks.toarray(), dtype=np.float64),
        )

    def _mixture(
        self,
        data: LabelData,
        mapping: np.ndarray,
        matrix: sp.csr_matrix,
        partnered: np.ndarray,
        known: KnownTruth | None,
    ) -> FloatArray:
        """The variational fit of the module docstring on (pooled) ``data``."""
        n_iter, _ = check_iterations(self.n_iter, self.tol, "ItemDifficultyDawidSkene")
        tol = self.mixture_tol
        if isinstance(tol, bool) or not isinstance(tol, int | float) or not tol >= 0:
            raise InvalidParameterError(
                f"ItemDifficultyDawidSkene: mixture_tol must be a number >= 0, got {tol!r}"
            )
        nu0 = self.class_prior
        if isinstance(nu0, bool) or not isinstance(nu0, int | float) or not nu0 > 0:
            raise InvalidParameterError(
                f"ItemDifficultyDawidSkene: class_prior must be a number > 0, got {nu0!r}"
            )
        C, J = data.n_classes, data.n_workers
        design = self._design(data, matrix, partnered)
        T = initial_shares(data)
        if known is not None:
            T = known.clamp(T)
        start_matrix = design.workers if self.reading_[1] == "skip-prior" else matrix
        prior = self._start_prior(start_matrix, T, J, C)
        fit = _Fit(R=start_responsibilities(T))
        iteration = self._iterate(fit, prior, design, known, n_iter, tol)
        counts = np.asarray(design.workers.T @ fit.R[:, :C]).reshape(J, C, C).transpose(0, 2, 1)
        final = worker_model(counts, prior, self.asymmetry, fit.share, True, fit.evidence)
        assert final.errors is not None  # means=True
        T = fit.R[:, :C] + fit.R[:, C:]
        assert fit.hard is not None  # set by every step
        self._keep_for_tempering(data, T, final.expected_log_e, final.errors, (fit.R, fit.hard))
        self.confusion_prior_ = prior
        self.errors_ = final.errors[mapping]
        self.symmetric_ = final.symmetric[mapping]
        self.symmetric_share_ = final.share
        totals = fit.R.sum(axis=0)  # (2C,)
        self.priors_ = (float(nu0) + totals[:C] + totals[C:]) / (C * float(nu0) + totals.sum())
        self.hard_ = row_sums(fit.R[:, C:])
        self.hard_share_ = float((1.0 + totals[C:].sum()) / (2.0 + totals.sum()))
        self.hard_confusion_ = fit.hard
        self.n_iter_ = iteration
        return T

    def _iterate(
        self,
        fit: _Fit,
        prior: FloatArray,
        design: _Design,
        known: KnownTruth | None,
        n_iter: int,
        tol: float,
    ) -> int:
        """The coordinate updates until the class shares move by at most ``tol`` or
        ``n_iter`` updates ran, accelerated by SQUAREM (module docstring, "Speed"); returns
        the number of updates. ``fit.R`` holds the last update's output."""
        C = fit.R.shape[1] // 2
        evaluations = 0

        def update(R: FloatArray) -> tuple[FloatArray, float]:
            nonlocal evaluations
            evaluations += 1
            fit.R = R
            fit.moved = None
            new = self._step(fit, prior, design)
            if known is None and fit.moved is not None:
                return new, fit.moved  # the compiled update's move of the class shares
            if known is not None:
                new = _clamp(new, known)
            moved = (new[:, :C] - R[:, :C]) + (new[:, C:] - R[:, C:])
            return new, float(np.max(np.abs(moved))) if moved.size else 0.0

        current = fit.R
        while True:
            first, change = update(current)
            if change <= tol or evaluations >= n_iter:
                fit.R = first
                return evaluations
            second, change = update(first)
            if change <= tol or evaluations >= n_iter or not self.accelerate:
                fit.R = second
                if change <= tol or evaluations >= n_iter:
                    return evaluations
                current = second
                continue
            r = first - current
            v = second - 2.0 * first + current
            scale = float(np.sqrt(np.sum(v * v)))
            if scale == 0.0:
                current = second
                continue
            # SqS3 step length (Varadhan & Roland 2008), at least a plain step, at most 8
            alpha = min(max(-float(np.sqrt(np.sum(r * r))) / scale, -8.0), -1.0)
            jump = current - 2.0 * alpha * r + alpha * alpha * v
            np.maximum(jump, 0.0, out=jump)
            total = row_sums(jump)
            # a row the jump emptied (all entries clipped) keeps the last plain update
            bad = ~(total > 1e-12)
            jump[bad] = second[bad]
            total[bad] = 1.0
            current = jump / total[:, None]
            if known is not None:
                current = _clamp(current, known)

    def _step(self, fit: _Fit, prior: FloatArray, design: _Design) -> FloatArray:
        """One round of the coordinate updates (module docstring); updates ``fit``'s worker
        state and ``H`` and returns the new ``R`` (N, 2C)."""
        N, C = fit.R.shape[0], fit.R.shape[1] // 2
        J = design.matrix.shape[1] // C
        compiled = self._compiled_update
        # [j, c, l]: the workers' expected counts on the easy items; [c, l]: the hard items'
        # expected votes M
        if compiled:
            counts, hard_votes = _difficulty_kernel.mixture_counts(
                *_csr(design.workers), fit.R, design.dense_checked, J
            )
        else:
            easy, hard = fit.R[:, :C], fit.R[:, C:]
            counts = np.asarray(design.workers.T @ easy).reshape(J, C, C).transpose(0, 2, 1)
            hard_votes = np.asarray(design.checked.T @ hard).T
        workers = worker_model(counts, prior, self.asymmetry, fit.share, False, fit.evidence)
        fit.share, fit.evidence = workers.share, workers.evidence
        # H within its bounds
        fit.hard_alpha = hard_prior(C) + hard_votes
        crowd = counts.sum(axis=0)  # (C, C): the easy labels' confusion, summed over workers
        easy_rate = np.diagonal(crowd) / np.maximum(crowd.sum(axis=1), 1e-300)
        fit.hard = bounded_confusion(fit.hard_alpha, easy_rate)
        hard_log = np.log(fit.hard)  # every entry > 0 (bounded_confusion)
        # q(π) = Dir(ν₀ + Σ_i T_i), q(ρ) = Beta(1 + Σ_i q(easy), 1 + Σ_i q(hard))
        totals = fit.R.sum(axis=0)  # (2C,)
        nu = float(self.class_prior) + totals[:C] + totals[C:]
        rho = 1.0 + np.array([totals[:C].sum(), totals[C:].sum()])
        log_pi = digamma(nu) - digamma(nu.sum())  # (C,)
        log_rho = digamma(rho) - digamma(rho.sum())  # (2,)
        if compiled:
            R = np.empty((N, 2 * C))
            _difficulty_kernel.mixture_scores(
                *_csr(design.matrix), np.ascontiguousarray(workers.expected_log_e),
                design.dense_votes, hard_log, log_pi + log_rho[0], log_pi + log_rho[1], R,
            )  # fmt: skip
            np.exp(R, out=R)  # every entry <= 1 (the max subtracted)
            fit.moved = _difficulty_kernel.normalise_rows(R, fit.R)
            return R
        log_e = workers.expected_log_e.transpose(0, 2, 1).reshape(J * C, C)  # [(j, l), c]
        scores = np.empty((N, 2 * C))
        scores[:, :C] = np.asarray(design.matrix @ log_e) + (log_pi + log_rho[0])
        scores[:, C:] = np.asarray(design.votes @ hard_log.T) + (log_pi + log_rho[1])
        # softmax over the 2C cells of each item: the max subtracted, every exp <= 1
        scores -= row_max(scores)[:, None]
        R = np.exp(scores)
        R /= row_sums(R)[:, None]
        return R


def _clamp(R: FloatArray, known: KnownTruth) -> FloatArray:
    """``R`` (N, 2C) with every known item's class fixed to its truth, its split between
    easy and hard (within the true class) kept, in place."""
    C = R.shape[1] // 2
    easy, hard = R[known.items, known.classes], R[known.items, C + known.classes]
    total = easy + hard
    # a row of zeros (underflow) falls back to an even split
    share = np.where(total > 0, easy / np.where(total > 0, total, 1.0), 0.5)
    R[known.items] = 0.0
    R[known.items, known.classes] = share
    R[known.items, C + known.classes] = 1.0 - share
    return R
