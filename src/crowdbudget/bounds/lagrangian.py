"""Lagrangian upper bound of Hu & Frazier, "Bayes-Optimal Effort Allocation in Crowdsourcing:
Bounds and Index Policies" (§4–§6); the names of the single-task DP and the index tables that
its callers use are importable from here too.

Model (§3–§4). K binary tasks, θ_x ~ Beta(α_{0,x}, β_{0,x}); task x is positive iff
θ_x >= d_x. Workers arrive as a Poisson process of rate r; each arriving worker (at most U of
them) is given one task, works an Exp(μ) time and returns a label ~ Bernoulli(θ_x). The final
reward is Σ_x R(α_x, β_x), R = max(P(θ_x > d_x), P(θ_x < d_x)) (eq. 2), the posterior expected
number of correctly classified tasks.

Relaxation (Theorems 1–2). Relaxing "one task per worker" with multipliers λ_ℓ >= 0 gives

    B(λ) = Σ_x sup_{π^(x)} E[R_x − Σ_ℓ λ_ℓ a_{ℓ,x}] + Σ_ℓ λ_ℓ  >=  optimal value,   (13)

a sum of single-task dynamic programs (15), convex in λ (Lemma 1). Tasks with the same
(α_0, β_0, d) share one DP, so the cost does not grow with K.

The single-task DP (15) — its states (n⁺, n⁻, w, arrivals to go), its derivation for T = ∞ and
the label cap C of §6 — is :mod:`crowdbudget.bounds.single_task`; the index tables of §6 are
:mod:`crowdbudget.bounds.index_tables`.

Minimisation over λ. Scalar λ (λ_ℓ = λ for all ℓ, the paper's choice): golden-section search on
[0, 1/2] (B is convex; the gain of one more worker is at most 1 − 1/2, so the minimiser is in
[0, 1/2]). Vector λ (tighter): projected subgradient descent from the scalar optimum; the
subgradient is ∂B/∂λ_ℓ = 1 − Σ_x P(task x hires at arrival ℓ), the hire probabilities come
from a forward pass through the optimal single-task policy.

Example:
    >>> result = lagrangian_bound(n_items=10, budget=12, arrival_rate=0.1, completion_rate=0.4)
    >>> 0.5 * 10 < result.bound <= 10
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from crowdbudget._validation import check_positive_int
from crowdbudget.bounds.index_tables import (
    IndexTable,
    index_by_bisection,
    index_grid,
    index_table,
)
from crowdbudget.bounds.single_task import (
    CapMode,
    StateSpace,
    backward_induction,
    check_rates,
    default_label_cap,
    forward_hires,
    prior_groups,
    reach_cap_probability,
    solve_single_task_reference,
)
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.types import FloatArray, IntArray

__all__ = [
    "LAMBDA_MAX",
    "BoundResult",
    "CapMode",
    "IndexTable",
    "StateSpace",
    "default_label_cap",
    "golden_section",
    "index_by_bisection",
    "index_grid",
    "index_table",
    "lagrangian_bound",
    "prior_groups",
    "relaxed_value",
    "solve_single_task_reference",
]

#: Upper end of the λ range: the value of one more worker is at most 1 − 1/2.
LAMBDA_MAX = 0.5


# ---- the bound ------------------------------------------------------------------------------
@dataclass
class BoundResult:
    """The Lagrangian upper bound (Theorem 2) and how it was obtained.

    Attributes:
        bound: min over λ of B(λ): an upper bound on the Bayes-optimal expected total reward
            (eq. 2: expected number of correctly classified tasks), total over tasks.
        bound_scalar: the bound with one λ for every arrival (golden-section search).
        lambda_scalar: the minimising scalar λ.
        bound_vector: the bound with λ_ℓ per arrival (subgradient descent), or None.
        penalties: the λ_ℓ of ``bound`` (shape (U,)).
        bound_forbid: B at ``penalties`` with hiring forbidden at the cap (the paper's DP):
            equal to ``bound`` when the cap does not bind.
        cap_reach_probability: per prior group, the probability that the optimal relaxed
            policy reaches the cap (~0: the cap does not bind).
        n_items, budget, arrival_rate, completion_rate, label_cap, horizon: the problem.
        evaluations: number of single-task DP solves.
    """

    bound: float
    bound_scalar: float
    lambda_scalar: float
    bound_vector: float | None
    penalties: FloatArray
    bound_forbid: float
    cap_reach_probability: list[float]
    n_items: int
    budget: int
    arrival_rate: float
    completion_rate: float
    label_cap: int
    horizon: float = math.inf
    evaluations: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def bound_per_item(self) -> float:
        return self.bound / self.n_items

    @property
    def cap_binds(self) -> bool:
        """Whether the cap may change the bound (reached with probability > 1e-9, or the
        forbid/optimistic values differ by more than 1e-9 per task)."""
        return max(self.cap_reach_probability, default=0.0) > 1e-9 or (
            self.bound - self.bound_forbid > 1e-9 * self.n_items
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "bound": self.bound,
            "bound_per_item": self.bound_per_item,
            "bound_scalar": self.bound_scalar,
            "lambda_scalar": self.lambda_scalar,
            "bound_vector": self.bound_vector,
            "bound_forbid_at_cap": self.bound_forbid,
            "label_cap": self.label_cap,
            "cap_reach_probability": max(self.cap_reach_probability, default=0.0),
            "cap_binds": self.cap_binds,
            "n_items": self.n_items,
            "budget": self.budget,
            "arrival_rate": self.arrival_rate,
            "completion_rate": self.completion_rate,
            "horizon": None if math.isinf(self.horizon) else self.horizon,
            "dp_solves": self.evaluations,
        }


class _Relaxation:
    """B(λ) = Σ_g count_g V^g(start; λ) + Σ_ℓ λ_ℓ over the prior groups."""

    def __init__(
        self,
        spaces: list[StateSpace],
        counts: IntArray,
        budget: int,
        r: float,
        mu: float,
    ) -> None:
        self.spaces = spaces
        self.counts = counts
        self.budget = budget
        self.r = r
        self.mu = mu
        self.evaluations = 0

    def _solve(
        self, space: StateSpace, penalties: FloatArray, optimistic: bool, keep: bool
    ) -> tuple[FloatArray, np.ndarray]:
        self.evaluations += 1
        return backward_induction(
            penalties,
            self.r,
            self.mu,
            space.p_pos,
            space.reward,
            space.in_flight,
            space.pos_next,
            space.neg_next,
            space.hire,
            optimistic,
            keep,
        )

    def value(self, penalties: FloatArray, optimistic: bool = True) -> float:
        total = float(np.sum(penalties))
        for space, count in zip(self.spaces, self.counts, strict=True):
            v, _ = self._solve(space, penalties, optimistic, False)
            total += float(count) * float(v[space.start])
        return total

    def value_and_subgradient(self, penalties: FloatArray) -> tuple[float, FloatArray]:
        total = float(np.sum(penalties))
        grad = np.ones(self.budget)
        for space, count in zip(self.spaces, self.counts, strict=True):
            v, decisions = self._solve(space, penalties, True, True)
            total += float(count) * float(v[space.start])
            hires, _ = forward_hires(
                decisions,
                self.r,
                self.mu,
                space.p_pos,
                space.in_flight,
                space.pos_next,
                space.neg_next,
                space.hire,
                space.start,
            )
            grad -= float(count) * hires
        return total, grad

    def cap_reach(self, penalties: FloatArray) -> list[float]:
        out = []
        for space in self.spaces:
            _, decisions = self._solve(space, penalties, True, True)
            out.append(
                float(
                    reach_cap_probability(
                        decisions,
                        self.r,
                        self.mu,
                        space.p_pos,
                        space.in_flight,
                        space.pos_next,
                        space.neg_next,
                        space.hire,
                        space.start,
                    )
                )
            )
        return out


def golden_section(
    f: Any, low: float, high: float, tol: float = 1e-7, max_iter: int = 200
) -> tuple[float, float]:
    """Minimise a convex (unimodal) ``f`` on [low, high]; returns (argmin, min).

    The end points are compared too, so a minimum at λ = 0 is found exactly.
    """
    inv_phi = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = low, high
    c = b - inv_phi * (b - a)
    d = a + inv_phi * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(max_iter):
        if b - a <= tol:
            break
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - inv_phi * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + inv_phi * (b - a)
            fd = f(d)
    candidates = [(fc, c), (fd, d), (f(low), low)]
    best_value, best_x = min(candidates)
    return best_x, best_value


def lagrangian_bound(
    *,
    n_items: int,
    budget: int,
    arrival_rate: float,
    completion_rate: float,
    prior: ArrayLike = (1.0, 1.0),
    thresholds: ArrayLike = 0.5,
    label_cap: int | None = None,
    horizon: float = math.inf,
    vector: bool = False,
    subgradient_steps: int = 150,
) -> BoundResult:
    """Upper bound on the Bayes-optimal expected number of correctly classified tasks.

    Args:
        n_items: K.
        budget: U, the number of workers that may be hired.
        arrival_rate, completion_rate: r and μ.
        prior: Beta pseudo-counts, shape (2,) or (K, 2), columns (b, a) as in
            :class:`~crowdbudget.types.Problem` (class-0 count, class-1 count).
        thresholds: d_x, scalar or shape (K,).
        label_cap: C, workers per task in the DP (default :func:`default_label_cap`).
        horizon: T; a finite T is accepted and bounded by the T = ∞ bound (module docstring).
        vector: also run subgradient descent over λ_ℓ per arrival (tighter, slower).
        subgradient_steps: iterations of the subgradient descent.

    Returns:
        :class:`BoundResult`.
    """
    n_items = check_positive_int(n_items, "n_items")
    budget = check_positive_int(budget, "budget")
    r, mu = check_rates(arrival_rate, completion_rate)
    if not horizon > 0:
        raise InvalidParameterError(f"horizon must be > 0 (inf for none), got {horizon}")
    cap = default_label_cap(n_items, budget) if label_cap is None else label_cap
    cap = check_positive_int(cap, "label_cap")
    groups, counts, _ = prior_groups(prior, thresholds, n_items)
    spaces = [StateSpace.build(a, b, d, cap) for a, b, d in groups]
    relax = _Relaxation(spaces, counts, budget, r, mu)

    lam, best = golden_section(lambda x: relax.value(np.full(budget, x)), 0.0, LAMBDA_MAX, tol=1e-8)
    scalar_bound = best
    penalties = np.full(budget, lam)
    vector_bound: float | None = None
    if vector:
        penalties, vector_bound = _subgradient(relax, penalties, scalar_bound, subgradient_steps)
    bound = min(scalar_bound, vector_bound) if vector_bound is not None else scalar_bound
    forbid = relax.value(penalties, optimistic=False)
    reach = relax.cap_reach(penalties)
    notes = []
    if not math.isinf(horizon):
        notes.append(
            "finite horizon: the T = ∞ bound is reported (valid, looser); the paper computes "
            "the bound for T = ∞ only (§7)"
        )
    return BoundResult(
        bound=bound,
        bound_scalar=scalar_bound,
        lambda_scalar=lam,
        bound_vector=vector_bound,
        penalties=penalties,
        bound_forbid=forbid,
        cap_reach_probability=reach,
        n_items=n_items,
        budget=budget,
        arrival_rate=r,
        completion_rate=mu,
        label_cap=cap,
        horizon=float(horizon),
        evaluations=relax.evaluations,
        notes=notes,
    )


def _subgradient(
    relax: _Relaxation, start: FloatArray, start_value: float, steps: int
) -> tuple[FloatArray, float]:
    """Projected subgradient descent on λ >= 0 with Polyak-free diminishing steps
    ``step_k = c / sqrt(k + 1) / ||g||`` (c = the scalar λ, or 0.01); keeps the best point."""
    lam = start.copy()
    best_lam, best_value = start.copy(), start_value
    scale = max(float(start.mean()), 1e-2)
    for k in range(steps):
        value, grad = relax.value_and_subgradient(lam)
        if value < best_value:
            best_value, best_lam = value, lam.copy()
        norm = float(np.linalg.norm(grad))
        if norm < 1e-12:
            break
        step = scale / math.sqrt(k + 1.0) / norm * math.sqrt(lam.shape[0])
        lam = np.clip(lam - step * grad, 0.0, LAMBDA_MAX)
    return best_lam, best_value


def relaxed_value(
    penalty: float | ArrayLike,
    *,
    n_items: int,
    budget: int,
    arrival_rate: float,
    completion_rate: float,
    prior: ArrayLike = (1.0, 1.0),
    thresholds: ArrayLike = 0.5,
    label_cap: int | None = None,
    cap_mode: CapMode = "optimistic",
) -> float:
    """B(λ) of eq. (13) at one λ (scalar or shape (U,)) — an upper bound for every λ >= 0."""
    r, mu = check_rates(arrival_rate, completion_rate)
    cap = default_label_cap(n_items, budget) if label_cap is None else label_cap
    groups, counts, _ = prior_groups(prior, thresholds, n_items)
    spaces = [StateSpace.build(a, b, d, cap) for a, b, d in groups]
    relax = _Relaxation(spaces, counts, budget, r, mu)
    pen = np.broadcast_to(np.asarray(penalty, dtype=float), (budget,)).copy()
    if np.any(pen < 0):
        raise InvalidParameterError("penalties λ must be >= 0")
    return relax.value(pen, optimistic=cap_mode == "optimistic")
