"""Two-coin worker model: item soft label θ_i ~ Beta(a_i, b_i), worker sensitivity
ρ_j1 ~ Beta(c_j1, d_j1) and specificity ρ_j2 ~ Beta(c_j2, d_j2), updated by moment matching.

Model (Chen, Lin, Zhou 2013, §4, last paragraph; Dawid & Skene 1979; Raykar et al. 2010).
A noiseless worker says 1 with probability θ_i; worker j repeats a noiseless 1 with probability
``ρ_j1 = P(Z = Y | Y = 1)`` and a noiseless 0 with probability ``ρ_j2 = P(Z = Y | Y = 0)``:

    P(Z_ij = 1 | θ, ρ1, ρ2) = θ ρ1 + (1 − θ)(1 − ρ2),
    P(Z_ij = 0 | θ, ρ1, ρ2) = θ (1 − ρ1) + (1 − θ) ρ2.

The one-coin model is the special case ρ1 = ρ2. As there, the product of Betas is not
conjugate; the paper's recipe (§4: independent Betas for the posterior, parameters by moment
matching) is applied to all three variables. Derivation:

Both likelihoods have the form ``θ·A + (1 − θ)·B`` with A a function of ρ1 alone and B of ρ2
alone: for z = 1, ``A = ρ1``, ``B = 1 − ρ2``; for z = 0, ``A = 1 − ρ1``, ``B = ρ2``. With the
three variables independent a priori, the exact posterior is a two-component mixture

    p(θ, ρ1, ρ2 | z) = w_A · [θ Beta(θ; a, b)/μ_θ] [A Beta(ρ1)/E A] Beta(ρ2)
                      + w_B · [(1−θ) Beta(θ; a, b)/(1−μ_θ)] Beta(ρ1) [B Beta(ρ2)/E B],

    w_A = μ_θ E[A] / Z,   w_B = (1 − μ_θ) E[B] / Z,   Z = μ_θ E[A] + (1 − μ_θ) E[B] = P(z),

and x·Beta(x; c, d)/E[x] = Beta(x; c+1, d), (1−x)·Beta(x; c, d)/E[1−x] = Beta(x; c, d+1).
So every marginal is a mixture of two Betas with weights (w_A, w_B):

    θ  | z :  w_A Beta(a+1, b)        + w_B Beta(a, b+1)            (either z)
    ρ1 | 1 :  w_A Beta(c1+1, d1)      + w_B Beta(c1, d1)
    ρ2 | 1 :  w_A Beta(c2, d2)        + w_B Beta(c2, d2+1)
    ρ1 | 0 :  w_A Beta(c1, d1+1)      + w_B Beta(c1, d1)
    ρ2 | 0 :  w_A Beta(c2, d2)        + w_B Beta(c2+1, d2)

Its first two moments are the weighted moments of the components, and the matched Beta has
``s = m(1−m)/v − 1``, ``a' = m s``, ``b' = (1−m) s`` (shared with
:mod:`crowdbudget.posteriors.one_coin`). A mixture of a Beta and its one-count shift has
variance below m(1−m), so s > 0. (Only the unchanged component of ρ1 or ρ2 has the prior's
moments; when w_B → 1 the update leaves that coin as it was — a label on an item believed to
be class 0 says nothing about the worker's sensitivity.)

For an item whose posterior mean is 1/2 (a fresh item) and a worker with μ1 = μ2, the θ update
equals the one-coin one: the θ weights only involve μ1 and μ2 (tested).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from crowdbudget._validation import check_prior, check_thresholds
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.posteriors.base import Lookahead
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.posteriors.one_coin import (
    BinaryItemBeliefs,
    _match,
    _match_scalar,
    beta_lookahead,
)
from crowdbudget.types import FloatArray, IntArray, LabelEvent


def _mixture_match(
    c: FloatArray, d: FloatArray, w_a: FloatArray, shift_a: int, shift_b: int
) -> tuple[FloatArray, FloatArray]:
    """Match a Beta to ``w_a Beta(c, d)·shift_a + (1 − w_a) Beta(c, d)·shift_b``.

    ``shift`` codes the component: +1 is Beta(c+1, d), −1 is Beta(c, d+1), 0 is Beta(c, d).
    """
    n = c + d

    def moments(shift: int) -> tuple[FloatArray, FloatArray]:
        cc = c + (shift == 1)
        nn = n + (shift != 0)
        m1 = cc / nn
        return m1, m1 * (cc + 1.0) / (nn + 1.0)

    m1a, m2a = moments(shift_a)
    m1b, m2b = moments(shift_b)
    w_b = 1.0 - w_a
    return _match(w_a * m1a + w_b * m1b, w_a * m2a + w_b * m2b)


def _mixture_match_scalar(
    c: float, d: float, w_a: float, shift_a: int, shift_b: int
) -> tuple[float, float]:
    """:func:`_mixture_match` of one value in Python floats (same operations, same order)."""
    n = c + d

    def moments(shift: int) -> tuple[float, float]:
        cc = c + (1.0 if shift == 1 else 0.0)
        nn = n + (0.0 if shift == 0 else 1.0)
        m1 = cc / nn
        return m1, m1 * (cc + 1.0) / (nn + 1.0)

    m1a, m2a = moments(shift_a)
    m1b, m2b = moments(shift_b)
    w_b = 1.0 - w_a
    return _match_scalar(w_a * m1a + w_b * m1b, w_a * m2a + w_b * m2b)


def _two_coin_update_scalar(
    a: float, b: float, c1: float, d1: float, c2: float, d2: float, label: int
) -> tuple[float, float, float, float, float, float]:
    """:func:`two_coin_update` of one label in Python floats, bit-identical to it (tested)."""
    positive = label == 1
    mt = a / (a + b)
    m1 = c1 / (c1 + d1)
    m2 = c2 / (c2 + d2)
    ea = m1 if positive else 1.0 - m1
    eb = 1.0 - m2 if positive else m2
    za = mt * ea
    w_a = za / (za + (1.0 - mt) * eb)
    na, nb = _mixture_match_scalar(a, b, w_a, 1, -1)
    if positive:
        nc1, nd1 = _mixture_match_scalar(c1, d1, w_a, 1, 0)
        nc2, nd2 = _mixture_match_scalar(c2, d2, w_a, 0, -1)
    else:
        nc1, nd1 = _mixture_match_scalar(c1, d1, w_a, -1, 0)
        nc2, nd2 = _mixture_match_scalar(c2, d2, w_a, 0, 1)
    return na, nb, nc1, nd1, nc2, nd2


def two_coin_update(
    a: ArrayLike,
    b: ArrayLike,
    c1: ArrayLike,
    d1: ArrayLike,
    c2: ArrayLike,
    d2: ArrayLike,
    label: ArrayLike,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Moment-matched posterior after one label, elementwise (module docstring).

    Args:
        a, b: item Beta; c1, d1: sensitivity Beta; c2, d2: specificity Beta; label: 1 or 0
            (broadcastable shapes).

    Returns:
        ``(a', b', c1', d1', c2', d2', p)`` with ``p = P(label | priors)`` of the observed label.
    """
    arrays = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (a, b, c1, d1, c2, d2)), np.asarray(label)
    )
    a, b, c1, d1, c2, d2 = arrays[:6]
    positive = arrays[6] == 1
    mt = a / (a + b)
    m1 = c1 / (c1 + d1)
    m2 = c2 / (c2 + d2)
    ea = np.where(positive, m1, 1.0 - m1)  # E[A]
    eb = np.where(positive, 1.0 - m2, m2)  # E[B]
    za = mt * ea
    z = za + (1.0 - mt) * eb
    w_a = za / z
    na, nb = _mixture_match(a, b, w_a, 1, -1)
    # z = 1: ρ1 shifts up in A, ρ2 shifts down in B; z = 0: ρ1 down in A, ρ2 up in B
    n1p, n1q = _mixture_match(c1, d1, w_a, 1, 0)
    n1r, n1s = _mixture_match(c1, d1, w_a, -1, 0)
    n2p, n2q = _mixture_match(c2, d2, w_a, 0, -1)
    n2r, n2s = _mixture_match(c2, d2, w_a, 0, 1)
    nc1 = np.where(positive, n1p, n1r)
    nd1 = np.where(positive, n1q, n1s)
    nc2 = np.where(positive, n2p, n2r)
    nd2 = np.where(positive, n2q, n2s)
    return na, nb, nc1, nd1, nc2, nd2, z


