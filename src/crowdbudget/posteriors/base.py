"""The posterior protocol (DESIGN §5): struct-of-arrays, never one object per item."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from crowdbudget.types import FloatArray, IntArray, LabelEvent


@dataclass(frozen=True)
class Lookahead:
    """One-step look-ahead of a posterior.

    Attributes:
        label_probabilities: predictive P(next label = l), shape (n_items, n_labels).
        class_probabilities: posterior class probabilities after that label,
            shape (n_items, n_labels, n_classes).

    With ``g(p) = max_c p_c`` the expected accuracy of an item, the knowledge-gradient reward
    is ``sum_l label_probabilities[:, l] * g(class_probabilities[:, l]) - g(now)`` and the
    optimistic one is ``max_l g(class_probabilities[:, l]) - g(now)``.
    """

    label_probabilities: FloatArray
    class_probabilities: FloatArray


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
        """What one more label (from ``worker``) could do to each item's posterior."""
        ...
