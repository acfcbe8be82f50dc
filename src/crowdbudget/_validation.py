"""Parameter checks that raise one-line :class:`InvalidParameterError` messages."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from crowdbudget.exceptions import BudgetError, InvalidParameterError


def short_repr(value: Any, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters (its last character kept, so a cut list or
    string still shows how it ends): error messages name the offending input without echoing
    a large one back."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-1]}"


def clip_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (an ellipsis marks the cut)."""
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def check_positive_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def check_budget(value: Any, name: str = "budget") -> float:
    """A budget: a finite number > 0."""
    try:
        budget = float(value)
    except (TypeError, ValueError):
        raise BudgetError(f"{name} must be a number > 0, got {value!r}") from None
    if not math.isfinite(budget):
        raise BudgetError(f"{name} must be a finite number > 0, got {value!r}")
    if budget <= 0:
        raise BudgetError(f"{name} must be a number > 0, got {value!r}")
    return budget


def check_probability(
    value: Any, name: str, *, low_open: bool = False, high_open: bool = False
) -> float:
    """A float in [0, 1] (ends excluded where asked)."""
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name} must be a number in [0, 1], got {value!r}") from None
    lo = "(" if low_open else "["
    hi = ")" if high_open else "]"
    ok = math.isfinite(p) and (p > 0 if low_open else p >= 0) and (p < 1 if high_open else p <= 1)
    if not ok:
        raise InvalidParameterError(f"{name} must be a number in {lo}0, 1{hi}, got {value!r}")
    return p


def check_prior(prior: ArrayLike, n_items: int, n_classes: int = 2) -> np.ndarray:
    """Per-item pseudo-counts as a float array of shape (n_items, n_classes), all > 0.

    Accepts one row for all items (shape (n_classes,)) or one row per item.
    Column ``c`` holds the pseudo-count of class ``c``; for binary problems column 1 is the
    Beta ``a`` (positive) and column 0 the Beta ``b`` (negative).
    """
    arr = np.asarray(prior, dtype=float)
    if arr.ndim == 1:
        if arr.shape[0] != n_classes:
            raise InvalidParameterError(
                f"prior must have {n_classes} pseudo-counts (one per class), got {arr.shape[0]}"
            )
        arr = np.broadcast_to(arr, (n_items, n_classes)).copy()
    if arr.shape != (n_items, n_classes):
        raise InvalidParameterError(
            f"prior must have shape ({n_classes},) or ({n_items}, {n_classes}), got {arr.shape}"
        )
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise InvalidParameterError("prior pseudo-counts must be finite numbers > 0")
    return arr


def check_thresholds(thresholds: ArrayLike | None, n_items: int) -> np.ndarray:
    """Per-item thresholds d in (0, 1), shape (n_items,); None means 0.5 everywhere."""
    if thresholds is None:
        return np.full(n_items, 0.5)
    arr = np.asarray(thresholds, dtype=float)
    if arr.ndim == 0:
        arr = np.full(n_items, float(arr))
    if arr.shape != (n_items,):
        raise InvalidParameterError(
            f"thresholds must be a number or have shape ({n_items},), got {arr.shape}"
        )
    if not np.all((arr > 0) & (arr < 1)):
        raise InvalidParameterError("thresholds must lie strictly between 0 and 1")
    return arr
