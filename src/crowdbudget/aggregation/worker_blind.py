"""A third kind of worker for the evidence's mixture: **class-blind** workers, whose answers
do not depend on the item's class — spammers who answer uniformly at random and biased
workers who give one class always alike (``asymmetry="evidence-blind"`` of
:class:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene`; registered as
``bds-ev-blind``; guarded, ``"evidence-blind-own"``: ``bds-ev-blind-own``, "The guard").

Why (docs/stress-bed.md, "the held-out bed"). On crowds of 10 classes with 20 % biased
workers the Dawid–Skene family collapses: two heavy workers who say class 4 on everything
make "class 4" a catch-all — a class whose row, for every worker, is that worker's marginal
label distribution explains any item — and the learned class prior follows it (76 % of the
items in class 4 where 12 % are). A free worker cannot learn "always 4" fast enough: each of
its C rows sees a C-th of its labels, and the symmetric worker of
:mod:`~crowdbudget.aggregation.worker_asymmetry` keeps a wrong-label distribution per row.
MACE (Hovy et al. 2013 §2), whose workers answer the truth or a class-independent strategy,
reads such a worker at once; this adds MACE's spammer as a whole-worker type.

Model (shapes: J workers, C classes; the two kinds of
:mod:`~crowdbudget.aggregation.worker_asymmetry` and a third)::

    s_j ~ Cat(w_sym, w_free, w_blind)
    s_j = blind:  ξ_j ~ Dir(γ),  e_jc = ξ_j for every class c     (label independent of class)

with ``γ = (1, …, 1)``: the uniform Dirichlet, no label preferred and no pseudo-counts
borrowed from ``α₀`` (whose strength is the class-dependent workers' spread, fitted on the
majority-vote start: read off it, γ was strong enough that a good worker with two or three
labels looked as blind as a spammer — measured, docs/stress-bed.md). Its marginal likelihood
needs only the
worker's label counts ``M_jl = Σ_c N_jcl`` (which do not depend on the items' shares)::

    log Z_blind = lnΓ(Σγ) − lnΓ(Σγ + n_j) + Σ_l [lnΓ(γ_l + M_jl) − lnΓ(γ_l)]

(the multinomial coefficient is the same for every kind and cancels). ``log Z_free`` is the
Pólya evidence of :func:`~crowdbudget.aggregation.worker_asymmetry.log_evidence` and
``log Z_sym = log Z_free + evidence_difference``. Mean field as in the two-kind mixture:
``q(s_j = k) ∝ w_k Z_k,j``, and every label enters the items' update through ``Σ_k q_jk
E_k[log e_jcl]`` with ``E_blind[log e_jcl] = ψ(γ_l + M_jl) − ψ(Σγ + n_j)`` — the same for
every class c, so a blind worker's label moves no item's posterior (it cancels in the
normalisation), and a worker with probability ``q_j,blind`` of being blind has its label's
weight scaled by ``1 − q_j,blind``. The crowd's weights ``w`` maximise the crowd's evidence
as a three-component mixture, by the EM fixed point ``w_k ← mean_j q_jk`` over the workers
with a count (each kept at least 1e-6), warm-started at every iteration of the verdict
(at thirds on the first). Nothing is tuned: a worker is blind when its label counts alone
explain its labels better than any class-dependent confusion does.

The guard (``asymmetry="evidence-blind-own"``, registered as ``bds-ev-blind-own``). The
weights are the crowd's, and a worker with little evidence of its own takes them: ``q_j ≈ w``.
On the default policy's campaigns at about one label per item (most items one label, a few
two; lone labels out of the workers' counts) that is most workers, and their counts — a few
partnered labels, often on items whose labels disagree, whose shares are split — barely
separate the kinds; the three-way fixed point then takes ``w_blind`` from the few checked
workers (measured on those campaigns' label sets: up to 1.0), every worker seen only alone is
read blind with that probability, its lone labels lose weight ``1 − w_blind``, and the items
fall to the class prior (temp at 1 label per item: 0.844 → 0.731 ± 0.156; docs/stress-bed.md).
Three guards were derived and measured on those label sets (8 crowds × 5 replays):

- *A crowd-level gate* (the three-kind mixture's evidence ``Σ_j log Σ_k w_k Z_jk`` against
  the two-kind one's by BIC's ``½ log J'``, on the start's counts or on ``bds-ev``'s): it
  passes on the collapsing replays too (on the start's counts gains of 2.6–58 nats against
  charges of 0.7–2.1): split
  items make the expected counts of a worker look blind whatever it is, so the crowd's
  evidence is not the question — refused.
- *Workers with no count never blind* (the share applied only to checked workers): fixes
  temp but not the crowds whose checked workers are few and look blind (class3-spam30-k5
  0.51).
- *Blind only on the worker's own evidence* (kept): the blind kind is open to worker ``j``
  only when its own log Bayes factor ``log Z_blind − max(log Z_sym, log Z_free)`` exceeds
  :data:`BLIND_EVIDENCE` = 3 nats (Kass & Raftery 1995: ``2 ln B > 6``, "strong"); for any
  other worker its blind likelihood is set to 0 (``log Z_blind = −∞``:
  :func:`guard_blind`), in ``q_j`` and in the weights' fixed point alike, so the weights
  are the EM fixed point of a mixture whose blind component covers only the workers that
  can be told blind. A worker with no count (all three evidences 0) is never blind; a heavy
  one-class worker has a factor of tens of nats and is read exactly as before. The
  threshold is Kass & Raftery's "strong", fixed on these 8 rows' label sets before the
  other tables of docs/stress-bed.md were run; on those rows (mean of 5 replays) 0 / 1 /
  2 / 3 / 5 nats give 0.665 / 0.669 / 0.683 / 0.698 / 0.703 on class3-spam30-k5
  (``bds-ev`` 0.724, the target 0.677) and 0.717 / 0.745 / 0.744 / 0.740 / 0.740 on
  binary-65-35-biased30-k5 (target 0.725): 0 and 1 miss a row, 2 to 5 meet all 8; the
  held-out collapse reads 0.702–0.710 at every one.

What it costs: the free evidence in full (O(J · C²) lnΓ per worker, where the two-kind
mixture needs O(J · C)) — computed anew, as the two-kind mixture's terms are, only for the
workers whose expected counts moved by more than ``STALE_COUNTS`` since their evidence was
computed (:func:`moved_workers`; on millionaire 96 % of its 37,332 workers keep theirs at
the sixth iteration) — and the three-way fixed point (compiled:
:func:`_weights_fixed_point`). On two classes the verdict's whole iteration is compiled
(:mod:`~crowdbudget.aggregation._bds_kernel`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
from numba import njit
from scipy.special import digamma, gammaln

from crowdbudget import _compiled_special
from crowdbudget._lean_load import lean_loads
from crowdbudget.aggregation.base import FloatArray
from crowdbudget.aggregation.worker_asymmetry import (
    STALE_COUNTS,
    Evidence,
    WorkerModel,
    _one_coin_summary,
    _worker_terms,
    evidence_difference,
)

#: lower bound of each of the crowd's three weights (kept away from 0 so logs stay finite)
WEIGHT_FLOOR = 1e-6

#: ``"evidence-blind-own"``: a worker may be read blind only when its own log Bayes factor,
#: ``log Z_blind − max(log Z_sym, log Z_free)``, exceeds this many nats (module docstring,
#: "The guard"; Kass & Raftery 1995: ``2 ln B > 6`` is "strong" evidence)
BLIND_EVIDENCE = 3.0


@dataclass(frozen=True)
class BlindEvidence(Evidence):
    """:class:`~crowdbudget.aggregation.worker_asymmetry.Evidence`, the crowd's three
    weights ``(w_sym, w_free, w_blind)``, shape (3,) (the next call's warm start), and each
    worker's free and blind evidence with the counts they were computed at (the next call
    keeps them for the workers whose counts did not move: :func:`moved_workers`).

    Attributes:
        counts: the expected counts ``N_jcl`` the worker's evidence was computed at, (J, C, C).
        free: ``log Z_free``, (J,).
        blind: ``log Z_blind`` (unguarded), (J,).
    """

    weights: FloatArray
    counts: FloatArray
    free: FloatArray
    blind: FloatArray


def _in_order_sum(x: FloatArray, axis: int) -> FloatArray:
    """``x.sum(axis=axis)``, the same bits: an axis of fewer than 8 entries (C classes, or
    the 3 kinds) added left to right, the order NumPy's reduction adds so few entries in
    whatever the layout (its pairwise sum starts at 8; the compiled two-class iteration
    adds in that order too), without the reduction's per-row inner loop — several times
    faster on (J, C, C); a longer axis by NumPy's own sum."""
    if x.shape[axis] >= 8:
        return np.asarray(x.sum(axis=axis))
    parts = np.moveaxis(x, axis, 0)
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    return np.asarray(total)


