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

from typing import Any

import numpy as np
import numpy.typing as npt

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
    from crowdbudget.registry import make_policy

    policy = make_policy(policy_id)
    if isinstance(policy, RequalloPolicy):
        return policy.build_requirement()
    return None


# ---------------------------------------------------------------------------------------------
# Calibration of a verdict's class probabilities (issue 19)
# ---------------------------------------------------------------------------------------------

#: NLL clips p(gold) below at this value: a verdict that gives the gold class probability 0
#: (EM posteriors underflow to exactly 0 on confident items) then costs −log(1e-12) ≈ 27.6
#: nats per item instead of infinity, so one such item cannot make the mean infinite while
#: still dominating it — which is the behaviour NLL should have for an over-confident error.
NLL_CLIP = 1e-12
#: ECE bins by default (Guo et al. 2017, "On Calibration of Modern Neural Networks", §2).
DEFAULT_BINS = 10
BINNINGS = ("equal-width", "equal-mass")


def _gold_rows(
    probas: npt.ArrayLike, gold: npt.ArrayLike, labels: npt.ArrayLike | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``probas`` (n_items, C) with a gold class (``gold >= 0``), their gold classes
    and the verdict's labels (argmax when ``labels`` is None)."""
    p = np.asarray(probas, dtype=float)
    truth = np.asarray(gold, dtype=np.int64).reshape(-1)
    if p.ndim != 2 or p.shape[0] != truth.shape[0]:
        raise ValueError(
            f"probas must have shape (n_items, n_classes) with n_items = len(gold) "
            f"= {truth.shape[0]}, got {p.shape}"
        )
    if not np.all(np.isfinite(p)):
        raise ValueError("probas must be finite (an aggregator returned NaN or inf)")
    mask = truth >= 0
    chosen = np.argmax(p, axis=1) if labels is None else np.asarray(labels, dtype=np.int64)
    return p[mask], truth[mask], chosen[mask]


def expected_calibration_error(
    probas: npt.ArrayLike,
    gold: npt.ArrayLike,
    *,
    labels: npt.ArrayLike | None = None,
    n_bins: int = DEFAULT_BINS,
    binning: str = "equal-width",
) -> float:
    """Expected calibration error of the top-class probability (Guo et al. 2017, eq. 3).

    ``ECE = Σ_b (n_b / n) · |accuracy_b − confidence_b|`` where confidence is the verdict's
    probability of the label it chose and accuracy whether that label is the gold one.
    ``binning="equal-width"``: bins [0, 1/B), …, [(B−1)/B, 1] of the confidence (the usual
    reliability-diagram bins; the last bin is closed so confidence 1 falls in it);
    ``"equal-mass"``: B bins holding (as nearly as possible) equally many items, in order of
    confidence (Nixon et al. 2019's adaptive ECE) — less sensitive to the pile of items at
    confidence ≈ 1 that EM verdicts produce.

    Args:
        probas: class probabilities, shape (n_items, n_classes).
        gold: gold class per item, shape (n_items,), ``-1`` where unknown (not counted).
        labels: the verdict's labels (n_items,) (its ties broken); default the argmax.

    Returns:
        ECE in [0, 1]; NaN when no item has gold.
    """
    if binning not in BINNINGS:
        raise ValueError(f"binning must be one of {', '.join(BINNINGS)}, got {binning!r}")
    if int(n_bins) < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins!r}")
    p, truth, chosen = _gold_rows(probas, gold, labels)
    n = truth.shape[0]
    if n == 0:
        return float("nan")
    confidence = p[np.arange(n), chosen]
    correct = (chosen == truth).astype(float)
    if binning == "equal-width":
        bins = np.minimum((confidence * n_bins).astype(np.int64), n_bins - 1)
    else:
        order = np.argsort(confidence, kind="stable")
        bins = np.empty(n, dtype=np.int64)
        bins[order] = (np.arange(n) * n_bins) // n
    size = np.bincount(bins, minlength=n_bins)
    gap = np.bincount(bins, weights=correct - confidence, minlength=n_bins)
    # Σ_b |Σ_{i in b} (correct_i − conf_i)| / n  ==  Σ_b (n_b/n) |acc_b − conf_b|
    return float(np.sum(np.abs(gap[size > 0])) / n)


def negative_log_likelihood(
    probas: npt.ArrayLike, gold: npt.ArrayLike, *, clip: float = NLL_CLIP
) -> float:
    """Mean ``−log p(gold)`` over the gold items, p clipped below at ``clip`` (1e-12: see
    :data:`NLL_CLIP`). Shapes as :func:`expected_calibration_error`; NaN without gold."""
    p, truth, _ = _gold_rows(probas, gold, None)
    if truth.shape[0] == 0:
        return float("nan")
    return float(-np.mean(np.log(np.maximum(p[np.arange(truth.shape[0]), truth], clip))))


