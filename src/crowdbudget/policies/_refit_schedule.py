"""When the worker-aware policies re-read all their labels (``refit``, ``refit-growth``):
the one schedule of the binary one-coin policy
(:mod:`crowdbudget.policies.worker_aware`) and the categorical ones
(:mod:`crowdbudget.policies.worker_aware_multiclass`).

After a refit at n labels the next one is at ``n + max(refit, ⌈refit_growth · n⌉)`` labels:
refit_growth = 0 is a refit every ``refit`` labels; g > 0 makes the intervals grow
geometrically from n = refit / g on, so a campaign of T labels re-reads O(refit/g² + T/g)
labels in all instead of T² / (2 refit).
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

import numpy as np

from crowdbudget.exceptions import InvalidParameterError


def _finite_nonnegative(value: object) -> TypeGuard[float | np.floating | np.integer]:
    """A real number (not a bool), finite and >= 0."""
    return (
        isinstance(value, int | float | np.integer | np.floating)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
        and float(value) >= 0.0
    )


def check_refit_growth(refit_growth: object, refit: int) -> None:
    """Refuse a ``refit_growth`` that is not a finite number >= 0, or one > 0 with ``refit``
    0 (a campaign that never refits has no schedule to grow), in one line."""
    if not _finite_nonnegative(refit_growth):
        raise InvalidParameterError(
            f"refit_growth must be a finite number >= 0 (0: a refit every `refit` labels), "
            f"got {refit_growth!r}"
        )
    if float(refit_growth) > 0.0 and not refit:
        raise InvalidParameterError("refit_growth needs refit >= 1 (refit=0 never refits)")


#: the item step of a refit: the paper's moment matching label by label in arrival order, or
#: the exact posterior of all an item's labels matched once (``refit_items``)
REFIT_ITEM_STEPS = ("sequential", "exact")


def check_refit_options(
    refit: object, growth: object, items: object, rounds: object, worker_model: str
) -> None:
    """Refuse the worker-aware policy's refit options (``refit``, ``refit_growth``,
    ``refit_items``, ``refit_rounds``) that it cannot run, in one line each."""
    if not (isinstance(refit, int) and refit >= 0):
        raise InvalidParameterError(f"refit must be an integer >= 0 (0: never), got {refit!r}")
    if refit and worker_model != "one-coin":
        raise InvalidParameterError("refit is implemented for posterior=one-coin only")
    check_refit_growth(growth, refit)
    if growth and worker_model != "one-coin":
        raise InvalidParameterError("refit_growth is implemented for posterior=one-coin only")
    if items not in REFIT_ITEM_STEPS:
        raise InvalidParameterError(
            f"refit_items must be one of {', '.join(REFIT_ITEM_STEPS)}, got {items!r}"
        )
    if not (isinstance(rounds, int) and rounds >= 1):
        raise InvalidParameterError(f"refit_rounds must be an integer >= 1, got {rounds!r}")


def next_refit_at(n_labels: int, refit: int, refit_growth: float) -> int:
    """The label count of the refit after one at ``n_labels``: n + max(refit, ⌈g · n⌉).

    ``g · n`` is rounded to 9 decimals before the ceiling, so a product that is an integer in
    exact arithmetic but lands a rounding error above it in floats is not pushed to the next
    integer (labels counts and growth rates of interest are far from 9 decimals)."""
    if not refit_growth:
        return n_labels + int(refit)
    return n_labels + max(int(refit), math.ceil(round(float(refit_growth) * n_labels, 9)))


def refit_schedule(n_labels: int, refit: int, refit_growth: float) -> list[int]:
    """Every label count (≤ ``n_labels``) after which a policy refits; [] when refit = 0."""
    points: list[int] = []
    at = int(refit)
    while refit and at <= n_labels:
        points.append(at)
        at = next_refit_at(at, refit, refit_growth)
    return points


def check_refit_tol(refit_tol: object, refit: int, worker_model: str, refit_items: str) -> None:
    """Refuse a ``refit_tol`` (the incremental refit's tolerance on a worker's mean
    reliability) that is not a finite number >= 0, or one > 0 without a refit, on two-coin
    workers or with the exact item step, in one line."""
    if not _finite_nonnegative(refit_tol):
        raise InvalidParameterError(
            f"refit_tol must be a finite number >= 0 (0: the full refit), got {refit_tol!r}"
        )
    if not float(refit_tol):
        return
    if not refit:
        raise InvalidParameterError("refit_tol needs refit >= 1 (refit=0 never refits)")
    if worker_model != "one-coin":
        raise InvalidParameterError("refit_tol is implemented for posterior=one-coin only")
    if refit_items != "sequential":
        raise InvalidParameterError("refit_tol needs refit_items=sequential")


def check_refit_exact(until: object, growth: object, refit_tol: object) -> None:
    """Refuse a ``refit_exact_until`` that is not an integer >= 0 or a ``refit_exact_growth``
    that is not a finite number >= 0, or either > 0 without ``refit_tol`` > 0 (every refit
    is then a full one), in one line."""
    if not (isinstance(until, int | np.integer) and not isinstance(until, bool) and until >= 0):
        raise InvalidParameterError(
            f"refit_exact_until must be an integer >= 0 (a label count), got {until!r}"
        )
    if not _finite_nonnegative(growth):
        raise InvalidParameterError(
            f"refit_exact_growth must be a finite number >= 0, got {growth!r}"
        )
    if (until or float(growth)) and not float(refit_tol):  # type: ignore[arg-type]
        raise InvalidParameterError(
            "refit_exact_until and refit_exact_growth need refit_tol > 0 "
            "(with refit_tol=0 every refit is a full one)"
        )


#: the registry's ``refit_tol`` of a binary one-coin refit (sequential item step) when the id
#: names none (0: the full refit at every refit; derivation and measurements:
#: policies/worker_aware.py, docs/decisions.md, "the incremental refit past 10^4 labels" and
#: "an exact phase by the problem's size")
DEFAULT_REFIT_TOL = 0.01
#: with ``refit_tol`` > 0, the registry's exact-refit options when the id names none: full
#: refits up to the first refit past the exact phase (:func:`exact_phase`: at most
#: ``refit_exact_until`` labels, with ``refit_exact_items`` labels per item but at least
#: :data:`EXACT_FLOOR`), then the incremental refit, and a full one again whenever the labels
#: have grown by ``refit_exact_growth`` since the last
DEFAULT_REFIT_EXACT: dict[str, Any] = {
    "refit_exact_until": 10_000,
    "refit_exact_growth": 0.1,
    "refit_exact_items": 1.0,
}

#: with ``refit_exact_items`` > 0, the exact phase lasts at least this many labels: the early
#: refits (undoing a lucky start) decide most, and below it a campaign's full refits cost
#: little. The smallest measured within one standard error of the full refit on every rte and
#: temp budget (500, 1,000 and 1,500 were not; docs/decisions.md)
EXACT_FLOOR = 2_000


def exact_phase(until: int, items: float, n_items: int) -> int:
    """The label count of a campaign's exact phase (full refits up to the first refit past it):
    ``until`` when ``items`` is 0, else ``min(until, max(EXACT_FLOOR, ⌈items · n_items⌉))``
    (``until`` 0: no cap). The registry's (10^4, 1 per item): rte (800 items) and temp (462)
    2,000 labels, trec (19,033 items) 10^4 as before."""
    if not items:
        return int(until)
    phase = max(EXACT_FLOOR, math.ceil(round(float(items) * n_items, 9)))
    return min(int(until), phase) if until else phase


def check_refit_exact_items(items: object, refit_tol: object) -> None:
    """Refuse a ``refit_exact_items`` that is not a finite number >= 0, or one > 0 without
    ``refit_tol`` > 0, in one line."""
    if not _finite_nonnegative(items):
        raise InvalidParameterError(
            f"refit_exact_items must be a finite number >= 0 (labels per item), got {items!r}"
        )
    if float(items) and not float(refit_tol):  # type: ignore[arg-type]
        raise InvalidParameterError(
            "refit_exact_items needs refit_tol > 0 (with refit_tol=0 every refit is a full one)"
        )


#: the registry's ``class_prior`` of the binary one-coin Opt-KG with a refit (sequential item
#: step) when the id names none (policies._class_prior; measurements: docs/stress-bed.md,
#: "the class prior as the default", "the default policy on held-out cells" and "a
#: first-label check on the class prior's gate"): the gate whose runaway lock trips at odds
#: x16, not x4 (a 95/5 crowd's share settling from its first reading of 0.2-0.3 does not shut
#: it), locked for the campaign where the first labels reject its fit (a crowd leaning to one
#: class, read as imbalanced, in a live campaign's pull mode)
DEFAULT_CLASS_PRIOR = "gated-checked"


#: the same for more than two classes (the categorical delegate's ``class_prior``;
#: policies._class_prior_multiclass; measurements: docs/stress-bed.md)
DEFAULT_MULTICLASS_CLASS_PRIOR = "gated"


def refit_tol_defaults(named: dict[str, Any], default_tol: bool = True) -> dict[str, Any]:
    """The registry's refit options of a binary one-coin refit that ``named`` (the id's
    parameters) leaves out: none with the exact item step; else :data:`DEFAULT_CLASS_PRIOR`
    if not named (and ``default_tol``: Opt-KG's defaults; ``"none"`` when the options leave
    no full refit, where the class prior cannot move), and, unless ``refit_tol`` is zero,
    :data:`DEFAULT_REFIT_TOL` if not named (and ``default_tol``; else 0) and
    :data:`DEFAULT_REFIT_EXACT`'s not named (``refit_exact_items`` not when the id names
    ``refit_exact_until``: a named exact phase is that many labels, as before)."""
    if named.get("refit_items", "sequential") != "sequential":
        return {}
    out: dict[str, Any] = {}
    tol = named.get("refit_tol", DEFAULT_REFIT_TOL if default_tol else 0.0)
    if tol:
        if "refit_tol" not in named:
            out["refit_tol"] = tol
        out.update({key: value for key, value in DEFAULT_REFIT_EXACT.items() if key not in named})
        if "refit_exact_until" in named and "refit_exact_items" not in named:
            out.pop("refit_exact_items")  # a named phase keeps its meaning: that many labels
    if default_tol and "multiclass_class_prior" not in named:
        out["multiclass_class_prior"] = DEFAULT_MULTICLASS_CLASS_PRIOR
    if default_tol and "class_prior" not in named:
        # the class prior moves at full refits only: an id that names none (incremental
        # refits throughout) keeps the problem's prior rather than being refused
        exact = {**out, **named}
        full_refits = (
            not tol
            or exact.get("refit_exact_until")
            or exact.get("refit_exact_growth")
            or exact.get("refit_exact_items")
        )
        out["class_prior"] = DEFAULT_CLASS_PRIOR if full_refits else "none"
    return out