def two_coin_rewards(
    a: ArrayLike,
    b: ArrayLike,
    c1: ArrayLike,
    d1: ArrayLike,
    c2: ArrayLike,
    d2: ArrayLike,
    threshold: ArrayLike = 0.5,
    now: ArrayLike | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Stage rewards ``(R1, R0, p1)`` of asking a two-coin worker about an item.

    ``R_z = h(I(a'_z, b'_z)) − h(I(a, b))`` with the moment-matched item posterior after label z
    (as :func:`crowdbudget.posteriors.one_coin.one_coin_rewards`); ``p1 = P(label 1)``;
    ``now`` as there (the caller's cached current error).

    Only the θ update enters the reward, and it depends on the worker only through the
    weights, so this is cheaper than :func:`two_coin_update`.
    """
    a, b, c1, d1, c2, d2 = (np.asarray(x, dtype=float) for x in (a, b, c1, d1, c2, d2))
    now = error_probability(a, b, threshold) if now is None else np.asarray(now, dtype=float)
    mt = a / (a + b)
    m1 = c1 / (c1 + d1)
    m2 = c2 / (c2 + d2)
    za1 = mt * m1
    p1 = za1 + (1.0 - mt) * (1.0 - m2)
    za0 = mt * (1.0 - m1)
    p0 = za0 + (1.0 - mt) * m2
    a1, b1 = _mixture_match(a, b, za1 / p1, 1, -1)
    a0, b0 = _mixture_match(a, b, za0 / p0, 1, -1)
    r1 = now - error_probability(a1, b1, threshold)
    r0 = now - error_probability(a0, b0, threshold)
    return r1, r0, p1


class TwoCoinPosterior(BinaryItemBeliefs):
    """Item Betas and per-worker sensitivity/specificity Betas, updated by moment matching.

    Args:
        item_prior: shape (2,) or (n_items, 2), columns (b, a) — class-0 and class-1 counts.
        worker_prior: shape (2,) or (n_workers, 2), columns (d, c) — wrong and right
            pseudo-counts, used for both coins; or shape (n_workers, 4) with columns
            (d1, c1, d2, c2) for separate sensitivity and specificity priors.
        n_items, n_workers: sizes.
        thresholds: d per item (default 0.5).

    Attributes:
        a, b: item parameters (n_items,); c1, d1 (sensitivity) and c2, d2 (specificity):
        worker parameters (n_workers,).
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
        wp = np.asarray(worker_prior, dtype=float)
        if wp.ndim == 2 and wp.shape[1] == 4:
            if wp.shape[0] != n_workers or not np.all(wp > 0):
                raise InvalidParameterError(
                    f"a (n_workers, 4) worker prior must have {n_workers} rows of numbers > 0"
                )
            sens, spec = wp[:, :2], wp[:, 2:]
        else:
            sens = spec = check_prior(wp, n_workers, 2)
        self.n_items = n_items
        self.n_workers = n_workers
        self.a: FloatArray = items[:, 1].copy()
        self.b: FloatArray = items[:, 0].copy()
        self.c1: FloatArray = sens[:, 1].copy()
        self.d1: FloatArray = sens[:, 0].copy()
        self.c2: FloatArray = spec[:, 1].copy()
        self.d2: FloatArray = spec[:, 0].copy()
        self.thresholds: FloatArray = check_thresholds(thresholds, n_items)

    def update(self, event: LabelEvent) -> None:
        """Moment-matched update of item ``event.item`` and worker ``event.worker``."""
        if event.label not in (0, 1):
            raise InvalidParameterError(f"binary labels are 0 or 1, got {event.label!r}")
        i, j = event.item, event.worker
        out = _two_coin_update_scalar(
            float(self.a[i]),
            float(self.b[i]),
            float(self.c1[j]),
            float(self.d1[j]),
            float(self.c2[j]),
            float(self.d2[j]),
            event.label,
        )
        self.a[i], self.b[i], self.c1[j], self.d1[j], self.c2[j], self.d2[j] = out

    def lookahead(
        self, worker: int | IntArray | None = None, items: IntArray | None = None
    ) -> Lookahead:
        """What one label from ``worker`` could do to each item (the KG family's input).

        Args, returns: as :meth:`crowdbudget.posteriors.one_coin.OneCoinPosterior.lookahead`
        (None: a worker who never errs, sensitivity = specificity = 1). The item update
        depends on the worker only through the mean sensitivity and specificity; the values
        are those of :func:`two_coin_rewards` bit for bit (P(label 0) is ``1 − P(label 1)``).
        """
        if items is None:
            a, b, thresholds = self.a, self.b, self.thresholds
        else:
            a, b, thresholds = self.a[items], self.b[items], self.thresholds[items]
        k = a.shape[0]
        mt = a / (a + b)
        if worker is None:
            m1 = m2 = np.ones(k)
        else:
            c1, d1, c2, d2 = self.c1[worker], self.d1[worker], self.c2[worker], self.d2[worker]
            m1, m2 = c1 / (c1 + d1), c2 / (c2 + d2)
        za1 = mt * m1
        p1 = za1 + (1.0 - mt) * (1.0 - m2)
        za0 = mt * (1.0 - m1)
        p0 = za0 + (1.0 - mt) * m2
        # entries 0..k−1: after a label 0, k..2k−1: after a label 1
        weight = np.concatenate([np.broadcast_to(za0 / p0, (k,)), np.broadcast_to(za1 / p1, (k,))])
        a_after, b_after = _mixture_match(np.tile(a, 2), np.tile(b, 2), weight, 1, -1)
        return beta_lookahead(a_after, b_after, np.broadcast_to(p1, (k,)), np.tile(thresholds, 2))

    def sensitivity(self) -> FloatArray:
        """Posterior mean of ρ_j1 = P(Z = 1 | Y = 1), shape (n_workers,)."""
        return self.c1 / (self.c1 + self.d1)

    def specificity(self) -> FloatArray:
        """Posterior mean of ρ_j2 = P(Z = 0 | Y = 0), shape (n_workers,)."""
        return self.c2 / (self.c2 + self.d2)
