"""Bayesian Dawid–Skene: Dirichlet priors on the class proportions and on every row of every
worker's confusion matrix, by variational inference — the model of Kim & Ghahramani,
"Bayesian Classifier Combination" (AISTATS 2012, §3 "IBCC"), with the mean-field updates of
Simpson, Roberts, Psorakis, Smith (2013, "Dynamic Bayesian combination of multiple imperfect
classifiers", §2 IBCC-VB), and an empirical-Bayes prior.

Model (shapes: N items, J workers, C classes)::

    π ~ Dir(ν₀)                                   class proportions, (C,)
    e_jc ~ Dir(α₀_c)   for every worker j, class c   row c of j's confusion matrix, (C,)
    z_i | π ~ Cat(π);  l | z_i = c, worker j ~ Cat(e_jc)

Variational inference. With ``q(z, π, e) = Π_i q(z_i) q(π) Π_jc q(e_jc)`` the coordinate
updates that maximise the evidence lower bound are (conjugacy; Simpson et al. eqs. 10–16):

- ``q(π) = Dir(ν)``, ``ν_c = ν₀_c + Σ_i T_ic``;
- ``q(e_jc) = Dir(α_jc)``, ``α_jcl = α₀_cl + N_jcl`` with ``N_jcl = Σ_{labels (i, j, l)} T_ic``
  (expected counts: one sparse product ``Nᵀ T`` as in :class:`DawidSkene`);
- ``log T_ic = E[log π_c] + Σ_{labels (i, j, l)} E[log e_jcl] + const``, with
  ``E[log π_c] = ψ(ν_c) − ψ(Σ ν)`` and ``E[log e_jcl] = ψ(α_jcl) − ψ(Σ_l α_jcl)``.

Compared with Dawid–Skene's EM (``log ê = log(N_jcl / N_jc·)``), ``ψ(α) − ψ(Σα)`` is smaller
than ``log(α / Σα)`` by about ``1/(2α)`` per count: a worker seen a few times is not trusted
as if its frequencies were exact, and the prior keeps an unseen (worker, class, label) cell
away from log 0 — the two reasons EM's posteriors say 0.999 where they are right 94% of the
time (see docs/calibration.md).

Empirical Bayes (``confusion_prior=None``, the default). The prior rows ``α₀_c`` (C,) are set
from the data: at every iteration, ``α₀_c`` maximises the Dirichlet-multinomial (Pólya)
marginal likelihood of the workers' expected count rows ``N_jc·`` (type-II maximum
likelihood, with the current ``T`` plugged in), by Minka's fixed point ("Estimating a
Dirichlet distribution", 2000, eq. 55)::

    α₀_cl ← α₀_cl · Σ_j [ψ(N_jcl + α₀_cl) − ψ(α₀_cl)] / Σ_j [ψ(n_jc + A_c) − ψ(A_c)],

``A_c = Σ_l α₀_cl``, ``n_jc = Σ_l N_jcl``, over the workers with ``n_jc > 0`` (each entry
kept in [1e-3, 1e4] so that a crowd of identical workers — whose MLE strength is infinite —
gives a finite, very strong prior). The prior is thus the crowd's average confusion matrix
with the crowd's own spread: the upper level of a hierarchical model whose lower level is the
workers.

When (``prior_fit``). ``"start"`` (the default): once, on the expected counts of the
starting shares (the majority vote), to convergence (20 steps), then held fixed while the
variational updates run — two-stage empirical Bayes. ``"every"``: re-fitted at every iteration
(3 steps, warm-started), i.e. the hyperparameters and ``q`` maximise the evidence bound
jointly. The joint maximisation has degenerate optima (e.g. "class 0: workers answer at random;
class 1: workers always say 1") that the two-stage fit cannot drift into, and the two-stage fit
runs the Pólya fit once instead of at every iteration (measurements: docs/decisions.md).

Form (``prior_form``). ``"confusion"`` (the default) fits every row ``α₀_c`` of the prior on
its own, as above. ``"one-coin"`` fits one accuracy for the whole crowd: every row puts
``α_d`` on its own class and ``α_o / (C − 1)`` on each other class, where ``(α_d, α_o)`` is the
type-II ML Beta prior of the workers' (agreeing, disagreeing) start counts summed over all
their rows (:func:`one_coin_polya_prior`, the same fixed point on (J, 1, 2) counts). The
workers' posteriors are still full confusion matrices; only the upper level is one-coin. Why:
on an imbalanced crowd each worker has a handful of rare-class items, so the rare class's row
of the full prior is fitted on the majority-vote start's rare-class items — half of which are
the vote's false positives — and comes out "workers answer at random on the rare class"; the
posterior then hands split items to the rare class, below majority vote. A one-coin upper
level lets the rare row borrow the crowd's accuracy from the common one (measured on the
stress bed: docs/stress-bed.md).

Form chosen by the evidence (``prior_form="evidence"``; ``bds-ev-blind-form``). The two
departures of ``bds-ev`` from ``bds`` — the one-coin upper level and ``lone_labels="skip"`` —
were chosen on crowds of many workers, and on a crowd of a few each tips the fit into reading
every item as one class (docs/stress-bed.md, 2026-12-07). The one-coin level fills a row a
worker has (almost) no counts in with the crowd's accuracy; once the class prior leans towards
one class that is every worker's rare-class row, so a good worker's rare-class labels read as
errors of the common class and "every item one class" is a fixed point (8 workers, 80/20, a
one-class worker giving 46 % of the labels: class prior 0.945, every item class 0, accuracy
0.766 where ``bds`` reads 0.840). ``skip`` judges the workers on the partnered labels alone,
and when those are a few heavy workers' shared items that agree at chance they hold no
evidence of two classes. ``bds``'s reading (a prior row fitted per class, every label
counted) has the opposite weakness on imbalanced crowds (above). Which reading the labels
support is a question for the model's evidence, as the other hyperparameters are: both fits
are made — the prior's form as given (one-coin, ``lone_labels`` as given) and the confusion
form counting every label, each its own two-stage prior and variational fit — and the one
whose fit has the larger evidence lower bound is read (the first on a tie). The bound (Bishop
2006 §10.2.2; Simpson et al. 2013 §2) at the items' shares ``T``, every other factor at its
optimum for ``T``: by conjugacy ``max_q(e) E_q[log p(L | z, e)] − KL(q(e) ‖ p(e))`` is the
log Pólya integral of the expected counts ``N_jcl = Σ T_ic`` (the counts need not be
integers), the kinds' ``q(s_j)`` at their optimum make it ``log Σ_k w_k Z_jk``, and the same
holds for ``π``, so (:meth:`BayesianDawidSkene.evidence_bound`)::

    L(T) = Σ_j log Σ_k w_k Z_jk(N_j) + ln B(ν₀ + Σ_i T_i) − ln B(ν₀) + Σ_i H(T_i)
         ≤ log p(labels | α₀, w, ν₀)

with ``w`` the kinds' type-II weights at these counts and every label counted, lone ones too
(the bound is the model's, whichever rule fitted ``T``, so the two fits are scored alike). It
costs a second fit. Measured (docs/stress-bed.md), the bound is a safe judge only of a
degenerate reading: always choosing by it (``bds-ev-blind-form``) closes the few-worker
probes but loses bed rows where the labels' errors are correlated (fact_eval, adult) or the
crowd is two-coin (the held-out bed's worst 0.044 → 0.084). ``"evidence-one-class"``
(``bds-ev-blind-recheck``) keeps the one-coin fit unless it reads every item as one class — a
reading in which the labels say nothing about any item — and only then makes the second fit
and keeps the one with the larger bound. What it cannot do: when a heavy spammer shares
nearly every item with one good worker, the two workers' labels are independent whatever the
truth, so the labels do not say which of them to follow; the bound is then flat (within 1 nat
between fits reading 0.568 and 0.816, docs/stress-bed.md) and no evidence can choose.

Floor (``prior_floor``). A lower bound on every fitted prior pseudo-count. With one label per
item the start is each label's own vote, so every worker looks always right, the type-II fit
drives the off-diagonal pseudo-counts to the bound 1e-3, and a lone label's posterior says
0.999… however often such labels are wrong (an NLL above Dawid–Skene's). A floor of 0.1
keeps a worker seen n times, always agreeing with itself, at an error probability of about
``0.1 / (α_d + n)``: still far above any class-prior ratio, so the lone label still decides,
but a wrong one costs ``log((α_d + n) / 0.1)`` nats instead of ``log((α_d + n) / 0.001)``.

Lone labels (``lone_labels``). A label that is the only one of its item makes that item's
posterior by itself, and the mean-field update then credits its worker with it: the label
enters row ``c`` of the worker's counts with the weight ``T_ic`` it gave itself. With a learned
class prior this confirms itself. On the worker-aware default's trec campaigns at one label per
item (about 13,000 of 19,033 items with one label, 2,800 with two or three), the workers saying
the rarer class on 40 % or more of their labels had their lone rare labels moved to the common
class — each moved label an error in its worker's common-class row, which made the next move
likelier, and the class prior followed (0.80 common against 0.63 of the labels): 3,092 of 4,903
lone class-0 labels moved, 73 % of them wrongly on the gold items; accuracy 0.59 against
majority vote's 0.66 (docs/stress-bed.md, 2026-12-07). ``"skip"`` leaves the lone labels out
of the workers' counts: a worker is judged by the labels something else can check — a partner
on the item, or the item's known truth — while every item's posterior still reads all its
labels. The start prior (``prior_fit="start"``) is still fitted on every label, where a lone
label agrees with itself: the crowd's prior stays a trusting one, so a worker seen only alone
still decides its item. ``"skip-prior"`` fits that prior on the partnered labels too (and is
then at the mercy of how few they are: measured, not the default). When fewer than two
workers have a partnered label (one label per item everywhere) nothing can be checked, and
both count every label, as ``"count"`` (the default of :class:`BayesianDawidSkene`; ``bds-oc``
uses ``"skip"``) does. ``"skip-predictive"`` is ``"skip"`` whose lone items read their label
through the worker's predictive ``E_q[e]`` instead of ``exp E_q[log e]`` — the exact posterior
once the label is cut from its worker — and which never falls back to counting them
(:mod:`~crowdbudget.aggregation._lone_predictive`, where it is derived).

``confusion_prior=(diagonal, off_diagonal)`` fixes it instead (Kim & Ghahramani use
hand-set values). ``ν₀ = class_prior`` (1: uniform).

Asymmetry (``asymmetry``). ``"free"`` (the default): every worker has a full confusion matrix,
one accuracy per class. ``"none"``: every worker has one accuracy for every class (its wrong
labels' distribution per class still free). ``"evidence"``: each worker is one or the other as
the marginal likelihood of its expected counts decides, the crowd's share of symmetric workers
fitted by type-II ML (:mod:`~crowdbudget.aggregation.worker_asymmetry`, where the derivation
is). When nothing can be checked (fewer than two workers with a partnered label) a worker's
counts are its labels' agreement with themselves, no evidence of how its accuracy depends on
the class, and ``"evidence"`` keeps the free workers.

Hierarchical pooling (``pool_below=k``): workers with fewer than k labels share one confusion
matrix (one "rest of the crowd" worker), so on sets where most workers give 1–2 labels (trec,
live campaigns early on) their labels count with the crowd's estimated reliability instead of
a prior-dominated one each. ``0`` (default) pools nobody.

Tempering (``temperature="auto"``; default 1, no tempering). The model's labels are
independent given
the true class; real crowds err together on hard items (the Snow et al. sets' errors are
items most workers get wrong), so the posterior of an item with ten labels counts ten
independent witnesses where there are fewer, and says 0.999 where it is right 94% of the time.
The verdict therefore reports the power posterior ``q_τ(z_i = c) ∝ exp(τ · log T_ic)`` (the
"tempered" or "safe Bayes" posterior, Grünwald 2012; a single τ ∈ (0, 1] for the whole data
set), which keeps every item's most probable class — labels and accuracy do not change —
and only spreads the confidence. τ is chosen without gold, by leave-one-label-out predictive
likelihood: for every label (i, j, l), the tempered posterior of z_i from the item's *other*
labels, ``exp(τ (log T_ic − E[log e_jcl]))`` normalised, predicts l through worker j's posterior
mean confusion, ``Σ_c q_τ(c | rest) E[e_jcl]``; τ maximises the sum of the log predictive
probabilities on [0.025, 1] (a scan in log τ, then Brent's bounded search: 9–20 evaluations
of the sum where a 40-point grid took 40; the evaluation, the search and their derivation in
:mod:`~crowdbudget.aggregation._tempering`). Where the labels really are independent given the
class the best τ is 1 (the plain posterior); correlated errors make held-out labels less
predictable than the plain posterior claims, and τ < 1. Measured (docs/stress-bed.md,
"2026-12-07: a cheaper τ search"): on the default verdict it lowers NLL on fact_eval and
millionaire at all labels (τ ≈ 0.52 and 0.11) and leaves most sparse rows at τ = 1;
``temperature=1`` (default) gives the untempered variational posterior, a number fixes τ.
Tempering is applied once, to the fit finally read: every choice between fits (the prior's
form by the evidence bound, a subclass's model choice) reads the fits untempered, so the
labels never depend on τ, and τ is searched once per fit read.

Known truth (``fit(..., known_truth=...)``: control items). A known item's ``q(z_i)`` is its
one-hot truth at the start and after every update, so the empirical-Bayes prior, every
worker's ``q(e_jc)`` (their control answers as counts of definite successes and failures)
and ``q(π)`` (the known items at their class) learn from it; tempering leaves a known item
one-hot (the variational semi-supervised IBCC of Kim & Ghahramani §3, whose training labels
are exactly this).

Start: ``T`` = majority-vote shares. Stop after ``n_iter`` iterations or when no entry of
``T`` moves by more than ``tol``. Cost per iteration: two sparse products (O(n_labels · C))
and O(J · C²) digammas.

Example:
    >>> from crowdbudget.datasets import load_dataset
    >>> bds = BayesianDawidSkene().fit(load_dataset("rte"))
    >>> bds.confusion_prior_.shape, bds.errors_.shape
    ((2, 2), (164, 2, 2))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma, gammaln, xlogy

from crowdbudget.aggregation.base import Aggregator, FloatArray, KnownTruth
from crowdbudget.aggregation.dawid_skene import check_iterations, incidence, initial_shares
from crowdbudget.aggregation.worker_asymmetry import ASYMMETRY, Evidence, worker_model
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError

#: bounds of the empirical-Bayes prior pseudo-counts (module docstring)
PRIOR_BOUNDS = (1e-3, 1e4)


#: when the empirical-Bayes prior is fitted (``prior_fit``; module docstring)
PRIOR_FITS = ("start", "every")

#: the form of the empirical-Bayes prior (``prior_form``; module docstring; ``"evidence"``:
#: either, as the evidence bound decides; ``"evidence-one-class"``: the one-coin fit, and the
#: bound decides only when that fit reads every item as one class)
PRIOR_FORMS = ("confusion", "one-coin", "evidence", "evidence-one-class")

#: whether a lone label (the only label of its item) counts in its worker's model
#: (``lone_labels``; module docstring)
LONE_LABELS = ("count", "skip", "skip-prior", "skip-predictive")


def polya_prior(counts: FloatArray, start: FloatArray, n_steps: int = 20) -> FloatArray:
    """Type-II ML Dirichlet prior rows from expected count rows (Minka 2000, eq. 55).

    Args:
        counts: ``counts[j, c, l]`` expected labels l of worker j on class-c items,
            shape (n_workers, C, C).
        start: the current prior ``α₀`` (C, C), all > 0.
        n_steps: fixed-point steps.

    Returns:
        ``α₀`` (C, C): row c maximises Π_j Pólya(counts[j, c] | α₀_c) (within PRIOR_BOUNDS).
    """
    alpha = np.array(start, dtype=float)
    n_jc = counts.sum(axis=2)  # (J, C)
    for c in range(alpha.shape[0]):
        active = n_jc[:, c] > 1e-9
        if active.sum() < 2:
            continue  # one worker carries no information about the spread: keep the start
        rows, totals = counts[active, c, :], n_jc[active, c]
        a = alpha[c]
        for _ in range(n_steps):
            total = a.sum()
            numerator = np.sum(digamma(rows + a) - digamma(a), axis=0)
            denominator = np.sum(digamma(totals + total) - digamma(total))
            # both sums are > 0 (ψ increasing, counts > 0) except for a class column never
            # observed, whose numerator is 0: the clip keeps it at the lower bound
            a = np.clip(a * numerator / max(denominator, 1e-300), *PRIOR_BOUNDS)
        alpha[c] = a
    return alpha


def one_coin_polya_prior(counts: FloatArray, start: FloatArray, n_steps: int = 20) -> FloatArray:
    """A one-coin prior from expected count rows (module docstring, "Form").

    Args:
        counts: ``counts[j, c, l]``, shape (n_workers, C, C), as :func:`polya_prior`.
        start: the current prior (C, C), all > 0; its mean diagonal and mean off-diagonal row
            mass start the fit.
        n_steps: fixed-point steps.

    Returns:
        The prior (C, C): ``α_d`` on the diagonal, ``α_o / (C − 1)`` elsewhere, where
        ``(α_d, α_o)`` maximises Π_j Pólya((agree_j, disagree_j) | α_d, α_o) over the workers'
        summed diagonal and off-diagonal counts (within PRIOR_BOUNDS).
    """
    C = counts.shape[1]
    agree = np.trace(counts, axis1=1, axis2=2)  # (J,)
    pairs = np.stack([agree, counts.sum(axis=(1, 2)) - agree], axis=1)[:, None, :]  # (J, 1, 2)
    diagonal = float(np.mean(np.diag(start)))
    first = np.array([[diagonal, float(start.sum()) / C - diagonal]])
    alpha_d, alpha_o = polya_prior(pairs, first, n_steps=n_steps)[0]
    return np.where(np.eye(C, dtype=bool), alpha_d, alpha_o / max(C - 1, 1))


class BayesianDawidSkene(Aggregator):
    """Bayesian Dawid–Skene / IBCC by variational inference (see the module docstring).

    Args:
        n_iter: maximum iterations (>= 1).
        tol: stop when no posterior probability moves by more than this.
        class_prior: ν₀, pseudo-count per class (> 0).
        confusion_prior: None (empirical Bayes) or ``(diagonal, off_diagonal)`` pseudo-counts.
        pool_below: workers with fewer labels than this share one confusion matrix (0: none).
        temperature: τ in (0, 1] (default 1: the variational posterior), or ``"auto"``
            (leave-one-label-out choice).
        prior_fit: when the empirical-Bayes prior is fitted: ``"start"`` (once, on the
            majority-vote start; default) or ``"every"`` (every iteration; the first build's
            rule) — module docstring. Ignored with ``confusion_prior``.
        prior_form: ``"confusion"`` (every prior row fitted on its own; default),
            ``"one-coin"`` (one crowd accuracy for every row), ``"evidence"`` (the
            one-coin fit or the confusion fit counting every label, the one with the larger
            evidence bound) or ``"evidence-one-class"`` (the one-coin fit, re-checked so only
            when it reads every item as one class) — module docstring.
        prior_floor: lower bound (>= 0) of every empirical-Bayes prior pseudo-count
            (default 0: the fit's own bound 1e-3) — module docstring.
        lone_labels: whether a label alone on its item counts in its worker's model:
            ``"count"`` (default), ``"skip"`` (not when at least two workers have a label
            with a partner), ``"skip-prior"`` (nor in the prior's fit) or
            ``"skip-predictive"`` (never, and read through ``E_q[e]``) — module docstring.
        asymmetry: each worker's confusion matrix free (``"free"``, default), symmetric
            (``"none"``: one accuracy) or either, as its marginal likelihood decides
            (``"evidence"``) — :mod:`~crowdbudget.aggregation.worker_asymmetry`; or with
            class-blind workers too (``"evidence-blind"``; ``"evidence-blind-own"``: blind
            only on a worker's own strong evidence) — :mod:`.worker_blind`.
        rng: seed or generator for ties.

    Fitted attributes:
        probas_: q(z_i = c), shape (n_items, C).
        labels_: argmax of ``probas_`` (ties at random), shape (n_items,).
        confusion_prior_: α₀, shape (C, C).
        errors_: posterior mean confusion ``E[e_jcl]``, shape (n_workers, C, C) (pooled
            workers share their pool's).
        priors_: posterior mean class proportions, shape (C,).
        temperature_: τ used.
        symmetric_: ``q(s_j = 1)``, each worker's probability of being symmetric, shape
            (n_workers,) (0 with ``"free"``, 1 with ``"none"``).
        symmetric_share_: the crowd's fitted share of symmetric workers ``w``.
        prior_form_: the form read (``"evidence…"``: the chosen one).
        form_bounds_: {form: evidence bound} of the fits scored (empty when no choice was
            made).
        n_iter_: iterations run.
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
        prior_form: str = "confusion",
        prior_floor: float = 0.0,
        lone_labels: str = "count",
        asymmetry: str = "free",
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(rng=rng)
        self.asymmetry = asymmetry
        self.prior_fit = prior_fit
        self.prior_form = prior_form
        self.prior_floor = prior_floor
        self.lone_labels = lone_labels
        self.n_iter = n_iter
        self.tol = tol
        self.class_prior = class_prior
        self.confusion_prior = confusion_prior
        self.pool_below = pool_below
        self.temperature = temperature

    def _fixed_prior(self, C: int) -> FloatArray | None:
        if self.confusion_prior is None:
            return None
        values = np.asarray(self.confusion_prior, dtype=float).reshape(-1)
        if values.shape != (2,) or np.any(values <= 0) or not np.all(np.isfinite(values)):
            raise InvalidParameterError(
                "BayesianDawidSkene: confusion_prior must be None (empirical Bayes) or two "
                f"positive pseudo-counts (diagonal, off-diagonal), got {self.confusion_prior!r}"
            )
        return np.where(np.eye(C, dtype=bool), values[0], values[1])

    def _pooled(self, data: LabelData) -> tuple[LabelData, np.ndarray]:
        """``data`` with the workers below ``pool_below`` labels merged into one worker, and
        the map old worker → new worker (n_workers,)."""
        pool = self.pool_below
        if isinstance(pool, bool) or not isinstance(pool, int | np.integer) or pool < 0:
            raise InvalidParameterError(
                f"BayesianDawidSkene: pool_below must be an integer >= 0, got {pool!r}"
            )
        n_labels = np.bincount(data.workers, minlength=data.n_workers)
        small = n_labels < pool
        if pool == 0 or small.sum() < 2:
            return data, np.arange(data.n_workers)
        kept = np.flatnonzero(~small)
        mapping = np.full(data.n_workers, kept.size, dtype=np.int64)
        mapping[kept] = np.arange(kept.size)
        worker_ids = np.append(data.worker_ids[kept], "(pooled)").astype(object)
        pooled = LabelData(
            items=data.items,
            workers=mapping[data.workers],
            labels=data.labels,
            item_ids=data.item_ids,
            worker_ids=worker_ids,
            classes=data.classes,
            gold=data.gold,
        )
        return pooled, mapping

    #: how ``temperature="auto"`` finds τ: ``"search"`` (the coarse scan and bounded search of
    #: :mod:`~crowdbudget.aggregation._tempering`) or ``"grid"`` (the 40-point grid, kept for
    #: comparison by the tests and benchmarks)
    _temperature_search = "search"

    #: whether a mixture's τ reads the mixture's own predictive (True; ``mixture`` of
    #: :meth:`_temperature`) or the workers' model alone (False: the rule before, kept for
    #: comparison by the tests and docs/stress-bed.md's measurement)
    _temperature_reads_mixture = True

    def _temperature(
        self,
        data: LabelData,
        log_T: FloatArray,
        expected_log_e: FloatArray,
        errors: FloatArray,
        mixture: tuple[FloatArray, FloatArray] | None = None,
    ) -> float:
        """τ: fixed, or by leave-one-label-out predictive likelihood (module docstring), its
        maximum found by :func:`~crowdbudget.aggregation._tempering.searched_temperature`.
        ``mixture``: the item-difficulty mixture's ``q(z, h)`` (n_items, 2C) and hard
        confusion ``H`` (C, C) when that is the fit; the criterion then reads the mixture's
        own predictive of a held-out label (:func:`~crowdbudget.aggregation._tempering.
        mixture_held_out_labels`, where it is derived)."""
        if self.temperature != "auto":
            tau = self.temperature
            if isinstance(tau, bool) or not isinstance(tau, int | float) or not 0 < tau <= 1:
                raise InvalidParameterError(
                    f"BayesianDawidSkene: temperature must be 'auto' or a number in (0, 1], "
                    f"got {tau!r}"
                )
            return float(tau)
        if data.n_labels == 0:
            return 1.0
        from crowdbudget.aggregation import _tempering

        if mixture is not None and self._temperature_reads_mixture:
            responsibilities, hard = mixture
            log_R = np.log(np.maximum(responsibilities, 1e-300))  # R > 0 up to underflow
            held = _tempering.mixture_held_out_labels(
                data.items, data.workers, data.labels, log_R, expected_log_e, errors, hard
            )
        else:
            held = _tempering.held_out_labels(
                data.items, data.workers, data.labels, log_T, expected_log_e, errors
            )
        if self._temperature_search == "grid":
            return _tempering.grid_temperature(held)
        return _tempering.searched_temperature(held)

    reads_known_truth = True

    def _fit_probas(self, data: LabelData) -> FloatArray:
        return self._tempered(self._chosen_form(data, None), None)

    def _fit_probas_known(self, data: LabelData, known: KnownTruth) -> FloatArray:
        return self._tempered(self._chosen_form(data, known), known)

    #: the criterion's inputs of the fit made last (:meth:`_keep_for_tempering`); a choice
    #: between fits keeps the chosen one's (it is in :attr:`_FITTED`); None once used
    _tempering_inputs: tuple[LabelData, FloatArray, FloatArray, FloatArray, Any] | None = None

    def _keep_for_tempering(
        self,
        data: LabelData,
        T: FloatArray,
        expected_log_e: FloatArray,
        errors: FloatArray,
        mixture: tuple[FloatArray, FloatArray] | None = None,
    ) -> None:
        """Keep a finished variational fit's τ-criterion inputs (:meth:`_temperature`'s, ``T``
        its shares) and report it untempered until :meth:`_tempered`. Tempering is how the
        verdict reports the fit finally read, so it is applied once, after every choice
        between fits (the prior's form, the item-difficulty mixture's evidence and gate, a
        refitted prior): those choices read the fits' own shares and class proportions, as a
        choice without tempering does, and the labels cannot depend on τ."""
        log_T = np.log(np.maximum(T, 1e-300))  # T > 0 (softmax of finite scores) up to underflow
        self._tempering_inputs = (data, log_T, expected_log_e, errors, mixture)
        self.temperature_ = 1.0

    def _tempered(self, T: FloatArray, known: KnownTruth | None) -> FloatArray:
        """The fit read, ``T`` (n_items, C), reported as the power posterior ``∝ T^τ`` with τ
        of that fit (module docstring, "Tempering"); a known item stays one-hot."""
        inputs, self._tempering_inputs = self._tempering_inputs, None
        if inputs is None:
            return T
        data, log_T, expected_log_e, errors, mixture = inputs
        tau = self._temperature(data, log_T, expected_log_e, errors, mixture)
        self.temperature_ = tau
        if tau == 1.0:
            return T
        scores = tau * log_T  # log_T is T's (kept with it)
        scores -= scores.max(axis=1, keepdims=True)
        tempered = np.exp(scores)  # every entry <= 1, the largest 1
        tempered /= tempered.sum(axis=1, keepdims=True)
        if known is not None:
            tempered = known.clamp(tempered)
        return tempered

    #: the prior's form and lone-label rule of the fit :meth:`_chosen_form` is making (None:
    #: ``prior_form`` and ``lone_labels``)
    _reading: tuple[str, str] | None = None

    #: the last :meth:`_variational` fit's shares before tempering (what its evidence bound
    #: is scored at)
    _variational_shares: FloatArray

    #: the fitted attributes a fit of each form sets (``prior_form="evidence"`` keeps the
    #: chosen form's)
    _FITTED = (
        "_tempering_inputs",
        "temperature_",
        "confusion_prior_",
        "errors_",
        "symmetric_",
        "symmetric_share_",
        "priors_",
        "n_iter_",
    )

    def _chosen_form(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        """The fit (n_items, C): of ``prior_form``, or with ``"evidence"`` the one-coin fit
        (``lone_labels`` as given) and the confusion fit counting every label, each scored by
        :meth:`evidence_bound`, the larger kept (the one-coin fit on a tie; module docstring,
        "Form chosen by the evidence"); with ``"evidence-one-class"`` the confusion fit is made
        and scored only when the one-coin fit reads every item as one class. Sets
        ``prior_form_`` (the form read) and ``form_bounds_`` ({form: bound} of the fits
        scored; empty unless a choice was made)."""
        self.form_bounds_: dict[str, float] = {}
        choose = self.prior_form in ("evidence", "evidence-one-class")
        if not choose or self.confusion_prior is not None:
            self.prior_form_ = self.prior_form
            return self._variational(data, known)
        if type(self)._variational is not BayesianDawidSkene._variational:
            raise InvalidParameterError(
                f"{type(self).__name__}: prior_form={self.prior_form!r} is not available here"
            )
        fits = []
        for reading in (("one-coin", self.lone_labels), ("confusion", "count")):
            self._reading = reading
            try:
                T = self._variational(data, known)
            finally:
                self._reading = None
            fits.append((T, {name: getattr(self, name) for name in self._FITTED}))
            recheck = self.prior_form == "evidence-one-class" and len(fits) == 1
            if recheck and np.unique(np.argmax(T, axis=1)).size > 1:
                self.prior_form_ = "one-coin"  # two classes read: kept as fitted
                return T
            # the bound of the variational fit: at its shares before tempering (tempering is
            # how the verdict reports them, not a point the fit's bound is maximised at)
            shares = self._variational_shares
            self.form_bounds_[reading[0]] = self.evidence_bound(data, shares, known)
        bounds = self.form_bounds_
        chosen = 1 if bounds["confusion"] > bounds["one-coin"] else 0
        T, fitted = fits[chosen]
        for name, value in fitted.items():
            setattr(self, name, value)
        self.prior_form_ = ("one-coin", "confusion")[chosen]
        return T

    def evidence_bound(
        self, data: LabelData, T: FloatArray, known: KnownTruth | None = None
    ) -> float:
        """The evidence lower bound (nats) of ``data``'s labels at the items' shares ``T``
        (n_items, C) under the fitted ``confusion_prior_`` and ``class_prior``, with every
        other factor at its optimum for ``T`` (module docstring, "Form chosen by the
        evidence")::

            Σ_j log Σ_k w_k Z_jk(N_j) + ln B(ν₀ + Σ_i T_i) − ln B(ν₀) + Σ_i H(T_i)

        ``N`` the expected counts of every label (pooled workers as fitted), ``Z`` the kinds'
        Pólya evidence (:func:`~crowdbudget.aggregation.worker_blind.crowd_log_evidence`),
        ``B`` the multivariate Beta function, ``H`` the entropy of an item's shares (a known
        item's is 0)."""
        from crowdbudget.aggregation.worker_blind import crowd_log_evidence

        model_data, _ = self._pooled(data)
        matrix = incidence(model_data)
        J, C = model_data.n_workers, data.n_classes
        counts = np.asarray(matrix.T @ T).reshape(J, C, C).transpose(0, 2, 1)
        partnered = self._partnered(model_data, matrix, known)
        asymmetry = self.asymmetry if partnered is not None else "free"
        workers = crowd_log_evidence(counts, self.confusion_prior_, asymmetry)
        nu0 = float(self.class_prior)
        nu = nu0 + T.sum(axis=0)  # (C,)
        classes = float(np.sum(gammaln(nu)) - gammaln(nu.sum()))
        classes -= float(C * gammaln(nu0) - gammaln(C * nu0))
        # x log x -> 0 as x -> 0: a share of 0 adds nothing (xlogy(0, 0) = 0)
        entropy = -float(np.sum(xlogy(T, T)))
        return workers + classes + entropy

    def _check(self) -> None:
        if self.prior_fit not in PRIOR_FITS:
            raise InvalidParameterError(
                f"BayesianDawidSkene: prior_fit must be one of {', '.join(PRIOR_FITS)}, "
                f"got {self.prior_fit!r}"
            )
        if self.prior_form not in PRIOR_FORMS:
            raise InvalidParameterError(
                f"BayesianDawidSkene: prior_form must be one of {', '.join(PRIOR_FORMS)}, "
                f"got {self.prior_form!r}"
            )
        if self.lone_labels not in LONE_LABELS:
            raise InvalidParameterError(
                f"BayesianDawidSkene: lone_labels must be one of {', '.join(LONE_LABELS)}, "
                f"got {self.lone_labels!r}"
            )
        if self.asymmetry not in ASYMMETRY:
            raise InvalidParameterError(
                f"BayesianDawidSkene: asymmetry must be one of {', '.join(ASYMMETRY)}, "
                f"got {self.asymmetry!r}"
            )
        floor = self.prior_floor
        if isinstance(floor, bool) or not isinstance(floor, int | float) or not floor >= 0:
            raise InvalidParameterError(
                f"BayesianDawidSkene: prior_floor must be a number >= 0, got {floor!r}"
            )

    @staticmethod
    def _partnered(
        data: LabelData, matrix: sp.csr_matrix, known: KnownTruth | None
    ) -> np.ndarray | None:
        """Which labels have a partner — another label of their item, or its known truth —
        shape (n_labels,); None when fewer than two workers have one (nothing can be checked:
        module docstring, "Lone labels")."""
        per_item = np.asarray(matrix.sum(axis=1)).reshape(-1)  # labels per item, (n_items,)
        partnered_item = per_item >= 2
        if known is not None:
            partnered_item |= known.mask(matrix.shape[0])
        partnered = partnered_item[data.items]  # (n_labels,)
        if np.unique(data.workers[partnered]).size < 2:
            return None
        return partnered

    def _worker_evidence(
        self,
        matrix: sp.csr_matrix,
        data: LabelData,
        partnered: np.ndarray | None,
        lone: str | None = None,
    ) -> sp.csr_matrix:
        """The incidence (n_items, n_workers·C) whose labels feed the workers' counts: every
        label of ``matrix`` (``"count"``, or when nothing can be checked), else only the
        ``partnered`` labels (module docstring)."""
        if (lone or self.lone_labels) == "count" or partnered is None:
            return matrix  # nothing can be checked: every label, as "count"
        C = data.n_classes
        return sp.csr_matrix(
            (partnered.astype(np.float64), (data.items, data.workers * C + data.labels)),
            shape=matrix.shape,
        )

    #: whether ``bds-ev`` and ``bds-ev-blind`` on two classes run their iterations compiled
    #: (the same bits; False: the NumPy loop, which ``tests/test_bds_kernel.py`` compares
    #: them with)
    _compiled_iteration = True

    def _evidence_iterations(
        self,
        T: FloatArray,
        matrix: sp.csr_matrix,
        workers_matrix: sp.csr_matrix,
        prior: FloatArray,
        known: KnownTruth | None,
        n_iter: int,
        tol: float,
    ) -> tuple[FloatArray, int, float, Evidence, FloatArray]:
        """The variational loop of :meth:`_variational` for ``asymmetry="evidence"`` (or
        ``"evidence-blind"``, ``"evidence-blind-own"``) on two classes with the prior held,
        each iteration's workers and scores compiled
        (:mod:`~crowdbudget.aggregation._bds_kernel`; the same operations, the same bits).
        Returns ``(T, iterations, share, evidence, E[log e])`` as the NumPy loop leaves them."""
        from crowdbudget.aggregation import _bds_kernel

        if self.asymmetry in ("evidence-blind", "evidence-blind-own"):
            blind = _bds_kernel.BlindState(prior, workers_matrix.shape[1] // 2)
            T, iteration = _bds_kernel.blind_iterations(
                blind, T, workers_matrix, matrix, float(self.class_prior), known, n_iter, tol,
                self.asymmetry == "evidence-blind-own",
            )  # fmt: skip
            evidence = blind.blind_evidence()
            return T, iteration, float(blind.weights[0]), evidence, blind.expected.copy()
        state = _bds_kernel.EvidenceState(prior, workers_matrix.shape[1] // 2)
        T, iteration, share = _bds_kernel.evidence_iterations(
            state, T, workers_matrix, matrix, float(self.class_prior), known, n_iter, tol
        )
        return T, iteration, share, state.evidence(), state.expected.copy()

    def _variational(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        """The variational fit of the module docstring; ``known`` items (if any) keep their
        one-hot truth. The prior's form and the lone-label rule: ``_reading`` while
        :meth:`_chosen_form` fits a candidate, else ``prior_form`` and ``lone_labels``."""
        n_iter, tol = check_iterations(self.n_iter, self.tol, "BayesianDawidSkene")
        nu0 = self.class_prior
        if isinstance(nu0, bool) or not isinstance(nu0, int | float) or not nu0 > 0:
            raise InvalidParameterError(
                f"BayesianDawidSkene: class_prior must be a number > 0, got {nu0!r}"
            )
        C = data.n_classes
        fixed = self._fixed_prior(C)
        model_data, mapping = self._pooled(data)
        matrix: sp.csr_matrix = incidence(model_data)
        J = model_data.n_workers
        self._check()
        partnered = self._partnered(model_data, matrix, known)
        reading = self._reading
        lone = self.lone_labels if reading is None else reading[1]
        workers_matrix = self._worker_evidence(matrix, model_data, partnered, lone)
        lone_read = None
        if lone == "skip-predictive":
            from crowdbudget.aggregation._lone_predictive import LoneLabels

            lone_read = LoneLabels(model_data, known)
            if len(lone_read) == 0:
                lone_read = None  # nothing to read: the "skip" fit, bit for bit
            elif partnered is None:  # cut even where nothing can be checked (no fallback)
                workers_matrix = lone_read.checked_incidence(model_data, matrix.shape)
        # with nothing to check, a worker's counts are its labels' agreement with themselves:
        # no evidence of its accuracy, nor of how that accuracy depends on the class
        asymmetry = self.asymmetry if partnered is not None else "free"
        floor = self.prior_floor
        form = self.prior_form if reading is None else reading[0]
        fit_prior = one_coin_polya_prior if form == "one-coin" else polya_prior
        T = initial_shares(data)
        if known is not None:
            T = known.clamp(T)
        prior = fixed if fixed is not None else np.where(np.eye(C, dtype=bool), 2.0, 1.0)
        every = fixed is None and self.prior_fit == "every"
        if fixed is None and not every:
            # two-stage empirical Bayes: the prior of the majority-vote start, then held; on
            # every label but with "skip-prior" (module docstring, "Lone labels")
            start_matrix = workers_matrix if lone == "skip-prior" else matrix
            start = np.asarray(start_matrix.T @ T).reshape(J, C, C).transpose(0, 2, 1)
            prior = np.maximum(fit_prior(start, prior, n_steps=20), float(floor))
        iteration, share, evidence = 0, 0.5, None
        compiled = asymmetry.startswith("evidence") and C == 2
        if compiled and not every and self._compiled_iteration and lone_read is None:
            T, iteration, share, evidence, expected_log_e = self._evidence_iterations(
                T, matrix, workers_matrix, prior, known, n_iter, tol
            )
        else:
            for iteration in range(1, n_iter + 1):  # noqa: B007 - n_iter_ below
                # [j, c, l]: the workers' expected counts (partnered labels only with "skip")
                counts = np.asarray(workers_matrix.T @ T).reshape(J, C, C).transpose(0, 2, 1)
                if every:
                    # warm start: a few steps
                    prior = np.maximum(fit_prior(counts, prior, n_steps=3), float(floor))
                means = lone_read is not None  # the lone labels read E_q[e]
                workers = worker_model(counts, prior, asymmetry, share, means, evidence)
                expected_log_e, share, evidence = (
                    workers.expected_log_e,
                    workers.share,
                    workers.evidence,
                )
                nu = float(nu0) + T.sum(axis=0)
                expected_log_pi = digamma(nu) - digamma(nu.sum())
                log_e = expected_log_e.transpose(0, 2, 1).reshape(J * C, C)  # [(j, l), c]
                scores = np.asarray(matrix @ log_e) + expected_log_pi
                if lone_read is not None:
                    assert workers.errors is not None  # means=True
                    lone_read.read(scores, expected_log_pi, workers.errors)
                scores -= scores.max(axis=1, keepdims=True)
                new_T = np.exp(scores)
                new_T /= new_T.sum(axis=1, keepdims=True)
                if known is not None:
                    new_T = known.clamp(new_T)
                change = float(np.max(np.abs(new_T - T))) if T.size else 0.0
                T = new_T
                if change <= tol:
                    break
        counts = np.asarray(workers_matrix.T @ T).reshape(J, C, C).transpose(0, 2, 1)
        workers = worker_model(counts, prior, asymmetry, share, True, evidence)
        errors = workers.errors
        assert errors is not None  # means=True
        self._variational_shares = T
        self._keep_for_tempering(model_data, T, expected_log_e, errors)
        self.confusion_prior_ = prior
        self.errors_ = errors[mapping]
        self.symmetric_ = workers.symmetric[mapping]
        self.symmetric_share_ = workers.share
        nu = float(nu0) + T.sum(axis=0)
        self.priors_ = nu / nu.sum()
        self.n_iter_ = iteration
        return T
