"""One-coin worker model: item soft label θ_i ~ Beta(a_i, b_i), worker reliability
ρ_j ~ Beta(c_j, d_j), updated by variational moment matching.

Model (Chen, Lin, Zhou 2013, §4, eq. 13). A noiseless worker would say 1 with probability θ_i;
worker j agrees with a noiseless worker with probability ρ_j, so

    P(Z_ij = 1 | θ, ρ) = θρ + (1 − θ)(1 − ρ),    P(Z_ij = 0 | θ, ρ) = (1 − θ)ρ + θ(1 − ρ).

The product of Betas is not conjugate to this likelihood. The paper approximates the posterior
by a product of independent Betas whose parameters match the exact posterior's first two
moments (its appendix, not included in our copy). The derivation, written out:

Write ``E_θ[θ^k (1−θ)^m] = (a)_k (b)_m / (a+b)_{k+m}`` (rising factorials; Beta moments) and
likewise for ρ with (c, d); μ_θ = a/(a+b), μ_ρ = c/(c+d). For a label z = 1 the exact
posterior is ``p(θ, ρ | z) ∝ [θρ + (1−θ)(1−ρ)] Beta(θ; a, b) Beta(ρ; c, d)``, a mixture of two
products of Betas. Its normaliser (the predictive probability of the label) is

    Z_1 = μ_θ μ_ρ + (1 − μ_θ)(1 − μ_ρ),

and, because θ and ρ are independent a priori, every posterior moment is a ratio of prior
moments:

    E[θ   | z=1] = (E[θ²] μ_ρ + E[θ(1−θ)] (1−μ_ρ)) / Z_1
    E[θ²  | z=1] = (E[θ³] μ_ρ + E[θ²(1−θ)] (1−μ_ρ)) / Z_1
    E[ρ   | z=1] = (μ_θ E[ρ²] + (1−μ_θ) E[ρ(1−ρ)]) / Z_1
    E[ρ²  | z=1] = (μ_θ E[ρ³] + (1−μ_θ) E[ρ²(1−ρ)]) / Z_1.

A label z = 0 is the same with θ replaced by 1 − θ in the likelihood:
``Z_0 = (1−μ_θ) μ_ρ + μ_θ (1−μ_ρ)``,
``E[θ | z=0] = (E[θ(1−θ)] μ_ρ + E[θ²] (1−μ_ρ)) / Z_0``, and so on. A Beta with mean m and
variance v has ``s = a' + b' = m(1−m)/v − 1``, ``a' = m s``, ``b' = (1−m) s``: those are the
updated parameters. (The exact posterior marginal of θ is a mixture of Beta(a+1, b) and
Beta(a, b+1) — hence its variance is below m(1−m), s > 0 and the match is always valid.)

Numerics: all moments are ratios of polynomials in (a, b, c, d) evaluated in closed form, so
an update costs a few dozen flops; ``s`` is computed as ``m(1−m)/v − 1`` with v the difference
E[θ²] − m², which is safe because v is of order m(1−m)/(a+b) ≫ ulp for the counts met in
practice (a + b < 1e6); we clip ``s`` below at 1e-9 as a guard.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from crowdbudget._validation import check_prior, check_thresholds
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.posteriors.base import Lookahead, known_beta
from crowdbudget.posteriors.beta_bernoulli import decide_positive, error_probability
from crowdbudget.types import FloatArray, IntArray, LabelEvent

_S_FLOOR = 1e-9


#: arrays or Python floats: the moment arithmetic below is the same IEEE-754 operations on both
_Real = TypeVar("_Real", float, FloatArray)


def _beta_moments(a: _Real, b: _Real) -> tuple[_Real, _Real, _Real, _Real, _Real]:
    """E[x], E[x²], E[x³], E[x(1−x)], E[x²(1−x)] of Beta(a, b), elementwise (arrays) or on
    Python floats (the scalar update paths: the same operations, so the same bits)."""
    n = a + b
    m1 = a / n
    m2 = m1 * (a + 1.0) / (n + 1.0)
    m3 = m2 * (a + 2.0) / (n + 2.0)
    x1mx = m1 * b / (n + 1.0)  # E[x(1−x)] = a b / (n (n+1))
    x21mx = m2 * b / (n + 2.0)  # E[x²(1−x)] = a(a+1) b / (n (n+1) (n+2))
    return m1, m2, m3, x1mx, x21mx


def _match(mean: FloatArray, second: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Beta parameters with the given first and second moments."""
    spread = mean * (1.0 - mean)
    # E[x²] − m² cancels when the Beta is extremely concentrated (a + b ~ 1e15); flooring the
    # variance at spread·1e-15 caps the matched a + b there instead of dividing by zero.
    var = np.maximum(second - mean * mean, spread * 1e-15)
    s = np.maximum(spread / var - 1.0, _S_FLOOR)
    return mean * s, (1.0 - mean) * s