def _row_max(x: FloatArray) -> FloatArray:
    """``x.max(axis=1)`` of (J, 3) by two ``np.maximum`` (exact: a maximum has no rounding;
    NaN propagates as in ``max``)."""
    return np.asarray(np.maximum(np.maximum(x[:, 0], x[:, 1]), x[:, 2]))


def blind_parameters(prior: FloatArray) -> FloatArray:
    """``γ`` (C,) for the prior ``α₀`` (C, C): the uniform Dirichlet, all ones (module
    docstring)."""
    return np.ones(prior.shape[0])


def log_evidence_free(counts: FloatArray, prior: FloatArray) -> FloatArray:
    """``log Z_free`` (J,) of the expected counts (J, C, C) under ``prior`` (C, C): the
    Dawid–Skene worker's Pólya evidence, row by row."""
    totals = prior.sum(axis=1)  # A_c
    n_jc = counts.sum(axis=2)
    # every Γ argument is >= a prior pseudo-count > 0: finite
    cells = gammaln(prior + counts) - gammaln(prior)
    return np.asarray(
        np.sum(gammaln(totals) - gammaln(totals + n_jc), axis=1) + np.sum(cells, axis=(1, 2))
    )


def log_evidence_blind(label_counts: FloatArray, gamma: FloatArray) -> FloatArray:
    """``log Z_blind`` (J,) of the workers' label counts ``M_jl`` (J, C) under ``Dir(γ)``."""
    total = float(gamma.sum())
    n_j = label_counts.sum(axis=1)
    return np.asarray(
        gammaln(total)
        - gammaln(total + n_j)
        + np.sum(gammaln(gamma + label_counts) - gammaln(gamma), axis=1)
    )


