"""A common Beta prior fitted to historical tasks (Hu & Frazier, "Bayes-Optimal Effort
Allocation in Crowdsourcing: Bounds and Index Policies", §7.2).

The paper holds back tasks of RTE as "historical data", estimates θ_x of each by its label
frequency and fits a Beta distribution to these estimates "by method of moments". Two
estimators:

``method="frequencies"`` (the paper's). θ̂_x = n⁺_x / n_x per held-back task; with m̂ and v̂ the
sample mean and (unbiased, ddof = 1) variance of the θ̂_x,

    s = m̂ (1 − m̂) / v̂ − 1,   α = m̂ s,   β = (1 − m̂) s.

It treats θ̂_x as if it were θ_x, so the binomial noise of n_x labels inflates v̂ and the prior
comes out too wide (s too small).

``method="beta-binomial"`` (improved variant). The label counts are beta-binomial: with n
labels per task, Var(θ̂) = m(1 − m)/n · (n + s)/(1 + s), s = α + β. Solving for s:

    s = n (m̂(1 − m̂) − v̂) / (n v̂ − m̂(1 − m̂)).

With unequal n_x, n is their mean (the tasks of RTE all have 10 labels).

Guards: the moments determine a Beta only when 0 < m̂ < 1 and the (noise-corrected) variance is
positive and below m̂(1 − m̂) — otherwise s would be <= 0 (no Beta has that mean and variance)
or infinite (no spread beyond the binomial noise). Then :class:`InvalidParameterError` is
raised, or, with ``on_degenerate="clip"``, s is clipped to [``min_strength``,
``max_strength``] and the fit says so in ``note``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from crowdbudget.exceptions import InvalidParameterError


@dataclass(frozen=True)
class BetaPriorFit:
    """A fitted Beta(a, b) prior.

    Attributes:
        a, b: the parameters (a: positive pseudo-count).
        mean, variance: the moments used (of θ̂ for "frequencies", corrected for
            "beta-binomial").
        n_tasks: held-back tasks used.
        method: the estimator.
        note: set when a guard clipped the strength.
    """

    a: float
    b: float
    mean: float
    variance: float
    n_tasks: int
    method: str
    note: str = ""

    @property
    def strength(self) -> float:
        return self.a + self.b

    def as_prior_row(self) -> np.ndarray:
        """``[b, a]``: the row layout of :class:`~crowdbudget.types.Problem` priors."""
        return np.array([self.b, self.a])


def fit_beta_prior(
    positives: ArrayLike,
    totals: ArrayLike,
    *,
    method: Literal["frequencies", "beta-binomial"] = "frequencies",
    on_degenerate: Literal["raise", "clip"] = "raise",
    min_strength: float = 0.1,
    max_strength: float = 1e4,
) -> BetaPriorFit:
    """Method-of-moments Beta prior from per-task label counts (module docstring).

    Args:
        positives: positive labels per held-back task, shape (n_tasks,).
        totals: labels per held-back task, shape (n_tasks,), all >= 1.
        method: ``"frequencies"`` (the paper's) or ``"beta-binomial"``.
        on_degenerate: ``"raise"`` or ``"clip"`` when the moments admit no Beta.

    Example:
        >>> fit = fit_beta_prior([2, 8, 5, 9, 1], [10, 10, 10, 10, 10])
        >>> round(fit.a, 3), round(fit.b, 3)
        (0.5, 0.5)
    """
    pos = np.asarray(positives, dtype=float).reshape(-1)
    tot = np.asarray(totals, dtype=float).reshape(-1)
    if pos.shape != tot.shape:
        raise InvalidParameterError(
            f"positives and totals must have one shape, got {pos.shape} and {tot.shape}"
        )
    if pos.size < 2:
        raise InvalidParameterError(f"a prior needs at least 2 held-back tasks, got {pos.size}")
    if np.any(tot < 1) or np.any(pos < 0) or np.any(pos > tot):
        raise InvalidParameterError("every task needs >= 1 label and 0 <= positives <= totals")
    if method not in ("frequencies", "beta-binomial"):
        raise InvalidParameterError(
            f"method must be 'frequencies' or 'beta-binomial', got {method!r}"
        )
    freq = pos / tot
    mean = float(freq.mean())
    var = float(freq.var(ddof=1))
    if not 0.0 < mean < 1.0:
        raise InvalidParameterError(
            f"the held-back label frequencies have mean {mean:g}; a Beta prior needs 0 < mean < 1"
        )
    spread = mean * (1.0 - mean)
    if method == "frequencies":
        strength = spread / var - 1.0 if var > 0 else np.inf
        variance = var
    else:
        n = float(tot.mean())
        denominator = n * var - spread
        strength = n * (spread - var) / denominator if denominator > 0 else np.inf
        variance = spread / (strength + 1.0) if np.isfinite(strength) else 0.0
    note = ""
    if not (np.isfinite(strength) and min_strength <= strength <= max_strength):
        if on_degenerate == "raise":
            raise InvalidParameterError(
                f"method-of-moments strength a+b = {strength:g} is outside "
                f"[{min_strength:g}, {max_strength:g}] (mean {mean:g}, variance {var:g}): the "
                "moments admit no usable Beta; use on_degenerate='clip' or more tasks"
            )
        clipped = float(
            np.clip(np.nan_to_num(strength, posinf=max_strength), min_strength, max_strength)
        )
        note = f"strength {strength:g} clipped to {clipped:g}"
        strength = clipped
    return BetaPriorFit(
        a=mean * float(strength),
        b=(1.0 - mean) * float(strength),
        mean=mean,
        variance=float(variance),
        n_tasks=int(pos.size),
        method=method,
        note=note,
    )