def one_coin_update(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, label: ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Moment-matched posterior after one label, elementwise.

    Args:
        a, b: item Beta parameters; c, d: worker Beta parameters; label: 1 or 0 (any
            broadcastable shapes).

    Returns:
        ``(a', b', c', d', p)``: the updated parameters and the predictive probability
        ``p = P(label | a, b, c, d)`` of the label that was observed.
    """
    a, b, c, d, z = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (a, b, c, d)), np.asarray(label)
    )
    positive = z == 1
    # For z = 0, θ enters through 1 − θ: swap (a, b), update, swap back.
    ta = np.where(positive, a, b)
    tb = np.where(positive, b, a)
    t1, t2, t3, t1m, t21m = _beta_moments(ta, tb)
    r1, r2, r3, r1m, r21m = _beta_moments(c, d)
    z1 = t1 * r1 + (1.0 - t1) * (1.0 - r1)
    theta_m1 = (t2 * r1 + t1m * (1.0 - r1)) / z1
    theta_m2 = (t3 * r1 + t21m * (1.0 - r1)) / z1
    rho_m1 = (t1 * r2 + (1.0 - t1) * r1m) / z1
    rho_m2 = (t1 * r3 + (1.0 - t1) * r21m) / z1
    na, nb = _match(theta_m1, theta_m2)
    nc, nd = _match(rho_m1, rho_m2)
    new_a = np.where(positive, na, nb)
    new_b = np.where(positive, nb, na)
    return new_a, new_b, nc, nd, z1


def _one_coin_update_scalar(
    a: float, b: float, c: float, d: float, label: int
) -> tuple[float, float, float, float]:
    """:func:`one_coin_update` of one label in Python floats: ``(a', b', c', d')``.

    The same operations in the same order as the array version (IEEE-754 double arithmetic is
    the same in Python and NumPy), so the results are bit-identical (tested); it avoids the
    ~60 NumPy calls of the array version on scalars (about 40 µs per label).
    """
    ta, tb = (a, b) if label == 1 else (b, a)
    t1, t2, t3, t1m, t21m = _beta_moments(ta, tb)  # plain arithmetic: floats in, floats out
    m = c + d
    r1 = c / m
    r2 = r1 * (c + 1.0) / (m + 1.0)
    r3 = r2 * (c + 2.0) / (m + 2.0)
    r1m = r1 * d / (m + 1.0)
    r21m = r2 * d / (m + 2.0)
    z1 = t1 * r1 + (1.0 - t1) * (1.0 - r1)
    na, nb = _match_scalar((t2 * r1 + t1m * (1.0 - r1)) / z1, (t3 * r1 + t21m * (1.0 - r1)) / z1)
    nc, nd = _match_scalar((t1 * r2 + (1.0 - t1) * r1m) / z1, (t1 * r3 + (1.0 - t1) * r21m) / z1)
    if label == 1:
        return na, nb, nc, nd
    return nb, na, nc, nd


def _match_scalar(mean: float, second: float) -> tuple[float, float]:
    """:func:`_match` of one value in Python floats (same operations, same order)."""
    spread = mean * (1.0 - mean)
    var = max(second - mean * mean, spread * 1e-15)
    s = max(spread / var - 1.0, _S_FLOOR)
    return mean * s, (1.0 - mean) * s


def _theta_after(
    ta: FloatArray, tb: FloatArray, r1: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The item half of :func:`one_coin_update` for label 1 on (ta, tb): ``(a', b', z1)``.

    The item update depends on the worker only through μ_ρ = ``r1``; a label 0 on (a, b) is a
    label 1 on (b, a) with the result swapped back. Same operations in the same order as
    :func:`one_coin_update`, so bit-identical to it, at a third of its NumPy calls.
    """
    t1, t2, t3, t1m, t21m = _beta_moments(ta, tb)
    z1 = t1 * r1 + (1.0 - t1) * (1.0 - r1)
    na, nb = _match((t2 * r1 + t1m * (1.0 - r1)) / z1, (t3 * r1 + t21m * (1.0 - r1)) / z1)
    return na, nb, z1


def beta_lookahead(
    a_after: FloatArray,
    b_after: FloatArray,
    p1: FloatArray,
    threshold: FloatArray,
    table: bool = False,
) -> Lookahead:
    """The :class:`~crowdbudget.posteriors.base.Lookahead` of k binary items from their Beta
    posteriors after each label: ``a_after``, ``b_after`` and ``threshold`` of shape (2k,)
    (entries 0..k−1 after a label 0, k..2k−1 after a label 1), ``p1`` = P(label 1), shape (k,).

    ``error_after`` is :func:`error_probability` of each posterior, one call for both labels
    (with one threshold for every item it is elementwise, so the values equal separate calls);
    ``label_probabilities`` is ``[1 − p1, p1]``; ``class_probabilities`` is computed on first
    access. ``table``: :func:`error_probability`'s table kernel at d = 1/2.
    """
    k = p1.shape[0]
    err = error_probability(a_after, b_after, threshold, table=table)

    def classes() -> FloatArray:
        positive = decide_positive(a_after, b_after, threshold)
        p_pos = np.where(positive, 1.0 - err, err).reshape(2, k).T
        return np.stack([1.0 - p_pos, p_pos], axis=-1)

    return Lookahead(np.column_stack([1.0 - p1, p1]), classes, err.reshape(2, k).T)


def one_coin_label_probability(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike
) -> FloatArray:
    """Predictive P(label = 1) = μ_θ μ_ρ + (1 − μ_θ)(1 − μ_ρ), elementwise."""
    a, b, c, d = (np.asarray(x, dtype=float) for x in (a, b, c, d))
    mt = a / (a + b)
    mr = c / (c + d)
    return np.asarray(mt * mr + (1.0 - mt) * (1.0 - mr), dtype=float)


def one_coin_rewards(
    a: ArrayLike,
    b: ArrayLike,
    c: ArrayLike,
    d: ArrayLike,
    threshold: ArrayLike = 0.5,
    now: ArrayLike | None = None,
    *,
    table: bool = False,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Stage rewards of asking worker (c, d) about item (a, b): ``(R1, R0, p1)``.

    ``R_z = h(I(a'_z, b'_z)) − h(I(a, b))`` with (a'_z, b'_z) the moment-matched item posterior
    after label z, computed as differences of error probabilities; ``p1`` = P(label 1). Only
    the item's accuracy counts in the reward (the final objective is labeling accuracy).
    ``now``, if given, is ``error_probability(a, b, threshold)`` computed by the caller (a
    policy keeps it per item, so scoring many workers for one item does not recompute it).
    ``table``: :func:`error_probability`'s table kernel at d = 1/2 (the worker-aware one-coin
    policies' scores, :attr:`BinaryItemBeliefs.half_table`).
    """
    a, b, c, d = (np.asarray(x, dtype=float) for x in (a, b, c, d))
    if now is None:
        now = error_probability(a, b, threshold, table=table)
    now = np.asarray(now, dtype=float)
    a1, b1, _, _, p1 = one_coin_update(a, b, c, d, 1)
    a0, b0, _, _, _ = one_coin_update(a, b, c, d, 0)
    r1 = now - error_probability(a1, b1, threshold, table=table)
    r0 = now - error_probability(a0, b0, threshold, table=table)
    return r1, r0, p1


class BinaryItemBeliefs:
    """The item side shared by the binary worker posteriors (:class:`OneCoinPosterior`,
    :class:`~crowdbudget.posteriors.two_coin.TwoCoinPosterior`): item Betas ``a``, ``b`` and
    Bayes thresholds ``thresholds``, each of shape (n_items,); the host class has ``update``."""

    a: FloatArray
    b: FloatArray
    thresholds: FloatArray
    update: Callable[[LabelEvent], None]
    #: True: the one-coin look-ahead's errors at d = 1/2 from the table kernel of I_{1/2}
    #: (:func:`error_probability` with ``table=True``; set by the worker-aware one-coin
    #: policies, whose compiled kernels use it). The posteriors' own outputs (class
    #: probabilities, confidence) and the two-coin look-ahead keep SciPy's bits.
    half_table = False

    def know(self, item: int, truth: int) -> None:
        """Item ``item`` is known to be of class ``truth`` (a control item): its Beta becomes
        :func:`~crowdbudget.posteriors.base.known_beta`, so every label on it updates its
        worker as a definite right or wrong answer (one-coin: ρ's Beta; two-coin: only the
        coin of that class, sensitivity for class 1, specificity for class 0)."""
        self.a[item], self.b[item] = known_beta(truth)

    def update_known(self, event: LabelEvent, truth: int) -> None:
        """A label of known truth (a control answer): :meth:`know`, then :meth:`update` —
        a one-coin worker's Beta(c, d) becomes Beta(c + 1, d) if the label is ``truth``,
        else Beta(c, d + 1) (up to ~1e-12)."""
        self.know(event.item, truth)
        self.update(event)

    def class_probabilities(self) -> FloatArray:
        """[P(negative), P(positive)] per item, shape (n_items, 2)."""
        p = 1.0 - error_probability(self.a, self.b, self.thresholds)
        positive = decide_positive(self.a, self.b, self.thresholds)
        p_pos = np.where(positive, p, 1.0 - p)
        return np.column_stack([1.0 - p_pos, p_pos])

    def predict(self) -> IntArray:
        """Bayes-rule labels on the item posteriors, shape (n_items,)."""
        return decide_positive(self.a, self.b, self.thresholds).astype(np.int64)

    def confidence(self) -> FloatArray:
        """Posterior probability that the predicted label is right, shape (n_items,)."""
        return 1.0 - error_probability(self.a, self.b, self.thresholds)


class OneCoinPosterior(BinaryItemBeliefs):
    """Item Betas and worker Betas as arrays, updated by moment matching (module docstring).

    Args:
        item_prior: shape (2,) or (n_items, 2), columns (b, a) — class-0 and class-1 counts.
        worker_prior: shape (2,) or (n_workers, 2), columns (d, c) — pseudo-counts of wrong
            and right answers; e.g. (1, 4) is the paper's Beta(4, 1).
        n_items, n_workers: sizes (needed when a prior has one row).
        thresholds: d per item (default 0.5).

    Attributes:
        a, b: item parameters, shape (n_items,); c, d: worker parameters, shape (n_workers,).
    """

    n_classes = 2

    def __init__(
        self,
        item_prior: ArrayLike,
        worker_prior: ArrayLike,
        n_items: int,
        n_workers: int,
        thresholds: ArrayLike | None = None,
    ) -> None:
        items = check_prior(item_prior, n_items, 2)
        workers = check_prior(worker_prior, n_workers, 2)
        self.n_items = n_items
        self.n_workers = n_workers
        self.a: FloatArray = items[:, 1].copy()
        self.b: FloatArray = items[:, 0].copy()
        self.c: FloatArray = workers[:, 1].copy()
        self.d: FloatArray = workers[:, 0].copy()
        self.thresholds: FloatArray = check_thresholds(thresholds, n_items)

    def update(self, event: LabelEvent) -> None:
        """Moment-matched update of item ``event.item`` and worker ``event.worker``."""
        if event.label not in (0, 1):
            raise InvalidParameterError(f"binary labels are 0 or 1, got {event.label!r}")
        i, j = event.item, event.worker
        self.a[i], self.b[i], self.c[j], self.d[j] = _one_coin_update_scalar(
            float(self.a[i]), float(self.b[i]), float(self.c[j]), float(self.d[j]), event.label
        )

    def lookahead(
        self, worker: int | IntArray | None = None, items: IntArray | None = None
    ) -> Lookahead:
        """What one label from ``worker`` could do to each item (the KG family's input).

        Args:
            worker: a worker index, or an array of them aligned with ``items`` (the pairs
                (items[k], worker[k])); None: a worker who never errs (ρ = 1).
            items: the items (default: all, in order).

        Returns:
            a :class:`~crowdbudget.posteriors.base.Lookahead` over the items: P(label),
            ``error_after`` and the class probabilities after each label. The item update
            depends on the worker only through μ_ρ = c/(c+d) (module docstring); the values
            are those of :func:`one_coin_update` bit for bit.
        """
        if items is None:
            a, b, thresholds = self.a, self.b, self.thresholds
        else:
            a, b, thresholds = self.a[items], self.b[items], self.thresholds[items]
        k = a.shape[0]
        if worker is None:
            r1 = np.ones(k)
        else:
            c, d = self.c[worker], self.d[worker]
            r1 = np.broadcast_to(c / (c + d), (k,))
        # entries 0..k−1: a label 0 (θ enters as 1 − θ: the swapped item), k..2k−1: a label 1
        na, nb, z1 = _theta_after(np.concatenate([b, a]), np.concatenate([a, b]), np.tile(r1, 2))
        a_after = np.concatenate([nb[:k], na[k:]])
        b_after = np.concatenate([na[:k], nb[k:]])
        return beta_lookahead(a_after, b_after, z1[k:], np.tile(thresholds, 2), self.half_table)

    def worker_reliability(self) -> FloatArray:
        """Posterior mean of ρ_j, shape (n_workers,)."""
        return self.c / (self.c + self.d)


def exact_item_beliefs(
    prior_a: FloatArray,
    prior_b: FloatArray,
    items: IntArray,
    labels: IntArray,
    reliability: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """Every item's θ posterior given all its labels with the workers held fixed, computed
    exactly and then moment-matched to one Beta (the ``refit_items="exact"`` item step).

    With the worker beliefs fixed and independent of θ, a label z of a worker of mean
    reliability r multiplies the density of θ by ``rθ + (1−r)(1−θ)`` (z = 1) or
    ``(1−r)θ + r(1−θ)`` (z = 0) — exact: the likelihood is linear in ρ, so integrating ρ out
    of its Beta gives its mean (§4, eq. 13). After n labels the product is a polynomial
    ``Σ_k w_k θ^k (1−θ)^(n−k)`` (Bernstein basis), so the posterior is the mixture
    ``Σ_k π_k Beta(a+k, b+n−k)`` with ``π_k ∝ w_k B(a+k, b+n−k)``. Its first two moments are
    matched by one Beta, once, instead of label by label in arrival order (the paper's
    sequential rule, whose result depends on the order of the labels).

    Args:
        prior_a, prior_b: shape (n_items,), every item's prior Beta.
        items, labels: shape (n_labels,), the labels (0/1) and their items.
        reliability: shape (n_labels,), the mean reliability c/(c+d) of each label's worker.

    Returns:
        ``(a, b)``, shape (n_items,): the matched Betas (an item without labels keeps its
        prior exactly).
    """
    n_items = prior_a.shape[0]
    counts = np.bincount(items, minlength=n_items)
    order = np.argsort(items, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0]) - np.searchsorted(items[order], items[order])
    width = int(counts.max()) + 1 if counts.shape[0] else 1
    # weights[i, k]: the coefficient of θ^k (1−θ)^(n_i−k); each row is rescaled to sum 1
    # after every label (a common factor of a row does not change its π), so no underflow
    weights = np.zeros((n_items, width))
    weights[:, 0] = 1.0
    up = labels == 1
    for k in range(width - 1):
        sel = np.flatnonzero(rank == k)
        i = items[sel]
        p_theta = np.where(up[sel], reliability[sel], 1.0 - reliability[sel])[:, None]
        row = weights[i, : k + 1]
        new = np.zeros((i.shape[0], k + 2))
        new[:, 1:] += p_theta * row
        new[:, :-1] += (1.0 - p_theta) * row
        weights[i, : k + 2] = new / new.sum(axis=1, keepdims=True)
    k_idx = np.arange(width)[None, :]
    n = counts[:, None]
    ka = prior_a[:, None] + k_idx
    kb = prior_b[:, None] + (n - k_idx)
    valid = (k_idx <= n) & (weights > 0)
    # log π_k up to a per-item constant; exp after subtracting the row max is in (0, 1]
    safe_a, safe_b = np.where(valid, ka, 1.0), np.where(valid, kb, 1.0)
    log_pi = np.where(
        valid,
        np.log(np.where(valid, weights, 1.0)) + special.betaln(safe_a, safe_b),
        -np.inf,
    )
    pi = np.exp(log_pi - log_pi.max(axis=1, keepdims=True))
    pi /= pi.sum(axis=1, keepdims=True)
    total = prior_a + prior_b + counts
    mean_k = safe_a / total[:, None]
    mean = np.sum(pi * mean_k, axis=1)
    second = np.sum(pi * mean_k * (safe_a + 1.0) / (total[:, None] + 1.0), axis=1)
    a, b = _match(mean, second)
    unlabeled = counts == 0
    return np.where(unlabeled, prior_a, a), np.where(unlabeled, prior_b, b)