def fit_weights(log_z: FloatArray, start: FloatArray, n_steps: int = 200) -> FloatArray:
    """The crowd's weights (3,) maximising ``Σ_j log Σ_k w_k Z_jk`` by the EM fixed point
    ``w_k ← mean_j q_jk`` from ``start``, each at least :data:`WEIGHT_FLOOR`, stopped when no
    weight moves by more than 1e-10.

    Args:
        log_z: ``log Z_jk`` of the workers with a count, shape (J', 3), any per-worker shift.
        start: the first weights, shape (3,), positive.
    """
    w = np.array(start, dtype=np.float64)  # (3,): the start, then the result
    if log_z.shape[0] == 0:
        w = np.maximum(w, WEIGHT_FLOOR)
        return np.asarray(w / w.sum())
    shifted = log_z - _row_max(log_z)[:, None]  # <= 0: exp does not overflow
    likelihood = np.ascontiguousarray(np.exp(shifted))  # (J', 3), each row's largest entry 1
    _weights_fixed_point(likelihood, w, n_steps)
    return w


@njit(cache=True, nogil=True, error_model="numpy")
def _weights_fixed_point(
    likelihood: FloatArray, weights: FloatArray, n_steps: int
) -> None:  # pragma: no cover (compiled; tests/test_worker_blind.py checks it bit for bit)
    """The loop of :func:`fit_weights`, compiled: from ``weights`` (3,) (the start; the
    result written in place), given ``exp(shifted)`` (J', 3), each step the NumPy
    expressions' operations in the same order — the sums over the three weights left to
    right, the mean over the workers row by row, as NumPy's reductions along those axes
    add — so the same bits, without NumPy's dispatch per array operation (up to 200 steps of
    five (J', 3) expressions at each iteration of the verdict).

    Two bit-neutral economies (the fixed point often runs all 200 steps). The quotients
    ``q_jk = w_k L_jk / Σ_k w_k L_jk`` are independent across workers, so they are computed
    in one pass over the columns (contiguous copies, (3, J')) that the compiler turns into
    vector divisions, and only the running means are added worker by worker; IEEE division
    and addition are correctly rounded, so the vector lanes give the scalar bits. A worker
    whose blind likelihood is 0 (``guard_blind``'s −∞, or an underflow) has ``w_2 L_j2 =
    +0``, so its row total is ``w_0 L_j0 + w_1 L_j1`` exactly and its blind quotient is
    ``+0``; adding ``+0`` to a sum of non-negative terms leaves it unchanged, so the blind
    mean adds only the other workers' quotients (in their order, from ``+0``, which is the
    first term's bits too) and the division for a guarded worker is never made."""
    floor = WEIGHT_FLOOR
    w = np.empty(3)
    for k in range(3):
        w[k] = _compiled_special.maximum(weights[k], floor)
    total = (w[0] + w[1]) + w[2]
    for k in range(3):
        w[k] = w[k] / total
    size = likelihood.shape[0]
    if size == 0:
        weights[:] = w
        return
    columns = np.empty((3, size))  # L_jk by column: contiguous for the vector pass
    n_open = 0
    for j in range(size):
        for k in range(3):
            columns[k, j] = likelihood[j, k]
        n_open += likelihood[j, 2] != 0.0
    open_rows = np.empty(n_open, dtype=np.int64)  # the workers with a blind likelihood
    n_open = 0
    for j in range(size):
        if likelihood[j, 2] != 0.0:
            open_rows[n_open] = j
            n_open += 1
    l0, l1, l2 = columns[0], columns[1], columns[2]
    q0, q1, rows = np.empty(size), np.empty(size), np.empty(size)
    new = np.empty(3)
    for _ in range(n_steps):
        w0, w1, w2 = w[0], w[1], w[2]
        for j in range(size):  # independent across workers: vector divisions
            j0 = l0[j] * w0
            j1 = l1[j] * w1
            row = (j0 + j1) + l2[j] * w2
            rows[j] = row
            q0[j] = j0 / row
            q1[j] = j1 / row
        mean0, mean1, mean2 = 0.0, 0.0, 0.0
        for j in range(size):  # NumPy's order: row by row
            mean0 += q0[j]
            mean1 += q1[j]
        for k in range(n_open):
            j = open_rows[k]
            mean2 += (l2[j] * w2) / rows[j]
        new[0] = _compiled_special.maximum(mean0 / size, floor)
        new[1] = _compiled_special.maximum(mean1 / size, floor)
        new[2] = _compiled_special.maximum(mean2 / size, floor)
        total = (new[0] + new[1]) + new[2]
        change = 0.0
        for k in range(3):
            new[k] = new[k] / total
            move = abs(new[k] - w[k])
            change = move if k == 0 else _compiled_special.maximum(change, move)
        if change < 1e-10:
            weights[:] = new
            return
        w[:] = new
    weights[:] = w


