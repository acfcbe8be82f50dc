"""The posterior protocol (DESIGN §5): struct-of-arrays, never one object per item."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

from crowdbudget.types import FloatArray, IntArray, LabelEvent

#: the weight a posterior puts on a known item's true class (a control item, whose answer the
#: requester knows): a Beta item gets pseudo-counts (KNOWN_STRENGTH, 1 / KNOWN_STRENGTH), a
#: categorical item the probability 1 − KNOWN_DOUBT on its class. Not exactly one-hot, so every
#: log stays finite and every moment-matching formula defined; close enough that a label on
#: the item updates its worker as a definite success or failure (the worker's Beta moves to
#: Beta(c + 1, d) or Beta(c, d + 1) up to ~1e-12).
KNOWN_STRENGTH = 1e6
KNOWN_DOUBT = 1e-12


def known_beta(truth: int) -> tuple[float, float]:
    """The item Beta ``(a, b)`` (a: class-1 count) of a binary item known to be ``truth``."""
    strong, weak = KNOWN_STRENGTH, 1.0 / KNOWN_STRENGTH
    return (strong, weak) if int(truth) == 1 else (weak, strong)


def known_row(truth: int, n_classes: int) -> FloatArray:
    """Class probabilities (n_classes,) of an item known to be ``truth``."""
    row = np.full(n_classes, KNOWN_DOUBT)
    row[int(truth)] = 1.0 - KNOWN_DOUBT * (n_classes - 1)
    return row


class Lookahead:
    """One-step look-ahead of a posterior: what one more label could do to each item.

    Attributes:
        label_probabilities: predictive P(next label = l), shape (n_items, n_labels).
        class_probabilities: posterior class probabilities after that label,
            shape (n_items, n_labels, n_classes) (computed on first access when the posterior
            gives a function for it: the knowledge-gradient rewards of a binary posterior need
            only ``error_after``, and the class probabilities cost special-function calls).
        error_after: P(the Bayes-rule label is wrong) after each label, shape
            (n_items, n_labels), when the posterior evaluates it directly (binary Beta
            posteriors: both tails of the incomplete beta function, full relative accuracy);
            None otherwise. Equal to ``1 − max_c class_probabilities`` up to rounding.

    With ``g(p) = max_c p_c`` the expected accuracy of an item, the knowledge-gradient reward
    is ``sum_l label_probabilities[:, l] * g(class_probabilities[:, l]) - g(now)`` and the
    optimistic one is ``max_l g(class_probabilities[:, l]) - g(now)``; where ``error_after``
    is given they are computed as ``now_error − error_after`` (:func:`kg_rewards`), which
    keeps the rewards of the Beta posteriors bit-identical to their direct formulas.
    """

    __slots__ = ("_class_probabilities", "_compute", "error_after", "label_probabilities")

    def __init__(
        self,
        label_probabilities: FloatArray,
        class_probabilities: FloatArray | Callable[[], FloatArray],
        error_after: FloatArray | None = None,
    ) -> None:
        self.label_probabilities = label_probabilities
        self.error_after = error_after
        if callable(class_probabilities):
            self._class_probabilities: FloatArray | None = None
            self._compute: Callable[[], FloatArray] | None = class_probabilities
        else:
            self._class_probabilities = class_probabilities
            self._compute = None

    @property
    def class_probabilities(self) -> FloatArray:
        if self._class_probabilities is None:
            assert self._compute is not None
            self._class_probabilities = self._compute()
            self._compute = None
        return self._class_probabilities

    def __repr__(self) -> str:
        return f"Lookahead(n_items={self.label_probabilities.shape[0]})"


def kg_rewards(lookahead: Lookahead, now_error: FloatArray) -> FloatArray:
    """Stage rewards of each label, shape (n_items, n_labels): the drop of the probability of
    a wrong Bayes label, ``now_error[:, None] − error_after`` (or, without ``error_after``,
    ``max_c class_probabilities − (1 − now_error)``)."""
    now = np.asarray(now_error, dtype=float)[:, None]
    if lookahead.error_after is not None:
        return np.asarray(now - lookahead.error_after, dtype=float)
    return np.asarray(lookahead.class_probabilities.max(axis=-1) - (1.0 - now), dtype=float)


@runtime_checkable
class LabelPosterior(Protocol):
    """Beliefs about the items' classes, updated in O(1) per label."""

    n_items: int
    n_classes: int

    def update(self, event: LabelEvent) -> None:
        """Take one label into account."""
        ...

    def class_probabilities(self) -> FloatArray:
        """P(item's true class = c | labels), shape (n_items, n_classes)."""
        ...

    def predict(self) -> IntArray:
        """Bayes-rule labels (the class of largest posterior probability), shape (n_items,)."""
        ...

    def lookahead(self, worker: int | None = None) -> Lookahead:
        """What one more label (from ``worker``) could do to each item's posterior.

        Posteriors with named workers (one-coin, two-coin) also take ``items`` and an array
        of workers: the look-ahead of the pairs (items[k], worker[k]) only.
        """
        ...
