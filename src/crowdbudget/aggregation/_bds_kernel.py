"""The variational iteration of ``bds-ev`` (and ``bds-ev-blind``) on two classes, compiled
(the same bits).

One iteration of :class:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene`
with ``asymmetry="evidence"`` (Kim & Ghahramani 2012 §3, the mean-field updates of Simpson et
al. 2013 §2, the workers' symmetric / free mixture of
:mod:`~crowdbudget.aggregation.worker_asymmetry`) is about sixty NumPy and SciPy calls on
arrays of a few hundred numbers (J workers × 2 × 2), each a few microseconds of dispatch: on
the worker-aware default's replays (one ``bds-ev`` verdict per campaign, 40–120 iterations
of 164 workers on RTE) about 0.6 ms an iteration, most of the verdict's time. Here an
iteration is one compiled call (:func:`evidence_iterations` runs the loop, :func:`_step` each
iteration) and one ``np.exp``: the exponential of the scores stays NumPy's (NumPy has SIMD
code of its own for it, whose bits a compiled ``exp`` — the C library's — need not share);
the normalisation, the known items, the stopping move and ``E[log π]`` are compiled.

The same operations in the same order as the NumPy code, so the same bits
(``tests/test_bds_kernel.py`` compares the fits bit for bit):

- the two sparse products are SciPy's ``csc_matvecs`` (the expected counts ``N = Wᵀ T``)
  and ``csr_matvecs`` (the scores ``M · E[log e]``): ``y += a · x`` over the stored entries in
  their order, from zeros;
- ψ, ln Γ, ln B and the logistic are SciPy's own C functions
  (:mod:`crowdbudget._compiled_special`), the share's fixed point the compiled loop of
  :func:`~crowdbudget.aggregation.worker_asymmetry.fit_share`;
- sums over the two classes are one addition (NumPy's reductions and the product with ones
  give the same single rounding for two terms — why this path is for two classes only); the
  sum over the items (``T.sum(axis=0)``, not NumPy's fast axis) is NumPy's row by row;
- the workers' evidence is kept per worker and recomputed only for those whose counts moved
  by more than :data:`~crowdbudget.aggregation.worker_asymmetry.STALE_COUNTS`
  (:func:`~crowdbudget.aggregation.worker_asymmetry.updated_evidence`); the numbers that
  depend on the prior only (``a``, ``b``, ``ln B(a, b)`` minus the prior's Γ terms) are
  computed by NumPy once per fit and passed in.

``bds-ev-blind`` (``asymmetry="evidence-blind"``: the class-blind third kind of
:mod:`~crowdbudget.aggregation.worker_blind`) on two classes: :func:`blind_iterations`, the
same loop, a worker's terms, free and blind evidence computed anew only when its four
counts moved by more than ``STALE_COUNTS`` since they were last computed (as ``blind_model``
keeps them: ``worker_blind.moved_workers``; the lnΓ the free evidence shares with the worker
terms computed once), the three weights' fixed point compiled
(:func:`~crowdbudget.aggregation.worker_blind._weights_fixed_point`), and NumPy's own ``exp``
and ``log`` between the compiled steps.

Shapes: N items, J workers, C = 2 classes; the incidence matrices are CSR (N, J·C) with the
column of label l of worker j at ``j·C + l``.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from numba import njit
from scipy.special import betaln, gammaln

from crowdbudget import _compiled_special
from crowdbudget._lean_load import lean_loads
from crowdbudget.aggregation.base import FloatArray, KnownTruth
from crowdbudget.aggregation.worker_asymmetry import (
    SHARE_BOUNDS,
    STALE_COUNTS,
    Evidence,
    _one_coin_summary,
    _share_fixed_point,
)
from crowdbudget.aggregation.worker_blind import (
    BLIND_EVIDENCE,
    BlindEvidence,
    _weights_fixed_point,
)
from crowdbudget.posteriors._logistic_kernel import NUMPY_SUM_CHUNK

_NO_ITEMS = np.empty(0, dtype=np.int64)


class EvidenceState:
    """The per-worker evidence kept between iterations (the arrays of
    :class:`~crowdbudget.aggregation.worker_asymmetry.Evidence`, updated in place by
    :func:`evidence_iterations`), the prior's constants, and the last iteration's ``E[log e]``.

    Args:
        prior: the fit's prior ``α₀`` (2, 2), held for the whole fit.
        n_workers: J.
    """

    def __init__(self, prior: FloatArray, n_workers: int) -> None:
        J = n_workers
        a, b = _one_coin_summary(prior)
        diagonal_prior = np.diag(prior)  # α₀_cc
        totals = prior.sum(axis=1)  # A_c
        off_totals = totals - diagonal_prior  # B_c
        # evidence_difference's prior-only terms, by its own NumPy expressions
        constant = float(np.sum(gammaln(off_totals) - gammaln(totals) + gammaln(diagonal_prior)))
        #: a, b, a + b, ln B(a, b) − constant, A_0, A_1, B_0, B_1, α₀_00, α₀_11
        self.constants = np.array(
            [a, b, a + b, float(betaln(a, b) - constant), *totals, *off_totals, *diagonal_prior]
        )
        self.prior = np.ascontiguousarray(prior, dtype=np.float64)
        self.n_jc = np.zeros((J, 2))
        self.right = np.zeros((J, 2))
        self.difference = np.zeros(J)
        self.free_total = np.zeros((J, 2))
        self.wrong_total = np.zeros((J, 2))
        self.on = np.zeros(J)
        self.off = np.zeros(J)
        self.seen = np.zeros(J, dtype=np.bool_)
        self.expected = np.zeros((J, 2, 2))

    def evidence(self) -> Evidence:
        """The kept evidence as :class:`Evidence` (copies), for ``worker_model``'s
        ``previous``."""
        return Evidence(
            prior=self.prior,
            n_jc=self.n_jc.copy(),
            right=self.right.copy(),
            difference=self.difference.copy(),
            free_total=self.free_total.copy(),
            wrong_total=self.wrong_total.copy(),
            on=self.on.copy(),
            off=self.off.copy(),
            seen=self.seen.copy(),
        )


def _csr_arrays(matrix: object) -> tuple[Any, Any, Any]:
    """A CSR matrix's ``indptr``, ``indices`` and ``data``, the order the compiled steps
    unpack them in."""
    return (
        matrix.indptr,  # type: ignore[attr-defined]
        matrix.indices,  # type: ignore[attr-defined]
        matrix.data,  # type: ignore[attr-defined]
    )


def _evidence_arrays(state: EvidenceState) -> tuple[Any, ...]:
    """The kept evidence's arrays in the order the compiled steps unpack them: ``α₀``, the
    prior's constants, then :class:`Evidence`'s per-worker fields."""
    return (
        state.prior,
        state.constants,
        state.n_jc,
        state.right,
        state.difference,
        state.free_total,
        state.wrong_total,
        state.on,
        state.off,
        state.seen,
    )


def evidence_iterations(
    state: EvidenceState,
    shares: FloatArray,
    workers_matrix: object,
    matrix: object,
    class_prior: float,
    known: KnownTruth | None,
    n_iter: int,
    tol: float,
) -> tuple[FloatArray, int, float]:
    """The variational loop of ``BayesianDawidSkene._variational`` (module docstring): at
    most ``n_iter`` iterations, stopped once no share moves by more than ``tol``.

    Args:
        state: the kept evidence (updated in place; ``state.expected`` gets the last
            iteration's ``E[log e]``).
        shares: the items' starting shares ``T`` (N, 2) (known items already one-hot).
        workers_matrix: the incidence whose labels feed the workers' counts, CSR (N, 2J).
        matrix: the incidence of every label, CSR (N, 2J).
        class_prior: ν₀.
        known: the items of known class, kept one-hot after every update (or None).
        n_iter: the most iterations (>= 1); ``tol``: the stopping tolerance.

    Returns:
        ``(T, iterations, w)``: the last shares (N, 2), the iterations run and the crowd's
        symmetric share fitted at the last of them.
    """
    low, high = SHARE_BOUNDS
    T = np.array(shares, dtype=np.float64, order="C")  # updated in place by the kernel
    exponentials = np.empty_like(T)  # np.exp of the scores: NumPy's own exp (its bits)
    scores = np.empty_like(T)
    share = np.array([0.5])
    items = _NO_ITEMS if known is None else np.asarray(known.items, dtype=np.int64)
    classes = _NO_ITEMS if known is None else np.asarray(known.classes, dtype=np.int64)
    arrays = (*_csr_arrays(workers_matrix), *_csr_arrays(matrix))
    evidence = (*_evidence_arrays(state), state.expected)
    settings = np.array([float(class_prior), float(tol), low, high])
    iteration = 0
    while not _step(
        exponentials, T, iteration, n_iter, items, classes, settings, arrays, evidence,
        share, NUMPY_SUM_CHUNK, scores,
    ):  # fmt: skip
        np.exp(scores, out=exponentials)
        iteration += 1
    return T, iteration, float(share[0])


@njit(cache=True, nogil=True)
def _step(
    exponentials: FloatArray,
    shares: FloatArray,
    iteration: int,
    n_iter: int,
    items: np.ndarray,
    classes: np.ndarray,
    settings: FloatArray,
    arrays: Any,
    evidence: Any,
    share: FloatArray,
    sum_chunk: int,
    scores: FloatArray,
) -> bool:  # pragma: no cover (compiled; tests/test_bds_kernel.py checks the fits' bits)
    """The end of iteration ``iteration`` (when > 0) and the start of the next: the shares
    ``exp(scores) / Σ_c exp(scores)`` (``exponentials`` (N, 2), normalised in place), the
    known items set one-hot, the largest move from ``shares``, which are then replaced by
    them; True (stop) when that move is within the tolerance or ``n_iter`` iterations are
    done; else the next iteration's scores (:func:`_iteration`) and False."""
    n_items = shares.shape[0]
    if iteration > 0:
        change = 0.0
        for i in range(n_items):
            total = exponentials[i, 0] + exponentials[i, 1]
            exponentials[i, 0] = exponentials[i, 0] / total
            exponentials[i, 1] = exponentials[i, 1] / total
        for k in range(items.shape[0]):  # as KnownTruth.clamp: every row 0, then the ones
            exponentials[items[k], 0] = 0.0
            exponentials[items[k], 1] = 0.0
        for k in range(items.shape[0]):
            exponentials[items[k], classes[k]] = 1.0
        for i in range(n_items):
            for c in range(2):
                move = abs(exponentials[i, c] - shares[i, c])
                # np.max: the first entry, then NaN-propagating maxima
                change = move if i == 0 and c == 0 else _compiled_special.maximum(change, move)
                shares[i, c] = exponentials[i, c]
        if change <= settings[1] or iteration == n_iter:
            return True
    # E[log π_c] = ψ(ν₀ + Σ_i T_ic) − ψ(Σ_c ν_c), the sum over the items in their order
    nu0, nu1 = 0.0, 0.0
    for i in range(n_items):
        nu0 += shares[i, 0]
        nu1 += shares[i, 1]
    nu0 = settings[0] + nu0
    nu1 = settings[0] + nu1
    log_pi = np.empty(2)
    both = _compiled_special.digamma(nu0 + nu1, 0)
    log_pi[0] = _compiled_special.digamma(nu0, 0) - both
    log_pi[1] = _compiled_special.digamma(nu1, 0) - both
    low, high = settings[2], settings[3]
    w_indptr, w_indices, w_data, m_indptr, m_indices, m_data = arrays
    prior, constants, n_jc, right, difference = evidence[:5]
    free_total, wrong_total, on, off, seen, expected = evidence[5:]
    share[0] = _iteration(
        shares, log_pi, w_indptr, w_indices, w_data, m_indptr, m_indices, m_data, prior,
        constants, n_jc, right, difference, free_total, wrong_total, on, off, seen,
        iteration == 0, min(max(share[0], low), high), low, high, sum_chunk, expected, scores,
    )  # fmt: skip
    return False


@njit(cache=True, nogil=True)
def _worker_terms(
    j: int,
    n_jc: FloatArray,
    right: FloatArray,
    constants: FloatArray,
    difference: FloatArray,
    free_total: FloatArray,
    wrong_total: FloatArray,
    on: FloatArray,
    off: FloatArray,
    seen: np.ndarray,
) -> None:  # pragma: no cover (compiled; tests/test_bds_kernel.py checks the fits' bits)
    """Worker j's terms of ``worker_asymmetry._worker_terms`` / ``evidence_difference``, in
    their order of operations, from ``n_jc[j]`` and ``right[j]`` (2,)."""
    a, b, ab, beta_term = constants[0], constants[1], constants[2], constants[3]
    agree = right[j, 0] + right[j, 1]
    n_j = n_jc[j, 0] + n_jc[j, 1]
    per_class = 0.0
    for c in range(2):
        totals, off_totals, diagonal = constants[4 + c], constants[6 + c], constants[8 + c]
        wrong = n_jc[j, c] - right[j, c]
        term = (
            _compiled_special.gammaln(totals + n_jc[j, c], 0)
            - _compiled_special.gammaln(off_totals + wrong, 0)
            - _compiled_special.gammaln(diagonal + right[j, c], 0)
        )
        per_class = term if c == 0 else per_class + term
        free_total[j, c] = _compiled_special.digamma(totals + n_jc[j, c], 0)
        wrong_total[j, c] = _compiled_special.digamma(off_totals + wrong, 0)
    symmetric_accuracy = _compiled_special.betaln(a + agree, b + (n_j - agree), 0) - beta_term
    difference[j] = symmetric_accuracy + per_class
    total = _compiled_special.digamma(ab + n_j, 0)
    on[j] = _compiled_special.digamma(a + agree, 0) - total
    off[j] = _compiled_special.digamma(b + (n_j - agree), 0) - total
    seen[j] = n_j > 1e-9


@njit(cache=True, nogil=True)
def _item_scores(
    n_items: int,
    m_indptr: Any,
    m_indices: Any,
    m_data: Any,
    expected: FloatArray,
    log_pi: FloatArray,
    scores: FloatArray,
) -> None:  # pragma: no cover (compiled; tests/test_bds_kernel.py checks the fits' bits)
    """The items' max-shifted scores (N, 2): ``csr_matvecs`` of the label matrix M,
    ``y[i, c] += a · E[log e_{j c l}]`` in stored order (SciPy's order, so the same bits),
    plus ``log π``."""
    for i in range(n_items):
        s0 = 0.0
        s1 = 0.0
        for k in range(m_indptr[i], m_indptr[i + 1]):
            column, a = m_indices[k], m_data[k]
            j, label = column // 2, column % 2
            s0 += a * expected[j, 0, label]
            s1 += a * expected[j, 1, label]
        s0 = s0 + log_pi[0]
        s1 = s1 + log_pi[1]
        top = _compiled_special.maximum(s0, s1)
        scores[i, 0] = s0 - top
        scores[i, 1] = s1 - top


@njit(cache=True, nogil=True)
def _iteration(
    shares: FloatArray,
    log_pi: FloatArray,
    w_indptr: np.ndarray,
    w_indices: np.ndarray,
    w_data: FloatArray,
    m_indptr: np.ndarray,
    m_indices: np.ndarray,
    m_data: FloatArray,
    prior: FloatArray,
    constants: FloatArray,
    n_jc: FloatArray,
    right: FloatArray,
    difference: FloatArray,
    free_total: FloatArray,
    wrong_total: FloatArray,
    on: FloatArray,
    off: FloatArray,
    seen: np.ndarray,
    fresh: bool,
    w: float,
    low: float,
    high: float,
    sum_chunk: int,
    expected: FloatArray,
    scores: FloatArray,
) -> float:  # pragma: no cover (compiled; tests/test_bds_kernel.py checks the fits' bits)
    """An iteration of :func:`_step` up to the max-shifted scores (module docstring); ``w``
    is the share's start, already clipped. Returns the fitted share."""
    n_items = shares.shape[0]
    J = n_jc.shape[0]
    # the expected counts: csc_matvecs of Wᵀ, y[(j, l), c] += a · T[i, c] in item order
    y = np.zeros((2 * J, 2))
    for i in range(n_items):
        for k in range(w_indptr[i], w_indptr[i + 1]):
            row, a = w_indices[k], w_data[k]
            y[row, 0] += a * shares[i, 0]
            y[row, 1] += a * shares[i, 1]
    # counts[j, c, l] = y[2j + l, c]; the evidence of the workers whose counts moved
    for j in range(J):
        n0 = y[2 * j, 0] + y[2 * j + 1, 0]
        n1 = y[2 * j, 1] + y[2 * j + 1, 1]
        r0, r1 = y[2 * j, 0], y[2 * j + 1, 1]
        moved = (abs(n0 - n_jc[j, 0]) + abs(r0 - right[j, 0])) + (
            abs(n1 - n_jc[j, 1]) + abs(r1 - right[j, 1])
        )
        if fresh or moved > STALE_COUNTS:
            n_jc[j, 0], n_jc[j, 1], right[j, 0], right[j, 1] = n0, n1, r0, r1
            _worker_terms(
                j, n_jc, right, constants, difference, free_total, wrong_total, on, off, seen
            )
    # the share: fit_share over the workers with a count, in worker order
    n_seen = 0
    for j in range(J):
        n_seen += seen[j]
    if n_seen > 0:
        values = np.empty(n_seen)
        n_seen = 0
        for j in range(J):
            if seen[j]:
                values[n_seen] = difference[j]
                n_seen += 1
        w = _share_fixed_point(values, w, low, high, sum_chunk)
    # E[log e_jcl]: ψ(α_jcl) + shift_jc off the diagonal, q E_sym + (1 − q) E_free on it
    shift = _compiled_special.logit(w, 0)
    for j in range(J):
        q = _compiled_special.expit(shift + difference[j], 0)
        p = 1.0 - q
        for c in range(2):
            row_shift = q * (off[j] - wrong_total[j, c]) - p * free_total[j, c]
            for label in range(2):
                psi = _compiled_special.digamma(prior[c, label] + y[2 * j + label, c], 0)
                if label == c:
                    expected[j, c, c] = q * on[j] + p * (psi - free_total[j, c])
                else:
                    expected[j, c, label] = psi + row_shift
    _item_scores(n_items, m_indptr, m_indices, m_data, expected, log_pi, scores)
    return w


class BlindState(EvidenceState):
    """:class:`EvidenceState` and what ``bds-ev-blind``'s three-kind mixture
    (:mod:`~crowdbudget.aggregation.worker_blind`) keeps: the crowd's weights (3,), the
    workers' ``log Z`` (J, 3) and the prior-only constants of the free and blind evidence.

    Args:
        prior: the fit's prior ``α₀`` (2, 2), held for the whole fit.
        n_workers: J.
    """

    def __init__(self, prior: FloatArray, n_workers: int) -> None:
        from crowdbudget.aggregation.worker_blind import blind_parameters

        super().__init__(prior, n_workers)
        gamma = blind_parameters(prior)  # γ (2,)
        totals = prior.sum(axis=1)  # A_c
        #: lnΓ(A_0), lnΓ(A_1), lnΓ(α₀_00), lnΓ(α₀_01), lnΓ(α₀_10), lnΓ(α₀_11), γ_0, γ_1,
        #: Σγ, lnΓ(Σγ), lnΓ(γ_0), lnΓ(γ_1) — by NumPy's gammaln, as worker_blind computes them
        total = float(gamma.sum())
        self.blind_constants = np.array(
            [*gammaln(totals), *gammaln(prior).reshape(-1), *gamma, total, gammaln(total),
             *gammaln(gamma)]
        )  # fmt: skip
        self.weights = np.full(3, 1.0 / 3)
        self.log_z = np.zeros((n_workers, 3))
        #: the counts N_jcl (J, 2, 2) each worker's evidence was computed at, its log Z_free
        #: and its unguarded log Z_blind (J,) — kept while its counts do not move
        self.cells = np.zeros((n_workers, 2, 2))
        self.free = np.zeros(n_workers)
        self.blind = np.zeros(n_workers)

    def blind_evidence(self) -> BlindEvidence:
        """The kept evidence as :class:`~crowdbudget.aggregation.worker_blind.BlindEvidence`
        (copies), for ``blind_model``'s ``previous``."""
        kept = self.evidence()
        fields = {name: getattr(kept, name) for name in kept.__dataclass_fields__}
        return BlindEvidence(
            **fields,
            weights=self.weights.copy(),
            counts=self.cells.copy(),
            free=self.free.copy(),
            blind=self.blind.copy(),
        )


def blind_iterations(
    state: BlindState,
    shares: FloatArray,
    workers_matrix: object,
    matrix: object,
    class_prior: float,
    known: KnownTruth | None,
    n_iter: int,
    tol: float,
    guarded: bool = False,
) -> tuple[FloatArray, int]:
    """The variational loop of ``BayesianDawidSkene._variational`` for
    ``asymmetry="evidence-blind"`` on two classes (arguments as :func:`evidence_iterations`;
    ``guarded``: ``"evidence-blind-own"``, a worker's blind ``log Z`` set to −∞ unless its own
    log Bayes factor exceeds :data:`~crowdbudget.aggregation.worker_blind.BLIND_EVIDENCE`, as
    :func:`~crowdbudget.aggregation.worker_blind.guard_blind`).
    Each iteration is four compiled calls and four NumPy ``exp`` / ``log`` (NumPy's own bits):
    the workers' evidence and ``log Z`` (:func:`_blind_evidence`), ``exp`` of the shifted
    ``log Z``, the weights' fixed point
    (:func:`~crowdbudget.aggregation.worker_blind._weights_fixed_point`), ``log`` of the weights,
    ``q`` (J, 3) (``exp`` of :func:`_blind_kinds`), ``E[log e]`` and the items' scores
    (:func:`_blind_scores`), ``exp`` of the scores. ``state.weights`` and ``state.expected``
    get the last iteration's.

    Returns:
        ``(T, iterations)``.
    """
    T = np.array(shares, dtype=np.float64, order="C")
    exponentials = np.empty_like(T)
    scores = np.empty_like(T)
    J = state.n_jc.shape[0]
    likelihood = np.empty((J, 3))
    kinds = np.empty((J, 3))
    log_weights = np.empty(3)
    log_pi = np.empty(2)
    items = _NO_ITEMS if known is None else np.asarray(known.items, dtype=np.int64)
    classes = _NO_ITEMS if known is None else np.asarray(known.classes, dtype=np.int64)
    w_arrays = _csr_arrays(workers_matrix)
    m_arrays = _csr_arrays(matrix)
    evidence = _evidence_arrays(state)
    guard = BLIND_EVIDENCE if guarded else np.inf  # no worker's factor exceeds +∞: no guard
    settings = np.array([float(class_prior), float(tol), float(guarded), guard, STALE_COUNTS])
    kept = (state.cells, state.free, state.blind)
    y = np.zeros((2 * J, 2))
    iteration = 0
    while True:
        n_seen = _blind_evidence(
            exponentials, T, iteration, n_iter, items, classes, settings, log_pi, w_arrays,
            evidence, state.blind_constants, kept, state.log_z, likelihood, y,
        )  # fmt: skip
        if n_seen < 0:
            break
        seen_likelihood = likelihood[:n_seen]
        np.exp(seen_likelihood, out=seen_likelihood)
        _weights_fixed_point(seen_likelihood, state.weights, 200)
        np.log(state.weights, out=log_weights)
        _blind_kinds(log_weights, state.log_z, kinds)
        np.exp(kinds, out=kinds)
        _blind_scores(
            kinds, y, T, log_pi, m_arrays, evidence, state.blind_constants, state.expected,
            scores,
        )  # fmt: skip
        np.exp(scores, out=exponentials)
        iteration += 1
    return T, iteration


@njit(cache=True, nogil=True)
def _blind_evidence(
    exponentials: FloatArray,
    shares: FloatArray,
    iteration: int,
    n_iter: int,
    items: np.ndarray,
    classes: np.ndarray,
    settings: FloatArray,
    log_pi: FloatArray,
    w_arrays: Any,
    evidence: Any,
    blind_constants: FloatArray,
    kept: Any,
    log_z: FloatArray,
    shifted: FloatArray,
    y: FloatArray,
) -> int:  # pragma: no cover (compiled; tests/test_bds_kernel.py checks the fits' bits)
    """The end of iteration ``iteration`` (as :func:`_step`: -1 to stop) and the start of the
    next: ``E[log π]``, the expected counts ``y`` (2J, 2), the terms and the free and blind
    evidence of every worker whose counts moved by more than ``settings[4]`` since they were
    computed (``kept``: those counts (J, 2, 2), ``log Z_free``, ``log Z_blind`` (J,); all on
    the first iteration; ``worker_blind.moved_workers``), every worker's ``log Z`` (J, 3)
    (sym, free, blind; ``worker_blind.blind_model``'s order of operations; guarded when
    ``settings[2]`` is not 0, at the threshold ``settings[3]``), and in ``shifted`` (J', 3)
    the seen workers' ``log Z`` minus its row maximum. Returns J'."""
    n_items = shares.shape[0]
    if iteration > 0:
        change = 0.0
        for i in range(n_items):
            total = exponentials[i, 0] + exponentials[i, 1]
            exponentials[i, 0] = exponentials[i, 0] / total
            exponentials[i, 1] = exponentials[i, 1] / total
        for k in range(items.shape[0]):
            exponentials[items[k], 0] = 0.0
            exponentials[items[k], 1] = 0.0
        for k in range(items.shape[0]):
            exponentials[items[k], classes[k]] = 1.0
        for i in range(n_items):
            for c in range(2):
                move = abs(exponentials[i, c] - shares[i, c])
                change = move if i == 0 and c == 0 else _compiled_special.maximum(change, move)
                shares[i, c] = exponentials[i, c]
        if change <= settings[1] or iteration == n_iter:
            return -1
    nu0, nu1 = 0.0, 0.0
    for i in range(n_items):
        nu0 += shares[i, 0]
        nu1 += shares[i, 1]
    nu0 = settings[0] + nu0
    nu1 = settings[0] + nu1
    both = _compiled_special.digamma(nu0 + nu1, 0)
    log_pi[0] = _compiled_special.digamma(nu0, 0) - both
    log_pi[1] = _compiled_special.digamma(nu1, 0) - both
    w_indptr, w_indices, w_data = w_arrays
    prior, constants, n_jc, right, difference = evidence[:5]
    free_total, wrong_total, on, off, seen = evidence[5:]
    J = n_jc.shape[0]
    y[:] = 0.0
    for i in range(n_items):
        for k in range(w_indptr[i], w_indptr[i + 1]):
            row, a = w_indices[k], w_data[k]
            y[row, 0] += a * shares[i, 0]
            y[row, 1] += a * shares[i, 1]
    n_seen = 0
    cells, free_kept, blind_kept = kept
    for j in range(J):
        # counts[j, c, l] = y[2j + l, c]; moved_workers' change, cell by cell in (c, l) order
        moved = (
            (abs(y[2 * j, 0] - cells[j, 0, 0]) + abs(y[2 * j + 1, 0] - cells[j, 0, 1]))
            + abs(y[2 * j, 1] - cells[j, 1, 0])
        ) + abs(y[2 * j + 1, 1] - cells[j, 1, 1])
        if iteration == 0 or moved > settings[4]:
            for c in range(2):
                for label in range(2):
                    cells[j, c, label] = y[2 * j + label, c]
            _blind_worker_evidence(
                j, y, prior, constants, n_jc, right, difference, free_total, wrong_total, on,
                off, seen, blind_constants, free_kept, blind_kept,
            )  # fmt: skip
        log_z[j, 0] = free_kept[j] + difference[j]
        log_z[j, 1] = free_kept[j]
        log_z[j, 2] = blind_kept[j]
        if settings[2] != 0.0:
            # guard_blind: blind only on the worker's own log Bayes factor above the guard
            own = log_z[j, 2] - _compiled_special.maximum(log_z[j, 0], log_z[j, 1])
            if own <= settings[3]:
                log_z[j, 2] = -np.inf
        if seen[j]:
            top = _compiled_special.maximum(
                _compiled_special.maximum(log_z[j, 0], log_z[j, 1]), log_z[j, 2]
            )
            for k in range(3):
                shifted[n_seen, k] = log_z[j, k] - top
            n_seen += 1
    return n_seen


# inlined (as _blind_worker_terms): a compiled call per worker and iteration would pass
# its arrays with their reference counts — measured, a tenth of the blind iteration
@njit(cache=True, nogil=True, inline="always")
def _blind_worker_evidence(
    j: int,
    y: FloatArray,
    prior: FloatArray,
    constants: FloatArray,
    n_jc: FloatArray,
    right: FloatArray,
    difference: FloatArray,
    free_total: FloatArray,
    wrong_total: FloatArray,
    on: FloatArray,
    off: FloatArray,
    seen: np.ndarray,
    blind_constants: FloatArray,
    free_kept: FloatArray,
    blind_kept: FloatArray,
) -> None:  # pragma: no cover (compiled; tests/test_bds_kernel.py checks the fits' bits)
    """Worker j's terms, ``log Z_free`` and ``log Z_blind`` at the counts ``y`` (2J, 2)
    (``blind_model``'s order of operations), written to the kept arrays."""
    gamma0, gamma1, gamma_total = blind_constants[6], blind_constants[7], blind_constants[8]
    n_jc[j, 0] = y[2 * j, 0] + y[2 * j + 1, 0]
    n_jc[j, 1] = y[2 * j, 1] + y[2 * j + 1, 1]
    right[j, 0], right[j, 1] = y[2 * j, 0], y[2 * j + 1, 1]
    # the terms of _worker_terms, keeping lnΓ(A_c + n_jc) and lnΓ(α₀_cc + N_jcc): the
    # free evidence's row and diagonal terms are lnΓ of the very same arguments
    row_gammaln, diagonal_gammaln = _blind_worker_terms(
        j, n_jc, right, constants, difference, free_total, wrong_total, on, off, seen
    )
    # log_evidence_free: Σ_c [lnΓ(A_c) − lnΓ(A_c + n_jc)] + Σ_cl cells in (c, l) order
    rows = (blind_constants[0] - row_gammaln[0]) + (blind_constants[1] - row_gammaln[1])
    cells = 0.0
    for c in range(2):
        for label in range(2):
            if label == c:
                cell_gammaln = diagonal_gammaln[c]
            else:
                cell_gammaln = _compiled_special.gammaln(prior[c, label] + y[2 * j + label, c], 0)
            cell = cell_gammaln - blind_constants[2 + 2 * c + label]
            cells = cell if c == 0 and label == 0 else cells + cell
    free_kept[j] = rows + cells
    # log_evidence_blind of M_jl = Σ_c N_jcl
    m0 = y[2 * j, 0] + y[2 * j, 1]
    m1 = y[2 * j + 1, 0] + y[2 * j + 1, 1]
    blind_kept[j] = (blind_constants[9] - _compiled_special.gammaln(gamma_total + (m0 + m1), 0)) + (
        (_compiled_special.gammaln(gamma0 + m0, 0) - blind_constants[10])
        + (_compiled_special.gammaln(gamma1 + m1, 0) - blind_constants[11])
    )


@njit(cache=True, nogil=True, inline="always")
def _blind_worker_terms(
    j: int,
    n_jc: FloatArray,
    right: FloatArray,
    constants: FloatArray,
    difference: FloatArray,
    free_total: FloatArray,
    wrong_total: FloatArray,
    on: FloatArray,
    off: FloatArray,
    seen: np.ndarray,
) -> tuple[tuple[float, float], tuple[float, float]]:  # pragma: no cover (compiled)
    """:func:`_worker_terms` (the same operations), returning the lnΓ it computed that the
    free evidence needs too: ``(lnΓ(A_c + n_jc))_c`` and ``(lnΓ(α₀_cc + N_jcc))_c``."""
    a, b, ab, beta_term = constants[0], constants[1], constants[2], constants[3]
    agree = right[j, 0] + right[j, 1]
    n_j = n_jc[j, 0] + n_jc[j, 1]
    per_class = 0.0
    rows = (0.0, 0.0)
    diagonals = (0.0, 0.0)
    for c in range(2):
        totals, off_totals, diagonal = constants[4 + c], constants[6 + c], constants[8 + c]
        wrong = n_jc[j, c] - right[j, c]
        row = _compiled_special.gammaln(totals + n_jc[j, c], 0)
        on_diagonal = _compiled_special.gammaln(diagonal + right[j, c], 0)
        term = row - _compiled_special.gammaln(off_totals + wrong, 0) - on_diagonal
        per_class = term if c == 0 else per_class + term
        if c == 0:
            rows, diagonals = (row, 0.0), (on_diagonal, 0.0)
        else:
            rows, diagonals = (rows[0], row), (diagonals[0], on_diagonal)
        free_total[j, c] = _compiled_special.digamma(totals + n_jc[j, c], 0)
        wrong_total[j, c] = _compiled_special.digamma(off_totals + wrong, 0)
    symmetric_accuracy = _compiled_special.betaln(a + agree, b + (n_j - agree), 0) - beta_term
    difference[j] = symmetric_accuracy + per_class
    total = _compiled_special.digamma(ab + n_j, 0)
    on[j] = _compiled_special.digamma(a + agree, 0) - total
    off[j] = _compiled_special.digamma(b + (n_j - agree), 0) - total
    seen[j] = n_j > 1e-9
    return rows, diagonals


@njit(cache=True, nogil=True)
def _blind_kinds(
    log_weights: FloatArray, log_z: FloatArray, kinds: FloatArray
) -> None:  # pragma: no cover (compiled; tests/test_bds_kernel.py checks the fits' bits)
    """``log w_k + log Z_jk`` minus its row maximum, (J, 3) (``q``'s scores)."""
    for j in range(log_z.shape[0]):
        for k in range(3):
            kinds[j, k] = log_weights[k] + log_z[j, k]
        top = _compiled_special.maximum(
            _compiled_special.maximum(kinds[j, 0], kinds[j, 1]), kinds[j, 2]
        )
        for k in range(3):
            kinds[j, k] = kinds[j, k] - top


@njit(cache=True, nogil=True)
def _blind_scores(
    kinds: FloatArray,
    y: FloatArray,
    shares: FloatArray,
    log_pi: FloatArray,
    m_arrays: Any,
    evidence: Any,
    blind_constants: FloatArray,
    expected: FloatArray,
    scores: FloatArray,
) -> None:  # pragma: no cover (compiled; tests/test_bds_kernel.py checks the fits' bits)
    """``q`` (``kinds`` (J, 3), exponentials normalised in place), ``E[log e]`` (J, 2, 2)
    as ``blind_model``'s ``q_sym E_sym + q_free E_free + q_blind E_blind``, and the items'
    max-shifted scores (N, 2) as :func:`_iteration`'s."""
    prior = evidence[0]
    free_total, wrong_total, on, off = evidence[5], evidence[6], evidence[7], evidence[8]
    gamma0, gamma1, gamma_total = blind_constants[6], blind_constants[7], blind_constants[8]
    for j in range(kinds.shape[0]):
        total = (kinds[j, 0] + kinds[j, 1]) + kinds[j, 2]
        q_sym = kinds[j, 0] / total
        q_free = kinds[j, 1] / total
        q_blind = kinds[j, 2] / total
        kinds[j, 0], kinds[j, 1], kinds[j, 2] = q_sym, q_free, q_blind
        # E_blind[log e_jcl] = ψ(γ_l + M_jl) − ψ(Σγ + n_j) is the same for both rows c: two
        # ψ, not four. A worker with q_blind = +0 (guarded: exp(−∞) = 0) would add
        # q_blind · E_blind = −0 (E_blind < 0: γ_l + M_jl < Σγ + n_j), and x + (−0) = x for
        # every x, so its E_blind is not computed at all.
        blind0, blind1 = 0.0, 0.0
        if q_blind != 0.0:
            m0 = y[2 * j, 0] + y[2 * j, 1]
            m1 = y[2 * j + 1, 0] + y[2 * j + 1, 1]
            blind_total = _compiled_special.digamma(gamma_total + (m0 + m1), 0)
            blind0 = _compiled_special.digamma(gamma0 + m0, 0) - blind_total
            blind1 = _compiled_special.digamma(gamma1 + m1, 0) - blind_total
        for c in range(2):
            for label in range(2):
                psi = _compiled_special.digamma(prior[c, label] + y[2 * j + label, c], 0)
                free_log = psi - free_total[j, c]
                sym_log = on[j] if label == c else psi + (off[j] - wrong_total[j, c])
                kept = q_sym * sym_log + q_free * free_log
                if q_blind != 0.0:
                    blind_log = blind0 if label == 0 else blind1
                    kept = kept + q_blind * blind_log
                expected[j, c, label] = kept
    m_indptr, m_indices, m_data = m_arrays
    _item_scores(shares.shape[0], m_indptr, m_indices, m_data, expected, log_pi, scores)


# the kernel loads without Numba's whole target set-up (crowdbudget._lean_load)
lean_loads(sys.modules[__name__])