def guard_blind(log_z: FloatArray) -> FloatArray:
    """``log Z`` (J, 3) (sym, free, blind) with the blind entry set to −∞ for every worker
    whose own log Bayes factor for the blind kind, ``log Z_blind − max(log Z_sym,
    log Z_free)``, is at most :data:`BLIND_EVIDENCE` (module docstring, "The guard"): such a
    worker is never read blind, and the crowd's weights are fitted on the same terms."""
    guarded = np.array(log_z, dtype=np.float64)
    own = guarded[:, 2] - np.maximum(guarded[:, 0], guarded[:, 1])  # (J,)
    guarded[own <= BLIND_EVIDENCE, 2] = -np.inf
    return guarded


def moved_workers(
    counts: FloatArray, prior: FloatArray, previous: Evidence | None
) -> np.ndarray | None:
    """Which workers' evidence to compute anew: a (J,) mask of those whose expected counts
    (J, C, C) moved by more than :data:`~crowdbudget.aggregation.worker_asymmetry.STALE_COUNTS`
    in total since ``previous`` (a :class:`BlindEvidence`) computed theirs, as
    ``updated_evidence`` does for the two-kind mixture (there every worker term depends on
    the counts only through ``n_jc`` and ``N_jcc``; the free and blind evidence read every
    cell, so the cells are compared); None when every worker is (no usable ``previous``, a
    changed prior or crowd, or all moved). The change ``Σ_cl |ΔN_jcl|`` is added cell by
    cell in (c, l) order, the order the compiled two-class iteration adds it in."""
    if (
        not isinstance(previous, BlindEvidence)
        or previous.counts.shape != counts.shape
        or not np.array_equal(previous.prior, prior)
    ):
        return None
    C = counts.shape[1]
    change = np.abs(counts - previous.counts)  # (J, C, C)
    total = change[:, 0, 0].copy()
    for k in range(1, C * C):
        total += change[:, k // C, k % C]
    moved = total > STALE_COUNTS  # (J,)
    return None if moved.all() else moved


def _updated_blind_evidence(
    counts: FloatArray,
    prior: FloatArray,
    right: FloatArray,
    label_counts: FloatArray,
    gamma: FloatArray,
    previous: Evidence | None,
) -> tuple[Evidence, FloatArray, FloatArray, FloatArray]:
    """The workers' terms (``_worker_terms`` of ``n_jc``, ``right`` (J, C)), the counts they
    are computed at (J, C, C), ``log Z_free`` and ``log Z_blind`` (J,): anew for the workers
    :func:`moved_workers` names, ``previous``'s for the others (every expression is per
    worker, so a worker's numbers are the same bits whichever others are computed with it;
    a kept worker's evidence is off by less than 1e-10 nats, as in ``updated_evidence``)."""
    n_jc = _in_order_sum(counts, 2)  # (J, C)
    moved = moved_workers(counts, prior, previous)
    if moved is None:
        terms = _worker_terms(prior, n_jc, right)
        free = log_evidence_free(counts, prior)
        blind = log_evidence_blind(label_counts, gamma)
        return terms, np.array(counts), free, blind
    assert isinstance(previous, BlindEvidence)  # moved_workers checked it
    fresh = _worker_terms(prior, n_jc[moved], right[moved])
    fields = {}
    for name in ("n_jc", "right", "difference", "free_total", "wrong_total", "on", "off", "seen"):
        kept = getattr(previous, name).copy()
        kept[moved] = getattr(fresh, name)
        fields[name] = kept
    kept_counts = previous.counts.copy()
    kept_counts[moved] = counts[moved]
    free = previous.free.copy()
    free[moved] = log_evidence_free(counts[moved], prior)
    blind = previous.blind.copy()
    blind[moved] = log_evidence_blind(label_counts[moved], gamma)
    return Evidence(prior=prior, **fields), kept_counts, free, blind


def blind_model(
    counts: FloatArray,
    prior: FloatArray,
    means: bool,
    previous: Evidence | None,
    guarded: bool = False,
) -> WorkerModel:
    """The three-kind mixture (module docstring) of the expected counts ``counts`` (J, C, C)
    under ``prior`` (C, C). ``previous``: the last call's evidence (its weights start the
    fixed point); ``guarded``: a worker is read blind only on its own strong evidence
    (:func:`guard_blind`; ``"evidence-blind-own"``). Returns the
    :class:`~crowdbudget.aggregation.worker_asymmetry.WorkerModel` whose ``symmetric`` is
    ``q(s_j = sym)`` and ``share`` ``w_sym``; the weights ride in its ``evidence`` (a
    :class:`BlindEvidence`)."""
    C = prior.shape[0]
    alpha = prior[None, :, :] + counts
    right = np.array(np.diagonal(counts, axis1=1, axis2=2))  # (J, C)
    gamma = blind_parameters(prior)
    label_counts = _in_order_sum(counts, 1)  # M_jl, (J, C)
    terms, kept_counts, free, blind = _updated_blind_evidence(
        counts, prior, right, label_counts, gamma, previous
    )
    log_z = np.stack([free + terms.difference, free, blind], axis=1)  # (J, 3): sym, free, blind
    if guarded:
        log_z = guard_blind(log_z)  # −∞: a blind likelihood of 0, its q 0 (exp(−∞) = 0)
    start = previous.weights if isinstance(previous, BlindEvidence) else np.full(3, 1.0 / 3)
    weights = fit_weights(log_z[terms.seen], start)
    scores = np.log(weights)[None, :] + log_z
    scores -= _row_max(scores)[:, None]
    q = np.exp(scores)
    q /= _in_order_sum(q, 1)[:, None]  # (J, 3); an unseen worker: the weights
    q_sym, q_free, q_blind = q[:, 0:1], q[:, 1:2], q[:, 2:3]  # (J, 1) each
    digamma_alpha = digamma(alpha)  # (J, C, C)
    free_log = digamma_alpha - terms.free_total[:, :, None]
    classes = np.arange(C)
    sym_log = digamma_alpha + (terms.off[:, None] - terms.wrong_total)[:, :, None]
    sym_log[:, classes, classes] = terms.on[:, None]
    n_j = _in_order_sum(label_counts, 1)
    # (q_sym E_sym + q_free E_free) + q_blind E_blind, in place. A worker with q_blind = +0
    # (guarded: exp(−∞) = 0) would add q_blind E_blind = −0 (E_blind < 0: γ_l + M_jl <
    # Σγ + n_j), and x + (−0) = x, so only the others' E_blind is computed and added.
    expected = q_sym[:, :, None] * sym_log
    expected += np.multiply(free_log, q_free[:, :, None], out=free_log)
    blind_rows = np.flatnonzero(q_blind[:, 0] != 0.0)
    if blind_rows.size:
        blind_log = (
            digamma(gamma + label_counts[blind_rows])
            - digamma(float(gamma.sum()) + n_j[blind_rows])[:, None]
        )
        expected[blind_rows] += q_blind[blind_rows, :, None] * blind_log[:, None, :]
    errors = None
    if means:
        a, b = _one_coin_summary(prior)
        agree = right.sum(axis=1)
        eye = np.eye(C, dtype=bool)
        beta = np.where(eye, 0.0, alpha)
        accuracy = ((a + agree) / (a + b + n_j))[:, None, None]
        sym_mean = np.where(
            eye, accuracy, (1.0 - accuracy) * beta / beta.sum(axis=2, keepdims=True)
        )
        free_mean = alpha / alpha.sum(axis=2, keepdims=True)
        blind_mean = (gamma + label_counts) / (float(gamma.sum()) + n_j)[:, None]
        errors = (
            q_sym[:, :, None] * sym_mean
            + q_free[:, :, None] * free_mean
            + q_blind[:, :, None] * blind_mean[:, None, :]
        )
    fields = {name: getattr(terms, name) for name in terms.__dataclass_fields__}
    evidence = BlindEvidence(**fields, weights=weights, counts=kept_counts, free=free, blind=blind)
    return WorkerModel(expected, errors, q[:, 0], float(weights[0]), evidence)


def crowd_log_evidence(counts: FloatArray, prior: FloatArray, asymmetry: str) -> float:
    """The workers' part of the verdict's evidence bound (module docstring of
    :mod:`~crowdbudget.aggregation.bayesian_dawid_skene`, "Form chosen by the evidence"):
    ``Σ_j log Σ_k w_k Z_jk`` of the expected counts ``counts`` (J, C, C) under ``prior``
    (C, C), over the kinds ``asymmetry`` allows (``"free"``: ``Σ_j log Z_free``; ``"none"``:
    ``Σ_j log Z_sym``; ``"evidence"``: symmetric or free; ``"evidence-blind"`` and
    ``"evidence-blind-own"``: and blind, the latter guarded as :func:`guard_blind`), the
    weights ``w`` (3,) at their type-II fixed point (:func:`fit_weights`, from thirds). With
    ``q(e)`` and ``q(s)`` at their optimum for the items' shares behind ``counts`` this is
    the largest the bound's worker terms can be (conjugacy: the Pólya integral of the
    expected counts)."""
    C = prior.shape[0]
    free = log_evidence_free(counts, prior)  # (J,)
    n_jc = _in_order_sum(counts, 2)
    right = np.array(np.diagonal(counts, axis1=1, axis2=2))  # (J, C)
    symmetric = free + evidence_difference(prior, n_jc, right)
    if asymmetry == "free":
        return float(np.sum(free))
    if asymmetry == "none":
        return float(np.sum(symmetric))
    blind = log_evidence_blind(_in_order_sum(counts, 1), np.ones(C))
    if asymmetry == "evidence":
        blind = np.full_like(blind, -np.inf)  # no blind kind: its likelihood 0
    log_z = np.stack([symmetric, free, blind], axis=1)  # (J, 3)
    if asymmetry == "evidence-blind-own":
        log_z = guard_blind(log_z)
    seen = _in_order_sum(n_jc, 1) > 0  # workers with a count (the others add log 1 = 0)
    log_z = log_z[seen]
    weights = fit_weights(log_z, np.full(3, 1.0 / 3), n_steps=500)  # each >= WEIGHT_FLOOR
    # a kind a worker cannot be keeps log Z = −∞ (exp: a likelihood of 0, no warning)
    scores = np.log(weights)[None, :] + log_z
    top = _row_max(scores)  # finite: the free kind's evidence always is
    return float(np.sum(top + np.log(_in_order_sum(np.exp(scores - top[:, None]), 1))))


# the weights' cached kernel loads without Numba's whole target set-up (crowdbudget._lean_load)
lean_loads(sys.modules[__name__])
