"""Dirichlet posterior for multi-class items (Chen, Lin, Zhou 2013, §5).

Item i has a class-probability vector θ_i ~ Dir(α_i); a noiseless worker's label is class c with
probability θ_ic; a label c adds one to α_ic (conjugacy). The item's true class is the largest
component of θ_i, so the Bayes decision is the class ``c`` maximising

    P_c(α) = P(θ_c is the largest component | Dir(α)).

Represent θ = G / ΣG with independent G_k ~ Gamma(α_k, 1): θ_c is largest iff G_c is, so

    P_c(α) = ∫_0^∞ f_{Γ(α_c)}(x) Π_{k≠c} F_{Γ(α_k)}(x) dx                      (1-D integral)
           = ∫_0^1 Π_{k≠c} F_{Γ(α_k)}(F⁻¹_{Γ(α_c)}(u)) du        (substituting u = F_{Γ(α_c)}(x)).

The second form has a bounded, smooth integrand on [0, 1]; we evaluate it with Gauss–Legendre
quadrature (``n_nodes`` nodes, vectorised over items and classes with
``scipy.special.gammaincinv`` / ``gammainc``); the probabilities are renormalised to sum to 1.
Measured accuracy (two classes against the exact Beta tail, every α ∈ {1..40}²): largest error
2.0e-5 with 64 nodes, 4.6e-6 with 128, 1.1e-6 with 256 — worst for lopsided states where one
class has shape 1 (the inverse CDF −log(1 − u) is singular at u = 1, which Gauss–Legendre
handles slowly); tested against Monte Carlo for three and four classes. Decisions do not depend
on it (:meth:`DirichletPosterior.predict` is exact); the Opt-KG rewards of nearly certain items
carry this error.

The expected accuracy of the Bayes decision is ``h(α) = max_c P_c(α)``; the stage reward of a
label l is ``R_l = h(α + e_l) − h(α)``; Opt-KG takes ``max_l R_l`` and KG ``Σ_l (α_l/Σα) R_l``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from crowdbudget._validation import check_prior
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.types import FloatArray, IntArray, LabelEvent

_NODES: dict[int, tuple[FloatArray, FloatArray]] = {}


def _legendre01(n: int) -> tuple[FloatArray, FloatArray]:
    if n not in _NODES:
        x, w = np.polynomial.legendre.leggauss(n)
        _NODES[n] = ((x + 1.0) / 2.0, w / 2.0)
    return _NODES[n]


def largest_class_probabilities(alpha: ArrayLike, n_nodes: int = 64) -> FloatArray:
    """``P(class c has the largest θ_c | Dir(α))`` for each row of ``alpha``.

    Args:
        alpha: Dirichlet parameters, shape (n, C) (or (C,)), all > 0.
        n_nodes: Gauss–Legendre nodes of the 1-D integral.

    Returns:
        Shape (n, C) (or (C,)); rows sum to 1.
    """
    alpha = np.asarray(alpha, dtype=float)
    single = alpha.ndim == 1
    a = np.atleast_2d(alpha)
    n, c = a.shape
    u, w = _legendre01(n_nodes)
    # x[i, c, q] = F⁻¹_{Γ(α_ic)}(u_q)
    x = special.gammaincinv(a[:, :, None], u[None, None, :])
    out = np.empty((n, c))
    for k in range(c):
        # Π_{m≠k} F_{Γ(α_im)}(x[i, k, q])
        cdf = special.gammainc(a[:, :, None], x[:, k, None, :])  # (n, C, Q)
        cdf[:, k, :] = 1.0
        out[:, k] = np.prod(cdf, axis=1) @ w
    out /= out.sum(axis=1, keepdims=True)
    return out[0] if single else out


class DirichletPosterior:
    """Independent Dirichlet posteriors of the items' class-probability vectors, as arrays.

    Args:
        prior: pseudo-counts, shape (n_classes,) or (n_items, n_classes).
        n_items: number of items (when ``prior`` has one row).

    Attributes:
        alpha: shape (n_items, n_classes).
    """

    def __init__(self, prior: ArrayLike, n_items: int | None = None) -> None:
        arr = np.asarray(prior, dtype=float)
        if n_items is None:
            if arr.ndim != 2:
                raise InvalidParameterError("n_items is needed when prior has one row")
            n_items = arr.shape[0]
        n_classes = arr.shape[-1]
        self.alpha: FloatArray = check_prior(arr, n_items, n_classes).copy()
        self.n_items = n_items
        self.n_classes = n_classes

    def update(self, event: LabelEvent) -> None:
        if not 0 <= event.label < self.n_classes:
            raise InvalidParameterError(f"labels are 0..{self.n_classes - 1}, got {event.label!r}")
        self.alpha[event.item, event.label] += 1.0

    def class_probabilities(self) -> FloatArray:
        """P(class c is item's largest component), shape (n_items, n_classes)."""
        return largest_class_probabilities(self.alpha)

    def predict(self) -> IntArray:
        """Bayes-rule labels (most probable largest class; ties → smallest index), shape
        (n_items,) — computed as the largest pseudo-count, without the integral.

        Why that is the same: with G_k ~ Gamma(α_k) independent, θ = G / ΣG, so "θ_c is the
        largest" is "G_c is the largest". If α_c ≥ α_d, write G_c = G'_d + H with
        G'_d ~ Gamma(α_d) and H ~ Gamma(α_c − α_d) ≥ 0 independent (H = 0 if equal), R the
        other G's. Then P(d largest) = P(G_d > G'_d + H, G_d > R) ≤ P(G_d > G'_d, G_d > R)
        = P(G'_d > G_d, G'_d > R) (G_d and G'_d are exchangeable) ≤ P(G'_d + H > G_d,
        G'_d + H > R) = P(c largest). So P(c largest) is ordered like α_c, equal α give equal
        probabilities, and argmax α (first on ties) is the Bayes rule with its tie-break. It
        saves the quadrature (seconds for 10⁴–10⁵ items)."""
        return np.argmax(self.alpha, axis=1).astype(np.int64)

    def confidence(self) -> FloatArray:
        return np.max(self.class_probabilities(), axis=1)


def dirichlet_rewards(alpha: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Stage rewards ``R_l = h(α + e_l) − h(α)`` and predictive ``p_l = α_l / Σα``.

    Args:
        alpha: shape (n, C).

    Returns:
        ``(rewards, probabilities)``, both shape (n, C).
    """
    a = np.atleast_2d(np.asarray(alpha, dtype=float))
    n, c = a.shape
    now = largest_class_probabilities(a).max(axis=1)
    bumped = np.repeat(a[:, None, :], c, axis=1) + np.eye(c)[None, :, :]  # (n, C, C)
    after = largest_class_probabilities(bumped.reshape(n * c, c)).max(axis=1).reshape(n, c)
    return after - now[:, None], a / a.sum(axis=1, keepdims=True)