def brier_score(probas: npt.ArrayLike, gold: npt.ArrayLike) -> float:
    """Mean over gold items of ``Σ_c (p_c − [c = gold])²`` (Brier 1950, all classes; for two
    classes this is twice the one-probability form ``(p_1 − y)²``). In [0, 2]."""
    p, truth, _ = _gold_rows(probas, gold, None)
    if truth.shape[0] == 0:
        return float("nan")
    onehot = np.zeros_like(p)
    onehot[np.arange(truth.shape[0]), truth] = 1.0
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def calibration_metrics(
    probas: npt.ArrayLike,
    gold: npt.ArrayLike,
    *,
    labels: npt.ArrayLike | None = None,
    n_bins: int = DEFAULT_BINS,
) -> dict[str, float]:
    """Accuracy and calibration of a verdict on its gold items: ``accuracy``, ``confidence``
    (mean top-class probability), ``ece`` (equal-width), ``ece_mass`` (equal-mass), ``nll``,
    ``brier``. The one place the runner, ``aggregate --gold`` and the calibration benchmark
    compute them. Shapes as :func:`expected_calibration_error`."""
    p, truth, chosen = _gold_rows(probas, gold, labels)
    n = truth.shape[0]
    nan = float("nan")
    return {
        "accuracy": float(np.mean(chosen == truth)) if n else nan,
        "confidence": float(np.mean(p[np.arange(n), chosen])) if n else nan,
        "ece": expected_calibration_error(probas, gold, labels=labels, n_bins=n_bins),
        "ece_mass": expected_calibration_error(
            probas, gold, labels=labels, n_bins=n_bins, binning="equal-mass"
        ),
        "nll": negative_log_likelihood(probas, gold),
        "brier": brier_score(probas, gold),
    }


def verdict_calibration(
    policy: Any, state: CampaignState, final_labels: IntArray, truth: IntArray, mask: BoolArray
) -> dict[str, float]:
    """``ece``, ``nll``, ``brier`` of the policy's verdict on the evaluated items (``mask``),
    for the runner's per-checkpoint rows (summarised as ``ece_mean`` ...), from
    ``policy.final_probabilities(state)`` — the model of its ``final_labels`` — and the
    labels it chose (ECE bins the probability of the chosen label)."""
    probas = np.asarray(policy.final_probabilities(state), dtype=float)
    if probas.shape[0] != np.asarray(truth).shape[0]:
        return {}
    gold = np.where(np.asarray(mask, dtype=bool), np.asarray(truth), -1)
    return {
        "ece": expected_calibration_error(probas, gold, labels=final_labels),
        "nll": negative_log_likelihood(probas, gold),
        "brier": brier_score(probas, gold),
    }


def reliability_diagram(
    probas: npt.ArrayLike,
    gold: npt.ArrayLike,
    path: Any,
    *,
    labels: npt.ArrayLike | None = None,
    n_bins: int = DEFAULT_BINS,
    title: str = "",
) -> None:
    """Write a reliability diagram (PNG) to ``path``: accuracy per equal-width confidence bin
    against the bin's mean confidence, bar widths the bins, the diagonal for reference, and
    a histogram of the confidences below (DeGroot & Fienberg 1983; Guo et al. 2017 Fig. 1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p, truth, chosen = _gold_rows(probas, gold, labels)
    n = truth.shape[0]
    confidence = p[np.arange(n), chosen]
    correct = (chosen == truth).astype(float)
    bins = np.minimum((confidence * n_bins).astype(np.int64), n_bins - 1)
    size = np.bincount(bins, minlength=n_bins)
    hits = np.bincount(bins, weights=correct, minlength=n_bins)
    conf = np.bincount(bins, weights=confidence, minlength=n_bins)
    filled = size > 0
    left = np.arange(n_bins) / n_bins
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(4.5, 5.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    top.bar(
        left[filled],
        hits[filled] / size[filled],
        width=1 / n_bins,
        align="edge",
        edgecolor="black",
        alpha=0.7,
        label="accuracy",
    )
    top.plot(
        conf[filled] / size[filled],
        hits[filled] / size[filled],
        "o",
        color="C3",
        label="(mean confidence, accuracy)",
    )
    top.plot([0, 1], [0, 1], "--", color="grey", label="perfect calibration")
    ece = expected_calibration_error(probas, gold, labels=labels, n_bins=n_bins)
    top.set_ylabel("accuracy")
    top.set_title(f"{title} ECE={ece:.3f}, n={n}".strip())
    top.legend(loc="upper left", fontsize=7)
    bottom.bar(left, size / max(n, 1), width=1 / n_bins, align="edge", edgecolor="black")
    bottom.set_xlabel("confidence (top-class probability)")
    bottom.set_ylabel("share")
    bottom.set_xlim(0, 1)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


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
