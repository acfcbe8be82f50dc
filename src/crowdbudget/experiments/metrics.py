"""Quantity–quality metrics of Li, Ma, Gao, Su, Quinn (WSDM 2016, §4.1 "Performance
Measures"), as a metric hook of :func:`crowdbudget.experiments.runner.run_experiment`.

- ``quantity``: items with at least ``min_labels`` (3) labels — "one instance needs to get at
  least three labels in order to be considered as labeled";
- ``correct``: labeled items whose final label is the true one;
- ``accuracy_labeled``: ``correct / quantity`` (0.5 when nothing is labeled: "we use 0.5 to
  indicate that the result is uninformative", §4.2);
- ``spent``: the cost spent (less than the budget when a policy stops early);
- with a ``requirement``: ``met`` (items meeting its quality rules, caps ignored — Table 3's
  "# Instances"), ``met_correct`` ("# Correct"), ``met_accuracy`` and ``complete`` (items
  meeting it with the caps — those a Requallo campaign no longer labels).

Only items in ``mask`` (known truth) are counted. Vote counts for the requirement are the
state's label counts plus ``pseudo`` votes per class (Requallo's pseudo-labels, §3.3); for
more than two classes the top two classes are used (§3.3).

Example:
    >>> import numpy as np
    >>> from crowdbudget.types import CampaignState, Problem
    >>> state = CampaignState.initial(Problem(n_items=3, budget=10))
    >>> state.label_counts[:] = [[0, 3], [2, 1], [1, 0]]
    >>> m = quality_metrics(state, np.array([1, 0, 0]), np.array([1, 1, 0]), np.ones(3, bool))
    >>> m["quantity"], m["correct"], m["accuracy_labeled"]
    (2.0, 1.0, 0.5)
"""

from __future__ import annotations

import numpy as np

from crowdbudget.aggregation.calibration import (  # re-exported: the experiments' metrics
    BINNINGS,
    DEFAULT_BINS,
    NLL_CLIP,
    brier_score,
    calibration_metrics,
    expected_calibration_error,
    negative_log_likelihood,
    reliability_diagram,
    verdict_calibration,
)
from crowdbudget.requirements import Requirement, as_requirement
from crowdbudget.types import BoolArray, CampaignState, IntArray

#: §4.1: "at least three labels in order to be considered as labeled"
MIN_LABELS_LABELED = 3


def quality_metrics(
    state: CampaignState,
    final_labels: IntArray,
    truth: IntArray,
    mask: BoolArray,
    requirement: Requirement | str | None = None,
    *,
    min_labels: int = MIN_LABELS_LABELED,
    pseudo: float = 1.0,
) -> dict[str, float]:
    """The §4.1 metrics of one campaign state (see the module docstring).

    Args:
        state: the campaign state (``label_counts`` shape (n_items, n_classes), ``spent``).
        final_labels, truth: shape (n_items,).
        mask: items to evaluate, shape (n_items,).
        requirement: optional requirement (object or text) for ``met``/``met_correct``/...
        min_labels: labels needed to count an item as labeled (3).
        pseudo: pseudo-votes per class added for the requirement (Requallo's default 1).
    """
    counts = np.asarray(state.label_counts)
    mask = np.asarray(mask, dtype=bool)
    n_labels = counts.sum(axis=1)
    right = (np.asarray(final_labels) == np.asarray(truth)) & mask
    labeled = (n_labels >= min_labels) & mask
    quantity = float(labeled.sum())
    correct = float((labeled & right).sum())
    out = {
        "quantity": quantity,
        "correct": correct,
        "accuracy_labeled": correct / quantity if quantity > 0 else 0.5,
        "spent": float(state.spent),
    }
    if requirement is not None:
        req = as_requirement(requirement)
        top_two = np.sort(counts, axis=1)[:, -2:].astype(float) + pseudo
        a, b = top_two[:, 1], top_two[:, 0]
        met = np.asarray(req.quality_met(a, b, pseudo)) & mask
        complete = np.asarray(req.is_complete(a, b, pseudo)) & mask
        n_met = float(met.sum())
        met_correct = float((met & right).sum())
        out.update(
            {
                "met": n_met,
                "met_correct": met_correct,
                "met_accuracy": met_correct / n_met if n_met > 0 else 0.5,
                "complete": float(complete.sum()),
            }
        )
    return out


def requallo_requirement_of(policy_id: str) -> Requirement | None:
    """The requirement a ``requallo:...`` policy id carries (None for other policies)."""
    from crowdbudget.policies.requallo import RequalloPolicy
    from crowdbudget.registry import make_policy, split_verdict

    policy = make_policy(split_verdict(policy_id)[0])
    if isinstance(policy, RequalloPolicy):
        return policy.build_requirement()
    return None


__all__ = [
    "BINNINGS",
    "DEFAULT_BINS",
    "MIN_LABELS_LABELED",
    "NLL_CLIP",
    "brier_score",
    "calibration_metrics",
    "expected_calibration_error",
    "negative_log_likelihood",
    "quality_metrics",
    "reliability_diagram",
    "requallo_requirement_of",
    "verdict_calibration",
]
