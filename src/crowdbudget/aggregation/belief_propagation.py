r"""Belief propagation for crowdsourcing (Liu, Peng, Ihler 2012, "Variational inference for
crowdsourcing", NIPS; the "BP" of Chen, Lin, Zhou 2013 §7).

Model (Liu et al. §2): item i has a true label z_i (uniform prior); worker j has a reliability
q_j ~ Beta(α, β); given z_i and q_j the worker says ``L_ij = z_i`` with probability q_j. For
C > 2 classes we use the symmetric one-coin extension: a wrong answer is uniform over the
C − 1 other classes (C = 2 is exactly the paper's model). Integrating q_j out gives the
factor graph of Liu et al. eq. (3):

    p(z | L) ∝ Π_j ψ_j(c_j),   ψ_j(c) = ∫ Beta(q; α, β) q^c ((1 − q)/(C − 1))^{γ_j − c} dq,

with γ_j the number of labels of worker j and c_j = Σ_{i ∈ ∂j} 1[L_ij = z_i] the number it
got right — one factor per worker over all its items.

Messages (sum-product, Liu et al. §3.1), one pair per edge e = (i, j):

- item → worker: ``m_{i→j}(z) ∝ Π_{j' ∈ ∂i \ j} m_{j'→i}(z)``; only
  ``b_e = m_{i→j}(z = L_ij)`` (normalised over z) enters the worker factor;
- worker → item: ``m_{j→i}(z_i) ∝ Σ_{z_{∂j \ i}} ψ_j(c_j) Π_{i' ∈ ∂j \ i} m_{i'→j}(z_{i'})``.
  Because ψ_j is a mixture over q of products over the items, the sum over the other items
  factorises inside the integral:

      m_{j→i}(z_i) ∝ ∫ Beta(q; α, β) f(z_i, q) Π_{i' ∈ ∂j \ i} g_{i'}(q) dq,
      f(z, q) = q if z = L_ij else (1 − q)/(C − 1),
      g_{i'}(q) = b_{i'} q + (1 − b_{i'}) (1 − q)/(C − 1).

  This is exactly the message of the paper's worker factor (the paper evaluates the same sum
  by dynamic programming over c_j); it takes two values, for z_i = L_ij and for the others,
  so it is stored as the log-ratio ``d_e = log A_e − log B_e`` with
  ``A_e = ∫ Beta q Π g``, ``B_e = ∫ Beta (1 − q)/(C − 1) Π g``.

Integration over q (the discretisation): Gauss–Jacobi quadrature for the weight
``q^{α−1} (1 − q)^{β−1}`` with ``n_nodes`` nodes q_k and weights ω_k (``scipy.special.
roots_jacobi``, mapped from [−1, 1] to [0, 1]). The integrand's non-Beta part is a polynomial
in q of degree γ_j, and an n-node Gauss rule is exact up to degree 2n − 1, so every message of
a worker with at most ``2·n_nodes − 1`` labels is *exact* (as the paper's dynamic program).
For busier workers the cavity posterior of q_j is concentrated (width ~ (q(1 − q)/γ_j)^½) and
the rule is an approximation (measured on the real data sets in ``tests/test_aggregators.py``
against 8× more nodes). Arrays: ``log g`` (n_labels, n_nodes) in chunks of edges; per worker
``S_j(q_k) = Σ_{e ∈ ∂j} log g_e(q_k)`` by a sparse product; the cavity of edge e is
``S_j(q_k) − log g_e(q_k)`` (exact removal, g > 0 on the open interval), then a max-shifted
``exp`` and two dot products give A_e and B_e. Item beliefs ``log m_i(z) = Σ_{e ∈ ∂i} d_e
1[z = L_e]`` are one ``np.bincount``; ``b_e`` is the leave-one-out softmax at L_e.

Schedule: parallel (flooding) updates from uniform item→worker messages (b_e = 1/C, so the
first worker messages are the prior odds E[q]/E[(1 − q)/(C − 1)]); optional damping of d;
stop after ``n_iter`` iterations or when max |Δd| < ``tol``. Final ``probas_`` are the item
beliefs (normalised), ``labels_`` their argmax.

Known truth (``fit(..., known_truth=...)``: control items): a label on a known item sends its
worker the item-to-worker message "z = truth" — probability 1 that the label is right if it is
the truth, 0 if not — in every iteration, so the worker's reliability belief reads the control
answers as definite; ``probas_`` of a known item is its one-hot truth.

Example:
    >>> from crowdbudget.datasets import load_dataset
    >>> bp = BeliefPropagation().fit(load_dataset("rte"))
    >>> bp.probas_.shape
    (800, 2)
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, logsumexp, roots_jacobi

from crowdbudget.aggregation.base import FloatArray, KnownTruth, KnownTruthAggregator
from crowdbudget.aggregation.dawid_skene import check_iterations, softmax_rows
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError

#: edges per chunk of the (n_labels, n_nodes) arrays (bounds memory at ~ chunk·n_nodes·8 B)
CHUNK_EDGES = 1 << 15


def beta_quadrature(alpha: float, beta: float, n_nodes: int) -> tuple[FloatArray, FloatArray]:
    """Nodes q_k in (0, 1) and weights ω_k (summing to 1) of the Gauss rule for Beta(α, β):
    ``Σ_k ω_k f(q_k) = E_{Beta(α, β)}[f(q)]`` exactly for polynomials f of degree < 2n."""
    x, w = roots_jacobi(n_nodes, beta - 1.0, alpha - 1.0)
    q = (1.0 + x) / 2.0
    w = np.asarray(w, dtype=float)
    return np.asarray(q, dtype=float), w / w.sum()


class BeliefPropagation(KnownTruthAggregator):
    """Sum-product BP on the item–worker graph with Beta(α, β) worker reliabilities.

    Args:
        alpha, beta: the Beta prior of each worker's reliability q_j (> 0; default (2, 1),
            the prior Liu et al. use in their experiments: workers better than random on
            average).
        n_nodes: Gauss–Jacobi nodes for the integral over q (exact for workers with at most
            2·n_nodes − 1 labels).
        n_iter: maximum BP iterations; tol: stop when max |Δ log-message| < tol.
        damping: in [0, 1): new message = (1 − damping)·update + damping·old.
        rng: seed or generator for exact ties.

    Fitted: ``probas_`` item beliefs (n_items, n_classes), ``labels_``, ``messages_`` the final
    worker→item log-ratios d_e, shape (n_labels,), ``skills_`` the posterior mean of q_j per
    worker (same quadrature), shape (n_workers,), ``n_iter_``.
    """

    def __init__(
        self,
        alpha: float = 2.0,
        beta: float = 1.0,
        n_nodes: int = 64,
        n_iter: int = 100,
        tol: float = 1e-6,
        damping: float = 0.0,
        rng: int | np.random.Generator | None = 0,
    ) -> None:
        super().__init__(rng=rng)
        self.alpha = alpha
        self.beta = beta
        self.n_nodes = n_nodes
        self.n_iter = n_iter
        self.tol = tol
        self.damping = damping

    def _validate(self) -> tuple[int, float]:
        n_iter, tol = check_iterations(self.n_iter, self.tol, "BeliefPropagation")
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise InvalidParameterError(
                    f"BeliefPropagation: {name} must be a number > 0, got {value!r}"
                )
        n = self.n_nodes
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 2 <= n <= 4096:
            raise InvalidParameterError(
                f"BeliefPropagation: n_nodes must be an integer in 2..4096, got {n!r}"
            )
        if not isinstance(self.damping, int | float) or not 0 <= self.damping < 1:
            raise InvalidParameterError(
                f"BeliefPropagation: damping must lie in [0, 1), got {self.damping!r}"
            )
        return n_iter, tol

    def _fit(self, data: LabelData, known: KnownTruth | None) -> FloatArray:
        """The message passing of the module docstring; a label on a ``known`` item sends
        its worker the message "z = truth" (1 if the label is the truth, else 0)."""
        n_iter, tol = self._validate()
        C = data.n_classes
        q, weights = beta_quadrature(float(self.alpha), float(self.beta), int(self.n_nodes))
        log_w = np.log(weights)
        wrong = (1.0 - q) / (C - 1)  # f(z ≠ L, q)
        n_labels = data.n_labels
        items, workers, labels = data.items, data.workers, data.labels
        chunks = [(lo, min(lo + CHUNK_EDGES, n_labels)) for lo in range(0, n_labels, CHUNK_EDGES)]
        worker_of_chunk = [
            sp.csr_matrix(
                (np.ones(hi - lo), (workers[lo:hi], np.arange(hi - lo))),
                shape=(data.n_workers, hi - lo),
            )
            for lo, hi in chunks
        ]
        flat = items * C + labels

        def log_g(b: FloatArray) -> FloatArray:
            return np.asarray(np.log(b[:, None] * q + (1.0 - b[:, None]) * wrong), dtype=float)

        def worker_messages(b: FloatArray) -> tuple[FloatArray, FloatArray]:
            totals = np.zeros((data.n_workers, q.shape[0]))
            for (lo, hi), matrix in zip(chunks, worker_of_chunk, strict=True):
                totals += matrix @ log_g(b[lo:hi])
            d = np.empty(n_labels)
            for lo, hi in chunks:
                cavity = totals[workers[lo:hi]] - log_g(b[lo:hi]) + log_w
                cavity -= cavity.max(axis=1, keepdims=True)
                mass = np.exp(cavity)
                d[lo:hi] = np.log(mass @ q) - np.log(mass @ wrong)
            return d, totals

        def item_beliefs(d: FloatArray) -> FloatArray:
            counts = np.bincount(flat, weights=d, minlength=data.n_items * C)
            return np.asarray(counts.reshape(data.n_items, C), dtype=float)

        def item_to_worker(d: FloatArray, beliefs: FloatArray) -> FloatArray:
            own = beliefs[items, labels] - d  # cavity log-belief at z = L_e
            rows = beliefs[items].copy()
            rows[np.arange(n_labels), labels] = -np.inf
            others = logsumexp(rows, axis=1)  # log Σ_{z ≠ L_e} exp(belief)
            return np.asarray(expit(own - others), dtype=float)

        on_known = None
        if known is not None:
            truth = np.full(data.n_items, -1, dtype=np.int64)
            truth[known.items] = known.classes
            on_known = truth[items] >= 0
            right = (labels == truth[items]).astype(float)[on_known]

        def clamp(b: FloatArray) -> FloatArray:
            # the interior quadrature nodes keep log_g finite at b = 0 and b = 1
            if on_known is not None:
                b[on_known] = right
            return b

        b = clamp(np.full(n_labels, 1.0 / C))
        d, totals = worker_messages(b)
        iteration = 0
        for iteration in range(1, n_iter + 1):  # noqa: B007 - n_iter_ below
            b = clamp(item_to_worker(d, item_beliefs(d)))
            d_new, totals = worker_messages(b)
            if self.damping:
                d_new = (1.0 - self.damping) * d_new + self.damping * d
            change = float(np.max(np.abs(d_new - d))) if n_labels else 0.0
            d = d_new
            if change < tol:
                break
        self.messages_ = d
        self.n_iter_ = iteration
        # posterior mean of q_j from the full (non-cavity) product, same quadrature
        log_post = totals + log_w
        log_post -= log_post.max(axis=1, keepdims=True)
        post = np.exp(log_post)
        self.skills_ = (post @ q) / post.sum(axis=1)
        return softmax_rows(item_beliefs(d))
